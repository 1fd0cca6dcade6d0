"""Kernels run on a real GPU (CuPy), compared with numpy, torch and the
interpreter. Every test here is marked ``gpu`` and skipped without a GPU
(tests/conftest.py); bench/gpu_check.sh runs them on a GPU machine."""
from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings

import polyir
from polyir.driver import compile_ir
from polyir.ir.interpreter import interpret
from polyir.ir.parser import parse
from polyir.target import cuda
from polyir.testing import programs, random_arguments, symbol_values
from tests.conftest import examples
from tests.gpu.kernels import (
    ELEMENTWISE,
    HAND_MAPPED_HOST,
    SHARED_TILED_MATMUL,
    host_fragment_matmul,
    wmma_matmul_kernel,
)
from tests.gpu.test_ptx import MMA_CASES, _matmul_inputs

pytestmark = pytest.mark.gpu


def _sm() -> int:
    """The compile target for this GPU: sm_90 on Hopper and later, else sm_80."""
    import cupy
    sm = int(cupy.cuda.Device().compute_capability)  # e.g. "90"
    return 90 if sm >= 90 else 80


def test_elementwise_chain_numpy_arguments() -> None:
    exe = compile_ir(parse(ELEMENTWISE), cuda(_sm()))
    rng = np.random.default_rng(0)
    x = rng.standard_normal((300, 257)).astype(np.float32)
    b = rng.standard_normal(257).astype(np.float32)
    y = np.zeros_like(x)
    exe(y, x, b)
    expected = np.tanh(x * 2 + b) / (1 + np.exp(-x)) + np.exp(-x * x)
    np.testing.assert_allclose(y, expected, rtol=2e-5, atol=2e-6)


def test_shared_memory_tiled_matmul() -> None:
    exe = compile_ir(parse(SHARED_TILED_MATMUL), cuda(_sm()))
    rng = np.random.default_rng(1)
    a = rng.standard_normal((70, 45)).astype(np.float32)
    b = rng.standard_normal((45, 33)).astype(np.float32)
    c = rng.standard_normal((70, 33)).astype(np.float32)
    expected = c + a @ b
    exe(c, a, b)
    np.testing.assert_allclose(c, expected, rtol=1e-4, atol=1e-4)


def test_hand_mapped_host_nest() -> None:
    exe = compile_ir(parse(HAND_MAPPED_HOST), cuda(_sm()))
    rng = np.random.default_rng(6)
    a = rng.standard_normal((64, 64)).astype(np.float32)
    b = rng.standard_normal((64, 64)).astype(np.float32)
    c = np.zeros((64, 64), np.float32)
    exe(c, a, b)
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("key,a_layout,b_layout,warps", MMA_CASES)
def test_tensor_core_matmul_cupy_in_place(key, a_layout, b_layout, warps) -> None:
    import cupy
    exe = compile_ir(parse(wmma_matmul_kernel(key, a_layout, b_layout, warps)), cuda(_sm()))
    m, n, k = 64, 128, 96
    a, b, a_in, b_in = _matmul_inputs(key, a_layout, b_layout, m, n, k)
    c = cupy.zeros((m, n), dtype=cupy.float32)
    exe(c, cupy.asarray(a_in), cupy.asarray(b_in))
    tolerance = 3e-2 if "tf32" in key else 1e-3
    np.testing.assert_allclose(cupy.asnumpy(c), a.astype(np.float64) @ b.astype(np.float64),
                               rtol=tolerance, atol=tolerance)


def test_tensor_core_bf16_with_torch_tensors() -> None:
    torch = pytest.importorskip("torch")
    exe = compile_ir(parse(wmma_matmul_kernel("m16n16k16.bf16.f32")), cuda(_sm()))
    a = torch.randn(64, 32, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(32, 48, device="cuda", dtype=torch.bfloat16)
    c = torch.zeros(64, 48, device="cuda", dtype=torch.float32)
    pointer = c.data_ptr()
    exe(c, a, b)
    assert c.data_ptr() == pointer  # written in place, no copy
    torch.testing.assert_close(c, a.float() @ b.float(), rtol=1e-3, atol=1e-3)


def test_mapped_fragment_nest_on_gpu() -> None:
    exe = compile_ir(parse(host_fragment_matmul()), cuda(_sm()))
    rng = np.random.default_rng(4)
    a = rng.standard_normal((48, 64)).astype(np.float16)
    b = rng.standard_normal((64, 32)).astype(np.float16)
    c = rng.standard_normal((48, 32)).astype(np.float32)
    expected = c + a.astype(np.float32) @ b.astype(np.float32)
    exe(c, a, b)
    np.testing.assert_allclose(c, expected, rtol=1e-3, atol=1e-3)


def test_torch_cuda_tensors_are_updated_in_place() -> None:
    torch = pytest.importorskip("torch")
    exe = compile_ir(parse(ELEMENTWISE), cuda(_sm()))
    x = torch.randn(40, 50, device="cuda")
    b = torch.randn(50, device="cuda")
    y = torch.zeros(40, 50, device="cuda")
    exe(y, x, b)
    expected = torch.tanh(x * 2 + b) * torch.sigmoid(x) + torch.exp(-x * x)
    torch.testing.assert_close(y, expected, rtol=2e-5, atol=2e-6)


def test_pykernel_target_cuda_runs() -> None:
    def saxpy_exp(Y, X, alpha):
        for i in range(X.shape[0]):
            Y[i] = alpha * X[i] + math.exp(X[i])

    kernel = polyir.kernel(saxpy_exp, target="cuda")
    x = np.linspace(-3, 3, 1000)
    y = np.zeros_like(x)
    kernel(y, x, 0.5)
    np.testing.assert_allclose(y, 0.5 * x + np.exp(x), rtol=1e-13)


@settings(max_examples=examples(10))
@given(programs(max_depth=3, max_statements=4))
def test_random_programs_match_the_interpreter(module) -> None:
    exe = compile_ir(module, cuda(_sm()))
    sizes = symbol_values(module.entry, None)
    expected = random_arguments(module.entry, np.random.default_rng(0), sizes)
    got = [x.copy() if isinstance(x, np.ndarray) else x for x in expected]
    interpret(module, *expected)
    exe(*got)
    for e, g in zip(expected, got, strict=False):
        if isinstance(e, np.ndarray):
            np.testing.assert_allclose(g, e, rtol=1e-4, atol=1e-5, equal_nan=True)
