"""The CPU backend's inline float32 ``exp``/``tanh``/``sigmoid``
(``polyir.llvm.mathlib``; erf too): exp and tanh within 2 ulp of the float64 result over their whole
range (subnormal results, overflow, infinities and NaN included; sigmoid 3
ulp, and right down to its subnormal results for x < -87), exact builds
without fused multiply-adds and fast-math builds with them."""
from __future__ import annotations

import math

import numpy as np
import pytest

import polyir
from polyir.cpu.jit import build_cpu
from polyir.target import cpu

TEXT = """func f(y: f32[N], x: f32[N]) {{
  for i = 0 to N {{
    S0: y[i] = {fn}(x[i])
  }}
}}"""

REFERENCE = {"exp": np.exp, "tanh": np.tanh, "sigmoid": lambda x: 1.0 / (1.0 + np.exp(-x)),
             "erf": np.vectorize(math.erf, otypes=[np.float64])}
BOUND = {"exp": 2.0, "tanh": 2.0, "sigmoid": 3.0, "erf": 3.0}
"""ulp: exp about 1, tanh about 2, erf about 2.5 (``polyir.llvm.mathlib``); sigmoid adds a division."""


def _inputs() -> np.ndarray:
    dense = np.linspace(-110.0, 95.0, 400_001)
    edges = [0.0, -0.0, 1e-30, -1e-30, 88.72, 88.7228, 88.7229, 89.0, -87.3, -103.0, -103.97,
             -104.0, -150.0, np.inf, -np.inf, np.nan, np.finfo(np.float32).max,
             np.finfo(np.float32).tiny]
    return np.concatenate([dense, np.random.default_rng(0).normal(0, 4, 100_000), edges]).astype(np.float32)


def _ulps(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    """Distance in float32 units in the last place (subnormals: of the smallest subnormal)."""
    spacing = np.spacing(np.abs(want).astype(np.float32)).astype(np.float64)
    return np.abs(got.astype(np.float64) - want) / spacing


@pytest.mark.parametrize("fast_math", [False, True], ids=["exact", "fast_math"])
@pytest.mark.parametrize("fn", ["exp", "tanh", "sigmoid", "erf"])
def test_inline_math_is_within_two_ulp(fn: str, fast_math: bool) -> None:
    executable = build_cpu(polyir.parse(TEXT.format(fn=fn)), cpu(1), fast_math=fast_math)
    x = _inputs()
    y = np.empty_like(x)
    executable(y, x)
    with np.errstate(over="ignore", invalid="ignore"):
        want = REFERENCE[fn](x.astype(np.float64))
        beyond = want.astype(np.float32)     # overflow: inf, as float32 gives
    finite = np.isfinite(want) & (np.abs(want) <= np.finfo(np.float32).max)
    assert np.array_equal(np.isnan(y), np.isnan(want))
    outside = ~finite & ~np.isnan(want)
    assert np.array_equal(y[outside], beyond[outside])
    worst = float(_ulps(y[finite], want[finite]).max())
    assert worst <= BOUND[fn], f"{fn}: {worst:.2f} ulp"
    fused = "vfmadd" in executable.asm or "vfmsub" in executable.asm or "vfnmadd" in executable.asm
    assert fused == fast_math      # FMAs only where fast math allows contraction
