"""Classic loop-nest kernels as plain Python, with sample arguments.

Each :class:`CorpusKernel` holds a function written in the ``@polyir.kernel``
subset (it also runs as ordinary Python on numpy arrays, which is the oracle),
``make_args(sizes, rng, dtype=np.float64)`` that builds a fresh, well-conditioned
argument list (SPD matrices for Cholesky, diagonally dominant ones for LU and
the triangular solves), and small default ``sizes`` suited to the interpreter.

    from polyir.testing.corpus import CORPUS, corpus_kernel
    k = corpus_kernel("gemm")
    args = k.make_args(k.sizes, np.random.default_rng(0))
    k.func(*args)                      # plain Python, in place

Kernels that read float scalars take them as Python floats; integer sizes are
Python ints. Arrays are updated in place.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

Sizes = Mapping[str, int]
MakeArgs = Callable[..., list[Any]]


@dataclass(frozen=True)
class CorpusKernel:
    """One kernel: ``func(*make_args(sizes, rng, dtype=...))`` runs it in place."""

    name: str
    func: Callable[..., None]
    make_args: MakeArgs
    sizes: Mapping[str, int] = field(default_factory=dict)


def _rand(rng: np.random.Generator, dtype: Any, *shape: int) -> np.ndarray:
    return rng.uniform(-1.0, 1.0, size=shape).astype(dtype)


# ----------------------------------------------------------------- linear algebra
def gemm(C, A, B, alpha, beta):
    ni, nj = C.shape
    nk = A.shape[1]
    for i in range(ni):
        for j in range(nj):
            C[i, j] *= beta
        for k in range(nk):
            for j in range(nj):
                C[i, j] += alpha * A[i, k] * B[k, j]


def _gemm_args(s: Sizes, rng: np.random.Generator, dtype: Any = np.float64) -> list[Any]:
    return [_rand(rng, dtype, s["ni"], s["nj"]), _rand(rng, dtype, s["ni"], s["nk"]),
            _rand(rng, dtype, s["nk"], s["nj"]), 1.5, 0.75]


def two_mm(tmp, A, B, C, D, alpha, beta):
    ni, nj = tmp.shape
    nk = A.shape[1]
    nl = D.shape[1]
    for i in range(ni):
        for j in range(nj):
            tmp[i, j] = 0.0
            for k in range(nk):
                tmp[i, j] += alpha * A[i, k] * B[k, j]
    for i in range(ni):
        for j in range(nl):
            D[i, j] *= beta
            for k in range(nj):
                D[i, j] += tmp[i, k] * C[k, j]


def _two_mm_args(s: Sizes, rng: np.random.Generator, dtype: Any = np.float64) -> list[Any]:
    ni, nj, nk, nl = s["ni"], s["nj"], s["nk"], s["nl"]
    return [np.zeros((ni, nj), dtype), _rand(rng, dtype, ni, nk), _rand(rng, dtype, nk, nj),
            _rand(rng, dtype, nj, nl), _rand(rng, dtype, ni, nl), 1.25, -0.5]


def trmm(A, B, alpha):
    """B = alpha * A^T B, A unit lower triangular (PolyBench trmm)."""
    m, n = B.shape
    for i in range(m):
        for j in range(n):
            for k in range(i + 1, m):
                B[i, j] += A[k, i] * B[k, j]
            B[i, j] = alpha * B[i, j]


def _trmm_args(s: Sizes, rng: np.random.Generator, dtype: Any = np.float64) -> list[Any]:
    return [_rand(rng, dtype, s["m"], s["m"]), _rand(rng, dtype, s["m"], s["n"]), 1.5]


def syrk(C, A, alpha, beta):
    n, m = A.shape
    for i in range(n):
        for j in range(i + 1):
            C[i, j] *= beta
        for k in range(m):
            for j in range(i + 1):
                C[i, j] += alpha * A[i, k] * A[j, k]


def _syrk_args(s: Sizes, rng: np.random.Generator, dtype: Any = np.float64) -> list[Any]:
    return [_rand(rng, dtype, s["n"], s["n"]), _rand(rng, dtype, s["n"], s["m"]), 1.5, 1.2]


def gemver(A, u1, v1, u2, v2, w, x, y, z, alpha, beta):
    n = A.shape[0]
    for i in range(n):
        for j in range(n):
            A[i, j] = A[i, j] + u1[i] * v1[j] + u2[i] * v2[j]
    for i in range(n):
        for j in range(n):
            x[i] = x[i] + beta * A[j, i] * y[j]
    for i in range(n):
        x[i] = x[i] + z[i]
    for i in range(n):
        for j in range(n):
            w[i] = w[i] + alpha * A[i, j] * x[j]


def _gemver_args(s: Sizes, rng: np.random.Generator, dtype: Any = np.float64) -> list[Any]:
    n = s["n"]
    return [_rand(rng, dtype, n, n)] + [_rand(rng, dtype, n) for _ in range(8)] + [1.5, 1.2]


def mvt(x1, x2, y1, y2, A):
    n = A.shape[0]
    for i in range(n):
        for j in range(n):
            x1[i] = x1[i] + A[i, j] * y1[j]
    for i in range(n):
        for j in range(n):
            x2[i] = x2[i] + A[j, i] * y2[j]


def _mvt_args(s: Sizes, rng: np.random.Generator, dtype: Any = np.float64) -> list[Any]:
    n = s["n"]
    return [_rand(rng, dtype, n) for _ in range(4)] + [_rand(rng, dtype, n, n)]


def atax(A, x, y):
    """y = A^T (A x), with A x accumulated in a scalar temporary."""
    m, n = A.shape
    for j in range(n):
        y[j] = 0.0
    for i in range(m):
        t = 0.0
        for j in range(n):
            t += A[i, j] * x[j]
        for j in range(n):
            y[j] += A[i, j] * t


def _atax_args(s: Sizes, rng: np.random.Generator, dtype: Any = np.float64) -> list[Any]:
    return [_rand(rng, dtype, s["m"], s["n"]), _rand(rng, dtype, s["n"]), np.zeros(s["n"], dtype)]


def bicg(A, s, q, p, r):
    n, m = A.shape
    for j in range(m):
        s[j] = 0.0
    for i in range(n):
        q[i] = 0.0
        for j in range(m):
            s[j] = s[j] + r[i] * A[i, j]
            q[i] = q[i] + A[i, j] * p[j]


def _bicg_args(s: Sizes, rng: np.random.Generator, dtype: Any = np.float64) -> list[Any]:
    n, m = s["n"], s["m"]
    return [_rand(rng, dtype, n, m), np.zeros(m, dtype), np.zeros(n, dtype),
            _rand(rng, dtype, m), _rand(rng, dtype, n)]


# -------------------------------------------------------------------- stencils
def jacobi_1d(A, B, tsteps):
    n = A.shape[0]
    for t in range(tsteps):  # noqa: B007 (the time loop)
        for i in range(1, n - 1):
            B[i] = 0.33333 * (A[i - 1] + A[i] + A[i + 1])
        for i in range(1, n - 1):
            A[i] = 0.33333 * (B[i - 1] + B[i] + B[i + 1])


def _jacobi_1d_args(s: Sizes, rng: np.random.Generator, dtype: Any = np.float64) -> list[Any]:
    return [_rand(rng, dtype, s["n"]), _rand(rng, dtype, s["n"]), s["tsteps"]]


def jacobi_2d(A, B, tsteps):
    n = A.shape[0]
    for t in range(tsteps):  # noqa: B007 (the time loop)
        for i in range(1, n - 1):
            for j in range(1, n - 1):
                B[i, j] = 0.2 * (A[i, j] + A[i, j - 1] + A[i, j + 1] + A[i + 1, j] + A[i - 1, j])
        for i in range(1, n - 1):
            for j in range(1, n - 1):
                A[i, j] = 0.2 * (B[i, j] + B[i, j - 1] + B[i, j + 1] + B[i + 1, j] + B[i - 1, j])


def _jacobi_2d_args(s: Sizes, rng: np.random.Generator, dtype: Any = np.float64) -> list[Any]:
    n = s["n"]
    return [_rand(rng, dtype, n, n), _rand(rng, dtype, n, n), s["tsteps"]]


def seidel_2d(A, tsteps):
    n = A.shape[0]
    for t in range(tsteps):  # noqa: B007 (the time loop)
        for i in range(1, n - 1):
            for j in range(1, n - 1):
                A[i, j] = (A[i - 1, j - 1] + A[i - 1, j] + A[i - 1, j + 1]
                           + A[i, j - 1] + A[i, j] + A[i, j + 1]
                           + A[i + 1, j - 1] + A[i + 1, j] + A[i + 1, j + 1]) / 9.0


def _seidel_2d_args(s: Sizes, rng: np.random.Generator, dtype: Any = np.float64) -> list[Any]:
    return [_rand(rng, dtype, s["n"], s["n"]), s["tsteps"]]


def heat_3d(A, B, tsteps):
    n = A.shape[0]
    for t in range(1, tsteps + 1):  # noqa: B007 (the time loop)
        for i in range(1, n - 1):
            for j in range(1, n - 1):
                for k in range(1, n - 1):
                    B[i, j, k] = (0.125 * (A[i + 1, j, k] - 2.0 * A[i, j, k] + A[i - 1, j, k])
                                  + 0.125 * (A[i, j + 1, k] - 2.0 * A[i, j, k] + A[i, j - 1, k])
                                  + 0.125 * (A[i, j, k + 1] - 2.0 * A[i, j, k] + A[i, j, k - 1])
                                  + A[i, j, k])
        for i in range(1, n - 1):
            for j in range(1, n - 1):
                for k in range(1, n - 1):
                    A[i, j, k] = (0.125 * (B[i + 1, j, k] - 2.0 * B[i, j, k] + B[i - 1, j, k])
                                  + 0.125 * (B[i, j + 1, k] - 2.0 * B[i, j, k] + B[i, j - 1, k])
                                  + 0.125 * (B[i, j, k + 1] - 2.0 * B[i, j, k] + B[i, j, k - 1])
                                  + B[i, j, k])


def _heat_3d_args(s: Sizes, rng: np.random.Generator, dtype: Any = np.float64) -> list[Any]:
    n = s["n"]
    return [_rand(rng, dtype, n, n, n), _rand(rng, dtype, n, n, n), s["tsteps"]]


def boundary_stencil(A, B):
    """Affine ``or``/``elif`` conditions: copy the border, smooth or negate inside."""
    n, m = A.shape
    for i in range(n):
        for j in range(m):
            if i == 0 or i == n - 1 or j == 0 or j == m - 1:
                B[i, j] = A[i, j]
            elif (i + j) % 2 == 0:
                B[i, j] = 0.25 * (A[i - 1, j] + A[i + 1, j] + A[i, j - 1] + A[i, j + 1])
            else:
                B[i, j] = -A[i, j]


def _boundary_args(s: Sizes, rng: np.random.Generator, dtype: Any = np.float64) -> list[Any]:
    return [_rand(rng, dtype, s["n"], s["m"]), np.zeros((s["n"], s["m"]), dtype)]


def conv2d_pad(inp, w, out, pad):
    """'Same'-style 2-d convolution; the zero padding is an affine guard."""
    h, wd = inp.shape
    kh, kw = w.shape
    oh, ow = out.shape
    for i in range(oh):
        for j in range(ow):
            acc = 0.0
            for a in range(kh):
                for b in range(kw):
                    if 0 <= i + a - pad < h and 0 <= j + b - pad < wd:
                        acc += inp[i + a - pad, j + b - pad] * w[a, b]
            out[i, j] = acc


def _conv_args(s: Sizes, rng: np.random.Generator, dtype: Any = np.float64) -> list[Any]:
    h, w, k, pad = s["h"], s["w"], s["k"], s["pad"]
    out = np.zeros((h + 2 * pad - k + 1, w + 2 * pad - k + 1), dtype)
    return [_rand(rng, dtype, h, w), _rand(rng, dtype, k, k), out, pad]


# ------------------------------------------------------------------- solvers
def trisolv(L, x, b):
    n = L.shape[0]
    for i in range(n):
        x[i] = b[i]
        for j in range(i):
            x[i] -= L[i, j] * x[j]
        x[i] = x[i] / L[i, i]


def _lower_triangular(rng: np.random.Generator, n: int, dtype: Any) -> np.ndarray:
    return (np.tril(rng.uniform(-1.0, 1.0, (n, n))) + n * np.eye(n)).astype(dtype)


def _trisolv_args(s: Sizes, rng: np.random.Generator, dtype: Any = np.float64) -> list[Any]:
    n = s["n"]
    return [_lower_triangular(rng, n, dtype), np.zeros(n, dtype), _rand(rng, dtype, n)]


def backsolve(U, x, b):
    """Upper triangular solve, rows visited bottom-up (a negative-step loop)."""
    n = U.shape[0]
    for i in range(n - 1, -1, -1):
        s = b[i]
        for j in range(i + 1, n):
            s -= U[i, j] * x[j]
        x[i] = s / U[i, i]


def _backsolve_args(s: Sizes, rng: np.random.Generator, dtype: Any = np.float64) -> list[Any]:
    n = s["n"]
    return [_lower_triangular(rng, n, dtype).T.copy(), np.zeros(n, dtype), _rand(rng, dtype, n)]


def lu(A):
    n = A.shape[0]
    for i in range(n):
        for j in range(i):
            for k in range(j):
                A[i, j] -= A[i, k] * A[k, j]
            A[i, j] /= A[j, j]
        for j in range(i, n):
            for k in range(i):
                A[i, j] -= A[i, k] * A[k, j]


def _lu_args(s: Sizes, rng: np.random.Generator, dtype: Any = np.float64) -> list[Any]:
    n = s["n"]
    return [(rng.uniform(-1.0, 1.0, (n, n)) + n * np.eye(n)).astype(dtype)]


def cholesky(A):
    n = A.shape[0]
    for i in range(n):
        for j in range(i):
            for k in range(j):
                A[i, j] -= A[i, k] * A[j, k]
            A[i, j] /= A[j, j]
        for k in range(i):
            A[i, i] -= A[i, k] * A[i, k]
        A[i, i] = math.sqrt(A[i, i])


def _cholesky_args(s: Sizes, rng: np.random.Generator, dtype: Any = np.float64) -> list[Any]:
    n = s["n"]
    m = rng.uniform(-1.0, 1.0, (n, n))
    return [(m @ m.T + n * np.eye(n)).astype(dtype)]


def floyd_warshall(path):
    n = path.shape[0]
    for k in range(n):
        for i in range(n):
            for j in range(n):
                path[i, j] = min(path[i, j], path[i, k] + path[k, j])


def _floyd_args(s: Sizes, rng: np.random.Generator, dtype: Any = np.float64) -> list[Any]:
    return [rng.uniform(1.0, 10.0, (s["n"], s["n"])).astype(dtype)]


# ---------------------------------------------------------------- reductions
def dot(x, y, out):
    s = 0.0
    for i in range(x.shape[0]):
        s += x[i] * y[i]
    out[0] = s


def _dot_args(s: Sizes, rng: np.random.Generator, dtype: Any = np.float64) -> list[Any]:
    return [_rand(rng, dtype, s["n"]), _rand(rng, dtype, s["n"]), np.zeros(1, dtype)]


def row_norms(A, nrm):
    n, m = A.shape
    for i in range(n):
        s = 0.0
        for j in range(m):
            s += A[i, j] ** 2
        nrm[i] = math.sqrt(s)


def _row_norms_args(s: Sizes, rng: np.random.Generator, dtype: Any = np.float64) -> list[Any]:
    return [_rand(rng, dtype, s["n"], s["m"]), np.zeros(s["n"], dtype)]


def softmax_rows(X, Y):
    n, m = X.shape
    for i in range(n):
        mx = X[i, 0]
        for j in range(1, m):
            mx = max(mx, X[i, j])
        total = 0.0
        for j in range(m):
            Y[i, j] = math.exp(X[i, j] - mx)
            total += Y[i, j]
        for j in range(m):
            Y[i, j] /= total


def _softmax_args(s: Sizes, rng: np.random.Generator, dtype: Any = np.float64) -> list[Any]:
    return [_rand(rng, dtype, s["n"], s["m"]) * 4, np.zeros((s["n"], s["m"]), dtype)]


def covariance(data, cov, mean):
    n, m = data.shape
    for j in range(m):
        mean[j] = 0.0
        for i in range(n):
            mean[j] += data[i, j]
        mean[j] /= n
    for i in range(n):
        for j in range(m):
            data[i, j] -= mean[j]
    for i in range(m):
        for j in range(i, m):
            cov[i, j] = 0.0
            for k in range(n):
                cov[i, j] += data[k, i] * data[k, j]
            cov[i, j] /= n - 1.0
            cov[j, i] = cov[i, j]


def _covariance_args(s: Sizes, rng: np.random.Generator, dtype: Any = np.float64) -> list[Any]:
    n, m = s["n"], s["m"]
    return [_rand(rng, dtype, n, m), np.zeros((m, m), dtype), np.zeros(m, dtype)]


def correlation(data, corr, mean, stddev, eps):
    """PolyBench correlation; the ``stddev <= eps`` guard becomes a select."""
    n, m = data.shape
    for j in range(m):
        mean[j] = 0.0
        for i in range(n):
            mean[j] += data[i, j]
        mean[j] /= n
    for j in range(m):
        stddev[j] = 0.0
        for i in range(n):
            stddev[j] += (data[i, j] - mean[j]) * (data[i, j] - mean[j])
        stddev[j] /= n
        stddev[j] = math.sqrt(stddev[j])
        if stddev[j] <= eps:
            stddev[j] = 1.0
    for i in range(n):
        for j in range(m):
            data[i, j] -= mean[j]
            data[i, j] /= math.sqrt(n) * stddev[j]
    for i in range(m - 1):
        corr[i, i] = 1.0
        for j in range(i + 1, m):
            corr[i, j] = 0.0
            for k in range(n):
                corr[i, j] += data[k, i] * data[k, j]
            corr[j, i] = corr[i, j]
    corr[m - 1, m - 1] = 1.0


def _correlation_args(s: Sizes, rng: np.random.Generator, dtype: Any = np.float64) -> list[Any]:
    n, m = s["n"], s["m"]
    data = _rand(rng, dtype, n, m)
    data[:, 0] = 0.5                       # a constant column: stddev 0 takes the guard
    return [data, np.zeros((m, m), dtype), np.zeros(m, dtype), np.zeros(m, dtype), 0.1]


# ------------------------------------------------------- other loop shapes
def suffix_sum(x):
    n = x.shape[0]
    for i in range(n - 2, -1, -1):
        x[i] += x[i + 1]


def _suffix_sum_args(s: Sizes, rng: np.random.Generator, dtype: Any = np.float64) -> list[Any]:
    return [_rand(rng, dtype, s["n"])]


def strided_backward(x, y):
    """A step of -2 with an affine start and stop."""
    n = x.shape[0]
    for i in range(n - 1, 1, -2):
        x[i] = x[i] - 0.5 * x[i - 2] + y[i // 2]


def _strided_args(s: Sizes, rng: np.random.Generator, dtype: Any = np.float64) -> list[Any]:
    return [_rand(rng, dtype, s["n"]), _rand(rng, dtype, s["n"])]


def saxpy(n, a, x, y):
    """Integer size argument and float scalar argument."""
    for i in range(n):
        y[i] += a * x[i]


def _saxpy_args(s: Sizes, rng: np.random.Generator, dtype: Any = np.float64) -> list[Any]:
    return [s["n"] - 1, -0.75, _rand(rng, dtype, s["n"]), _rand(rng, dtype, s["n"])]


def gather_rows(E, idx, out):
    """An embedding lookup: a non-affine (gather) subscript."""
    n, d = out.shape
    for i in range(n):
        for j in range(d):
            out[i, j] = E[idx[i], j]


def _gather_args(s: Sizes, rng: np.random.Generator, dtype: Any = np.float64) -> list[Any]:
    v, n, d = s["v"], s["n"], s["d"]
    return [_rand(rng, dtype, v, d), rng.integers(0, v, n).astype(np.int32), np.zeros((n, d), dtype)]


def clamp(X, hi):
    """Data-dependent if/elif lowered to selects."""
    for i in range(X.shape[0]):
        if X[i] < 0.0:
            X[i] = 0.0
        elif X[i] > hi:
            X[i] = hi


def _clamp_args(s: Sizes, rng: np.random.Generator, dtype: Any = np.float64) -> list[Any]:
    return [_rand(rng, dtype, s["n"]), 0.5]


def int_arith(a, b, out):
    """Python floor division and modulo on signed integers."""
    for i in range(a.shape[0]):
        out[i] = a[i] // b[i] + a[i] % b[i] * 3 - abs(a[i] - b[i]) + max(a[i], 2 * b[i])


def _int_arith_args(s: Sizes, rng: np.random.Generator, dtype: Any = np.int64) -> list[Any]:
    itype = dtype if np.issubdtype(dtype, np.integer) else np.int64
    n = s["n"]
    b = rng.integers(1, 5, n) * rng.choice([-1, 1], n)
    return [rng.integers(-20, 20, n).astype(itype), b.astype(itype), np.zeros(n, itype)]


CORPUS: list[CorpusKernel] = [
    CorpusKernel("gemm", gemm, _gemm_args, {"ni": 5, "nj": 4, "nk": 3}),
    CorpusKernel("2mm", two_mm, _two_mm_args, {"ni": 4, "nj": 3, "nk": 5, "nl": 2}),
    CorpusKernel("trmm", trmm, _trmm_args, {"m": 5, "n": 4}),
    CorpusKernel("syrk", syrk, _syrk_args, {"n": 5, "m": 3}),
    CorpusKernel("gemver", gemver, _gemver_args, {"n": 5}),
    CorpusKernel("mvt", mvt, _mvt_args, {"n": 6}),
    CorpusKernel("atax", atax, _atax_args, {"m": 5, "n": 4}),
    CorpusKernel("bicg", bicg, _bicg_args, {"n": 5, "m": 4}),
    CorpusKernel("jacobi-1d", jacobi_1d, _jacobi_1d_args, {"n": 10, "tsteps": 3}),
    CorpusKernel("jacobi-2d", jacobi_2d, _jacobi_2d_args, {"n": 6, "tsteps": 2}),
    CorpusKernel("seidel-2d", seidel_2d, _seidel_2d_args, {"n": 6, "tsteps": 2}),
    CorpusKernel("heat-3d", heat_3d, _heat_3d_args, {"n": 5, "tsteps": 2}),
    CorpusKernel("boundary-stencil", boundary_stencil, _boundary_args, {"n": 5, "m": 6}),
    CorpusKernel("conv2d-pad", conv2d_pad, _conv_args, {"h": 5, "w": 6, "k": 3, "pad": 1}),
    CorpusKernel("trisolv", trisolv, _trisolv_args, {"n": 6}),
    CorpusKernel("backsolve", backsolve, _backsolve_args, {"n": 6}),
    CorpusKernel("lu", lu, _lu_args, {"n": 6}),
    CorpusKernel("cholesky", cholesky, _cholesky_args, {"n": 6}),
    CorpusKernel("floyd-warshall", floyd_warshall, _floyd_args, {"n": 5}),
    CorpusKernel("dot", dot, _dot_args, {"n": 9}),
    CorpusKernel("row-norms", row_norms, _row_norms_args, {"n": 4, "m": 5}),
    CorpusKernel("softmax-rows", softmax_rows, _softmax_args, {"n": 3, "m": 6}),
    CorpusKernel("covariance", covariance, _covariance_args, {"n": 6, "m": 4}),
    CorpusKernel("correlation", correlation, _correlation_args, {"n": 6, "m": 4}),
    CorpusKernel("suffix-sum", suffix_sum, _suffix_sum_args, {"n": 9}),
    CorpusKernel("strided-backward", strided_backward, _strided_args, {"n": 11}),
    CorpusKernel("saxpy", saxpy, _saxpy_args, {"n": 8}),
    CorpusKernel("gather-rows", gather_rows, _gather_args, {"v": 7, "n": 5, "d": 3}),
    CorpusKernel("clamp", clamp, _clamp_args, {"n": 10}),
    CorpusKernel("int-arith", int_arith, _int_arith_args, {"n": 12}),
]
"""Every corpus kernel, in a fixed order."""


def corpus_kernel(name: str) -> CorpusKernel:
    """The corpus entry called ``name``; raises ``KeyError`` listing the names."""
    for entry in CORPUS:
        if entry.name == name:
            return entry
    raise KeyError(f"no corpus kernel {name!r}; known: {', '.join(k.name for k in CORPUS)}")


__all__ = ["CORPUS", "CorpusKernel", "corpus_kernel"]
