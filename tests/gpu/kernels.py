"""Hand-written IR used by the GPU tests (and by bench/gpu_bench.py)."""
from __future__ import annotations

from polyir.ir.fragments import MMA_SHAPES


def wmma_matmul_kernel(key: str = "m16n16k16.f16.f32", a_layout: str = "row",
                       b_layout: str = "row", warps: tuple[int, int] = (1, 1)) -> str:
    """``C[M, N] = A @ B`` (f32 accumulate) as a launch of a fragment kernel.

    Each warp computes one 16x16 tile of C; a block holds ``warps[0] x warps[1]``
    warps (x along N, y along M). ``a_layout == "col"`` means A is given
    transposed (``At[K, M]``), ``b_layout == "col"`` means B is given as
    ``Bt[N, K]``. Sizes must be multiples of the tile sizes.
    """
    shape = MMA_SHAPES[key]
    m, n, k = shape.m, shape.n, shape.k
    a_type, b_type = shape.a_dtype, shape.b_dtype
    wx, wy = warps
    a_param = f"A: {a_type}[M, K]" if a_layout == "row" else f"A: {a_type}[K, M]"
    b_param = f"B: {b_type}[K, N]" if b_layout == "row" else f"B: {b_type}[N, K]"
    row = f"{m * wy}*by + {m}*ty"
    col = f"{n * wx}*bx + {n}*(tx // 32)"
    a_at = f"A[{row}, kk]" if a_layout == "row" else f"A[kk, {row}]"
    b_at = f"B[kk, {col}]" if b_layout == "row" else f"B[{col}, kk]"
    return f"""
func matmul(C: f32[M, N], {a_param}, {b_param}) {{
  launch matmul_k grid(N // {n * wx}, M // {m * wy}, 1) block({32 * wx}, {wy}, 1) (C, A, B, M, N, K)
}}

kernel matmul_k(C: f32[M, N], {a_param}, {b_param}, M: index, N: index, K: index) {{
  local fa: {a_type}[{m}, {k}] @fragment
  local fb: {b_type}[{k}, {n}] @fragment
  local fc: f32[{m}, {n}] @fragment
  for by = 0 to M // {m * wy} gpu=block.y {{
    for bx = 0 to N // {n * wx} gpu=block.x {{
      for ty = 0 to {wy} gpu=thread.y {{
        for tx = 0 to {32 * wx} gpu=thread.x {{
          F0: fc = fragment_fill(0.0)
          for kk = 0 to K step {k} {{
            F1: fa = fragment_load<a, {key}, {a_layout}>({a_at})
            F2: fb = fragment_load<b, {key}, {b_layout}>({b_at})
            F3: fc = fragment_mma<{key}>(fa, fb, fc)
          }}
          F4: fragment_store<{key}, row>(C[{row}, {col}], fc)
        }}
      }}
    }}
  }}
}}
"""


def host_fragment_matmul(key: str = "m16n16k16.f16.f32") -> str:
    """The same product written in a host function with parallel tile loops,
    for ``gpu-map`` to outline (one warp per 16x16 tile of C)."""
    shape = MMA_SHAPES[key]
    m, n, k = shape.m, shape.n, shape.k
    return f"""
func matmul(C: f32[M, N], A: {shape.a_dtype}[M, K], B: {shape.b_dtype}[K, N]) {{
  local fa: {shape.a_dtype}[{m}, {k}] @fragment
  local fb: {shape.b_dtype}[{k}, {n}] @fragment
  local fc: f32[{m}, {n}] @fragment
  for i = 0 to M step {m} parallel {{
    for j = 0 to N step {n} parallel {{
      F0: fc = fragment_load<acc, {key}, row>(C[i, j])
      for kk = 0 to K step {k} {{
        F1: fa = fragment_load<a, {key}, row>(A[i, kk])
        F2: fb = fragment_load<b, {key}, row>(B[kk, j])
        F3: fc = fragment_mma<{key}>(fa, fb, fc)
      }}
      F4: fragment_store<{key}, row>(C[i, j], fc)
    }}
  }}
}}
"""


SHARED_TILED_MATMUL = """
func matmul(C: f32[N, M], A: f32[N, K], B: f32[K, M]) {
  local At: f32[16, 16]
  local Bt: f32[16, 16]
  for ii = 0 to N step 16 parallel {
    for jj = 0 to M step 16 parallel {
      for kk = 0 to K step 16 {
        for i = ii to min(N, ii + 16) parallel {
          for k = kk to min(K, kk + 16) parallel {
            S0: At[i - ii, k - kk] = A[i, k]
          }
        }
        for k_1 = kk to min(K, kk + 16) parallel {
          for j = jj to min(M, jj + 16) parallel {
            S1: Bt[k_1 - kk, j - jj] = B[k_1, j]
          }
        }
        for i_1 = ii to min(N, ii + 16) parallel {
          for j_1 = jj to min(M, jj + 16) parallel {
            for k_2 = kk to min(K, kk + 16) {
              S2: C[i_1, j_1] = C[i_1, j_1] + At[i_1 - ii, k_2 - kk] * Bt[k_2 - kk, j_1 - jj]
            }
          }
        }
      }
    }
  }
}
"""
"""Shared-memory tiled matmul (tiles copied in, then used): the cooperative
mapping must put a barrier after the copies and one before the next copies."""

ELEMENTWISE = """
func chain(Y: f32[N, M], X: f32[N, M], b: f32[M]) {
  for i = 0 to N parallel {
    for j = 0 to M parallel {
      S0: Y[i, j] = tanh(X[i, j] * 2.0 + b[j]) * sigmoid(X[i, j]) + exp(-X[i, j] * X[i, j])
    }
  }
}
"""

HAND_MAPPED_HOST = """
func main(C: f32[N, N], A: f32[N, N], B: f32[N, N]) {
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
            barrier
            for k = 0 to 8 {
              S3: acc[] = acc[] + As[ty, k] * Bs[k, tx]
            }
            barrier
          }
          S4: C[8*by + ty, 8*bx + tx] = acc[]
        }
      }
    }
  }
}
"""
"""A host function holding a nest mapped by hand (allowed before outlining,
docs/ir.md): gpu-map outlines it as it is."""
