"""The classic-kernel corpus through ``@polyir.kernel``: the plain Python run
is the oracle for the interpreter and for the native CPU backend; the IR
text round-trips through the parser."""
from __future__ import annotations

import copy
from typing import Any

import numpy as np
import pytest

import polyir
from polyir.ir.nodes import Buffer, Symbol
from polyir.testing.corpus import CORPUS, CorpusKernel, corpus_kernel

IDS = [k.name for k in CORPUS]


def _python_and_args(entry: CorpusKernel, seed: int = 0, dtype: Any = np.float64,
                     sizes: dict[str, int] | None = None) -> tuple[list[Any], list[Any]]:
    args = entry.make_args(sizes or entry.sizes, np.random.default_rng(seed), dtype=dtype)
    expected = copy.deepcopy(args)
    entry.func(*expected)
    return args, expected


def _assert_same(got: list[Any], expected: list[Any], rtol: float = 1e-7, atol: float = 1e-9) -> None:
    for position, (a, b) in enumerate(zip(got, expected, strict=True)):
        if isinstance(b, np.ndarray):
            assert a.dtype == b.dtype
            np.testing.assert_allclose(a, b, rtol=rtol, atol=atol, err_msg=f"argument {position}")


def test_corpus_is_complete() -> None:
    names = set(IDS)
    assert len(names) == len(IDS) >= 25
    for needed in ("gemm", "trmm", "gemver", "mvt", "atax", "bicg", "jacobi-1d", "jacobi-2d",
                   "seidel-2d", "heat-3d", "trisolv", "lu", "cholesky", "dot", "row-norms",
                   "covariance", "correlation", "floyd-warshall", "conv2d-pad", "suffix-sum"):
        assert needed in names
    with pytest.raises(KeyError, match="known: gemm"):
        corpus_kernel("no-such-kernel")


@pytest.mark.parametrize("entry", CORPUS, ids=IDS)
def test_interpreted_ir_matches_python(entry: CorpusKernel) -> None:
    args, expected = _python_and_args(entry)
    module = polyir.kernel(entry.func, target="interpret").ir(*args)
    # The entry function's parameters are the Python parameters, in order.
    names = [p.name for p in module.entry.params]
    assert names == list(entry.func.__code__.co_varnames[:entry.func.__code__.co_argcount])
    for param, arg in zip(module.entry.params, args, strict=True):
        if isinstance(arg, np.ndarray):
            assert isinstance(param, Buffer) and param.rank == arg.ndim
        elif isinstance(arg, int):
            assert isinstance(param, Symbol)
    changed = any(not np.array_equal(a, b) for a, b in zip(args, expected, strict=True) if isinstance(a, np.ndarray))
    assert changed, "the kernel must write something for the comparison to mean anything"
    polyir.interpret(module, *args)
    _assert_same(args, expected)


@pytest.mark.parametrize("entry", CORPUS, ids=IDS)
def test_ir_text_round_trips(entry: CorpusKernel) -> None:
    args, _ = _python_and_args(entry)
    module = polyir.kernel(entry.func, target="interpret").ir(*args)
    text = str(module)
    assert polyir.parse(text) == module
    polyir.verify(polyir.parse(text))


@pytest.mark.parametrize("entry", CORPUS, ids=IDS)
def test_native_cpu_matches_python(entry: CorpusKernel) -> None:
    args, expected = _python_and_args(entry, seed=1)
    compiled = polyir.kernel(entry.func)          # default target: the native CPU backend
    compiled(*args)
    _assert_same(args, expected, rtol=1e-6, atol=1e-9)
    artifact = next(iter(compiled.cache.values()))
    assert artifact.llvm_ir and "define" in artifact.llvm_ir


F32_KERNELS = ["gemm", "atax", "jacobi-2d", "cholesky", "softmax-rows", "correlation", "conv2d-pad",
               "clamp", "backsolve", "row-norms"]


@pytest.mark.parametrize("target", ["interpret", "cpu"])
@pytest.mark.parametrize("name", F32_KERNELS)
def test_float32_arguments(name: str, target: str) -> None:
    """f32 arrays with Python float scalars: the array dtype wins, casts are explicit."""
    entry = corpus_kernel(name)
    args, expected = _python_and_args(entry, seed=2, dtype=np.float32)
    compiled = polyir.kernel(entry.func, target=target)
    module = compiled.ir(*args)
    for param, arg in zip(module.entry.params, args, strict=True):
        if isinstance(arg, np.ndarray):
            assert str(param.dtype) == "f32"
    compiled(*args)
    _assert_same(args, expected, rtol=2e-4, atol=1e-5)


@pytest.mark.parametrize("name", ["gemm", "lu", "jacobi-1d", "conv2d-pad", "backsolve", "saxpy"])
def test_one_compiled_version_serves_two_sizes(name: str) -> None:
    entry = corpus_kernel(name)
    compiled = polyir.kernel(entry.func, target="interpret")
    for scale in (0, 2):
        sizes = {k: v + scale for k, v in entry.sizes.items()}
        args, expected = _python_and_args(entry, seed=scale, sizes=sizes)
        compiled(*args)
        _assert_same(args, expected)
    assert len(compiled.cache) == 1


def test_specialized_sizes_are_constants() -> None:
    entry = corpus_kernel("gemm")
    compiled = polyir.kernel(entry.func, target="interpret", specialize=True)
    for scale in (0, 1):
        sizes = {k: v + scale for k, v in entry.sizes.items()}
        args, expected = _python_and_args(entry, sizes=sizes)
        module = compiled.ir(*args)
        assert module.entry.symbols == ()
        text = str(module)
        assert f"C: f64[{sizes['ni']}, {sizes['nj']}]" in text
        compiled(*args)
        _assert_same(args, expected)
    assert len(compiled.cache) == 2


@pytest.mark.parametrize("target", ["interpret", "cpu"])
def test_integer_arguments_specialized(target: str) -> None:
    entry = corpus_kernel("saxpy")
    args, expected = _python_and_args(entry)
    compiled = polyir.kernel(entry.func, target=target, specialize=True)
    text = str(compiled.ir(*args))
    assert f"for i = 0 to {args[0]} " in text
    compiled(*args)
    _assert_same(args, expected)
