"""Arithmetic, comparisons, math functions and casts in every type, against numpy."""
from __future__ import annotations

import numpy as np
import pytest

from polyir.ir.types import round_to_bf16
from tests.interpreter.helpers import run

FLOATS = ["f16", "bf16", "f32", "f64"]
INTS = ["i8", "i32", "i64"]
NUMPY = {"f16": np.float16, "bf16": np.float32, "f32": np.float32, "f64": np.float64,
         "i8": np.int8, "i32": np.int32, "i64": np.int64, "bool": np.bool_}


def elementwise(dtype: str, out_dtype: str, expr: str, inputs: int = 2) -> str:
    params = ", ".join(f"{name}: {dtype}[N]" for name in "AB"[:inputs])
    return f"""
func f(C: {out_dtype}[N], {params}) {{
  for i = 0 to N {{
    S0: C[i] = {expr}
  }}
}}
"""


def sample(dtype: str, rng: np.random.Generator, n: int = 64, special: bool = True) -> np.ndarray:
    if dtype in INTS:
        info = np.iinfo(NUMPY[dtype])
        values = rng.integers(info.min, info.max, n, endpoint=True, dtype=NUMPY[dtype])
        values[:6] = [info.min, info.max, 0, -1, 1, 7][:6]
        return values
    values = rng.standard_normal(n) * 10.0 ** rng.integers(-3, 4, n)
    if special:
        values[:5] = [np.inf, -np.inf, np.nan, 0.0, -0.0]
    if dtype == "bf16":
        return round_to_bf16(values.astype(np.float32))
    return values.astype(NUMPY[dtype])


def in_float32(a: np.ndarray) -> np.ndarray:
    return a.astype(np.float32)


def expected_float(dtype: str, result32_or_64: np.ndarray) -> np.ndarray:
    """Store semantics: f16/bf16 computed in float32 then rounded on store."""
    if dtype == "f16":
        with np.errstate(over="ignore"):
            return result32_or_64.astype(np.float16)
    if dtype == "bf16":
        return round_to_bf16(result32_or_64)
    return result32_or_64


def assert_same(actual: np.ndarray, expected: np.ndarray) -> None:
    assert actual.dtype == expected.dtype, (actual.dtype, expected.dtype)
    np.testing.assert_array_equal(actual, expected)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("op", ["+", "-", "*", "/", "%"])
def test_float_arithmetic_is_exact_in_its_type(dtype, op):
    rng = np.random.default_rng(hash((dtype, op)) % 2**32)
    A, B = sample(dtype, rng), sample(dtype, rng)
    B[10:14] = [0.0, -0.0, 0.0, np.inf]
    A[10:14] = [1.0, 1.0, 0.0, 5.0]
    C = np.zeros_like(A)
    run(elementwise(dtype, dtype, f"A[i] {op} B[i]"), C, A, B)
    a, b = (x.astype(np.float64) if dtype == "f64" else in_float32(x) for x in (A, B))
    with np.errstate(all="ignore"):
        raw = {"+": a + b, "-": a - b, "*": a * b, "/": a / b, "%": np.fmod(a, b)}[op]
    assert_same(C, expected_float(dtype, raw))


def test_float32_chain_rounds_every_operation():
    # a * b + c with a*b rounded to float32 first (no fused multiply-add)
    a = np.float32(1.0 + 2.0 ** -12)
    A, B, Cin = (np.full(1, a, np.float32), np.full(1, a, np.float32),
                 np.full(1, -np.float32(1.0 + 2.0 ** -11), np.float32))
    C = np.zeros(1, np.float32)
    src = """
func f(C: f32[N], A: f32[N], B: f32[N], D: f32[N]) {
  for i = 0 to N {
    S0: C[i] = A[i] * B[i] + D[i]
  }
}
"""
    run(src, C, A, B, Cin)
    assert C[0] == (A[0] * B[0]) + Cin[0]   # numpy float32: product rounded, then sum
    assert C[0] != np.float32(np.float64(a) * np.float64(a) + np.float64(Cin[0]))


@pytest.mark.parametrize("dtype", INTS)
@pytest.mark.parametrize("op", ["+", "-", "*", "/", "%"])
def test_integer_arithmetic_wraps_and_truncates(dtype, op):
    rng = np.random.default_rng(len(dtype) * 31 + ord(op))
    A, B = sample(dtype, rng), sample(dtype, rng)
    if op in "/%":
        B[B == 0] = 3
        B[(A == np.iinfo(A.dtype).min) & (B == -1)] = 2   # C leaves INT_MIN / -1 undefined
        A[6:10] = [7, -7, 7, -7]
        B[6:10] = [2, 2, -2, -2]
    C = np.zeros_like(A)
    run(elementwise(dtype, dtype, f"A[i] {op} B[i]"), C, A, B)
    with np.errstate(all="ignore"):
        rem = np.fmod(A, B) if op in "/%" else None
        expected = {"+": lambda: A + B, "-": lambda: A - B, "*": lambda: A * B,
                    "/": lambda: (A - rem) // B, "%": lambda: rem}[op]()
    assert_same(C, expected.astype(A.dtype))
    if op == "/":
        assert list(C[6:10]) == [3, -3, -3, 3]
    if op == "%":
        assert list(C[6:10]) == [1, -1, 1, -1]


def test_int_min_divided_by_minus_one_wraps():
    A, B, C = np.array([-2**31], np.int32), np.array([-1], np.int32), np.zeros(1, np.int32)
    run(elementwise("i32", "i32", "A[i] / B[i]"), C, A, B)
    assert C[0] == -2**31


def test_intermediate_overflow_wraps_before_division():
    # (a * b) wraps in i32 before the division, as in C
    src = elementwise("i32", "i32", "A[i] * B[i] / 3:i32")
    A, B, C = np.array([65536], np.int32), np.array([65536 + 5], np.int32), np.zeros(1, np.int32)
    run(src, C, A, B)
    wrapped = 65536 * 65541 - 2**32          # = 327680, the i32 product
    assert C[0] == 327680 // 3 == wrapped // 3


@pytest.mark.parametrize("dtype", FLOATS + INTS)
@pytest.mark.parametrize("op", ["<", "<=", ">", ">=", "==", "!="])
def test_comparisons(dtype, op):
    rng = np.random.default_rng(7)
    A, B = sample(dtype, rng), sample(dtype, rng)
    B[20:30] = A[20:30]
    C = np.zeros(A.shape, np.bool_)
    run(elementwise(dtype, "bool", f"A[i] {op} B[i]"), C, A, B)
    with np.errstate(invalid="ignore"):
        expected = {"<": A < B, "<=": A <= B, ">": A > B, ">=": A >= B, "==": A == B, "!=": A != B}[op]
    assert_same(C, expected)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("fn", ["max", "min"])
def test_float_max_min_ignore_nan(dtype, fn):
    rng = np.random.default_rng(11)
    A, B = sample(dtype, rng), sample(dtype, rng)
    A[5:8] = [np.nan, 1.0, np.nan]
    B[5:8] = [2.0, np.nan, np.nan]
    C = np.zeros_like(A)
    run(elementwise(dtype, dtype, f"{fn}(A[i], B[i])"), C, A, B)
    expected = (np.fmax if fn == "max" else np.fmin)(A, B)
    assert_same(C, expected)
    assert C[5] == 2.0 and C[6] == 1.0 and np.isnan(C[7])


@pytest.mark.parametrize("dtype", INTS)
def test_integer_unary_and_minmax(dtype):
    rng = np.random.default_rng(5)
    A, B = sample(dtype, rng), sample(dtype, rng)
    for expr, expected in [("-A[i]", lambda: -A), ("abs(A[i])", lambda: np.abs(A)),
                           ("max(A[i], B[i])", lambda: np.maximum(A, B)),
                           ("min(A[i], B[i])", lambda: np.minimum(A, B))]:
        C = np.zeros_like(A)
        run(elementwise(dtype, dtype, expr), C, A, B)
        with np.errstate(all="ignore"):
            assert_same(C, expected().astype(A.dtype))


@pytest.mark.parametrize("fn", ["exp", "exp2", "log", "log2", "sqrt", "rsqrt", "tanh", "erf", "sigmoid",
                                "sin", "cos", "floor", "ceil", "abs", "neg"])
@pytest.mark.parametrize("dtype", ["f32", "f64"])
def test_math_functions(fn, dtype):
    import math
    rng = np.random.default_rng(3)
    A = sample(dtype, rng)
    A[5:9] = [100.0, -100.0, 1e-3, 2.5]
    C = np.zeros_like(A)
    run(elementwise(dtype, dtype, f"{fn}(A[i])" if fn != "neg" else "-A[i]", inputs=1), C, A)
    x = A.astype(np.float64)
    with np.errstate(all="ignore"):
        ref = {"exp": np.exp, "exp2": np.exp2, "log": np.log, "log2": np.log2, "sqrt": np.sqrt,
               "rsqrt": lambda v: 1 / np.sqrt(v), "tanh": np.tanh, "erf": np.vectorize(math.erf),
               "sigmoid": lambda v: 1 / (1 + np.exp(-v)), "sin": np.sin, "cos": np.cos,
               "floor": np.floor, "ceil": np.ceil, "abs": np.abs, "neg": np.negative}[fn](x)
    ref = ref.astype(A.dtype)
    np.testing.assert_allclose(C, ref, rtol=4e-7 if dtype == "f32" else 1e-15, atol=0)
    assert np.array_equal(np.isnan(C), np.isnan(ref))


def test_pow_special_cases_follow_ieee():
    A = np.array([2.0, -8.0, 0.0, -2.0, 1e300], np.float64)
    B = np.array([10.0, 1 / 3, -1.0, 3.0, 2.0], np.float64)
    C = np.zeros(5)
    run(elementwise("f64", "f64", "pow(A[i], B[i])"), C, A, B)
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(C, np.power(A, B))


CAST_TYPES = FLOATS + INTS + ["bool"]


@pytest.mark.parametrize("src", CAST_TYPES)
@pytest.mark.parametrize("dst", CAST_TYPES)
def test_casts(src, dst):
    rng = np.random.default_rng(CAST_TYPES.index(src) * 10 + CAST_TYPES.index(dst))
    if src == "bool":
        A = rng.integers(0, 2, 40).astype(np.bool_)
    elif src in INTS:
        A = sample(src, rng, 40)
        if dst in FLOATS:   # exactly representable through float32 for the numpy reference
            A = (A % 5000).astype(A.dtype) if src != "i8" else A
    else:
        A = sample(src, rng, 40, special=dst in FLOATS or dst == "bool")
        if dst in INTS:
            info = np.iinfo(NUMPY[dst])
            A = np.clip(A, info.min / 2, info.max / 2).astype(A.dtype)
        if dst == "bf16" and src == "f64":
            A = A.astype(np.float32).astype(np.float64)
    C = np.zeros(A.shape, NUMPY[dst])
    run(elementwise(src, dst, f"cast<{dst}>(A[i])", inputs=1), C, A)
    with np.errstate(all="ignore"):
        if dst == "bool":
            expected = A != 0
        elif dst == "bf16":
            expected = round_to_bf16(A.astype(np.float32))
        elif dst in INTS and src in FLOATS:
            expected = np.trunc(A.astype(np.float64)).astype(NUMPY[dst])
        else:
            expected = A.astype(NUMPY[dst])
    assert_same(C, expected)


def test_float_to_int_nan_and_saturation():
    A = np.array([np.nan, 1e20, -1e20, -3.7, 3.7, np.inf], np.float32)
    C = np.zeros(6, np.int32)
    run(elementwise("f32", "i32", "cast<i32>(A[i])", inputs=1), C, A)
    assert list(C) == [0, 2**31 - 1, -2**31, -3, 3, 2**31 - 1]


def test_narrowing_int_cast_wraps():
    A = np.array([300, -129, 127, 2**40 + 5], np.int64)
    C = np.zeros(4, np.int8)
    run(elementwise("i64", "i8", "cast<i8>(A[i])", inputs=1), C, A)
    np.testing.assert_array_equal(C, A.astype(np.int8))


def test_f16_and_bf16_round_on_store_and_overflow():
    src = """
func f(H: f16[N], G: bf16[N], A: f32[N]) {
  for i = 0 to N {
    S0: H[i] = cast<f16>(A[i]) * 1.0:f16
    S1: G[i] = cast<bf16>(A[i]) + 0.0:bf16
  }
}
"""
    A = np.array([1.0 + 2 ** -11, 1.0 + 3 * 2 ** -11, 65519.0, 65520.0, 1e-8, 3.0e38, 1.00390625, -0.0],
                 np.float32)
    H, G = np.zeros(8, np.float16), np.zeros(8, np.float32)
    run(src, H, G, A)
    assert_same(H, A.astype(np.float16))
    assert_same(G, round_to_bf16(A))
    assert H[3] == np.inf and H[0] == 1.0 and H[1] == np.float16(1.0 + 4 * 2 ** -11)


def test_f16_arithmetic_computed_in_float32_then_rounded():
    # (a + b) - a in f16 buffers: the sum is NOT rounded to f16 before the subtraction
    A = np.array([2048.0], np.float16)
    B = np.array([1.0], np.float16)
    C = np.zeros(1, np.float16)
    run(elementwise("f16", "f16", "A[i] + B[i] - A[i]"), C, A, B)
    assert C[0] == 1.0   # in pure f16, 2048 + 1 rounds to 2048 and the result would be 0


def test_select_and_logic_are_lazy():
    src = """
func f(C: f32[N], A: f32[N]) {
  for i = 0 to N {
    S0: C[i] = select(i > 0 and A[i - 1] > 0.0, A[i - 1], select(not (i == 0), 7.0, -1.0))
  }
}
"""
    A = np.array([1.0, -2.0, 3.0, 0.5], np.float32)
    C = np.zeros(4, np.float32)
    run(src, C, A)
    np.testing.assert_array_equal(C, [-1.0, 1.0, 7.0, 3.0])


def test_literals_are_rounded_to_their_type():
    src = """
func f(C: f64[N]) {
  for i = 0 to N {
    S0: C[i] = cast<f64>(0.1) + cast<f64>(0.1:f16) + cast<f64>(300:i8) + 0.1:f64
  }
}
"""
    C = np.zeros(1)
    run(src, C)
    assert C[0] == float(np.float32(0.1)) + float(np.float16(0.1)) + 44.0 + 0.1


@pytest.mark.parametrize("mid", ["f32", "f16", "bf16"])
def test_narrowing_float_cast_rounds_even_when_not_stored(mid):
    A = np.array([0.1, 1 / 3, 1e-30, 70000.5, -2.0000001], np.float64)
    C = np.zeros(5)
    run(elementwise("f64", "f64", f"cast<f64>(cast<{mid}>(A[i]))", inputs=1), C, A)
    with np.errstate(over="ignore"):
        expected = {"f32": A.astype(np.float32), "f16": A.astype(np.float16),
                    "bf16": round_to_bf16(A.astype(np.float32))}[mid].astype(np.float64)
    np.testing.assert_array_equal(C, expected)
