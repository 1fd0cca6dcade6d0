"""Native code keeps the IR's float semantics unless an option allows otherwise."""
from __future__ import annotations

import logging

import numpy as np

import polyir
from polyir.cpu.jit import build_cpu
from polyir.target import cpu

VECTORIZED_SUM = """
func r(s: f32[1], a: f32[N]) {
  for k = 0 to N vectorize=8 {
    S0: s[0] = s[0] + a[k]
  }
}"""


def test_vectorize_hint_does_not_reorder_a_float_sum(caplog) -> None:
    a = np.random.default_rng(0).standard_normal(1001).astype(np.float32)
    with caplog.at_level(logging.WARNING, logger="polyir.llvm"):
        exact = build_cpu(polyir.parse(VECTORIZED_SUM), cpu(1), cache_dir=None)
    assert "not vectorised" in caplog.text
    s = np.zeros(1, np.float32)
    exact(s, a)
    assert s[0] == np.cumsum(a)[-1]                 # the sequential order, bit for bit
    fast = build_cpu(polyir.parse(VECTORIZED_SUM), cpu(1), cache_dir=None, fast_math=True)
    assert "llvm.loop.vectorize.enable" in fast.llvm_ir
    s = np.zeros(1, np.float32)
    fast(s, a)
    np.testing.assert_allclose(s[0], a.astype(np.float64).sum(), rtol=1e-4)


def test_vectorize_hint_kept_where_it_reorders_nothing() -> None:
    text = """
func f(C: f32[N], A: f32[N, M]) {
  for i = 0 to N vectorize=8 {
    for j = 0 to M {
      S0: C[i] = C[i] + A[i, j]
    }
  }
}"""
    assert "llvm.loop.vectorize.enable" in build_cpu(polyir.parse(text), cpu(1), cache_dir=None).llvm_ir
