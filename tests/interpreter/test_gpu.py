"""GPU semantics: launches, shared memory, barriers, warp fragments, mapped host nests."""
from __future__ import annotations

import numpy as np
import pytest

from polyir.ir.interpreter import InterpretError
from polyir.ir.types import round_to_bf16
from tests.gpu.kernels import HAND_MAPPED_HOST
from tests.interpreter.helpers import rand, run
from tests.interpreter.test_loops import f32_matmul_sequential

TILED = """
func main(C: f32[N, N], A: f32[N, N], B: f32[N, N]) {
  launch mm grid(N // 8, N // 8, 1) block(8, 8, 1) (C, A, B)
}

kernel mm(C: f32[N, N], A: f32[N, N], B: f32[N, N]) {
  local As: f32[8, 8] @shared
  local Bs: f32[8, 8] @shared
  local acc: f32[] @local
  for by = 0 to N // 8 gpu=block.y {
    for bx = 0 to N // 8 gpu=block.x {
      for ty = 0 to 8 gpu=thread.y {
        for tx = 0 to 8 gpu=thread.x {
          S0: acc[] = 0.0
          for kt = 0 to N // 8 {
            S1: As[ty, tx] = A[8*by + ty, 8*kt + tx]
            S2: Bs[ty, tx] = B[8*kt + ty, 8*bx + tx]
            BARRIER1
            for k = 0 to 8 {
              S3: acc[] = acc[] + As[ty, k] * Bs[k, tx]
            }
            BARRIER2
          }
          S4: C[8*by + ty, 8*bx + tx] = acc[]
        }
      }
    }
  }
}
"""


def tiled(first: bool = True, second: bool = True) -> str:
    return TILED.replace("BARRIER1", "barrier" if first else "").replace("BARRIER2", "barrier" if second else "")


@pytest.mark.parametrize("order", ["forward", "reverse", "shuffle"])
def test_tiled_matmul_with_shared_memory_and_barriers(order):
    rng = np.random.default_rng(0)
    n = 16
    A, B = rand(rng, n, n), rand(rng, n, n)
    C = np.zeros((n, n), np.float32)
    run(tiled(), C, A, B, parallel_order=order, seed=3)
    np.testing.assert_array_equal(C, f32_matmul_sequential(np.zeros_like(C), A, B))


@pytest.mark.parametrize("missing", ["first", "second"])
def test_missing_barrier_is_a_visible_race(missing):
    rng = np.random.default_rng(1)
    n = 16
    A, B = rand(rng, n, n), rand(rng, n, n)
    src = tiled(first=missing != "first", second=missing != "second")
    expected = f32_matmul_sequential(np.zeros((n, n), np.float32), A, B)
    wrong = 0
    for order in ("reverse", "shuffle"):
        C = np.zeros((n, n), np.float32)
        run(src, C, A, B, parallel_order=order, seed=5)
        wrong += not np.array_equal(C, expected)
    assert wrong > 0


REDUCE = """
func main(out: f32[G], x: f32[G, 32]) {
  launch red grid(G, 1, 1) block(32, 1, 1) (out, x)
}

kernel red(out: f32[G], x: f32[G, 32]) {
  local buf: f32[32] @shared
  for b = 0 to G gpu=block.x {
    for t = 0 to 32 gpu=thread.x {
      S0: buf[t] = x[b, t]
      barrier
      if (t < 16) {
        S1: buf[t] = buf[t] + buf[t + 16]
      }
      barrier
      if (t < 8) {
        S2: buf[t] = buf[t] + buf[t + 8]
      }
      barrier
      if (t < 4) {
        S3: buf[t] = buf[t] + buf[t + 4]
      }
      barrier
      if (t < 2) {
        S4: buf[t] = buf[t] + buf[t + 2]
      }
      barrier
      if (t == 0) {
        S5: out[b] = buf[0] + buf[1]
      }
    }
  }
}
"""


@pytest.mark.parametrize("order", ["forward", "shuffle"])
def test_block_tree_reduction(order):
    rng = np.random.default_rng(2)
    x = rand(rng, 3, 32)
    out = np.zeros(3, np.float32)
    run(REDUCE, out, x, parallel_order=order, seed=9)
    v = x.copy()
    for half in (16, 8, 4, 2, 1):
        v = v[:, :half] + v[:, half:2 * half]
    np.testing.assert_array_equal(out, v[:, 0])


def test_divergent_barrier_is_an_error():
    src = """
func main(x: f32[32]) {
  launch k grid(1, 1, 1) block(32, 1, 1) (x)
}

kernel k(x: f32[32]) {
  for t = 0 to 32 gpu=thread.x {
    if (t < 16) {
      S0: x[t] = 1.0
      barrier
    }
  }
}
"""
    with pytest.raises(InterpretError, match="divergent barrier.*16 of 32 threads"):
        run(src, np.zeros(32, np.float32))


def test_mapped_loop_longer_than_launch_is_an_error():
    src = """
func main(x: f32[64]) {
  launch k grid(1, 1, 1) block(32, 1, 1) (x)
}

kernel k(x: f32[64]) {
  for t = 0 to 64 gpu=thread.x {
    S0: x[t] = 1.0
  }
}
"""
    with pytest.raises(InterpretError, match="64 iterations"):
        run(src, np.zeros(64, np.float32))


def test_launch_with_symbol_argument_and_partial_last_block():
    src = """
func main(y: f64[N], x: f64[N], n: index) {
  launch axpy grid((n + 31) // 32, 1, 1) block(32, 1, 1) (y, x, n)
}

kernel axpy(y: f64[N], x: f64[N], n: index) {
  for b = 0 to (n + 31) // 32 gpu=block.x {
    for t = 0 to 32 gpu=thread.x {
      if (32*b + t < n) {
        S0: y[32*b + t] = y[32*b + t] + 2.0:f64 * x[32*b + t]
      }
    }
  }
}
"""
    x, y = np.arange(70.0), np.ones(70)
    run(src, y, x, 70)
    np.testing.assert_array_equal(y, 1 + 2 * np.arange(70.0))


def mma_source(key: str, dtype: str, b_layout: str) -> str:
    b_shape = "K, N" if b_layout == "row" else "N, K"
    b_index = "16*kt, 16*bx" if b_layout == "row" else "16*bx, 16*kt"
    k = 16 if "k16" in key else 8
    return f"""
func main(C: f32[M, N], A: {dtype}[M, K], B: {dtype}[{b_shape}]) {{
  launch mma grid(N // 16, M // 16, 1) block(32, 1, 1) (C, A, B)
}}

kernel mma(C: f32[M, N], A: {dtype}[M, K], B: {dtype}[{b_shape}]) {{
  local fa: {dtype}[16, {k}] @fragment
  local fb: {dtype}[{k}, 16] @fragment
  local fc: f32[16, 16] @fragment
  for by = 0 to M // 16 gpu=block.y {{
    for bx = 0 to N // 16 gpu=block.x {{
      for t = 0 to 32 gpu=thread.x {{
        F0: fc = fragment_load<acc, {key}, row>(C[16*by, 16*bx])
        for kt = 0 to K // {k} {{
          F1: fa = fragment_load<a, {key}, row>(A[16*by, {k}*kt])
          F2: fb = fragment_load<b, {key}, {b_layout}>(B[{b_index.replace('16*kt', f'{k}*kt')}])
          F3: fc = fragment_mma<{key}>(fa, fb, fc)
        }}
        F4: fragment_store<{key}, row>(C[16*by, 16*bx], fc)
      }}
    }}
  }}
}}
"""


@pytest.mark.parametrize("key, dtype", [("m16n16k16.f16.f32", "f16"), ("m16n16k16.bf16.f32", "bf16"),
                                        ("m16n16k8.tf32.f32", "f32")])
@pytest.mark.parametrize("b_layout", ["row", "col"])
def test_fragment_mma_matches_numpy(key, dtype, b_layout):
    rng = np.random.default_rng(4)
    m, n, k = 32, 48, 32
    A = rand(rng, m, k, dtype=np.float16 if dtype == "f16" else np.float32)
    B = rand(rng, k, n, dtype=np.float16 if dtype == "f16" else np.float32)
    if dtype == "bf16":
        A, B = round_to_bf16(A), round_to_bf16(B)
    C0 = rand(rng, m, n)
    C = C0.copy()
    run(mma_source(key, dtype, b_layout), C, A, B if b_layout == "row" else np.ascontiguousarray(B.T))
    expected = A.astype(np.float64) @ B.astype(np.float64) + C0
    tolerance = 1e-2 if dtype == "f32" else 1e-5   # tf32 rounds the f32 inputs to 10 bits
    np.testing.assert_allclose(C, expected, rtol=tolerance, atol=tolerance)
    if dtype == "f32":
        assert not np.array_equal(C, (A.astype(np.float64) @ B + C0).astype(np.float32))


def test_fill_and_fragment_divergence_error():
    src = """
func main(C: f32[16, 16]) {
  launch k grid(1, 1, 1) block(32, 1, 1) (C)
}

kernel k(C: f32[16, 16]) {
  local fc: f32[16, 16] @fragment
  for t = 0 to 32 gpu=thread.x {
    F0: fc = fragment_fill(2.5)
    if (t < 31) {
      F1: fragment_store<m16n16k16.f16.f32, row>(C[0, 0], fc)
    }
  }
}
"""
    with pytest.raises(InterpretError, match="divergent fragment"):
        run(src, np.zeros((16, 16), np.float32))
    C = np.zeros((16, 16), np.float32)
    run(src.replace("t < 31", "t < 32"), C)
    assert (C == 2.5).all()


def test_fragment_tile_out_of_bounds():
    src = """
func main(C: f32[16, 20]) {
  launch k grid(1, 1, 1) block(32, 1, 1) (C)
}

kernel k(C: f32[16, 20]) {
  local fc: f32[16, 16] @fragment
  for t = 0 to 32 gpu=thread.x {
    F0: fc = fragment_fill(1.0)
    F1: fragment_store<m16n16k16.f16.f32, row>(C[0, 8], fc)
  }
}
"""
    with pytest.raises(InterpretError, match="F1.*out of bounds"):
        run(src, np.zeros((16, 20), np.float32))


MAPPED_HOST = HAND_MAPPED_HOST  # the tiled matmul mapped in a host function, before outlining


@pytest.mark.parametrize("order", ["forward", "shuffle"])
def test_gpu_mapped_nest_in_host_function_runs_as_launch(order):
    rng = np.random.default_rng(6)
    n = 16
    A, B = rand(rng, n, n), rand(rng, n, n)
    C = np.zeros((n, n), np.float32)
    run(MAPPED_HOST, C, A, B, parallel_order=order, seed=1)
    np.testing.assert_array_equal(C, f32_matmul_sequential(np.zeros_like(C), A, B))
    # the same nest with its barriers removed races under a shuffled thread order
    racy = MAPPED_HOST.replace("barrier\n", "\n")
    C2 = np.zeros((n, n), np.float32)
    run(racy, C2, A, B, parallel_order="shuffle", seed=1)
    assert not np.array_equal(C2, C)


def test_mapped_host_nest_with_data_dependent_thread_extent():
    src = """
func main(y: f64[N]) {
  for b = 0 to (N + 7) // 8 gpu=block.x {
    for t = 0 to min(8, N - 8*b) gpu=thread.x {
      S0: y[8*b + t] = cast<f64>(8*b + t) * 2.0:f64
    }
  }
}
"""
    y = np.zeros(13)
    run(src, y)
    np.testing.assert_array_equal(y, np.arange(13.0) * 2)


def test_launch_and_mapped_nest_inside_host_loops_see_the_loop_variable():
    src = """
func main(y: f64[B, 32], z: f64[B, 32]) {
  for b = 0 to B {
    launch fill grid(1, 1, 1) block(32, 1, 1) (y, b)
    for blk = 0 to 1 gpu=block.x {
      for t = 0 to 32 gpu=thread.x {
        S1: z[b, t] = y[b, t] + cast<f64>(b)
      }
    }
  }
}

kernel fill(y: f64[B, 32], b: index) {
  for t = 0 to 32 gpu=thread.x {
    S0: y[b, t] = cast<f64>(100*b + t)
  }
}
"""
    y, z = np.zeros((3, 32)), np.zeros((3, 32))
    run(src, y, z)
    expected_y = 100 * np.arange(3.0)[:, None] + np.arange(32.0)[None, :]
    np.testing.assert_array_equal(y, expected_y)
    np.testing.assert_array_equal(z, expected_y + np.arange(3.0)[:, None])


def test_local_buffers_are_private_per_thread_and_shared_per_block():
    src = """
func main(out: i32[G, 64]) {
  launch k grid(G, 1, 1) block(64, 1, 1) (out)
}

kernel k(out: i32[G, 64]) {
  local mine: i32[] @local
  local count: i32[1] @shared
  for g = 0 to G gpu=block.x {
    for t = 0 to 64 gpu=thread.x {
      S0: mine[] = mine[] + cast<i32>(t)
      if (t == 0) {
        S1: count[0] = count[0] + 1:i32
      }
      barrier
      S2: out[g, t] = mine[] * 1000:i32 + count[0]
    }
  }
}
"""
    out = np.zeros((3, 64), np.int32)
    run(src, out, parallel_order="shuffle")
    # fresh zero locals per thread; one fresh shared counter per block
    np.testing.assert_array_equal(out, np.broadcast_to(np.arange(64) * 1000 + 1, (3, 64)))
