"""detect_races=True: conflicting accesses between barriers or between blocks are errors."""
from __future__ import annotations

import numpy as np
import pytest

from polyir.ir.interpreter import InterpretError
from tests.interpreter.helpers import rand, run
from tests.interpreter.test_gpu import MAPPED_HOST, REDUCE, mma_source, tiled
from tests.interpreter.test_loops import f32_matmul_sequential


@pytest.mark.parametrize("order", ["forward", "shuffle"])
def test_race_free_kernels_pass(order):
    rng = np.random.default_rng(0)
    n = 16
    A, B = rand(rng, n, n), rand(rng, n, n)
    for src in (tiled(), MAPPED_HOST):
        C = np.zeros((n, n), np.float32)
        run(src, C, A, B, parallel_order=order, detect_races=True)
        np.testing.assert_array_equal(C, f32_matmul_sequential(np.zeros_like(C), A, B))
    x = rand(rng, 2, 32)
    out = np.zeros(2, np.float32)
    run(REDUCE, out, x, detect_races=True)
    A16, B16 = rand(rng, 32, 32, dtype=np.float16), rand(rng, 32, 32, dtype=np.float16)
    C = np.zeros((32, 32), np.float32)
    run(mma_source("m16n16k16.f16.f32", "f16", "row"), C, A16, B16, detect_races=True)
    np.testing.assert_allclose(C, A16.astype(np.float64) @ B16, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("missing", ["first", "second"])
def test_missing_barrier_is_reported_as_a_race(missing):
    rng = np.random.default_rng(1)
    A, B = rand(rng, 16, 16), rand(rng, 16, 16)
    src = tiled(first=missing != "first", second=missing != "second")
    with pytest.raises(InterpretError, match=r"data race in block .*'(As|Bs)'"):
        run(src, np.zeros((16, 16), np.float32), A, B, detect_races=True)


RMW = """
func main(out: i32[1]) {
  launch k grid(1, 1, 1) block(64, 1, 1) (out)
}

kernel k(out: i32[1]) {
  local count: i32[1] @shared
  for t = 0 to 64 gpu=thread.x {
    S0: count[0] = count[0] + 1:i32
    barrier
    if (t == 0) {
      S1: out[0] = count[0]
    }
  }
}
"""


def test_read_modify_write_race_that_no_order_reveals():
    for order in ("forward", "reverse", "shuffle"):
        out = np.zeros(1, np.int32)
        run(RMW, out, parallel_order=order)
        assert out[0] == 64   # serial threads hide the race ...
    with pytest.raises(InterpretError, match=r"data race .*'count'.*S0"):
        run(RMW, np.zeros(1, np.int32), detect_races=True)   # ... the race check does not


def test_race_between_blocks_on_global_memory():
    src = """
func main(y: f64[8]) {
  launch k grid(2, 1, 1) block(8, 1, 1) (y)
}

kernel k(y: f64[8]) {
  for b = 0 to 2 gpu=block.x {
    for t = 0 to 8 gpu=thread.x {
      S0: y[t] = y[t] + cast<f64>(b)
    }
  }
}
"""
    y = np.zeros(8)
    run(src, y)
    assert (y == 1).all()
    with pytest.raises(InterpretError, match="data race between blocks"):
        run(src, np.zeros(8), detect_races=True)


def test_thread_private_locals_and_same_thread_reuse_are_not_races():
    src = """
func main(y: f64[64]) {
  launch k grid(1, 1, 1) block(64, 1, 1) (y)
}

kernel k(y: f64[64]) {
  local acc: f64[] @local
  for t = 0 to 64 gpu=thread.x {
    S0: acc[] = y[t]
    S1: y[t] = acc[] * 2.0:f64 + y[t]
  }
}
"""
    y = np.arange(64.0)
    run(src, y, detect_races=True)
    np.testing.assert_array_equal(y, np.arange(64.0) * 3)


def test_two_warps_storing_the_same_fragment_tile_race():
    src = """
func main(C: f32[16, 32]) {
  launch k grid(1, 1, 1) block(64, 1, 1) (C)
}

kernel k(C: f32[16, 32]) {
  local fc: f32[16, 16] @fragment
  for t = 0 to 64 gpu=thread.x {
    F0: fc = fragment_fill(1.0)
    F1: fragment_store<m16n16k16.f16.f32, row>(C[0, 16 * (t // 32) * OVERLAP], fc)
  }
}
"""
    C = np.zeros((16, 32), np.float32)
    run(src.replace("OVERLAP", "1"), C, detect_races=True)   # warp w stores columns 16w..16w+15
    assert (C == 1).all()
    with pytest.raises(InterpretError, match=r"data race .*'C'.*F1"):
        run(src.replace("OVERLAP", "0"), np.zeros((16, 32), np.float32), detect_races=True)
