"""Scalar expression builders whose semantics need more than one IR operator:
rounding, integer floor division, the two remainders, sign, clamp, power by
a small integer. Each takes operand expressions already in the computation
type ``dtype`` and returns an expression of that type.
"""
from __future__ import annotations

from polyir.frontends.lowering.context import const
from polyir.ir.nodes import BinOp, Call, Cast, Compare, Expr, Select
from polyir.ir.types import DType


def floor_div_int(x: Expr, y: Expr, dtype: DType) -> Expr:
    """Integer division rounded toward negative infinity (Python's ``//``)."""
    quotient = BinOp("/", x, y)
    zero = const(0, dtype)
    inexact = Compare("!=", BinOp("%", x, y), zero)
    signs_differ = Compare("!=", Compare("<", x, zero), Compare("<", y, zero))
    return Select(BinOp("and", inexact, signs_differ), BinOp("-", quotient, const(1, dtype)), quotient)


def trunc(x: Expr, dtype: DType) -> Expr:
    """A float rounded toward zero."""
    return Select(Compare("<", x, const(0, dtype)), Call("ceil", (x,)), Call("floor", (x,)))


def round_half_even(a: Expr, dtype: DType) -> Expr:
    """Round half to even, from ``f = floor(x)`` and the exact fraction
    ``x - f`` (no ``x + 0.5``, which can round up wrongly)."""
    half, one, two = const(0.5, dtype), const(1, dtype), const(2, dtype)
    low = Call("floor", (a,))
    fraction = BinOp("-", a, low)
    odd = Compare("!=", BinOp("-", low, BinOp("*", two, Call("floor", (BinOp("/", low, two),)))),
                  const(0, dtype))
    up = BinOp("or", Compare(">", fraction, half), BinOp("and", Compare("==", fraction, half), odd))
    return Select(up, BinOp("+", low, one), low)


def round_half_away(a: Expr, dtype: DType) -> Expr:
    """Round half away from zero (C's ``round``), from the exact fraction."""
    half, one = const(0.5, dtype), const(1, dtype)
    magnitude = Call("abs", (a,))
    low = Call("floor", (magnitude,))
    rounded = Select(Compare(">=", BinOp("-", magnitude, low), half), BinOp("+", low, one), low)
    # copysign: -0.0 and negative halves keep their sign.
    return Select(Compare("<", a, const(0, dtype)), Call("neg", (rounded,)), rounded)


def fmod(x: Expr, y: Expr, dtype: DType) -> Expr:
    """C's ``fmod``: the remainder has the sign of the dividend (for floats the
    IR's ``%``, exact, as ``torch.fmod``)."""
    return BinOp("%", x, y)


def _fixed_remainder(x: Expr, y: Expr, dtype: DType) -> tuple[Expr, Expr]:
    """``(fmod(x, y), whether it has the wrong sign for Python's %)``."""
    zero = const(0, dtype)
    rest = BinOp("%", x, y)
    wrong_sign = BinOp("and", Compare("!=", rest, zero),
                       Compare("!=", Compare("<", rest, zero), Compare("<", y, zero)))
    return rest, wrong_sign


def floor_div_float(x: Expr, y: Expr, dtype: DType) -> Expr:
    """``torch.div(x, y, rounding_mode="floor")`` on floats, as eager computes it
    (Python's float ``//``): from the exact ``fmod``, ``(x - mod) / y`` corrected
    by one, rounded to the nearest integer; a zero quotient has the sign of
    ``x / y``; ``y == 0`` gives ``x / y``."""
    zero, one = const(0, dtype), const(1, dtype)
    rest, wrong_sign = _fixed_remainder(x, y, dtype)
    div = BinOp("-", BinOp("/", BinOp("-", x, rest), y), Select(wrong_sign, one, zero))
    low = Call("floor", (div,))
    rounded = Select(Compare(">", BinOp("-", div, low), const(0.5, dtype)), BinOp("+", low, one), low)
    quotient = BinOp("/", x, y)
    signed_zero = Select(Compare("<", BinOp("/", one, quotient), zero), const(-0.0, dtype), zero)
    return Select(Compare("==", y, zero), quotient,
                  Select(Compare("!=", div, zero), rounded, signed_zero))


def remainder(x: Expr, y: Expr, dtype: DType) -> Expr:
    """Python's ``%``: the remainder has the sign of the divisor (floats: as
    ``torch.remainder``, ``fmod`` plus the divisor when the signs differ)."""
    zero = const(0, dtype)
    if dtype.is_float:
        rest, wrong_sign = _fixed_remainder(x, y, dtype)
        return Select(wrong_sign, BinOp("+", rest, y), rest)
    rest = BinOp("%", x, y)
    wrong_sign = BinOp("and", Compare("!=", rest, zero),
                       Compare("!=", Compare("<", rest, zero), Compare("<", y, zero)))
    return Select(wrong_sign, BinOp("+", rest, y), rest)


def sign(a: Expr, dtype: DType) -> Expr:
    """-1, 0 or 1 (NaN stays NaN, -0.0 stays -0.0)."""
    zero, one = const(0, dtype), const(1, dtype)
    return Select(Compare(">", a, zero), one, Select(Compare("<", a, zero), const(-1, dtype), a))


def clamp(a: Expr, low: Expr | None, high: Expr | None) -> Expr:
    """``low`` first, then ``high`` (torch.clamp's order); a NaN input compares
    false both times and stays NaN."""
    if low is not None:
        a = Select(Compare("<", a, low), low, a)
    if high is not None:
        a = Select(Compare(">", a, high), high, a)
    return a


def small_power(x: Expr, exponent: int, dtype: DType) -> Expr:
    """``x ** exponent`` for an integer exponent, by repeated squaring
    (a negative exponent: the reciprocal of the positive power)."""
    if exponent == 0:
        return const(1, dtype)
    result: Expr | None = None
    base = x
    n = abs(exponent)
    while n:
        if n & 1:
            result = base if result is None else BinOp("*", result, base)
        n >>= 1
        if n:
            base = BinOp("*", base, base)
    assert result is not None
    return BinOp("/", const(1, dtype), result) if exponent < 0 else result


EAGER_POWERS: dict[int, tuple[DType, ...]] = {-2: (DType.F32, DType.F64, DType.BF16), 3: (DType.BF16,)}
"""The integer exponents torch's CPU kernel computes with plain arithmetic
(``pow_tensor_scalar_optimized_kernel``), and for which stored types:
:func:`eager_power` reproduces them. (f16 goes through ``pow`` in eager.)"""


def eager_power(x: Expr, exponent: int, dtype: DType, stored: DType) -> Expr:
    """``x ** exponent`` (a key of :data:`EAGER_POWERS`) as torch's CPU kernel
    computes it: ``x ** -2`` is ``1 / (x * x)`` (for f32/f64, not the correctly
    rounded power); for bf16 ``x ** 3`` is ``(x * x) * x`` and ``x ** -2`` is
    ``1 / (x * x)`` in bf16 arithmetic, every product and quotient rounded to
    bf16. ``dtype``: the computation type (f32 for bf16); ``stored``: the
    tensor's type."""
    def op(symbol: str, a: Expr, b: Expr) -> Expr:
        value: Expr = BinOp(symbol, a, b)
        return Cast(dtype, Cast(DType.BF16, value)) if stored is DType.BF16 else value

    assert stored in EAGER_POWERS[exponent], (exponent, stored)
    if exponent == -2:
        return op("/", const(1, dtype), op("*", x, x))
    return op("*", op("*", x, x), x)


def nan_max(acc: Expr, value: Expr) -> Expr:
    """``max`` that lets NaN through (from either side), as torch's max pooling
    and XLA's ``max`` do; IR ``max`` drops NaN."""
    return Select(BinOp("or", Compare(">", value, acc), Compare("!=", value, value)), value, acc)


def nan_min(acc: Expr, value: Expr) -> Expr:
    """``min`` that lets NaN through (from either side)."""
    return Select(BinOp("or", Compare("<", value, acc), Compare("!=", value, value)), value, acc)
