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


@settings(max_examples=examples(150, 2000))
@given(programs(dtypes=("f32", "f64", "f16", "bf16")))
def test_random_programs_match_the_naive_evaluator(module):
    fn = module.entry
    for trial in range(2):
        args = random_arguments(fn, trial)
        expected = copy.deepcopy(args)
        Naive(fn).run(*expected)
        interpret(module, *args)
        for p, got, want in zip(fn.params, args, expected, strict=True):
            if isinstance(got, np.ndarray):
                assert same(got, want), f"{p.name} differs:\n{module}\n{got}\n{want}"
