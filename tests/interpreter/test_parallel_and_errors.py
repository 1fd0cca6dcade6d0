"""parallel_order exposes wrong parallelism claims; faults raise InterpretError."""
from __future__ import annotations

import numpy as np
import pytest

from polyir.errors import PolyirError
from polyir.ir.interpreter import InterpretError
from tests.interpreter.helpers import ir, rand, run

PREFIX_SUM = """
func scan(A: f64[N]) {
  for i = 1 to N PARALLEL {
    S0: A[i] = A[i] + A[i - 1]
  }
}
"""

SCALE = """
func scale(A: f64[N, M], B: f64[N, M]) {
  for i = 0 to N parallel {
    for j = 0 to M parallel {
      S0: B[i, j] = A[i, j] * 2.0:f64 + B[i, j]
    }
  }
}
"""


def test_wrongly_parallel_loop_differs_under_reverse_and_shuffle():
    module = ir(PREFIX_SUM.replace("PARALLEL", "parallel"))
    x = np.arange(1.0, 21.0)
    results = {}
    for order in ("forward", "reverse", "shuffle"):
        A = x.copy()
        run(module, A, parallel_order=order, seed=2)
        results[order] = A
    np.testing.assert_array_equal(results["forward"], np.cumsum(x))
    assert not np.array_equal(results["reverse"], results["forward"])
    assert not np.array_equal(results["shuffle"], results["forward"])
    # the reverse order is exactly the sequential loop run backwards
    backwards = x.copy()
    for i in range(19, 0, -1):
        backwards[i] += backwards[i - 1]
    np.testing.assert_array_equal(results["reverse"], backwards)


def test_sequential_loop_ignores_parallel_order():
    module = ir(PREFIX_SUM.replace("PARALLEL", ""))
    x = np.arange(1.0, 21.0)
    for order in ("reverse", "shuffle"):
        A = x.copy()
        run(module, A, parallel_order=order)
        np.testing.assert_array_equal(A, np.cumsum(x))


def test_correct_parallel_loops_agree_in_every_order():
    rng = np.random.default_rng(0)
    A, B0 = rand(rng, 6, 7, dtype=np.float64), rand(rng, 6, 7, dtype=np.float64)
    for order in ("forward", "reverse", "shuffle"):
        for seed in range(3):
            B = B0.copy()
            run(SCALE, A, B, parallel_order=order, seed=seed)
            np.testing.assert_array_equal(B, A * 2 + B0)


def test_shuffle_is_seeded():
    module = ir(PREFIX_SUM.replace("PARALLEL", "parallel"))
    x = np.arange(1.0, 30.0)
    runs = []
    for seed in (7, 7, 8):
        A = x.copy()
        run(module, A, parallel_order="shuffle", seed=seed)
        runs.append(A)
    np.testing.assert_array_equal(runs[0], runs[1])
    assert not np.array_equal(runs[0], runs[2])


def test_unknown_parallel_order():
    with pytest.raises(ValueError, match="parallel_order"):
        run(SCALE, np.zeros((1, 1)), np.zeros((1, 1)), parallel_order="backwards")


@pytest.mark.parametrize("subscript, bad", [("i - 1", [-1]), ("i + 1", [5]), ("2*i - 4", [-4])])
def test_out_of_bounds_read_names_statement_buffer_index_and_location(subscript, bad):
    src = f"""
func f(B: f64[N], A: f64[N]) {{
  for i = 0 to N {{
    S7: B[i] = A[{subscript}] + 1.0:f64
  }}
}}
"""
    B, A = np.zeros(5), np.ones(5)
    with pytest.raises(InterpretError) as info:
        run(src, B, A)
    message = str(info.value)
    assert "S7" in message and "'A'" in message and str(bad) in message and "4:5" in message
    assert isinstance(info.value, PolyirError)


def test_out_of_bounds_in_the_middle_of_a_dimension_is_caught():
    # flat offset stays inside the array: only a per-dimension check catches it
    src = """
func f(A: f32[4, 4]) {
  for i = 0 to 2 {
    for j = 0 to 6 {
      S0: A[i, j] = 1.0
    }
  }
}
"""
    A = np.zeros((4, 4), np.float32)
    with pytest.raises(InterpretError, match=r"index \[0, 5\] out of bounds for buffer 'A' of shape \[4, 4\]"):
        run(src, A)


def test_check_bounds_off_gives_the_same_results():
    rng = np.random.default_rng(3)
    A = rand(rng, 5, 6, dtype=np.float64)
    B1, B2 = rand(rng, 5, 6, dtype=np.float64), None
    B2 = B1.copy()
    run(SCALE, A, B1)
    run(SCALE, A, B2, check_bounds=False)
    np.testing.assert_array_equal(B1, B2)


def test_guarded_access_does_not_fault():
    src = """
func f(B: f64[N], A: f64[N]) {
  for i = 0 to N {
    if (i >= 1) {
      S0: B[i] = A[i - 1]
    }
  }
}
"""
    B, A = np.zeros(4), np.arange(4.0)
    run(src, B, A)
    np.testing.assert_array_equal(B, [0, 0, 1, 2])


def test_out_of_bounds_gather_and_write():
    src = """
func f(out: f32[N], table: f32[V], idx: i32[N]) {
  for i = 0 to N {
    S3: out[i] = table[cast<i64>(idx[i])]
  }
}
"""
    out, table = np.zeros(3, np.float32), np.ones(4, np.float32)
    with pytest.raises(InterpretError, match=r"S3.*\[-1\].*'table'"):
        run(src, out, table, np.array([0, -1, 2], np.int32))
    write = """
func g(A: f32[N]) {
  for i = 0 to N + 1 {
    S1: A[i] = 2.0
  }
}
"""
    with pytest.raises(InterpretError, match=r"S1.*\[4\]"):
        run(write, np.zeros(4, np.float32))


def test_integer_division_by_zero_names_statement():
    src = """
func f(A: i32[N], B: i32[N]) {
  for i = 0 to N {
    S5: A[i] = A[i] / B[i]
  }
}
"""
    with pytest.raises(InterpretError, match="S5.*division by zero"):
        run(src, np.ones(3, np.int32), np.array([1, 0, 1], np.int32))
