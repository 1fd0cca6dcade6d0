"""Row sums run across vector lanes (``polyir.llvm.row_block``, planned by
``orders.lanes_for``): the in-register transpose, what the matcher accepts
and refuses, bit-equal results against the plain Python function (corpus
kernels at odd and rectangular sizes) and against the scalar lowering
(random row blocks), and the vector shuffles and packed arithmetic of the
code."""
from __future__ import annotations

import copy
import dataclasses
import re
from collections.abc import Callable

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import polyir
from polyir.cpu.jit import build_cpu
from polyir.driver import compile_ir
from polyir.ir.nodes import For, Module
from polyir.ir.types import DType
from polyir.ir.walk import walk_nodes
from polyir.llvm.row_block import aliased_reads, match_row_block, transpose
from polyir.target import cpu
from polyir.testing import random_arguments
from polyir.testing.corpus import corpus_kernel
from polyir.tiling.unroll_jam import unroll_jam
from tests.conftest import assert_runs_alike, examples


# ------------------------------------------------------------------ transpose
@pytest.mark.parametrize("size", [2, 4, 8, 16, 32])
@pytest.mark.parametrize("per_lane", [2, 4])
def test_transpose_stages_transpose_the_block(size: int, per_lane: int) -> None:
    block = np.arange(size * size).reshape(size, size)
    columns = transpose([block[r] for r in range(size)],
                        lambda a, b, mask: np.concatenate([a, b])[mask], per_lane)
    assert np.array_equal(np.array(columns), block.T)


# ------------------------------------------------------------------ matching
MATVEC = """func mv(x: {t}[N], y: {t}[M], A: {t}[N, M]) {{
  for i = 0 to N {{
    for j = 0 to M {{
      S0: x[i] = {value}
    }}
  }}
}}"""


def _jammed(value: str, factor: int, dtype: str = "f32") -> tuple[Module, For]:
    module = polyir.parse(MATVEC.format(t=dtype, value=value))
    function, _ = unroll_jam(module.entry, "i", factor, -1, check=False)
    loop = next(n for n in walk_nodes(function.body) if isinstance(n, For) and len(n.body) == factor)
    return dataclasses.replace(module, functions=(function,)), loop


@pytest.mark.parametrize("value", [
    "x[i] + A[i, j] * y[j]",
    "A[i, j] * y[j] + x[i]",
    "x[i] - (A[i, j] - 2.0) / y[j]",
    "x[i] * A[i, j]",
    "x[i] + A[j, i] * y[j]",        # lanes along a row of A (a vector load per column)
])
def test_matcher_accepts_row_sums(value: str) -> None:
    module, loop = _jammed(value, 8)
    block = match_row_block(loop, module.entry, lambda dtype: 8)
    assert block is not None and block.groups == 1 and block.row == "i_t"
    twice = match_row_block(loop, module.entry, lambda dtype: 4)
    assert twice is not None and twice.groups == 2


@pytest.mark.parametrize("value", [
    "x[i] + A[i + j, j] * y[j]",    # the column loop in a row subscript
    "x[i] + A[i, 2 * j] * y[j]",    # the column read with a stride
    "x[i] + x[j // 2] * y[j]",      # the accumulated buffer read, not linearly
    "max(x[i], A[i, j])",           # not + - *
    "x[i] + exp(A[i, j])",          # a call
])
def test_matcher_refuses_other_bodies(value: str) -> None:
    module, loop = _jammed(value, 8)
    assert match_row_block(loop, module.entry, lambda dtype: 8) is None


def test_matcher_accepts_reads_of_the_sums_buffer_as_aliased() -> None:
    # allowed: the lowering runs the lanes only when, at run time, they miss the sums
    module, loop = _jammed("x[i] + x[j] * y[j]", 8)
    block = match_row_block(loop, module.entry, lambda dtype: 8)
    assert block is not None and [load.buffer for load in aliased_reads(block)] == ["x"]


def test_matcher_refuses_other_counts_and_types() -> None:
    module, loop = _jammed("x[i] + A[i, j] * y[j]", 6)
    assert match_row_block(loop, module.entry, lambda dtype: 4) is None
    module, loop = _jammed("x[i] + A[i, j] * y[j]", 8)
    assert match_row_block(loop, module.entry, lambda dtype: 0) is None
    module, loop = _jammed("x[i] + A[i, j] * y[j]", 8, "f16")
    assert match_row_block(loop, module.entry, lambda dtype: 8) is None
    # copies that are not one statement shifted along the rows
    shuffled = dataclasses.replace(loop, body=loop.body[1:] + loop.body[:1])
    assert match_row_block(shuffled, module.entry, lambda dtype: 8) is None


# ------------------------------------------------------------------ exactness
def _python(func: Callable[..., None], args: list[object]) -> list[object]:
    out = copy.deepcopy(args)
    func(*out)
    return out


CASES = [("mvt", {"n": n}) for n in (1, 7, 13, 129)] + \
    [("atax", {"m": m, "n": n}) for m, n in ((1, 1), (7, 13), (13, 7), (129, 33), (40, 129))] + \
    [("bicg", {"n": n, "m": m}) for n, m in ((1, 1), (7, 13), (13, 7), (129, 33), (40, 129))]


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("name, sizes", CASES, ids=[f"{n}-{'x'.join(map(str, s.values()))}" for n, s in CASES])
def test_corpus_row_sums_bit_equal_to_python(name: str, sizes: dict[str, int], dtype: type) -> None:
    kernel = corpus_kernel(name)
    args = kernel.make_args(sizes, np.random.default_rng(1), dtype)
    compiled = polyir.kernel(kernel.func)
    want = _python(kernel.func, args)
    got = copy.deepcopy(args)
    compiled(*got)
    for a, b in zip(got, want, strict=True):
        if isinstance(b, np.ndarray):
            assert np.array_equal(a, b), (name, sizes)


def test_row_sum_kernel_has_shuffles_and_packed_arithmetic() -> None:
    target = cpu(1)
    if target.vector_bits < 256:
        pytest.skip("the host has no 256-bit vectors")
    lanes = target.vector_bits // 32
    kernel = corpus_kernel("mvt")
    args = kernel.make_args({"n": 64}, np.random.default_rng(0), np.float32)
    executable = polyir.kernel(kernel.func).compile_for(*args)
    assert any(r.kind == "applied" and f"vectorised across {lanes} rows" in r.why
               for r in executable.remarks), [r.why for r in executable.remarks]
    vector = f"<{lanes} x float>"
    assert re.search(rf"shufflevector {re.escape(vector)}", executable.llvm_ir)
    assert re.search(rf"fmul {re.escape(vector)}", executable.llvm_ir)
    assert re.search(rf"fadd {re.escape(vector)}", executable.llvm_ir)
    register = "zmm" if lanes == 16 else "ymm"
    asm = executable.asm
    assert re.search(rf"\bv(unpck[lh]ps|shuff\w+|perm\w+|insertf\w+)\s[^\n]*%{register}", asm), asm[:4000]
    assert re.search(rf"\bvaddps\s[^\n]*%{register}", asm)
    assert re.search(rf"\bvmulps\s[^\n]*%{register}", asm)
    assert "fmadd" not in asm  # no contraction without fast math


# ------------------------------------------------------------------ random row blocks
TERMS = ["A[i, j]", "y[j]", "z[i]", "2.0:{t}", "B[i, j + 1]", "x[j]"]
"""``x[j]`` reads the sums' buffer: the lanes run when the columns miss the rows."""


@st.composite
def row_blocks(draw: st.DrawFn) -> tuple[Module, int]:
    """Jammed row sums with random terms, operators and groups of lanes."""
    dtype = draw(st.sampled_from(["f32", "f64"]))

    def term(depth: int) -> str:
        if depth == 0 or draw(st.booleans()):
            return draw(st.sampled_from(TERMS)).format(t=dtype)
        op = draw(st.sampled_from(["+", "-", "*", "/"]))
        return f"({term(depth - 1)} {op} {term(depth - 1)})"
    op = draw(st.sampled_from(["+", "-", "*"]))
    value = f"x[i] {op} {term(2)}" if draw(st.booleans()) else f"{term(2)} {op} x[i]"
    source = f"""func rows(x: {dtype}[N], y: {dtype}[M], z: {dtype}[N], A: {dtype}[N, M],
                          B: {dtype}[N, M + 1]) {{
      for i = 0 to N {{
        for j = 0 to M {{
          S0: x[i] = {value}
        }}
      }}
    }}"""
    module = polyir.parse(source)
    lanes = 4 if dtype == "f32" else 2
    factor = lanes * draw(st.sampled_from([1, 2]))
    function, _ = unroll_jam(module.entry, "i", factor, -1, check=False)
    return dataclasses.replace(module, functions=(function,)), draw(st.integers(1, 23))


@settings(max_examples=examples(25), deadline=None)
@given(row_blocks())
def test_random_row_blocks_bit_equal_to_scalar_code(case: tuple[Module, int]) -> None:
    module, size = case
    loop = next(n for n in walk_nodes(module.entry.body) if isinstance(n, For) and len(n.body) > 1)
    assert match_row_block(loop, module.entry, lambda dtype: 4 if dtype is DType.F32 else 2)
    target = dataclasses.replace(cpu(1), vector_bits=128)
    lanes = build_cpu(module, target, cache_dir=None)
    scalar = build_cpu(module, dataclasses.replace(target, vector_bits=32), cache_dir=None)
    vector = re.compile(r"<\d+ x (float|double)>")
    assert vector.search(lanes.llvm_ir) and not vector.search(scalar.llvm_ir)
    assert_runs_alike(random_arguments(module, 0, {"N": size + 3, "M": size}), scalar, lanes,
                      what=str(module))


def test_compile_ir_plans_the_lanes_for_a_matrix_vector_product() -> None:
    module = polyir.parse(MATVEC.format(t="f32", value="x[i] + A[i, j] * y[j]"))
    target = dataclasses.replace(cpu(1), vector_bits=256)
    executable = compile_ir(module, target, "auto-tile", cache_dir=None)
    applied = [r.why for r in executable.remarks if r.kind == "applied"]
    assert len(applied) == 1 and applied[0].endswith("unroll-jam{loops=i factors=8}"), applied
    rng = np.random.default_rng(0)
    for n, m in ((1, 1), (7, 13), (17, 9), (40, 33)):
        A = rng.standard_normal((n, m), dtype=np.float32)
        y = rng.standard_normal(m, dtype=np.float32)
        x = rng.standard_normal(n, dtype=np.float32)
        want = x.copy()
        for i in range(n):
            for j in range(m):
                want[i] = want[i] + A[i, j] * y[j]
        executable(x, y, A)
        assert np.array_equal(x, want)
