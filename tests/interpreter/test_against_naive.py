"""Random programs: the compiled interpreter against the naive tree walker."""
from __future__ import annotations

import copy

import numpy as np
from hypothesis import given, settings

from polyir.ir.interpreter import interpret
from polyir.testing import programs, random_arguments
from tests.conftest import examples
from tests.interpreter.naive import Naive


def same(a: np.ndarray, b: np.ndarray) -> bool:
    return a.dtype == b.dtype and np.array_equal(a, b, equal_nan=a.dtype.kind == "f")


def close(a: np.ndarray, b: np.ndarray) -> bool:
    return a.dtype == b.dtype and np.allclose(a, b, rtol=1e-6, atol=1e-9, equal_nan=True)


def run_both(module, compare) -> None:
    fn = module.entry
    for trial in range(2):
        args = random_arguments(fn, trial)
        expected = copy.deepcopy(args)
        Naive(fn).run(*expected)
        interpret(module, *args)
        for p, got, want in zip(fn.params, args, expected, strict=True):
            if isinstance(got, np.ndarray):
                assert compare(got, want), f"{p.name} differs:\n{module}\n{got}\n{want}"


@settings(max_examples=examples(150, 2000))
@given(programs(dtypes=("f32", "f64", "f16", "bf16"), math=False))
def test_random_programs_match_the_naive_evaluator(module):
    # Exactly-rounded operations only: results must agree to the bit.
    run_both(module, same)


@settings(max_examples=examples(40, 800))
@given(programs(dtypes=("f32", "f64"), math=True))
def test_random_programs_with_transcendentals_match_within_an_ulp_or_so(module):
    # exp/tanh/sigmoid come from different libraries (math vs numpy): compare closely.
    run_both(module, close)
