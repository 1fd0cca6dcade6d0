"""Loops, bounds, conditionals, gathers and reductions against numpy."""
from __future__ import annotations

import numpy as np
import pytest

from polyir.ir.affine import Aff
from polyir.ir.nodes import Assign, BinOp, Buffer, For, Function, Load
from polyir.ir.types import DType
from tests.interpreter.helpers import ir, rand, run

GEMM = """
func gemm(C: f32[N, M], A: f32[N, K], B: f32[K, M]) {
  for i = 0 to N {
    for j = 0 to M {
      for k = 0 to K {
        S0: C[i, j] = C[i, j] + A[i, k] * B[k, j]
      }
    }
  }
}
"""


def f32_matmul_sequential(C: np.ndarray, A: np.ndarray, B: np.ndarray) -> np.ndarray:
    """C + A @ B with float32 rounding after each multiply and add, k in order."""
    out = C.copy()
    for k in range(A.shape[1]):
        out = out + (A[:, k:k + 1] * B[k:k + 1, :]).astype(np.float32)
    return out


def test_matmul_exact_float32():
    rng = np.random.default_rng(0)
    A, B, C = rand(rng, 7, 5), rand(rng, 5, 9), rand(rng, 7, 9)
    expected = f32_matmul_sequential(C, A, B)
    run(GEMM, C, A, B)
    assert C.dtype == np.float32
    np.testing.assert_array_equal(C, expected)


def test_matmul_built_from_nodes_f64():
    i, j, k = Aff.var("i"), Aff.var("j"), Aff.var("k")
    n = Aff.var("n")
    zero = Aff.const(0)
    body = Assign("S0", "C", (i, j), BinOp("+", Load("C", (i, j)),
                                          BinOp("*", Load("A", (i, k)), Load("B", (k, j)))))
    fn = Function("mm", (Buffer("C", DType.F64, (n, n)), Buffer("A", DType.F64, (n, n)),
                         Buffer("B", DType.F64, (n, n))),
                  (For("i", (zero,), (n,), (For("j", (zero,), (n,), (For("k", (zero,), (n,), (body,)),)),)),))
    rng = np.random.default_rng(1)
    A, B = rand(rng, 6, 6, dtype=np.float64), rand(rng, 6, 6, dtype=np.float64)
    C = np.zeros((6, 6))
    run(fn, C, A, B)
    np.testing.assert_allclose(C, A @ B, rtol=1e-13)


def test_triangular_bounds_max_min_and_steps():
    src = """
func tri(A: f64[N, N], out: f64[N, N]) {
  for i = 0 to N {
    for j = max(0, i - 2) to min(N, i + 3) step 2 {
      S0: out[i, j] = A[i, j] + 1.0:f64
    }
  }
  for i_1 = 1 to N step 3 {
    for j_1 = 0 to i_1 {
      S1: out[j_1, i_1] = out[j_1, i_1] * 2.0:f64
    }
  }
}
"""
    rng = np.random.default_rng(2)
    n = 9
    A = rand(rng, n, n, dtype=np.float64)
    out = np.zeros((n, n))
    expected = np.zeros((n, n))
    for i in range(n):
        for j in range(max(0, i - 2), min(n, i + 3), 2):
            expected[i, j] = A[i, j] + 1.0
    for i in range(1, n, 3):
        for j in range(0, i):
            expected[j, i] *= 2.0
    run(src, A, out)
    np.testing.assert_array_equal(out, expected)


def test_if_else_and_floordiv_mod_subscripts():
    src = """
func f(A: i32[N], B: i32[N]) {
  for i = 0 to N {
    if (i % 3 == 0, i >= 2) {
      S0: B[i] = A[i // 2] * 10:i32
    } else {
      if (2*i + 1 < N) {
        S1: B[i] = A[(i + 1) // 2] + A[i % 4]
      }
    }
  }
}
"""
    n = 13
    A = np.arange(n, dtype=np.int32) * 7 - 20
    B = np.full(n, -1, dtype=np.int32)
    expected = B.copy()
    for i in range(n):
        if i % 3 == 0 and i >= 2:
            expected[i] = A[i // 2] * 10
        elif 2 * i + 1 < n:
            expected[i] = A[(i + 1) // 2] + A[i % 4]
    run(src, A, B)
    np.testing.assert_array_equal(B, expected)


def test_gather_through_index_array():
    src = """
func embed(out: f32[N, D], table: f32[V, D], idx: i64[N]) {
  for i = 0 to N {
    for d = 0 to D {
      S0: out[i, d] = table[idx[i], d] * 2.0
    }
  }
}
"""
    rng = np.random.default_rng(3)
    table = rand(rng, 10, 4)
    idx = rng.integers(0, 10, 6).astype(np.int64)
    out = np.zeros((6, 4), np.float32)
    run(src, out, table, idx)
    np.testing.assert_array_equal(out, table[idx] * np.float32(2))


def test_reduction_through_scalar_temporary_and_scalar_param():
    src = """
func norm(out: f64[], A: f64[N], scale: f64[]) {
  local t: f64[]
  for i = 0 to N {
    S0: t[] = t[] + A[i] * A[i]
  }
  S1: out[] = sqrt(t[]) * scale[]
}
"""
    A = np.arange(1.0, 6.0)
    out = np.zeros(())
    run(src, out, A, 0.5)
    assert out[()] == np.sqrt(np.sum(A * A)) * 0.5
    out2 = np.zeros(())
    run(src, out2, A, np.array(2.0))   # 0-d array param in place
    assert out2[()] == np.sqrt(np.sum(A * A)) * 2.0


def test_locals_are_fresh_zero_each_call():
    src = """
func acc(out: f32[N]) {
  local t: f32[N]
  for i = 0 to N {
    S0: t[i] = t[i] + 1.0
    S1: out[i] = t[i]
  }
}
"""
    out = np.zeros(4, np.float32)
    module = ir(src)
    run(module, out)
    run(module, out)
    np.testing.assert_array_equal(out, np.ones(4, np.float32))


def test_explicit_symbol_and_loop_var_values():
    src = """
func f(A: i64[N], n: index) {
  for i = 0 to min(N, n) {
    S0: A[i] = i * i - n
  }
}
"""
    A = np.full(8, 99, np.int64)
    run(src, A, 5)
    np.testing.assert_array_equal(A, [i * i - 5 for i in range(5)] + [99, 99, 99])


def test_symbol_inferred_from_composite_shape():
    src = """
func f(A: f64[N], B: f64[2*N + 1]) {
  for i = 0 to 2*N {
    S0: B[i] = A[i // 2]
  }
}
"""
    A = np.arange(4.0)
    B = np.zeros(9)
    run(src, A, B)
    np.testing.assert_array_equal(B, np.append(A[np.arange(8) // 2], 0.0))


def test_non_contiguous_and_torch_inputs_updated_in_place():
    torch = pytest.importorskip("torch")
    src = """
func f(A: f32[N, M]) {
  for i = 0 to N {
    for j = 0 to M {
      S0: A[i, j] = A[i, j] * 3.0 + 1.0
    }
  }
}
"""
    base = np.arange(24, dtype=np.float32).reshape(4, 6)
    view = base[:, ::2]
    expected = base.copy()
    expected[:, ::2] = expected[:, ::2] * 3 + 1
    run(src, view)
    np.testing.assert_array_equal(base, expected)
    t = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    run(src, t)
    assert t.tolist() == [[1.0, 4.0, 7.0], [10.0, 13.0, 16.0]]
