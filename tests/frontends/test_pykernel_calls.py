"""Calling ``@polyir.kernel`` functions: decorator forms, caching, in-place
updates of numpy arrays and torch CPU tensors, ``ir``/``compile_for``,
pipelines and targets."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import polyir
from polyir.frontends.pykernel import Kernel
from polyir.ir.printer import print_module
from polyir.testing.corpus import corpus_kernel, gemm


@polyir.kernel
def axpy_native(y, x, a):
    for i in range(y.shape[0]):
        y[i] += a * x[i]


@polyir.kernel(target="interpret")
def axpy_interp(y, x, a=2.0):
    """Docstring kept."""
    for i in range(y.shape[0]):
        y[i] += a * x[i]


def test_decorator_forms() -> None:
    assert isinstance(axpy_native, Kernel) and isinstance(axpy_interp, Kernel)
    assert axpy_native.target == "cpu"                 # the default target: native CPU
    assert axpy_interp.target == "interpret"
    assert axpy_interp.__name__ == "axpy_interp" and axpy_interp.__doc__ == "Docstring kept."
    y = np.zeros(3)
    axpy_interp.py_func(y, np.ones(3), 3.0)             # the original function, plain Python
    np.testing.assert_array_equal(y, 3.0)
    assert not isinstance(axpy_interp.py_func, Kernel)
    with pytest.raises(TypeError):
        polyir.kernel(target="interpret", bogus=1)


@pytest.mark.parametrize("compiled", [axpy_native, axpy_interp], ids=["cpu", "interpret"])
def test_runs_in_place_and_returns_none(compiled: Kernel) -> None:
    y, x = np.arange(4.0), np.ones(4)
    assert compiled(y, x, 0.5) is None
    np.testing.assert_array_equal(y, np.arange(4.0) + 0.5)


def test_keyword_and_default_arguments() -> None:
    y, x = np.zeros(3), np.arange(3.0)
    axpy_interp(y, x=x)
    np.testing.assert_array_equal(y, 2.0 * x)
    axpy_interp(x=x, y=y, a=-2.0)
    np.testing.assert_array_equal(y, 0.0)


def test_cache_is_keyed_on_signature() -> None:
    compiled = polyir.kernel(axpy_interp.py_func, target="interpret")
    compiled(np.zeros(3), np.ones(3), 1.0)
    compiled(np.zeros(7), np.ones(7), 2.0)                 # same dtypes and ranks
    assert len(compiled.cache) == 1
    assert compiled.ir(np.zeros(3), np.ones(3), 1.0) is compiled.ir(np.zeros(9), np.ones(9), 3.0)
    compiled(np.zeros(3, np.float32), np.ones(3, np.float32), 1.0)     # new dtypes
    compiled(np.zeros(3, np.float32), np.ones(3, np.float32), np.float32(1.0))  # f32 scalar
    assert len(compiled.cache) == 3
    text = str(compiled.ir(np.zeros(3, np.float32), np.ones(3, np.float32), np.float32(1.0)))
    assert "a: f32[]" in text and "cast" not in text


@pytest.mark.parametrize("target", ["interpret", "cpu"])
def test_torch_cpu_tensors_are_updated_in_place(target: str) -> None:
    entry = corpus_kernel("gemm")
    rng = np.random.default_rng(0)
    C, A, B = (torch.from_numpy(rng.uniform(size=s).astype(np.float32)) for s in ((3, 4), (3, 5), (5, 4)))
    expected = C.clone() * 0.5 + 1.5 * (A @ B)
    polyir.kernel(entry.func, target=target)(C, A, B, 1.5, 0.5)
    torch.testing.assert_close(C, expected, rtol=1e-5, atol=1e-6)
    grad = torch.zeros(4, requires_grad=True)
    with pytest.raises(polyir.ArgumentError):
        axpy_interp(grad.to(torch.bfloat16), torch.ones(4), 1.0)


def test_non_contiguous_arrays_are_written_back() -> None:
    base = np.zeros((4, 3))
    y = base[:, 1]                           # a strided view
    axpy_interp(y, np.arange(4.0), 1.0)
    np.testing.assert_array_equal(base[:, 1], np.arange(4.0))
    np.testing.assert_array_equal(base[:, [0, 2]], 0.0)
    A = np.arange(12.0).reshape(3, 4)
    C, B = np.zeros((4, 4)), np.eye(3, 4)
    expected = C.copy()
    gemm(expected, A.T, B, 1.0, 0.0)
    polyir.kernel(gemm, target="interpret")(C, A.T, B, 1.0, 0.0)  # a transposed (F-order) input
    np.testing.assert_array_equal(C, expected)


def test_interpret_accepts_the_python_arguments() -> None:
    y, x = np.zeros(5), np.arange(5.0)
    module = axpy_interp.ir(y, x, 3.0)
    assert [p.name for p in module.entry.params] == ["y", "x", "a"]
    polyir.interpret(module, y, x, 3.0)
    np.testing.assert_array_equal(y, 3.0 * x)


def test_compile_for_builds_without_running() -> None:
    y, x = np.zeros(3), np.ones(3)
    native = axpy_interp.compile_for(y, x, 1.0, target="cpu")
    assert "define" in native.llvm_ir and native.ptx is None
    # the CPU pipeline on several cores also marks the loop parallel for its thread team
    assert print_module(native.ir).replace(" parallel", "") == print_module(axpy_interp.ir(y, x, 1.0))
    np.testing.assert_array_equal(y, 0.0)                  # not run
    native(y, x, 4.0)
    np.testing.assert_array_equal(y, 4.0)
    interpreted = axpy_interp.compile_for(y, x, 1.0)       # the kernel's own target
    assert interpreted.llvm_ir is None and interpreted.ir == axpy_interp.ir(y, x, 1.0)
    np.testing.assert_array_equal(y, 4.0)


def test_pipeline_runs_before_building() -> None:
    entry = corpus_kernel("jacobi-2d")
    args = entry.make_args(entry.sizes, np.random.default_rng(0))
    expected = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    entry.func(*expected)
    compiled = polyir.kernel(entry.func, target="interpret", pipeline="simplify-bounds,mark-parallel")
    compiled(*args)
    for got, want in zip(args, expected, strict=True):
        if isinstance(want, np.ndarray):
            np.testing.assert_allclose(got, want)
    (artifact,) = compiled.cache.values()
    assert "parallel" in str(artifact.ir) and "parallel" not in str(compiled.ir(*args))


def test_compile_for_cuda_needs_no_gpu() -> None:
    entry = corpus_kernel("gemm")
    args = entry.make_args(entry.sizes, np.random.default_rng(0))
    before = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    artifact = polyir.kernel(entry.func).compile_for(*args, target="cuda")
    assert ".entry" in artifact.ptx and ".target sm_90" in artifact.ptx
    for got, want in zip(args, before, strict=True):
        if isinstance(want, np.ndarray):
            np.testing.assert_array_equal(got, want)


def test_repeated_calls_take_the_fast_path_with_every_check_kept() -> None:
    @polyir.kernel
    def scale(y, x, a):
        for i in range(y.shape[0]):
            y[i] = a * x[i]

    y, x = np.zeros(5, np.float32), np.arange(5, dtype=np.float32)
    scale(y, x, 2.0)
    scale(y, x, 3.0)                                   # same key: no new compile
    np.testing.assert_array_equal(y, 3.0 * x)
    assert len(scale.cache) == 1
    frozen = np.zeros(5, np.float32)
    frozen.flags.writeable = False
    for _ in range(2):                                 # refused the first time and every time after
        with pytest.raises(polyir.ArgumentError, match="read-only"):
            scale(frozen, x, 1.0)
    with pytest.raises(polyir.BoundsError, match="x"):
        scale(y, np.arange(4, dtype=np.float32), 1.0)  # bounds still checked on the fast path
    scale(y.astype(np.float64), x.astype(np.float64), 1.0)   # another dtype: another build
    assert len(scale.cache) == 2
    scale.target = "interpret"                         # a changed target is seen at once
    y_interp = np.zeros(5, np.float32)
    scale(y_interp, x, 4.0)
    np.testing.assert_array_equal(y_interp, 4.0 * x)
    assert len(scale.cache) == 3
