"""Lane blocks (``polyir.tiling.lane_blocks``, planned by ``orders.lane_blocks_for``):
the rewrite of Cholesky's dot products, its refusals, random triangular
reductions (interpreted, then compiled across lanes against the scalar
code), and ``cholesky``, ``lu`` and ``trisolv`` bit-equal to the Python function."""
from __future__ import annotations

import copy
import dataclasses
import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import polyir
from polyir.context import PassContext
from polyir.cpu.jit import build_cpu
from polyir.errors import IllegalTransform, PassError
from polyir.ir.nodes import Module
from polyir.passes import transform
from polyir.target import Target, cpu
from polyir.testing import assert_preserves_or_refuses, random_arguments
from polyir.testing.corpus import corpus_kernel
from polyir.tiling.bands import UnsupportedNest
from tests.conftest import assert_runs_alike, examples
from tests.tiling.test_autotile import AVX2

CHOLESKY_ROWS = """func f(A: f32[n, n]) {
  for i = 0 to n {
    for j = 0 to i {
      for k = 0 to j {
        S0: A[i, j] = A[i, j] - A[i, k] * A[j, k]
      }
      S1: A[i, j] = A[i, j] / A[j, j]
    }
  }
}"""


LANES = "lane-blocks{loop=j lanes=4 lane=l},unroll-jam{loops=l factors=4 depth=0}"


def test_lane_blocks_put_a_lane_loop_in_the_shared_part_and_keep_each_rest() -> None:
    rolled = str(transform(polyir.parse(CHOLESKY_ROWS), "lane-blocks{loop=j lanes=4 lane=l}"))
    assert re.search(r"for k = 0 to j \{\n\s+for l = 0 to 4 \{\n\s+S0_1: A\[i, j \+ l\] = "
                     r"A\[i, j \+ l\] - A\[i, k\] \* A\[j \+ l, k\]", rolled), rolled
    out = str(transform(polyir.parse(CHOLESKY_ROWS), LANES))
    assert "for j = 0 to i - 3 step 4 {" in out
    for r in range(1, 4):
        assert f"A[i, j + {r}] = A[i, j + {r}] - A[i, k] * A[j + {r}, k]" in out
    assert re.search(r"for r = 0 to 4 \{\n\s+for k_\d+ = max\(0, j\) to j \+ r \{", out), out
    assert re.search(r"for j_\d+ = max\(0, 4\*\(i // 4\)\) to i \{", out), out


def test_lane_blocks_refuse_with_a_witness() -> None:
    # rest(j) writes z[0], which the shared part of every later lane reads
    text = """func f(B: f32[n, n], y: f32[n], z: f32[n]) {
  for j = 0 to n {
    for k = 0 to j {
      S0: y[j] = y[j] + B[j, k] * z[k]
    }
    S1: z[0] = y[j]
  }
}"""
    with pytest.raises(PassError) as info:
        transform(polyir.parse(text), "lane-blocks{loop=j lanes=4}")
    assert isinstance(info.value.cause, IllegalTransform)
    assert "witness" in str(info.value.cause)


@pytest.mark.parametrize("bounds", ["j + 2 to j + 5", "0 to 2 * j", "0 to n"])
def test_lane_blocks_refuse_other_shapes(bounds: str) -> None:
    text = CHOLESKY_ROWS.replace("for k = 0 to j", f"for k = {bounds}").replace("A: f32[n, n]",
                                                                               "A: f32[n, 3 * n + 5]")
    with pytest.raises(PassError) as info:
        transform(polyir.parse(text), "lane-blocks{loop=j lanes=4}")
    assert isinstance(info.value.cause, UnsupportedNest)


# ------------------------------------------------------------------ random triangular reductions
TERMS = ["X[i, k] * B[j, k]", "X[i, k] * X[j, k]", "B[j, k]", "z[k]", "X[i, k]", "2.0:{t}",
         "X[i, k] / (B[j, k] + 3.0:{t})"]
RESTS = ["", "S1: X[i, j] = X[i, j] / (B[j, j] + 3.0:{t})", "S1: z[j] = X[i, j]",
         "S1: z[0] = X[i, j] * 0.5:{t}", "S1: X[j, j] = X[i, j]"]


@st.composite
def triangular_reductions(draw: st.DrawFn) -> Module:
    """``for i { for j { for k < j + c { X[i, j] op= e }; rest } }`` with random
    bounds, terms and rests (some of which make the lane blocks illegal); or
    the ``j`` loop alone, top-level, ``i`` the last row (``trisolv``'s shape)."""
    t = draw(st.sampled_from(["f32", "f64"]))
    j_bounds = draw(st.sampled_from(["0 to i", "1 to i", "0 to N", "0 to i + 1"]))
    k_bounds = draw(st.sampled_from(["0 to j", "1 to j", "0 to j + 1", "2 to j - 1"]))
    op = draw(st.sampled_from(["+", "-"]))
    term = draw(st.sampled_from(TERMS)).format(t=t)
    rest = draw(st.sampled_from(RESTS)).format(t=t)
    nest = f"""for j = {j_bounds} {{
      for k = {k_bounds} {{
        S0: X[i, j] = X[i, j] {op} {term}
      }}
      {rest}
    }}"""
    if draw(st.booleans()):
        body = f"for i = 0 to N {{\n    {nest}\n  }}"
    else:
        body = re.sub(r"\bi\b", "(N - 1)", nest)
    return polyir.parse(f"""func f(X: {t}[N, N], B: {t}[N, N], z: {t}[N]) {{
  {body}
}}""")


@settings(max_examples=examples(25), deadline=None)
@given(triangular_reductions(), st.integers(1, 21))
def test_random_lane_blocks_preserve_or_refuse_and_compile_bit_equal(module: Module, size: int) -> None:
    result = assert_preserves_or_refuses(lambda m: transform(m, LANES), module)
    if not isinstance(result, Module):
        return
    _assert_bit_equal(module, result, dataclasses.replace(cpu(1), vector_bits=128), size)


@settings(max_examples=examples(15), deadline=None)
@given(triangular_reductions(), st.integers(1, 40))
def test_auto_tile_of_random_triangular_reductions_preserves_and_compiles_bit_equal(
        module: Module, size: int) -> None:
    # the policy's path: planned when the jammed part is a row block, proven rolled, unrolled last
    result = assert_preserves_or_refuses(lambda m: transform(m, "auto-tile", ctx=PassContext(AVX2)),
                                         module)
    assert isinstance(result, Module)  # auto-tile refuses by remarks, never by raising
    _assert_bit_equal(module, result, AVX2, size)


# ------------------------------------------------------------------ corpus
@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("n", [1, 2, 7, 16, 17, 33, 129, 256])
@pytest.mark.parametrize("name", ["cholesky", "lu", "trisolv"])
def test_lane_blocked_corpus_kernels_bit_equal_to_python(name: str, n: int, dtype: type) -> None:
    # lu's lower triangle reads A[k, j]: a vector along the lanes, no transpose;
    # trisolv's loop is top-level (after distribution), x[j] read while x[i] is summed
    kernel = corpus_kernel(name)
    args = kernel.make_args({"n": n}, np.random.default_rng(n), dtype)
    want = copy.deepcopy(args)
    kernel.func(*want)
    got = copy.deepcopy(args)
    polyir.kernel(kernel.func)(*got)
    for a, b in zip(got, want, strict=True):
        assert np.array_equal(a, b)


def test_cholesky_plan_is_a_lane_block_with_packed_arithmetic() -> None:
    target = cpu(1)
    if target.vector_bits < 256:
        pytest.skip("the host has no 256-bit vectors")
    lanes = target.vector_bits // 32
    kernel = corpus_kernel("cholesky")
    args = kernel.make_args({"n": 64}, np.random.default_rng(0), np.float32)
    executable = polyir.kernel(kernel.func).compile_for(*args)
    assert any(r.kind == "applied" and f"in blocks of {lanes}" in r.why
               and f"lane-blocks{{loop=j lanes={lanes} lane=j_lane}},unroll-jam{{loops=j_lane "
                   f"factors={lanes} depth=0}}" in r.why
               for r in executable.remarks), [r.why for r in executable.remarks]
    vector = re.escape(f"<{lanes} x float>")
    assert re.search(rf"shufflevector {vector}", executable.llvm_ir)
    assert re.search(rf"fsub {vector}", executable.llvm_ir)
    assert "fmadd" not in executable.asm  # no contraction without fast math


def _assert_bit_equal(module: Module, result: Module, target: Target, size: int) -> None:
    """``result`` built for ``target`` (its lanes) gives bit for bit what ``module``
    built with scalar code gives, at ``N = size``."""
    lanes = build_cpu(result, target, cache_dir=None)
    scalar = build_cpu(module, dataclasses.replace(target, vector_bits=32), cache_dir=None)
    assert_runs_alike(random_arguments(module, 0, {"N": size}), scalar, lanes, what=str(result))
