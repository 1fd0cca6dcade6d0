"""Reductions marked parallel under ``accept_reassociation`` are privatised
(CPU) or kept serial (GPU mapping), never raced."""
from __future__ import annotations

import copy
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import polyir
from polyir.cpu.jit import build_cpu
from polyir.ir.nodes import For
from polyir.ir.walk import walk_nodes
from polyir.target import cpu
from polyir.testing import programs, random_arguments
from tests.conftest import examples

SUM = """
func r(s: f32[1], a: f32[N]) {
  for k = 0 to N {
    S0: s[0] = s[0] + a[k]
  }
}"""

ROW_SUMS = """
func r(s: f64[M], A: f64[M, N]) {
  for i = 0 to M {
    for k = 0 to N {
      S0: s[i] = s[i] + A[i, k]
    }
  }
}"""


def test_cpu_privatises_a_reduction_marked_parallel() -> None:
    marked = polyir.transform(polyir.parse(ROW_SUMS), "mark-parallel{accept_reassociation=true}")
    assert all(loop.parallel for loop in walk_nodes(marked.entry.body) if isinstance(loop, For))
    team = replace(cpu(2), parallel_dispatch_ns=0.0, team_late_ns=2**62)
    executable = build_cpu(marked, team, cache_dir=None)
    A = np.random.default_rng(0).standard_normal((3, 20_000))
    s = np.ones(3)
    executable(s, A)
    np.testing.assert_allclose(s, 1.0 + A.sum(axis=1), rtol=1e-10)
    assert executable.parallel_stats()["dispatches"] >= 1


def test_gpu_mapping_keeps_a_shared_reduction_serial() -> None:
    marked = polyir.transform(polyir.parse(SUM), "mark-parallel{accept_reassociation=true}")
    remarks: list[str] = []
    mapped = polyir.gpu.mapping.map_module(marked, report=lambda where, why: remarks.append(why))
    assert remarks and "'s'" in remarks[0]
    a, s = np.ones(1000, np.float32), np.zeros(1, np.float32)
    polyir.interpret(mapped, s, a, detect_races=True)
    assert s[0] == 1000.0
    with pytest.warns(RuntimeWarning, match="runs serially"):
        polyir.gpu.mapping.map_module(marked)
    explained = polyir.transform(marked, "gpu-map")
    assert "launch" in str(explained)


@settings(max_examples=examples(15), deadline=None)
@given(programs(max_depth=3, dtypes=("f64",)))
def test_random_programs_through_reassociating_marks_and_gpu_mapping(module) -> None:
    """Differential: whatever reassociating ``mark-parallel`` marks, the GPU
    mapping runs race-free in the interpreter and equals the original."""
    mapped = polyir.transform(module, "mark-parallel{accept_reassociation=true},gpu-map")
    args = random_arguments(module, 2, 5)
    expected = copy.deepcopy(args)
    polyir.interpret(module, *expected)
    polyir.interpret(mapped, *args, detect_races=True)
    for got, want in zip(args, expected, strict=True):
        if isinstance(want, np.ndarray):
            np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-9)


@settings(max_examples=examples(12), deadline=None)
@given(data=st.data())
def test_reductions_marked_parallel_agree_with_the_serial_order_on_edge_values(data) -> None:
    # differential (issue 16, item 6): mark-parallel{accept_reassociation=true}
    # then native code on 2 threads, against the interpreter on the serial IR,
    # over NaN, infinities, signed zeros and extreme ints (wrapping + and *)
    from polyir.testing import edge_arrays, edge_reductions

    dtype = data.draw(st.sampled_from(("f32", "f64", "i64")))
    text = data.draw(edge_reductions(dtype))
    n = data.draw(st.sampled_from((0, 1, 7, 5000, 40_001)))
    pattern = data.draw(edge_arrays(dtype, 61))
    A = np.resize(pattern, n)
    serial = polyir.parse(text)
    marked = polyir.transform(serial, "mark-parallel{accept_reassociation=true}")
    assert all(loop.parallel for loop in walk_nodes(marked.entry.body) if isinstance(loop, For))
    team = replace(cpu(2), parallel_dispatch_ns=0.0, team_late_ns=2**62)
    start = data.draw(edge_arrays(dtype, 1))
    expected, got = start.copy(), start.copy()
    with np.errstate(all="ignore"):
        polyir.interpret(serial, expected, A.copy())
        build_cpu(marked, team, cache_dir=None)(got, A.copy())
    if dtype != "i64":        # the sign of a zero max/min is unspecified (docs/ir.md); NaN payloads too
        expected, got = np.where(expected == 0, 0, expected), np.where(got == 0, 0, got)
        expected, got = np.where(np.isnan(expected), np.nan, expected), np.where(np.isnan(got), np.nan, got)
    assert expected.tobytes() == got.tobytes(), f"{text}N = {n}: serial {expected}, parallel {got}"
