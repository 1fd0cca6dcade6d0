"""``fast_math``: FMA contraction and reassociation, only when asked for."""
from __future__ import annotations

import re

import numpy as np
import pytest

import polyir
from polyir.cpu.jit import build_cpu
from polyir.target import cpu

PACKED_FMA = re.compile(r"\bvfmadd\w*ps\s+[^\n]*%[yz]mm\d+")
ANY_FMA = re.compile(r"\bvfn?m(add|sub)\w*[ps][sd]\b")

DOT = """
func dot(s: f32[], a: f32[N], b: f32[N]) {
  for k = 0 to N {
    S0: s[] = s[] + a[k] * b[k]
  }
}"""
MATMUL = """
func mm(C: f32[N, M], A: f32[N, K], B: f32[K, M]) {
  for i = 0 to N {
    for k = 0 to K {
      for j = 0 to M {
        S0: C[i, j] = C[i, j] + A[i, k] * B[k, j]
      }
    }
  }
}"""


def _has_fma_instructions() -> bool:
    from polyir.cpu import jit
    jit._initialise()
    return "+fma" in jit._STATE["features"].split(",")


needs_fma = pytest.mark.skipif(not _has_fma_instructions(), reason="host CPU without FMA")


@needs_fma
@pytest.mark.parametrize("text", [DOT, MATMUL], ids=["dot", "matmul"])
def test_fast_math_gives_packed_fma_and_exact_math_none(text):
    exact = build_cpu(polyir.parse(text), cpu(1), cache_dir=None)
    fast = build_cpu(polyir.parse(text), cpu(1), cache_dir=None, fast_math=True)
    assert PACKED_FMA.search(fast.asm), "no packed FMA in:\n" + fast.asm[:4000]
    assert not ANY_FMA.search(exact.asm)
    assert "contract reassoc nsz" in fast.llvm_ir
    assert "contract" not in exact.llvm_ir


def test_exact_dot_is_the_sequential_float32_sum_and_fast_is_close():
    rng = np.random.default_rng(0)
    a = rng.standard_normal(10_001).astype(np.float32)
    b = rng.standard_normal(10_001).astype(np.float32)
    sequential = np.float32(0)
    for x, y in zip(a, b, strict=True):
        sequential = np.float32(sequential + np.float32(x * y))
    exact = build_cpu(polyir.parse(DOT), cpu(1), cache_dir=None)
    fast = build_cpu(polyir.parse(DOT), cpu(1), cache_dir=None, fast_math=True)
    s_exact, s_fast = np.zeros((), np.float32), np.zeros((), np.float32)
    exact(s_exact, a, b)
    fast(s_fast, a, b)
    assert s_exact.tobytes() == sequential.tobytes()
    reference = float(a.astype(np.float64) @ b.astype(np.float64))
    assert abs(float(s_fast) - reference) <= 1e-4 * float(np.abs(a) @ np.abs(b))


def test_fast_math_is_part_of_the_cache_key(tmp_path):
    first = build_cpu(polyir.parse(DOT), cpu(1), cache_dir=tmp_path)
    other = build_cpu(polyir.parse(DOT), cpu(1), cache_dir=tmp_path, fast_math=True)
    again = build_cpu(polyir.parse(DOT), cpu(1), cache_dir=tmp_path, fast_math=True)
    assert (first.cache_hit, other.cache_hit, again.cache_hit) == (False, False, True)
    assert (first.fast_math, other.fast_math, again.fast_math) == (False, True, True)
    assert "contract" in again.llvm_ir


def _py_dot(s, a, b):
    for k in range(a.shape[0]):
        s[0] += a[k] * b[k]


def test_kernel_is_exact_unless_asked():
    a = np.random.default_rng(1).standard_normal(5000).astype(np.float32)
    b = np.random.default_rng(2).standard_normal(5000).astype(np.float32)
    by_python, by_kernel = np.zeros(1, np.float32), np.zeros(1, np.float32)
    _py_dot(by_python, a, b)
    exact = polyir.kernel(_py_dot)
    exact(by_kernel, a, b)
    assert by_kernel.tobytes() == by_python.tobytes()
    assert not exact.compile_for(by_kernel, a, b).fast_math
    fast = polyir.kernel(fast_math=True)(_py_dot)
    by_fast = np.zeros(1, np.float32)
    fast(by_fast, a, b)
    artifact = fast.compile_for(by_fast, a, b)
    assert artifact.fast_math and "contract reassoc nsz" in artifact.llvm_ir
    np.testing.assert_allclose(by_fast, by_python, rtol=1e-4, atol=1e-3)


def test_compile_defaults_to_fast_math_and_can_be_exact():
    import torch
    model = torch.nn.Linear(16, 8).eval()
    x = torch.randn(3, 16)
    fast = polyir.compile(model, (x,))
    exact = polyir.compile(model, (x,), fast_math=False)
    assert all(s.executable.fast_math for s in fast.last_plan.segments)
    assert not any(s.executable.fast_math for s in exact.last_plan.segments)
    with torch.no_grad():
        expected = model(x)
    torch.testing.assert_close(fast(x), expected, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(exact(x), expected, rtol=1e-5, atol=1e-5)
