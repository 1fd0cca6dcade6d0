"""``polyir.ptx.runtime`` without a GPU: with CuPy absent it raises DeviceError
saying so; with a CuPy stand-in that runs kernels in the interpreter
(tests/gpu/fakecupy.py) the runtime binds arguments, walks launches and
copies results exactly as on a GPU."""
from __future__ import annotations

import sys

import numpy as np
import pytest

from polyir.driver import compile_ir
from polyir.errors import ArgumentError, DeviceError
from polyir.ir.parser import parse
from polyir.ir.types import round_to_bf16
from polyir.target import cuda
from tests.gpu import fakecupy
from tests.gpu.kernels import ELEMENTWISE, SHARED_TILED_MATMUL, wmma_matmul_kernel
from tests.gpu.ptxas import PTXAS, assemble


@pytest.fixture
def fake_cupy(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setitem(sys.modules, "cupy", fakecupy)
    fakecupy.RawModule.launches = []

    def build(text: str):
        exe = compile_ir(parse(text), cuda(80))
        if PTXAS:  # these tests check the runtime, not ptxas: run them without it too
            assemble(exe.ptx, ("sm_80",))
        fakecupy.RawModule.current_ir = exe.ir
        return exe

    return build


def test_missing_cupy_is_a_device_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "cupy", None)  # import cupy -> ImportError
    exe = compile_ir(parse(ELEMENTWISE), cuda(80))
    x = np.ones((2, 3), np.float32)
    with pytest.raises(DeviceError, match="needs CuPy"):
        exe(x.copy(), x, np.ones(3, np.float32))


def test_no_gpu_is_a_device_error(monkeypatch: pytest.MonkeyPatch, fake_cupy) -> None:
    exe = fake_cupy(ELEMENTWISE)
    monkeypatch.setattr(fakecupy.cuda.runtime, "getDeviceCount", lambda: 0)
    x = np.ones((2, 3), np.float32)
    with pytest.raises(DeviceError, match="no CUDA GPU"):
        exe(x.copy(), x, np.ones(3, np.float32))


def test_numpy_arguments_are_copied_back(fake_cupy) -> None:
    exe = fake_cupy(ELEMENTWISE)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((9, 70)).astype(np.float32)
    b = rng.standard_normal(70).astype(np.float32)
    y = np.zeros_like(x)
    exe(y, x, b)
    expected = np.tanh(x * 2 + b) / (1 + np.exp(-x)) + np.exp(-x * x)
    np.testing.assert_allclose(y, expected, rtol=1e-5, atol=1e-6)
    (launch,) = fakecupy.RawModule.launches
    assert launch["grid"] == (3, 2, 1) and launch["block"] == (32, 8, 1)


def test_device_arrays_are_used_in_place_and_checked(fake_cupy) -> None:
    exe = fake_cupy(SHARED_TILED_MATMUL)
    rng = np.random.default_rng(1)
    a = fakecupy.asarray(rng.standard_normal((20, 17)).astype(np.float32))
    b = fakecupy.asarray(rng.standard_normal((17, 18)).astype(np.float32))
    c = fakecupy.zeros((20, 18), np.float32)
    exe(c, a, b)
    np.testing.assert_allclose(np.asarray(c), np.asarray(a) @ np.asarray(b), rtol=1e-4, atol=1e-4)
    with pytest.raises(ArgumentError, match="dtype float64"):
        exe(c, a.astype(np.float64), b)
    with pytest.raises(ArgumentError, match="dimension 0"):
        exe(c, fakecupy.zeros((17, 17), np.float32), b)
    with pytest.raises(ArgumentError, match="expected 3 arguments"):
        exe(c, a)


def test_bf16_buffers_are_16_bit_on_the_device(fake_cupy) -> None:
    exe = fake_cupy(wmma_matmul_kernel("m16n16k16.bf16.f32"))
    rng = np.random.default_rng(2)
    a = round_to_bf16(rng.standard_normal((32, 48)).astype(np.float32))
    b = round_to_bf16(rng.standard_normal((48, 16)).astype(np.float32))
    c = np.zeros((32, 16), np.float32)
    exe(c, a, b)
    np.testing.assert_allclose(c, a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4)


def test_empty_grids_do_not_launch(fake_cupy) -> None:
    exe = fake_cupy("""
func f(A: f32[N], n: index) {
  for i = 5 to n parallel {
    S0: A[i] = 2.0
  }
  for i_1 = 0 to N parallel {
    S1: A[i_1] = A[i_1] + 1.0
  }
}
""")
    a = np.zeros(8, np.float32)
    exe(a, 3)
    np.testing.assert_array_equal(a, np.ones(8))
    assert [entry["kernel"] for entry in fakecupy.RawModule.launches] == ["f_k1"]
    exe(a, 7)
    np.testing.assert_array_equal(a, [2, 2, 2, 2, 2, 3, 3, 2])


def test_a_too_small_output_is_refused_before_any_launch(fake_cupy) -> None:
    # issue 16: the host-side footprint check of the CUDA path (polyir.cpu.bounds)
    from polyir import BoundsError
    exe = fake_cupy("func f(B: f32[P, Q], A: f32[N, M]) {\n"
                    "  for i = 1 to -1 + N {\n    for j = 1 to -1 + M {\n"
                    "      S0: B[i, j] = A[i - 1, j] + A[i + 1, j] + A[i, j]\n    }\n  }\n}\n")
    A, small = np.ones((50, 40), np.float32), np.full((5, 5), 7.0, np.float32)
    with pytest.raises(BoundsError, match="B"):
        exe(small, A)
    assert fakecupy.RawModule.launches == [] and bool((small == 7.0).all())
    big = np.zeros((50, 40), np.float32)
    exe(big, A)
    assert len(fakecupy.RawModule.launches) == 1 and big[1:-1, 1:-1].min() == 3.0


GATHER = """func embed(out: f32[N, D], W: f32[V, D], ids: i64[N]) {
  for i = 0 to N {
    for j = 0 to D {
      S0: out[i, j] = W[ids[i], j]
    }
  }
}
"""

SHIFTED_GATHER = """func embed(out: f32[N, D], W: f32[V, D], ids: i32[N]) {
  for i = 0 to N {
    for j = 0 to D {
      S0: out[i, j] = W[cast<i64>(ids[i]) + 1, j]
    }
  }
}
"""


@pytest.mark.parametrize("on_device", [True, False])
def test_gather_ids_are_checked_before_any_launch(fake_cupy, on_device: bool) -> None:
    # issue 16: an embedding id out of range on the GPU path is a BoundsError, device ids included
    from polyir import BoundsError
    exe = fake_cupy(GATHER)
    W = np.arange(12, dtype=np.float32).reshape(4, 3)
    place = fakecupy.asarray if on_device else np.asarray
    out = place(np.full((3, 3), -1.0, np.float32))
    for bad in ([0, 4, 1], [-1, 0, 0]):
        fakecupy.counts.clear()
        with pytest.raises(BoundsError, match=rf"subscript ids\[i\w*\] of 'W' .* takes the value {max(bad) if max(bad) >= 4 else min(bad)} from 'ids' in statement S0"):
            exe(out, place(W), place(np.array(bad, np.int64)))
        assert fakecupy.RawModule.launches == [] and bool((np.asarray(out) == -1.0).all())
        if on_device:      # only the minimum and maximum came back
            assert fakecupy.counts["to_host"] == 1
    exe(out, place(W), place(np.array([3, 0, 2], np.int64)))
    np.testing.assert_array_equal(np.asarray(out), W[[3, 0, 2]])


def test_a_computed_gather_subscript_is_checked_on_device_ids(fake_cupy) -> None:
    from polyir import BoundsError
    exe = fake_cupy(SHIFTED_GATHER)
    W = fakecupy.asarray(np.arange(12, dtype=np.float32).reshape(4, 3))
    out = fakecupy.zeros((2, 3), np.float32)
    with pytest.raises(BoundsError, match="takes the value 4 from 'ids'"):
        exe(out, W, fakecupy.asarray(np.array([0, 3], np.int32)))       # 3 + 1 is past W
    assert fakecupy.RawModule.launches == []
    exe(out, W, fakecupy.asarray(np.array([2, -1], np.int32)))
    np.testing.assert_array_equal(np.asarray(out), np.arange(12, dtype=np.float32).reshape(4, 3)[[3, 0]])
    unchecked = compile_ir(parse(SHIFTED_GATHER), cuda(80), check_bounds=False)
    assert not unchecked.bounds
