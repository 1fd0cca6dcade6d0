"""The JIT vectorises simple loops for the host CPU (checked in the assembly)."""
from __future__ import annotations

import re

import numpy as np
import pytest

PACKED_MUL = re.compile(r"\bv?mulps\s+.*%[xyz]mm\d+")


def test_elementwise_loop_uses_packed_vector_multiply(native):
    ex = native("""
func f(y: f32[N], a: f32[N], b: f32[N]) {
  for i = 0 to N {
    S0: y[i] = a[i] * b[i]
  }
}""")
    assert PACKED_MUL.search(ex.asm), "no packed float multiply in:\n" + ex.asm[:4000]
    a, b = np.arange(100, dtype=np.float32), np.full(100, 0.5, np.float32)
    y = np.zeros(100, np.float32)
    ex(y, a, b)
    np.testing.assert_array_equal(y, a * b)


def test_tanh_chain_vectorises_without_libm_calls(native):
    ex = native("""
func f(y: f32[N], x: f32[N], a: f32[], b: f32[]) {
  for i = 0 to N {
    S0: y[i] = tanh(a[] * x[i] + b[]) * x[i]
  }
}""")
    assert PACKED_MUL.search(ex.asm)
    assert "tanhf" not in ex.asm and "expf" not in ex.asm
    x = np.linspace(-12, 12, 4097, dtype=np.float32)
    y = np.zeros_like(x)
    ex(y, x, 0.5, 0.25)
    expected = np.tanh(np.float32(0.5) * x.astype(np.float64) + np.float32(0.25)) * x
    np.testing.assert_allclose(y, expected, rtol=4e-7, atol=1e-30)


def test_scalar_loop_is_not_reported_as_packed(native):
    """The oracle itself can fail: a loop-carried recurrence has no packed multiply."""
    ex = native("""
func f(y: f32[N]) {
  for i = 1 to N {
    S0: y[i] = y[i - 1] * y[i]
  }
}""")
    assert not PACKED_MUL.search(ex.asm)


def test_vectorize_attribute_sets_the_vector_width(native):
    template = """
func f(y: f32[N], a: f32[N], b: f32[N]) {
  for i = 0 to N vectorize=WIDTH {
    S0: y[i] = a[i] * b[i]
  }
}"""
    scalar = native(template.replace("WIDTH", "1"))
    assert "llvm.loop.vectorize.width" in scalar.llvm_ir
    assert not PACKED_MUL.search(scalar.asm)
    four = native(template.replace("WIDTH", "4"))
    packed = [line for line in four.asm.splitlines() if PACKED_MUL.search(line)]
    assert packed and all("xmm" in line for line in packed)
    a, b = np.arange(37, dtype=np.float32), np.full(37, 3.0, np.float32)
    for ex in (scalar, four):
        y = np.zeros(37, np.float32)
        ex(y, a, b)
        np.testing.assert_array_equal(y, a * b)


WIDTH_TEST = """
func f(y: f32[N], a: f32[N], b: f32[N]) {
  for i = 0 to N {
    S0: y[i] = a[i] * b[i] + y[i]
  }
}"""


def _built(vector_bits: int):
    from dataclasses import replace

    import polyir
    from polyir.cpu.jit import build_cpu
    from polyir.target import cpu
    return build_cpu(polyir.parse(WIDTH_TEST), replace(cpu(1), vector_bits=vector_bits),
                     cache_dir=None)


def test_target_vector_bits_128_keeps_to_xmm_registers():
    narrow = _built(128)
    assert re.search(r"%xmm", narrow.asm) and not re.search(r"%[yz]mm", narrow.asm)


def _has_avx512() -> bool:
    from polyir.target import host_vector_bits
    return host_vector_bits() >= 512


@pytest.mark.skipif(not _has_avx512(), reason="host without AVX-512")
def test_target_vector_bits_512_uses_zmm_registers():
    """LLVM alone prefers 256-bit vectors on this host; ``vector_bits=512`` (what
    ``cpu()`` picks with AVX-512) gets zmm code."""
    wide = _built(512)
    assert re.search(r"\bv?mulps\s+.*%zmm", wide.asm)
    assert not re.search(r"\bv?mulps\s+.*%zmm", _built(256).asm)
    y, a = np.ones(1000, np.float32), np.arange(1000, dtype=np.float32)
    wide(y, a, a)
    np.testing.assert_array_equal(y, a * a + 1)
