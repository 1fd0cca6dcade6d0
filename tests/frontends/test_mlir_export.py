"""Exporting polyir IR as affine MLIR: export -> import round trips keep the
meaning (the interpreter on both sides, random programs and the classic-kernel
corpus against the plain Python kernels), mlir-opt accepts the output, and
GPU-mapped IR is refused with a reason."""
from __future__ import annotations

import copy
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

import polyir
from polyir.errors import ExportError
from polyir.frontends.mlir import export_mlir
from polyir.frontends.mlir.exporter import float_literal
from polyir.frontends.mlir.tools import mlir_opt, run_mlir_opt
from polyir.ir.types import DType
from polyir.testing import assert_equivalent, programs
from polyir.testing.corpus import CORPUS, CorpusKernel
from tests.conftest import examples

xdsl = pytest.importorskip("xdsl", reason="the round trips read MLIR back with xDSL")
from polyir.frontends.mlir import import_mlir  # noqa: E402

HAS_MLIR_OPT = mlir_opt() is not None
needs_mlir_opt = pytest.mark.skipif(not HAS_MLIR_OPT, reason="mlir-opt is not installed "
                                    "(apt-get install mlir-22-tools)")
IDS = [k.name for k in CORPUS]
SETTINGS = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@settings(SETTINGS, max_examples=examples(60, 1000))
@given(programs())
def test_random_programs_round_trip(module) -> None:
    assert_equivalent(module, import_mlir(export_mlir(module)), trials=3)


@settings(SETTINGS, max_examples=examples(30, 500))
@given(programs(dtypes=("f16", "bf16", "f32", "f64"), max_statements=3))
def test_random_programs_of_every_dtype_round_trip(module) -> None:
    assert_equivalent(module, import_mlir(export_mlir(module)), trials=2, rtol=1e-2, atol=1e-2)


@settings(SETTINGS, max_examples=examples(10, 200))
@given(programs(dtypes=("f32", "bf16")))
def test_mlir_opt_verifies_exported_random_programs(module) -> None:
    if not HAS_MLIR_OPT:
        pytest.skip("mlir-opt is not installed (apt-get install mlir-22-tools)")
    run_mlir_opt(export_mlir(module))


def _kernel_and_args(entry: CorpusKernel) -> tuple[polyir.ir.nodes.Module, list]:
    args = entry.make_args(entry.sizes, np.random.default_rng(3))
    return polyir.kernel(entry.func, target="interpret").ir(*args), args


@pytest.mark.parametrize("entry", CORPUS, ids=IDS)
def test_corpus_round_trip_matches_the_python_kernel(entry: CorpusKernel) -> None:
    module, args = _kernel_and_args(entry)
    back = import_mlir(export_mlir(module), f"{entry.name}.mlir")
    assert [p.name for p in back.entry.params] == [p.name for p in module.entry.params]
    expected = copy.deepcopy(args)
    entry.func(*expected)
    polyir.interpret(back, *args)
    for got, want in zip(args, expected, strict=True):
        if isinstance(want, np.ndarray):
            np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12)


@needs_mlir_opt
def test_mlir_opt_verifies_the_whole_corpus() -> None:
    text = "\n".join(export_mlir(_kernel_and_args(entry)[0]) for entry in CORPUS)
    printed = run_mlir_opt(text)
    assert printed.count("func.func @") == len(CORPUS)


EVERYTHING = """
func f(A: f32[N, M], H: f16[N], W: bf16[4, 4], D: f64[], G: i32[N], E: i8[N], L: i64[N], F: bool[N], n: index) {
  local t: f64[]
  for i = max(0, 1 - n) to min(N, n + 2) step 2 parallel unroll=2 vectorize=4 {
    for j = (i + 1) // 2 to M {
      if (i % 3 == 0, i + j < N + M, n >= 2) {
        S0: A[i, j] = select(F[i], exp(A[i, j]), -A[i, j]) + cast<f32>(i) / sqrt(abs(A[i, j]) + 1.0)
      } else {
        S1: t[] = D[] * 2.0:f64 + cast<f64>(L[i] % 3) + pow(D[], 2.0:f64)
      }
    }
    S2: H[i] = cast<f16>(tanh(cast<f32>(H[i])) * sigmoid(A[i, 0])) + H[i]
    S3: W[i % 4, 0] = cast<bf16>(max(erf(A[i, 0]), min(log(1.5), rsqrt(2.0)))) + cast<bf16>(floor(exp2(0.5)) + ceil(log2(3.0)))
    S4: G[i] = cast<i32>(A[i, 0] * 100.0) / 3:i32 + max(G[i], -G[i]) + cast<i32>(E[i]) * cast<i32>(F[i])
    S5: E[i] = cast<i8>(cast<i32>(E[i]) + 1:i32)
    S6: F[i] = not (A[i, 0] >= 0.0 and F[i]) or cast<bool>(G[i]) != F[i]
    S7: L[abs(cast<i64>(G[i])) % 1 + i] = L[abs(cast<i64>(G[i])) % N] + cast<i64>(sin(cos(0.5)) * 8.0) + 1
  }
  S8: D[] = t[] + inf:f64 * 0.0:f64 + cast<f64>(n)
}
"""


def test_every_construct_round_trips_and_mlir_opt_accepts_it() -> None:
    module = polyir.parse(EVERYTHING)
    text = export_mlir(module)
    for needle in ("polyir.parallel", "polyir.unroll = 2", "polyir.vectorize = 4", "affine.if", "floordiv",
                   "mod 3", "memref.load", "memref.store", "math.erf", "arith.truncf", "memref<f64>",
                   'polyir.shape = "N, M"', "memref.dim"):
        assert needle in text, needle
    back = import_mlir(text)
    assert_equivalent(module, back, trials=3, rtol=1e-2, atol=1e-2)
    assert str(polyir.parse(str(back))) == str(back)
    if HAS_MLIR_OPT:
        run_mlir_opt(text)


@pytest.mark.parametrize("value, dtype", [(0.1, DType.F32), (1e-300, DType.F64), (-2.5e38, DType.F32),
                                          (math.inf, DType.F32), (-math.inf, DType.F64), (math.nan, DType.F32),
                                          (3.0, DType.F64), (123456789.0, DType.F64)])
def test_float_literals_are_exact(value, dtype) -> None:
    rounded = float(np.float32(value)) if dtype is DType.F32 else value
    module = polyir.parse(f"func f(A: {dtype}[]) {{\n  S0: A[] = {value!r}:{dtype}\n}}".replace("nan:", "nan:")
                          .replace("inf:", "inf:"))
    text = export_mlir(module)
    assert float_literal(rounded, dtype) in text
    back = import_mlir(text)
    out = np.zeros((), dtype.numpy)
    polyir.interpret(back, out)
    assert (math.isnan(out) and math.isnan(value)) or float(out) == rounded


GPU_MAPPED = """
func f(A: f32[64]) {
  for b = 0 to 2 gpu=block.x {
    for t = 0 to 32 gpu=thread.x {
      S0: A[32*b + t] = 1.0
    }
  }
}
"""


def test_gpu_mapped_ir_is_refused_with_a_reason() -> None:
    with pytest.raises(ExportError, match="mapped to block.x.*GPU-mapped IR is out of scope"):
        export_mlir(polyir.parse(GPU_MAPPED))
    shared = polyir.parse("func f(A: f32[4]) {\n  local s: f32[4] @shared\n"
                          "  for i = 0 to 4 {\n    S0: s[i] = A[i]\n  }\n}")
    with pytest.raises(ExportError, match="@shared buffer 's'"):
        export_mlir(shared)
