"""Classic kernels (text IR) used by the polyhedral tests and docs."""
from __future__ import annotations

MATMUL = """\
func matmul(C: f64[N, M], A: f64[N, K], B: f64[K, M]) {
  for i = 0 to N {
    for j = 0 to M {
      S0: C[i, j] = 0.0:f64
      for k = 0 to K {
        S1: C[i, j] = C[i, j] + A[i, k] * B[k, j]
      }
    }
  }
}
"""

TWO_MM = """\
func two_mm(D: f64[N, N], A: f64[N, N], B: f64[N, N], C: f64[N, N], local_t: f64[N, N]) {
  for i = 0 to N {
    for j = 0 to N {
      S0: local_t[i, j] = 0.0:f64
      for k = 0 to N {
        S1: local_t[i, j] = local_t[i, j] + A[i, k] * B[k, j]
      }
    }
  }
  for i_1 = 0 to N {
    for j_1 = 0 to N {
      S2: D[i_1, j_1] = 0.0:f64
      for k_1 = 0 to N {
        S3: D[i_1, j_1] = D[i_1, j_1] + local_t[i_1, k_1] * C[k_1, j_1]
      }
    }
  }
}
"""

JACOBI_1D = """\
func jacobi1d(A: f64[N], B: f64[N], T: index) {
  for t = 0 to T {
    for i = 1 to N - 1 {
      S0: B[i] = (A[i - 1] + A[i] + A[i + 1]) * 0.25:f64
    }
    for i_1 = 1 to N - 1 {
      S1: A[i_1] = B[i_1]
    }
  }
}
"""

SEIDEL_2D = """\
func seidel2d(A: f64[N, N], T: index) {
  for t = 0 to T {
    for i = 1 to N - 1 {
      for j = 1 to N - 1 {
        S0: A[i, j] = (A[i - 1, j] + A[i, j - 1] + A[i, j] + A[i + 1, j] + A[i, j + 1]) * 0.2:f64
      }
    }
  }
}
"""

TRISOLV = """\
func trisolv(L: f64[N, N], x: f64[N], b: f64[N]) {
  for i = 0 to N {
    S0: x[i] = b[i]
    for j = 0 to i {
      S1: x[i] = x[i] - L[i, j] * x[j]
    }
    S2: x[i] = x[i] * L[i, i]
  }
}
"""

TRSM = """\
func trsm(L: f64[N, N], X: f64[N, M]) {
  for i = 0 to N {
    for j = 0 to i {
      for k = 0 to M {
        S0: X[i, k] = X[i, k] - L[i, j] * X[j, k]
      }
    }
  }
}
"""

LU = """\
func lu(A: f64[N, N]) {
  for k = 0 to N {
    for i = k + 1 to N {
      S0: A[i, k] = A[i, k] * A[k, k]
    }
    for i_1 = k + 1 to N {
      for j = k + 1 to N {
        S1: A[i_1, j] = A[i_1, j] - A[i_1, k] * A[k, j]
      }
    }
  }
}
"""

KERNELS = {
    "matmul": MATMUL, "two_mm": TWO_MM, "jacobi1d": JACOBI_1D, "seidel2d": SEIDEL_2D,
    "trisolv": TRISOLV, "trsm": TRSM, "lu": LU,
}
