"""PTX emission without a GPU: every PTX made here is assembled by ptxas for
sm_80 and sm_90; golden checks on what the PTX must contain; tensor-core
kernels also run in the interpreter against numpy; the entry points compile
for CUDA on a machine with no GPU and refuse to run with a clear error."""
from __future__ import annotations

import math
import re

import numpy as np
import pytest
from hypothesis import given, settings

import polyir
from polyir.driver import build, compile_ir
from polyir.errors import CompileError, DeviceError
from polyir.ir.interpreter import interpret
from polyir.ir.parser import parse
from polyir.ir.types import round_to_bf16
from polyir.target import cuda
from polyir.testing import programs
from tests.conftest import HAS_GPU, examples
from tests.gpu.kernels import (
    ELEMENTWISE,
    HAND_MAPPED_HOST,
    SHARED_TILED_MATMUL,
    host_fragment_matmul,
    wmma_matmul_kernel,
)
from tests.gpu.ptxas import assemble

MMA_CASES = [
    ("m16n16k16.f16.f32", "row", "row", (1, 1)),
    ("m16n16k16.f16.f32", "col", "col", (2, 2)),
    ("m16n16k16.bf16.f32", "row", "col", (1, 2)),
    ("m16n16k8.tf32.f32", "col", "row", (2, 1)),
]


def _matmul_inputs(key: str, a_layout: str, b_layout: str, m: int, n: int, k: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    dtype = np.float16 if ".f16." in key else np.float32
    a = rng.standard_normal((m, k)).astype(dtype)
    b = rng.standard_normal((k, n)).astype(dtype)
    if ".bf16." in key:
        a, b = round_to_bf16(a), round_to_bf16(b)
    a_in = a if a_layout == "row" else np.ascontiguousarray(a.T)
    b_in = b if b_layout == "row" else np.ascontiguousarray(b.T)
    return a, b, a_in, b_in


# -------------------------------------------------------------- tensor cores
@pytest.mark.parametrize("key,a_layout,b_layout,warps", MMA_CASES)
def test_wmma_kernel_ptx_and_interpreter(key, a_layout, b_layout, warps) -> None:
    module = parse(wmma_matmul_kernel(key, a_layout, b_layout, warps))
    exe = compile_ir(module, cuda(80))
    ptx = exe.ptx
    shape = key.split(".")[0]
    kind = {"f16": "f16", "bf16": "bf16", "tf32": "tf32"}[key.split(".")[1]]
    assert re.search(rf"wmma\.load\.a\.sync\.aligned\.{a_layout}\.{shape}\.global\.{kind}", ptx)
    assert re.search(rf"wmma\.load\.b\.sync\.aligned\.{b_layout}\.{shape}\.global\.{kind}", ptx)
    assert f"wmma.mma.sync.aligned.{a_layout}.{b_layout}.{shape}" in ptx
    assert f"wmma.store.d.sync.aligned.row.{shape}.global.f32" in ptx
    assert ".local" not in ptx  # fragments live in registers
    assemble(ptx)
    m, n, k = 32, 64, 48
    a, b, a_in, b_in = _matmul_inputs(key, a_layout, b_layout, m, n, k)
    c = np.zeros((m, n), np.float32)
    interpret(module, c, a_in, b_in)
    tolerance = 2e-2 if "tf32" in key else 1e-4
    np.testing.assert_allclose(c, a.astype(np.float64) @ b.astype(np.float64), rtol=tolerance, atol=tolerance)


def test_mapped_fragment_nest_ptx() -> None:
    exe = compile_ir(parse(host_fragment_matmul("m16n16k16.bf16.f32")), cuda(90))
    assert "wmma.load.c.sync.aligned.row.m16n16k16.global.f32" in exe.ptx
    assert "wmma.mma.sync.aligned.row.row.m16n16k16.f32.bf16.bf16.f32" in exe.ptx
    assert ".target sm_90" in exe.ptx
    assemble(exe.ptx, ("sm_90",))


def test_fragment_layout_must_be_consistent() -> None:
    text = wmma_matmul_kernel().replace(
        "F0: fc = fragment_fill(0.0)",
        "F0: fc = fragment_fill(0.0)\n          F9: fa = fragment_load<a, m16n16k16.f16.f32, col>(A[0, 0])")
    with pytest.raises(CompileError, match="one layout"):
        compile_ir(parse(text), cuda(80))


# -------------------------------------------------------------- golden PTX
def test_elementwise_ptx_golden() -> None:
    exe = compile_ir(parse(ELEMENTWISE), cuda(80))
    ptx = exe.ptx
    assert ".visible .entry chain_k0(" in ptx
    for register in ("%tid.x", "%tid.y", "%ctaid.x", "%ctaid.y"):
        assert register in ptx
    assert "call" not in ptx and ".extern .func" not in ptx  # math is inline, no libdevice
    assert "bar.sync" not in ptx
    assert ".target sm_80" in ptx and ".version 8.0" in ptx
    assert "ptx_kernel" in exe.llvm_ir
    assemble(ptx)


def test_shared_memory_ptx_golden() -> None:
    exe = compile_ir(parse(SHARED_TILED_MATMUL), cuda(80))
    ptx = exe.ptx
    assert re.search(r"\.shared \.align 16 \.b8 \S*At\S*\[1024\]", ptx)
    assert re.search(r"\.shared \.align 16 \.b8 \S*Bt\S*\[1024\]", ptx)
    assert ptx.count("bar.sync") >= 2
    assert "st.shared" in ptx and "ld.shared" in ptx
    assemble(ptx)


def test_hand_mapped_nest_ptx_golden() -> None:
    ptx = compile_ir(parse(HAND_MAPPED_HOST), cuda(80)).ptx
    assert ptx.count("bar.sync") == 2 and ".shared" in ptx
    assert "%tid.y" in ptx and "%ctaid.y" in ptx
    assemble(ptx)


def test_large_shared_buffers_use_dynamic_shared_memory() -> None:
    module = parse("""
func f(A: f32[N, 128], B: f32[N, 128]) {
  local T: f32[128, 128] @shared
  for b = 0 to N step 128 parallel {
    for i = 0 to 128 parallel {
      for j = 0 to 128 {
        S0: T[i, j] = A[b + i, j]
      }
    }
    for i2 = 0 to 128 parallel {
      for j2 = 0 to 128 {
        S1: B[b + i2, j2] = T[127 - i2, j2]
      }
    }
  }
}
""")
    exe = compile_ir(module, cuda(90))
    (launch,) = [n for n in exe.ir.entry.body]
    assert launch.shared_bytes == 128 * 128 * 4
    assert ".extern .shared .align 16 .b8 __polyir_dynamic_shared[]" in exe.ptx
    assert "bar.sync" in exe.ptx
    assemble(exe.ptx, ("sm_90",))
    rng = np.random.default_rng(3)
    a = rng.standard_normal((256, 128)).astype(np.float32)
    b = np.zeros_like(a)
    interpret(exe.ir, a, b, parallel_order="reverse")
    np.testing.assert_array_equal(b, a.reshape(2, 128, 128)[:, ::-1].reshape(256, 128))


MATH = ("exp", "exp2", "log", "log2", "sqrt", "rsqrt", "tanh", "erf", "sigmoid", "sin", "cos",
        "floor", "ceil", "abs")


@pytest.mark.parametrize("dtype", ["f32", "f64", "f16", "bf16"])
def test_math_functions_need_no_libdevice(dtype: str) -> None:
    calls = " + ".join(f"{fn}(X[i])" for fn in MATH)
    one = "1.0" if dtype == "f32" else f"1.0:{dtype}"
    module = parse(f"""
func f(Y: {dtype}[N], X: {dtype}[N]) {{
  for i = 0 to N parallel {{
    S0: Y[i] = {calls} + pow(X[i], {one}) + max(X[i], {one}) + min(X[i], -X[i])
  }}
}}
""")
    exe = compile_ir(module, cuda(80))
    assert "call" not in exe.ptx and ".extern .func" not in exe.ptx
    if dtype == "bf16":
        assert "ld.global.nc.b16" in exe.ptx or "ld.global.b16" in exe.ptx
    assemble(exe.ptx)


# -------------------------------------------------------------- properties
@settings(max_examples=examples(10))
@given(programs(max_depth=3, max_statements=4, dtypes=("f32", "f64", "f16")))
def test_random_programs_assemble(module) -> None:
    exe = compile_ir(module, cuda(80))
    assert exe.ptx.count(".entry") == len([f for f in exe.ir.functions if f.kind == "kernel"])
    if exe.ptx:  # a program whose results are all dead compiles to nothing
        assemble(exe.ptx)
    else:
        assert not any(f.kind == "kernel" for f in exe.ir.functions)


# -------------------------------------------------------------- entry points
def test_driver_builds_cuda_without_a_gpu() -> None:
    with pytest.raises(CompileError, match="not mapped"):
        build(parse(ELEMENTWISE), "cuda:sm_80")  # the backend lowers mapped IR only
    exe = compile_ir(parse(ELEMENTWISE), "cuda:sm_80")
    assert exe.ptx.startswith("//") and exe.llvm_ir and exe.ir.functions[1].kind == "kernel"
    assemble(exe.ptx)
    if not HAS_GPU:
        x = np.ones((4, 4), np.float32)
        with pytest.raises(DeviceError, match="CuPy|GPU"):
            exe(x.copy(), x, np.ones(4, np.float32))


def test_pykernel_compile_for_cuda_returns_ptx() -> None:
    def scale(Y, X, alpha):
        for i in range(X.shape[0]):
            for j in range(X.shape[1]):
                Y[i, j] = alpha * X[i, j] + math.exp(X[i, j])

    kernel = polyir.kernel(scale, target="cuda")
    x = np.ones((8, 8), np.float32)
    exe = kernel.compile_for(np.zeros_like(x), x, 2.0)
    assert ".entry" in exe.ptx
    assemble(exe.ptx, ("sm_90",))


def test_unsupported_targets_and_shapes_are_refused() -> None:
    with pytest.raises(CompileError, match="sm_70"):
        compile_ir(parse(ELEMENTWISE), cuda(70))
    module = parse("""
func f(A: f32[N]) {
  local T: f32[N] @shared
  for i = 0 to N parallel {
    S0: T[i] = A[i]
    S1: A[i] = T[i] * 2.0
  }
}
""")
    with pytest.raises(Exception, match="symbolic shape"):
        compile_ir(module, cuda(80))


def _corpus():
    from polyir.testing.corpus import CORPUS
    return CORPUS


@pytest.mark.parametrize("entry", _corpus(), ids=[k.name for k in _corpus()])
def test_corpus_kernels_compile_for_cuda(entry) -> None:
    args = entry.make_args(entry.sizes, np.random.default_rng(0))
    exe = polyir.kernel(entry.func, target="cuda:sm_80").compile_for(*args)
    kernels = [f for f in exe.ir.functions if f.kind == "kernel"]
    assert kernels and exe.ptx.count(".entry") == len(kernels)
    assert "call" not in exe.ptx
    assemble(exe.ptx)
