"""Native code equals the reference interpreter on random programs and the corpus."""
from __future__ import annotations

import copy
import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings

import polyir
from polyir.cpu.jit import build_cpu
from polyir.ir.interpreter import interpret
from polyir.ir.nodes import For, Module, Node
from polyir.target import cpu
from polyir.testing import programs, random_arguments
from polyir.testing.corpus import CORPUS
from tests.conftest import examples


def _assert_same(expected: list, actual: list, rtol: float, atol: float, context: str) -> None:
    for index, (e, a) in enumerate(zip(expected, actual, strict=True)):
        if isinstance(e, np.ndarray):
            assert e.dtype == a.dtype
            if e.dtype.kind == "f":
                np.testing.assert_allclose(a, e, rtol=rtol, atol=atol,
                                           err_msg=f"argument {index} of\n{context}")
            else:
                np.testing.assert_array_equal(a, e, err_msg=f"argument {index} of\n{context}")


def _check(module: Module, cores: int, seed: int, sizes=None) -> None:
    args = random_arguments(module, seed, sizes)
    expected, actual = copy.deepcopy(args), copy.deepcopy(args)
    interpret(module, *expected)
    build_cpu(module, cpu(cores), cache_dir=None)(*actual)
    _assert_same(expected, actual, rtol=1e-5, atol=1e-6, context=str(module))


@settings(max_examples=examples(30))
@given(programs(dtypes=("f16", "bf16", "f32", "f64")))
def test_random_programs_match_interpreter(module):
    _check(module, cores=1, seed=0)


def _outer_parallel(nodes: tuple[Node, ...]) -> tuple[Node, ...]:
    return tuple(dataclasses.replace(n, parallel=True) if isinstance(n, For) else n
                 for n in nodes)


@settings(max_examples=examples(15))
@given(programs(max_depth=3, dtypes=("f32", "f64")))
def test_random_programs_with_parallel_outer_loops(module):
    """Outer loops whose iterations are independent (the interpreter run in
    reverse order agrees with forward order) run in parallel natively."""
    function = module.entry
    marked = Module((dataclasses.replace(function, body=_outer_parallel(function.body)),))
    args = random_arguments(marked, 1, 9)
    forward, backward = copy.deepcopy(args), copy.deepcopy(args)
    interpret(module, *forward)
    interpret(marked, *backward, parallel_order="reverse")
    independent = all(np.array_equal(f, b) for f, b in zip(forward, backward, strict=True)
                      if isinstance(f, np.ndarray))
    if independent:
        actual = copy.deepcopy(args)
        build_cpu(marked, _dispatching(3), cache_dir=None)(*actual)
        _assert_same(forward, actual, rtol=1e-5, atol=1e-6, context=str(marked))
    else:  # the claim is wrong: native code is only checked for not crashing
        build_cpu(marked, _dispatching(3), cache_dir=None)(*copy.deepcopy(args))


def _dispatching(cores: int):
    """A target whose size policy sends every non-empty parallel loop to the team."""
    return dataclasses.replace(cpu(cores), parallel_dispatch_ns=0.0, team_late_ns=2**62)


@pytest.mark.parametrize("kernel", CORPUS, ids=[k.name for k in CORPUS])
def test_corpus_matches_python_and_interpreter(kernel):
    args = kernel.make_args(kernel.sizes, np.random.default_rng(0))
    module = polyir.kernel(kernel.func).ir(*args)
    by_python, by_interpreter, native = (copy.deepcopy(args) for _ in range(3))
    kernel.func(*by_python)
    interpret(module, *by_interpreter)
    build_cpu(module, cpu(2), cache_dir=None)(*native)
    _assert_same(by_interpreter, native, rtol=1e-12, atol=1e-12, context=str(module))
    _assert_same(by_python, native, rtol=1e-12, atol=1e-12, context=kernel.name)
