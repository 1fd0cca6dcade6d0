"""Data-dependent subscripts that cannot be checked before the call (their index
buffer is written by the function, or the index mixes loop variables and
several loads) are checked in the loop by native code: an index outside the
buffer stops the call with ``polyir.BoundsError`` instead of reading or
writing past it; in-bounds calls give the Python function's results."""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

import polyir
from polyir.cpu.bounds import data_dependent_subscripts
from polyir.cpu.jit import build_cpu
from polyir.errors import BoundsError
from polyir.target import cpu


def _bump_then_gather(out, A, idx):
    for i in range(idx.shape[0]):
        idx[i] = idx[i] + 1
    for i in range(idx.shape[0]):
        out[i] = A[idx[i]]


def _scatter_shifted(A, idx, v):
    for i in range(idx.shape[0]):
        A[idx[i] + i] = v[i]


def _two_sources(out, A, p, q):
    for i in range(p.shape[0]):
        out[i] = A[p[i] + q[i]]


def test_a_written_index_buffer_is_checked_in_the_loop() -> None:
    compiled = polyir.kernel(_bump_then_gather)
    A = np.arange(5.0)
    out, idx = np.zeros(3), np.array([0, 2, 3])
    compiled(out, A, idx)
    np.testing.assert_array_equal(out, [1.0, 3.0, 4.0])
    with pytest.raises(BoundsError, match=r"data-dependent subscript .* A\[\.\.\. idx\[i\w*\] \.\.\.\] in statement S1 \(line \d+\)"):
        compiled(np.zeros(3), A, np.array([0, 4, 1]))      # 4 + 1 is past A


@pytest.mark.parametrize("bad", [[0, 4, 0], [-2, 0, 0]])
def test_a_scatter_with_a_loop_variable_in_its_index_never_writes_outside(bad: list[int]) -> None:
    compiled = polyir.kernel(_scatter_shifted)
    guard = np.full(16, 7.0)
    A = guard[4:9]                                    # a view: neighbours must stay untouched
    v = np.array([1.0, 2.0, 3.0])
    compiled(A, np.array([0, 0, 0]), v)
    np.testing.assert_array_equal(A, [1.0, 2.0, 3.0, 7.0, 7.0])
    with pytest.raises(BoundsError):
        compiled(A, np.array(bad), v)
    assert (guard[:4] == 7.0).all() and (guard[9:] == 7.0).all()


def test_two_index_buffers_are_checked_and_the_check_follows_check_bounds() -> None:
    A, out = np.arange(6.0), np.zeros(2)
    polyir.kernel(_two_sources)(out, A, np.array([1, 2]), np.array([3, 3]))
    np.testing.assert_array_equal(out, [4.0, 5.0])
    with pytest.raises(BoundsError, match="checked in the loop"):
        polyir.kernel(_two_sources)(out, A, np.array([1, 3]), np.array([3, 3]))
    text = polyir.kernel(_two_sources).ir(out, A, np.array([1, 2]), np.array([3, 3]))
    unchecked = build_cpu(text, cpu(1), cache_dir=None, check_bounds=False)
    checked = build_cpu(text, cpu(1), cache_dir=None)
    assert "subscript.ok" in checked.llvm_ir and "subscript.ok" not in unchecked.llvm_ir


def test_the_check_reports_through_parallel_loops() -> None:
    module = polyir.parse("""
func f(A: f64[N], idx: i64[M], out: f64[M]) {
  for i = 0 to M {
    S0: idx[i] = idx[i] * 2
  }
  for k = 0 to M {
    S1: out[k] = A[idx[k]]
  }
}
""")
    marked = polyir.transform(module, "mark-parallel")
    assert "parallel" in str(marked)
    team = build_cpu(marked, replace(cpu(2), parallel_dispatch_ns=0.0, team_late_ns=2**62),
                     cache_dir=None)
    A = np.arange(10.0)
    out = np.zeros(2000)
    idx = np.tile([1, 4], 1000)
    team(A, idx.copy(), out)
    np.testing.assert_array_equal(out, np.tile([2.0, 8.0], 1000))
    assert team.parallel_stats()["dispatches"] > 0
    idx[1500] = 5
    with pytest.raises(BoundsError):
        team(A, idx, out)


def test_the_error_names_every_data_dependent_subscript() -> None:
    module = polyir.kernel(_two_sources).ir(np.zeros(2), np.zeros(6), np.zeros(2, np.int64),
                                               np.zeros(2, np.int64))
    listed = data_dependent_subscripts(module.entry)
    assert len(listed) == 1 and listed[0].startswith("A[... p[i] + q[i] ...] in statement S0 (line ")
