"""Random typed expression trees: compiled interpreter against the naive evaluator.

Stresses where the compiled code skips work: float32 rounding left to the
store, integer wrap-around left to the consumer, lazy select/and/or, casts
between every pair of types, and the special values (inf, nan, -0.0, INT_MIN).
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from polyir.ir.affine import Aff
from polyir.ir.interpreter import InterpretError, interpret
from polyir.ir.nodes import (
    Assign,
    BinOp,
    Buffer,
    Call,
    Cast,
    Compare,
    Const,
    Expr,
    For,
    Function,
    Load,
    Select,
    Var,
)
from polyir.ir.types import DType, round_to_bf16
from tests.conftest import examples
from tests.interpreter.naive import Naive

N = 12
TYPES = [DType.F16, DType.BF16, DType.F32, DType.F64, DType.I8, DType.I32, DType.I64, DType.BOOL]
# Correctly rounded operations only: libm and numpy may differ by an ulp on
# transcendental functions (those are checked with a tolerance in test_types.py).
FLOAT_FNS = ["neg", "abs", "max", "min", "sqrt", "floor", "ceil"]
INT_FNS = ["neg", "abs", "max", "min"]
INDEX_I = Aff.var("i")


def input_name(dtype: DType) -> str:
    return f"X_{dtype.value}"


def constants(dtype: DType) -> st.SearchStrategy[Const]:
    if dtype is DType.BOOL:
        return st.booleans().map(lambda b: Const(b, dtype))
    if dtype.is_int:
        bits = dtype.bits
        return st.integers(-(2 ** (bits - 1)), 2 ** (bits - 1) - 1).map(lambda v: Const(v, dtype))
    return st.one_of(st.sampled_from([0.0, -0.0, 1.0, 0.5, 3.0, -2.5, 1e-3, 65504.0, 70000.0, 1e30]),
                     st.floats(-1e6, 1e6, allow_nan=False)).map(lambda v: Const(v, dtype))


def expressions(dtype: DType, depth: int) -> st.SearchStrategy[Expr]:
    leaves = [st.just(Load(input_name(dtype), (INDEX_I,))), constants(dtype)]
    if dtype is DType.I64:
        leaves.append(st.just(Var("i")))
    leaf = st.one_of(*leaves)
    if depth == 0:
        return leaf
    sub = expressions(dtype, depth - 1)
    options = [leaf,
               st.builds(lambda t, e: Cast(dtype, e), st.sampled_from(TYPES), st.integers(0, 3)).flatmap(
                   lambda c: expressions(TYPES[c.value], depth - 1).map(lambda e: Cast(dtype, e))),
               st.builds(Select, comparisons(depth - 1), sub, sub)]
    if dtype is DType.BOOL:
        options += [st.builds(BinOp, st.sampled_from(["and", "or"]), sub, sub),
                    sub.map(lambda e: Call("not", (e,))), comparisons(depth - 1)]
    else:
        ops = ["+", "-", "*", "/", "%"]
        options.append(st.builds(BinOp, st.sampled_from(ops), sub, sub))
        fns = FLOAT_FNS if dtype.is_float else INT_FNS
        options.append(st.sampled_from(fns).flatmap(
            lambda fn: st.tuples(*[sub] * (2 if fn in ("max", "min") else 1)).map(
                lambda args: Call(fn, args))))
    return st.one_of(*options)


def comparisons(depth: int) -> st.SearchStrategy[Expr]:
    return st.sampled_from([t for t in TYPES if t is not DType.BOOL]).flatmap(
        lambda t: st.builds(Compare, st.sampled_from(["<", "<=", ">", ">=", "==", "!="]),
                            expressions(t, max(depth, 0)), expressions(t, max(depth, 0))))


def typed_expression() -> st.SearchStrategy[tuple[DType, Expr]]:
    return st.sampled_from(TYPES).flatmap(lambda t: st.integers(1, 3).flatmap(
        lambda d: expressions(t, d).map(lambda e: (t, e))))


def inputs(seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    arrays = []
    for dtype in TYPES:
        if dtype is DType.BOOL:
            arrays.append(rng.integers(0, 2, N).astype(np.bool_))
        elif dtype.is_int:
            info = np.iinfo(dtype.numpy)
            values = rng.integers(-20, 20, N)
            values[:3] = [info.min, info.max, 0]
            values[3:5] = rng.integers(info.min, info.max, 2)
            arrays.append(values.astype(dtype.numpy))
        else:
            values = rng.standard_normal(N) * 10.0 ** rng.integers(-2, 3, N)
            values[:4] = [np.inf, np.nan, -0.0, 0.0]
            with np.errstate(over="ignore"):
                values = values.astype(np.float32) if dtype is DType.BF16 else values.astype(dtype.numpy)
            arrays.append(round_to_bf16(values) if dtype is DType.BF16 else values)
    return arrays


def program(dtype: DType, expr: Expr) -> Function:
    n = Aff.var("N")
    params = (Buffer("OUT", dtype, (n,)),) + tuple(Buffer(input_name(t), t, (n,)) for t in TYPES)
    loop = For("i", (Aff.const(0),), (n,), (Assign("S0", "OUT", (INDEX_I,), expr),))
    return Function("f", params, (loop,))


@settings(max_examples=examples(400, 4000))
@given(typed_expression(), st.integers(0, 3))
def test_random_expressions_match_the_naive_evaluator(typed, seed):
    dtype, expr = typed
    fn = program(dtype, expr)
    ins = inputs(seed)
    expected = np.zeros(N, dtype.numpy)
    try:
        Naive(fn).run(expected, *[a.copy() for a in ins])
    except ZeroDivisionError:
        with pytest.raises(InterpretError, match="by zero"):
            interpret(fn, np.zeros(N, dtype.numpy), *ins)
        return
    got = np.zeros(N, dtype.numpy)
    interpret(fn, got, *ins)
    assert np.array_equal(got, expected, equal_nan=dtype.is_float), f"{expr}\n{got}\n{expected}"
