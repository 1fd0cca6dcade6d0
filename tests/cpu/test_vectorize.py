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


def _register_tile(columns: int) -> str:
    rows = "\n".join(f"""    for j_{r} = 0 to {columns} {{
      S{r}: C[{r}, j_{r}] = C[{r}, j_{r}] + A[{r}, k] * exp(B[k, j_{r}])
    }}""" for r in range(4))
    return f"""
func f(C: f32[4, {columns}], A: f32[4, K], B: f32[K, {columns}]) {{
  for k = 0 to K {{
{rows}
  }}
}}"""


@pytest.mark.parametrize("columns, vectors", [(8, 1), (16, 2), (32, 4), (24, None)])
def test_jammed_copies_of_several_vectors_are_vectorised_not_unrolled(columns, vectors):
    """The column loops an unroll-and-jam leaves (a register tile's rows) of 1, 2 or
    4 vectors each, whose statements ``polyir.llvm.lane_loop`` does not lower
    itself (a call of ``exp``): no full unrolling (LLVM's O3 would unroll each
    into scalar statements for the SLP vectoriser, seconds of compile time on a
    convolution tile), one vector iteration of ``vectors`` parts each; packed
    FMAs and the same sums. 3 vectors a copy is left to LLVM."""
    from dataclasses import replace

    import polyir
    from polyir.cpu.jit import build_cpu
    from polyir.target import cpu
    ex = build_cpu(polyir.parse(_register_tile(columns)), replace(cpu(1), vector_bits=256),
                   cache_dir=None, fast_math=True)
    assert ("llvm.loop.unroll.disable" in ex.llvm_ir) == (vectors is not None)
    assert ("llvm.loop.interleave.count" in ex.llvm_ir) == (vectors is not None and vectors > 1)
    if vectors is not None and vectors > 1:
        assert f'!{{ !"llvm.loop.interleave.count", i32 {vectors} }}' in ex.llvm_ir
        assert '!{ !"llvm.loop.vectorize.width", i32 8 }' in ex.llvm_ir
    assert re.search(r"\bvfmadd\w*ps\s+.*%ymm", ex.asm), ex.asm[:3000]
    rng = np.random.default_rng(0)
    A = rng.standard_normal((4, 37)).astype(np.float32)
    B = rng.standard_normal((37, columns)).astype(np.float32)
    C = rng.standard_normal((4, columns)).astype(np.float32)
    expected = C + A @ np.exp(B)
    ex(C, A, B)
    np.testing.assert_allclose(C, expected, rtol=1e-5, atol=1e-5)
