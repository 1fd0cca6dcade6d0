"""numpy formulations of the corpus kernels (``polyir.testing.corpus``), keyed by name.

Each function has the signature of its corpus kernel and updates the same
arguments in place, so its result can be compared with the plain-Python run
and with polyir's. They are what a numpy user would write: whole-array
expressions, BLAS matrix products, and a Python loop over one dimension only
where the kernel carries a dependence along it (``lu``, the triangular
solves, ``floyd-warshall``, the time loops of the stencils).

The functions work on numpy arrays and on CuPy arrays alike (the array
module is taken from the arguments), so the GPU section can reuse them.
``seidel-2d`` has no entry: its Gauss-Seidel sweep reads values written
earlier in the same sweep in both dimensions, which no whole-array numpy
expression reproduces.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

NO_FORMULATION: dict[str, str] = {
    "seidel-2d": "no numpy formulation (in-place Gauss-Seidel sweep)",
}
"""Corpus kernels without a numpy formulation, with the reason."""


def array_module(*args: Any) -> Any:
    """``cupy`` when some argument is a CuPy array, else ``numpy``."""
    for arg in args:
        module = type(arg).__module__.split(".")[0]
        if module == "cupy":
            import cupy
            return cupy
    return np


# ----------------------------------------------------------------- linear algebra
def gemm(C: Any, A: Any, B: Any, alpha: float, beta: float) -> None:
    C *= beta
    C += alpha * (A @ B)


def two_mm(tmp: Any, A: Any, B: Any, C: Any, D: Any, alpha: float, beta: float) -> None:
    tmp[...] = alpha * (A @ B)
    D *= beta
    D += tmp @ C


def trmm(A: Any, B: Any, alpha: float) -> None:
    """Row ``i`` of ``B`` gains the *original* rows below it (they are updated later)."""
    xp = array_module(A)
    B[...] = alpha * (B + xp.tril(A, -1).T @ B)


def syrk(C: Any, A: Any, alpha: float, beta: float) -> None:
    """Only the lower triangle (diagonal included) of ``C`` is updated."""
    xp = array_module(C)
    lower = xp.tri(C.shape[0], dtype=bool)
    C[...] = xp.where(lower, beta * C + alpha * (A @ A.T), C)


def gemver(A: Any, u1: Any, v1: Any, u2: Any, v2: Any, w: Any, x: Any, y: Any, z: Any,
           alpha: float, beta: float) -> None:
    xp = array_module(A)
    A += xp.outer(u1, v1) + xp.outer(u2, v2)
    x += beta * (A.T @ y)
    x += z
    w += alpha * (A @ x)


def mvt(x1: Any, x2: Any, y1: Any, y2: Any, A: Any) -> None:
    x1 += A @ y1
    x2 += A.T @ y2


def atax(A: Any, x: Any, y: Any) -> None:
    y[...] = A.T @ (A @ x)


def bicg(A: Any, s: Any, q: Any, p: Any, r: Any) -> None:
    s[...] = r @ A
    q[...] = A @ p


# -------------------------------------------------------------------- stencils
def jacobi_1d(A: Any, B: Any, tsteps: int) -> None:
    for _ in range(tsteps):
        B[1:-1] = 0.33333 * (A[:-2] + A[1:-1] + A[2:])
        A[1:-1] = 0.33333 * (B[:-2] + B[1:-1] + B[2:])


def _five_point(src: Any) -> Any:
    return 0.2 * (src[1:-1, 1:-1] + src[1:-1, :-2] + src[1:-1, 2:] + src[2:, 1:-1] + src[:-2, 1:-1])


def jacobi_2d(A: Any, B: Any, tsteps: int) -> None:
    for _ in range(tsteps):
        B[1:-1, 1:-1] = _five_point(A)
        A[1:-1, 1:-1] = _five_point(B)


def _heat_step(src: Any) -> Any:
    centre = src[1:-1, 1:-1, 1:-1]
    return (0.125 * (src[2:, 1:-1, 1:-1] - 2.0 * centre + src[:-2, 1:-1, 1:-1])
            + 0.125 * (src[1:-1, 2:, 1:-1] - 2.0 * centre + src[1:-1, :-2, 1:-1])
            + 0.125 * (src[1:-1, 1:-1, 2:] - 2.0 * centre + src[1:-1, 1:-1, :-2])
            + centre)


def heat_3d(A: Any, B: Any, tsteps: int) -> None:
    for _ in range(tsteps):
        B[1:-1, 1:-1, 1:-1] = _heat_step(A)
        A[1:-1, 1:-1, 1:-1] = _heat_step(B)


def boundary_stencil(A: Any, B: Any) -> None:
    xp = array_module(A)
    n, m = A.shape
    B[0, :], B[n - 1, :], B[:, 0], B[:, m - 1] = A[0, :], A[n - 1, :], A[:, 0], A[:, m - 1]
    smooth = 0.25 * (A[:-2, 1:-1] + A[2:, 1:-1] + A[1:-1, :-2] + A[1:-1, 2:])
    even = (xp.arange(1, n - 1)[:, None] + xp.arange(1, m - 1)[None, :]) % 2 == 0
    B[1:-1, 1:-1] = xp.where(even, smooth, -A[1:-1, 1:-1])


def conv2d_pad(inp: Any, w: Any, out: Any, pad: int) -> None:
    """Zero-pad once, then accumulate one shifted slice per filter tap."""
    xp = array_module(inp)
    h, wd = inp.shape
    kh, kw = w.shape
    oh, ow = out.shape
    padded = xp.zeros((h + 2 * pad, wd + 2 * pad), dtype=inp.dtype)
    padded[pad:pad + h, pad:pad + wd] = inp
    acc = xp.zeros((oh, ow), dtype=out.dtype)
    for a in range(kh):
        for b in range(kw):
            acc += padded[a:a + oh, b:b + ow] * w[a, b]
    out[...] = acc


# ------------------------------------------------------------------- solvers
def trisolv(L: Any, x: Any, b: Any) -> None:
    """Forward substitution, one row (a dot product) at a time."""
    for i in range(L.shape[0]):
        x[i] = (b[i] - L[i, :i] @ x[:i]) / L[i, i]


def backsolve(U: Any, x: Any, b: Any) -> None:
    """Back substitution, one row at a time from the bottom."""
    n = U.shape[0]
    for i in range(n - 1, -1, -1):
        x[i] = (b[i] - U[i, i + 1:] @ x[i + 1:]) / U[i, i]


def lu(A: Any) -> None:
    """Right-looking LU without pivoting (the same factors as the corpus' Doolittle)."""
    xp = array_module(A)
    n = A.shape[0]
    for k in range(n - 1):
        A[k + 1:, k] /= A[k, k]
        A[k + 1:, k + 1:] -= xp.outer(A[k + 1:, k], A[k, k + 1:])


def cholesky(A: Any) -> None:
    """LAPACK Cholesky; like the corpus kernel, only the lower triangle is written."""
    xp = array_module(A)
    factor = xp.linalg.cholesky(A)
    A[...] = xp.where(xp.tri(A.shape[0], dtype=bool), factor, A)


def floyd_warshall(path: Any) -> None:
    """Row and column ``k`` do not change in step ``k``, so each step is one expression."""
    xp = array_module(path)
    for k in range(path.shape[0]):
        xp.minimum(path, path[:, k:k + 1] + path[k:k + 1, :], out=path)


# ---------------------------------------------------------------- reductions
def dot(x: Any, y: Any, out: Any) -> None:
    out[0] = x @ y


def row_norms(A: Any, nrm: Any) -> None:
    xp = array_module(A)
    nrm[...] = xp.sqrt((A * A).sum(axis=1))


def softmax_rows(X: Any, Y: Any) -> None:
    xp = array_module(X)
    e = xp.exp(X - X.max(axis=1, keepdims=True))
    Y[...] = e / e.sum(axis=1, keepdims=True)


def covariance(data: Any, cov: Any, mean: Any) -> None:
    n = data.shape[0]
    mean[...] = data.sum(axis=0) / n
    data -= mean
    cov[...] = (data.T @ data) / (n - 1.0)


def correlation(data: Any, corr: Any, mean: Any, stddev: Any, eps: float) -> None:
    xp = array_module(data)
    n = data.shape[0]
    mean[...] = data.sum(axis=0) / n
    stddev[...] = xp.sqrt(((data - mean) ** 2).sum(axis=0) / n)
    stddev[...] = xp.where(stddev <= eps, 1.0, stddev)
    data -= mean
    data /= math.sqrt(n) * stddev
    corr[...] = data.T @ data
    xp.fill_diagonal(corr, 1.0)


# ------------------------------------------------------- other loop shapes
def suffix_sum(x: Any) -> None:
    xp = array_module(x)
    x[...] = xp.cumsum(x[::-1])[::-1]


def strided_backward(x: Any, y: Any) -> None:
    """``i = n-1, n-3, ... > 1``: every read of ``x[i-2]`` sees the old value."""
    n = x.shape[0]
    if n < 3:
        return
    low = 2 if (n - 1) % 2 == 0 else 3
    count = len(range(low, n, 2))
    x[low:n:2] = x[low:n:2] - 0.5 * x[low - 2:n - 2:2] + y[low // 2:low // 2 + count]


def saxpy(n: int, a: float, x: Any, y: Any) -> None:
    y[:n] += a * x[:n]


def gather_rows(E: Any, idx: Any, out: Any) -> None:
    out[...] = E[idx]


def clamp(X: Any, hi: float) -> None:
    xp = array_module(X)
    X[...] = xp.where(X < 0.0, 0.0, xp.where(X > hi, hi, X))


def int_arith(a: Any, b: Any, out: Any) -> None:
    xp = array_module(a)
    out[...] = a // b + a % b * 3 - abs(a - b) + xp.maximum(a, 2 * b)


NUMPY_KERNELS: dict[str, Callable[..., None]] = {
    "gemm": gemm, "2mm": two_mm, "trmm": trmm, "syrk": syrk, "gemver": gemver, "mvt": mvt,
    "atax": atax, "bicg": bicg, "jacobi-1d": jacobi_1d, "jacobi-2d": jacobi_2d,
    "heat-3d": heat_3d, "boundary-stencil": boundary_stencil, "conv2d-pad": conv2d_pad,
    "trisolv": trisolv, "backsolve": backsolve, "lu": lu, "cholesky": cholesky,
    "floyd-warshall": floyd_warshall, "dot": dot, "row-norms": row_norms,
    "softmax-rows": softmax_rows, "covariance": covariance, "correlation": correlation,
    "suffix-sum": suffix_sum, "strided-backward": strided_backward, "saxpy": saxpy,
    "gather-rows": gather_rows, "clamp": clamp, "int-arith": int_arith,
}
"""Corpus name -> numpy formulation (same arguments, updated in place)."""
