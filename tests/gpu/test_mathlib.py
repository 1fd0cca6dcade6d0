"""The device math library (``polyir.ptx.mathlib``) is plain arithmetic, so it
runs on the host through a JIT: compared with numpy in float64 over wide
ranges, near the edges, and on special values."""
from __future__ import annotations

import math

import numpy as np
import pytest

from tests.gpu.mathjit import compile_math

REFERENCE = {
    "exp": np.exp, "exp2": np.exp2, "log": np.log, "log2": np.log2, "sin": np.sin,
    "cos": np.cos, "tanh": np.tanh, "erf": np.vectorize(math.erf),
    "sigmoid": lambda x: 1.0 / (1.0 + np.exp(-x)),
}
# Largest relative error allowed, in units of the type's epsilon (erf: the
# Abramowitz-Stegun tail has absolute error 1.5e-7 in both types, plus rounding).
ULPS = {np.float32: 8, np.float64: 16}


def _inputs(fn: str, dtype: type, rng: np.random.Generator) -> np.ndarray:
    limit = 80.0 if dtype == np.float32 else 700.0
    parts = [rng.uniform(-30, 30, 4000), rng.uniform(-1, 1, 4000), rng.uniform(-1e-4, 1e-4, 500)]
    if fn in ("exp", "exp2", "sigmoid"):
        parts.append(rng.uniform(-limit, limit, 2000))
    if fn in ("log", "log2"):
        exponent = 120 if dtype == np.float32 else 1000
        parts = [np.exp2(rng.uniform(-exponent, exponent, 6000)), 1 + rng.uniform(-1e-3, 1e-3, 1000)]
    return np.concatenate(parts).astype(dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("fn", sorted(REFERENCE))
def test_accuracy_against_numpy(fn: str, dtype: type) -> None:
    rng = np.random.default_rng(len(fn))
    x = _inputs(fn, dtype, rng)
    got = compile_math(fn, dtype)(x).astype(np.float64)
    want = REFERENCE[fn](x.astype(np.float64))
    finite = np.isfinite(want) & (np.abs(want) > np.finfo(dtype).tiny)
    eps = np.finfo(dtype).eps
    if fn in ("sin", "cos"):  # absolute error near the zeros, relative elsewhere
        error = np.abs(got - want)[finite] / np.maximum(np.abs(want[finite]), 1e-3)
    elif fn == "erf":
        error = np.abs(got - want)[finite] / np.maximum(np.abs(want[finite]), 1.0)
        eps = 4e-7 / ULPS[dtype]
    else:
        error = np.abs(got - want)[finite] / np.abs(want[finite])
    assert error.max() <= ULPS[dtype] * eps, f"{fn} max error {error.max():.3g}"
    # results that overflow/underflow in the reference do so on the device too
    np.testing.assert_array_equal(np.isinf(got[np.isinf(want)]), True)


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
def test_special_values(dtype: type) -> None:
    special = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0], dtype)
    exp = compile_math("exp", dtype)(special)
    np.testing.assert_array_equal(exp, [np.nan, np.inf, 0.0, 1.0, 1.0])
    log = compile_math("log", dtype)(np.array([np.nan, np.inf, -1.0, 0.0, 1.0], dtype))
    np.testing.assert_array_equal(log, [np.nan, np.inf, np.nan, -np.inf, 0.0])
    tanh = compile_math("tanh", dtype)(special)
    np.testing.assert_array_equal(tanh, [np.nan, 1.0, -1.0, 0.0, -0.0])
    assert np.signbit(tanh[4])
    tiny = np.array([np.finfo(dtype).smallest_subnormal * 7], dtype)
    np.testing.assert_allclose(compile_math("log", dtype)(tiny), np.log(tiny.astype(np.float64)), rtol=4 * np.finfo(dtype).eps)


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
def test_pow(dtype: type) -> None:
    rng = np.random.default_rng(7)
    a = rng.uniform(0.01, 10, 2000).astype(dtype)
    e = rng.uniform(-6, 6, 2000).astype(dtype)
    pow_ = compile_math("pow", dtype, 2)
    want = a.astype(np.float64) ** e.astype(np.float64)
    assert (np.abs(pow_(a, e) - want) / want).max() < 64 * np.finfo(dtype).eps
    cases = np.array([[-2, 3], [-2, 2], [0, 2], [0, -1], [0, 0], [-1.5, 0.5], [np.nan, 0], [2, -1]], dtype)
    np.testing.assert_allclose(pow_(cases[:, 0], cases[:, 1]), [-8, 4, 0, np.inf, 1, np.nan, 1, 0.5],
                               rtol=4 * np.finfo(dtype).eps, atol=0)
