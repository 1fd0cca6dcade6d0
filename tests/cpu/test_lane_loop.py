"""A register tile's rows lowered as vector statements (``polyir.llvm.lane_loop``):
what the matcher accepts and refuses, the code it emits (vectors, no loop for
LLVM's vectoriser), and bit-equal results against the scalar lowering and the
interpreter on random tiles, in exact and fast-math builds."""
from __future__ import annotations

import dataclasses
import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import polyir
from polyir.cpu.jit import build_cpu
from polyir.ir.nodes import For, Module
from polyir.ir.types import DType
from polyir.llvm.lane_loop import lane_loops, match_lane_loop
from polyir.target import cpu
from polyir.testing import random_arguments
from tests.conftest import assert_runs_alike, examples


def _tile(statement: str, columns: int = 16, rows: int = 2, dtype: str = "f32") -> Module:
    """``rows`` sibling loops over ``columns`` columns, statement ``r`` the
    template with ``{r}`` the row and ``{j}`` the column variable."""
    loops = "\n".join(f"""    for j_{r} = c to c + {columns} {{
      S{r}: {statement.format(r=r, j=f"j_{r}")}
    }}""" for r in range(rows))
    return polyir.parse(f"""
func f(C: {dtype}[4, 64], A: {dtype}[4, K], B: {dtype}[K, 64], c: index) {{
  for k = 0 to K {{
{loops}
  }}
}}""")


def _rows(module: Module) -> tuple[For, ...]:
    outer = module.entry.body[0]
    assert isinstance(outer, For)
    return tuple(node for node in outer.body if isinstance(node, For))


def _lanes(dtype: DType) -> int:
    return {DType.F32: 8, DType.F64: 4}.get(dtype, 0)


FMA = "C[{r}, {j}] = C[{r}, {j}] + A[{r}, k] * B[k, {j}]"


@pytest.mark.parametrize("statement", [
    FMA,
    "C[{r}, {j}] = max(C[{r}, {j}], A[{r}, k] - B[k, {j}])",
    "C[{r}, {j}] = abs(B[k, {j}]) / (2.0 + neg(A[{r}, k]))",
    "C[{r}, {j} + 1] = C[{r}, {j} + 1] * min(B[k, {j}], 1.5)",
])
@pytest.mark.parametrize("columns, vectors", [(8, 1), (16, 2), (24, 3), (32, 4)])
def test_matcher_accepts_tile_rows(statement: str, columns: int, vectors: int) -> None:
    module = _tile(statement, columns)
    found = lane_loops(_rows(module), module.entry.buffers.get, _lanes)
    assert [(row.lanes, row.vectors) for row in found] == [(8, vectors)] * 2


@pytest.mark.parametrize("statement, why", [
    ("C[{r}, {j}] = C[{r}, {j} + 1] + B[k, {j}]", "reads its own buffer at another element"),
    ("C[{r}, 0] = C[{r}, 0] + B[k, {j}]", "a reduction along the loop (no lanes to write)"),
    ("C[{r}, 2 * {j} - 2 * c] = B[k, {j}]", "writes with a stride"),
    ("C[{r}, {j}] = B[{j} - c, {j}]", "the loop in an outer subscript"),
    ("C[{r}, {j}] = exp(B[k, {j}])", "a call it does not vectorise"),
    ("C[{r}, {j}] = B[k, ({j} - c) // 2]", "the loop inside a floor division"),
])
def test_matcher_refuses_other_rows(statement: str, why: str) -> None:
    module = _tile(statement)
    assert lane_loops(_rows(module), module.entry.buffers.get, _lanes) == [], why


def test_matcher_refuses_other_counts_types_and_lone_loops() -> None:
    for columns in (12, 40, 4):   # not a multiple of the lanes, more than 4 vectors, under one
        module = _tile(FMA, columns)
        assert lane_loops(_rows(module), module.entry.buffers.get, _lanes) == [], columns
    module = _tile(FMA, dtype="i32")
    assert lane_loops(_rows(module), module.entry.buffers.get, _lanes) == []
    module = _tile(FMA, rows=1)
    row = _rows(module)
    assert match_lane_loop(row[0], module.entry.buffers.get, _lanes) is not None
    assert lane_loops(row, module.entry.buffers.get, _lanes) == []   # one row: left to LLVM
    module = _tile(FMA, dtype="f64")
    assert [r.vectors for r in lane_loops(_rows(module), module.entry.buffers.get, _lanes)] == [4, 4]
    assert lane_loops(_rows(module), module.entry.buffers.get, lambda dtype: 0) == []


@pytest.mark.parametrize("columns", [8, 16, 24, 32])
def test_tile_rows_are_vector_statements_with_packed_fmas(columns: int) -> None:
    """Each row is ``columns / 8`` vector loads, FMAs and stores: no loop left
    for LLVM to vectorise (no hints), the same sums."""
    module = polyir.parse(f"""
func f(C: f32[4, {columns}], A: f32[4, K], B: f32[K, {columns}]) {{
  for k = 0 to K {{
""" + "\n".join(f"""    for j_{r} = 0 to {columns} {{
      S{r}: C[{r}, j_{r}] = C[{r}, j_{r}] + A[{r}, k] * B[k, j_{r}]
    }}""" for r in range(4)) + """
  }
}""")
    ex = build_cpu(module, dataclasses.replace(cpu(1), vector_bits=256), cache_dir=None, fast_math=True)
    assert "llvm.loop.vectorize" not in ex.llvm_ir and "llvm.loop.interleave" not in ex.llvm_ir
    assert len(re.findall(r"store <8 x float>", ex.llvm_ir)) == 4 * columns // 8
    assert re.search(r"\bvfmadd\w*ps\s+.*%ymm", ex.asm), ex.asm[:3000]
    rng = np.random.default_rng(0)
    A = rng.standard_normal((4, 37)).astype(np.float32)
    B = rng.standard_normal((37, columns)).astype(np.float32)
    C = rng.standard_normal((4, columns)).astype(np.float32)
    expected = C + A @ B
    ex(C, A, B)
    np.testing.assert_allclose(C, expected, rtol=1e-5, atol=1e-5)


# ------------------------------------------------------------------ random tiles
LOADS = ["A[{r}, k]", "B[k, {j}]", "B[k, {j} + 1]", "D[{j}]", "C[{r}, {j}]", "C[{r} + 1, {j}]",
         "C[{r}, {j} + 1]", "2.5:{t}"]
"""``C[r, j + 1]`` reads another iteration's element of the buffer the row
writes (refused: left to LLVM); ``C[r + 1, j]`` the next row's (the rows run
in order, each whole before the next)."""


@st.composite
def random_tiles(draw: st.DrawFn) -> tuple[Module, int, bool]:
    """Rows of random statements over random columns, f32 or f64."""
    dtype = draw(st.sampled_from(["f32", "f64"]))
    columns = draw(st.sampled_from([4, 8, 16, 24, 32, 12]))

    def term(depth: int) -> str:
        choice = draw(st.integers(0, 3 if depth else 0))
        if choice == 0:
            return draw(st.sampled_from(LOADS))
        if choice == 1:
            return f"{draw(st.sampled_from(['neg', 'abs']))}({term(depth - 1)})"
        if choice == 2:
            return f"{draw(st.sampled_from(['max', 'min']))}({term(depth - 1)}, {term(depth - 1)})"
        return f"({term(depth - 1)} {draw(st.sampled_from(['+', '-', '*', '/']))} {term(depth - 1)})"

    rows = draw(st.integers(2, 3))
    loops = []
    for r in range(rows):
        statements = [f"S{r}_{s}: C[{r}, j_{r}] = {term(2)}"
                      for s in range(draw(st.integers(1, 2)))]
        body = "\n      ".join(s.format(r=r, j=f"j_{r}", t=dtype) for s in statements)
        loops.append(f"    for j_{r} = c to c + {columns} {{\n      {body}\n    }}")
    source = f"""func f(C: {dtype}[4, 40], A: {dtype}[4, K], B: {dtype}[K, 41], D: {dtype}[41], c: index) {{
  for k = 0 to K {{
{chr(10).join(loops)}
  }}
}}"""
    module = polyir.parse(source)
    polyir.verify(module)
    return module, draw(st.integers(0, 8 - (columns > 32))), draw(st.booleans())


@settings(max_examples=examples(40), deadline=None)
@given(random_tiles())
def test_random_tiles_bit_equal_to_scalar_code_and_interpreter(case: tuple[Module, int, bool]) -> None:
    module, offset, fast = case
    target = dataclasses.replace(cpu(1), vector_bits=256)
    vector = build_cpu(module, target, cache_dir=None, fast_math=fast)
    scalar = build_cpu(module, dataclasses.replace(target, vector_bits=32), cache_dir=None,
                       fast_math=fast)
    rows = _rows(module)
    matched = lane_loops(rows, module.entry.buffers.get, _lanes)
    if matched:
        assert "llvm.loop.vectorize" not in vector.llvm_ir, str(module)
    args = random_arguments(module, np.random.default_rng(0), {"K": 5})
    for index, param in enumerate(module.entry.params):
        if param.name == "c":
            args[index] = offset
    oracles = [] if fast else [lambda *a: polyir.interpret(module, *a)]
    assert_runs_alike(args, scalar, vector, *oracles, what=str(module))


@pytest.mark.parametrize("fn", ["max", "min"])
def test_max_and_min_keep_the_interpreters_nan_and_zero_rule(fn: str) -> None:
    """``max(a, b)`` is ``a`` when ``a`` wins or ``b`` is NaN, else ``b`` (docs/ir.md),
    lane by lane as in the scalar code: NaN on either side, +0 against -0."""
    module = _tile(f"C[{{r}}, {{j}}] = {fn}(B[k, {{j}}], C[{{r}}, {{j}}])", 8)
    ex = build_cpu(module, dataclasses.replace(cpu(1), vector_bits=256), cache_dir=None)
    assert "<8 x float>" in ex.llvm_ir
    specials = np.array([np.nan, 1.0, -0.0, 0.0, np.nan, -np.inf, 2.0, 0.0], np.float32)
    B = np.pad(np.stack([specials, specials[::-1]]), ((0, 0), (0, 56)))        # K = 2
    C = np.pad(np.stack([specials[::-1], specials] * 2), ((0, 0), (0, 56)))
    A = np.zeros((4, 2), np.float32)
    got, want = C.copy(), C.copy()
    ex(got, A, B, 0)
    polyir.interpret(module, want, A, B, 0)
    assert np.array_equal(got.view(np.int32), want.view(np.int32))
