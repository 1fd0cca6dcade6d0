"""Scalar semantics of polyir values in Python, used by generated interpreter code.

Values are plain Python objects: floats of every width are Python ``float``
(IEEE double) holding a value exactly representable in their type, integers
are Python ``int`` in their type's range, ``bool`` is ``bool``.

* One float32 operation is computed in double and rounded once to float32.
  Double has more than ``2 * 24 + 2`` significand bits, so the result is the
  correctly rounded float32 result for ``+ - * /`` and ``sqrt`` (no double
  rounding error). :data:`F32_CELL` is a one-element float32 memoryview: a store
  into it rounds (and overflows to inf) exactly like a C ``(float)`` cast.
* f16 and bf16 values are computed in float32 and rounded on store with
  :func:`round_f16` / :func:`round_bf16` (round to nearest even, overflow to inf).
* Integer ``/`` and ``%`` truncate toward zero; results wrap to the type's width.
* Math functions never raise: they return IEEE results (inf, nan) like C.
"""
from __future__ import annotations

import math

import numpy as np

INF = math.inf
NAN = math.nan

F32_CELL = memoryview(bytearray(4)).cast("f")
"""A float32 cell: ``F32_CELL[0] = x; y = F32_CELL[0]`` rounds ``x`` to float32."""


def round_f32(x: float) -> float:
    """``x`` rounded to the nearest float32 (as a Python float)."""
    F32_CELL[0] = x
    return F32_CELL[0]


def _round_to_format(x: float, precision: int, min_exp: int, max_finite: float) -> float:
    """Round a double to a binary format with ``precision`` significand bits,
    smallest normal exponent ``min_exp`` and largest finite value ``max_finite``
    (round half to even; overflow gives inf; subnormals handled)."""
    if x != x or x == 0.0 or x in (INF, -INF):
        return x
    _, exp = math.frexp(x)  # x = m * 2**exp with 0.5 <= |m| < 1
    quantum = max(exp - 1, min_exp) - (precision - 1)
    rounded = math.ldexp(float(round(math.ldexp(x, -quantum))), quantum)
    if abs(rounded) > max_finite:
        return math.copysign(INF, x)
    return math.copysign(rounded, x)  # keeps the sign of an underflow to zero


_F16_MAX = 65504.0
_BF16_MAX = math.ldexp(2.0 - 2.0 ** -7, 127)
_TF32_MAX = math.ldexp(2.0 - 2.0 ** -10, 127)


def round_f16(x: float) -> float:
    """``x`` rounded to the nearest IEEE half (as a Python float)."""
    return _round_to_format(x, 11, -14, _F16_MAX)


def round_bf16(x: float) -> float:
    """``x`` rounded to the nearest bfloat16 (as a Python float)."""
    return _round_to_format(x, 8, -126, _BF16_MAX)


def round_tf32(x: float) -> float:
    """``x`` rounded to tf32 (10 explicit significand bits, float32 range)."""
    return _round_to_format(x, 11, -126, _TF32_MAX)


# ------------------------------------------------------------------ integers
def wrap_int(x: int, bits: int) -> int:
    """``x`` reduced modulo ``2**bits`` into the signed range."""
    half = 1 << (bits - 1)
    return ((x + half) & ((1 << bits) - 1)) - half


def int_div(a: int, b: int) -> int:
    """C integer division (truncation toward zero); raises ZeroDivisionError."""
    if b == 0:
        raise ZeroDivisionError("integer division by zero")
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def int_rem(a: int, b: int) -> int:
    """C integer remainder (sign of the dividend); raises ZeroDivisionError."""
    if b == 0:
        raise ZeroDivisionError("integer remainder by zero")
    return a - b * int_div(a, b)


def int_pow(a: int, b: int, bits: int) -> int:
    """Integer power, wrapped; negative exponents give 0 unless ``|a| == 1``."""
    if b < 0:
        if a == 1:
            return 1
        if a == -1:
            return -1 if b % 2 else 1
        if a == 0:
            raise ZeroDivisionError("integer 0 raised to a negative power")
        return 0
    return wrap_int(pow(a, b, 1 << bits), bits)


# ---------------------------------------------------------------- float ops
def float_div0(a: float, b: float) -> float:
    """``a / b`` for ``b == 0`` (IEEE: signed inf, or nan for 0/0 and nan/0)."""
    if a != a or a == 0.0:
        return NAN
    return math.copysign(INF, a) * math.copysign(1.0, b)


def float_rem(a: float, b: float) -> float:
    """C ``fmod``: remainder with the sign of ``a``; nan when ``b == 0`` or ``a`` is inf."""
    try:
        return math.fmod(a, b)
    except ValueError:
        return NAN


def fmax(a: float, b: float) -> float:
    """``fmaxf``: the larger operand; the other one when one is nan."""
    return a if a > b or b != b else b


def fmin(a: float, b: float) -> float:
    """``fminf``: the smaller operand; the other one when one is nan."""
    return a if a < b or b != b else b


def _numpy_fallback(fn: str, *args: float) -> float:
    with np.errstate(all="ignore"):
        return float(getattr(np, fn)(*(np.float64(a) for a in args)))


def f_exp(x: float) -> float:
    try:
        return math.exp(x)
    except OverflowError:
        return INF


def f_exp2(x: float) -> float:
    try:
        return math.pow(2.0, x)
    except OverflowError:
        return INF


def f_log(x: float) -> float:
    try:
        return math.log(x)
    except ValueError:
        return -INF if x == 0.0 else NAN


def f_log2(x: float) -> float:
    try:
        return math.log2(x)
    except ValueError:
        return -INF if x == 0.0 else NAN


def f_sqrt(x: float) -> float:
    try:
        return math.sqrt(x)
    except ValueError:
        return NAN


def f_rsqrt(x: float) -> float:
    if x == 0.0:
        return math.copysign(INF, x)
    try:
        return 1.0 / math.sqrt(x)
    except ValueError:
        return NAN


def f_sigmoid(x: float) -> float:
    try:
        return 1.0 / (1.0 + math.exp(-x))
    except OverflowError:
        return 0.0


def f_sin(x: float) -> float:
    try:
        return math.sin(x)
    except ValueError:
        return NAN


def f_cos(x: float) -> float:
    try:
        return math.cos(x)
    except ValueError:
        return NAN


def f_floor(x: float) -> float:
    """C's ``floor``: a zero result keeps the sign of ``x`` (``floor(-0.0) = -0.0``)."""
    if x != x or x in (INF, -INF):
        return x
    result = float(math.floor(x))
    return math.copysign(0.0, x) if result == 0.0 else result


def f_ceil(x: float) -> float:
    """C's ``ceil``: a zero result keeps the sign of ``x`` (``ceil(-0.5) = -0.0``)."""
    if x != x or x in (INF, -INF):
        return x
    result = float(math.ceil(x))
    return math.copysign(0.0, x) if result == 0.0 else result


def f_pow(a: float, b: float) -> float:
    try:
        return math.pow(a, b)
    except (ValueError, OverflowError, ZeroDivisionError):
        return _numpy_fallback("power", a, b)


FLOAT_CALLS = {
    "exp": "_f_exp", "exp2": "_f_exp2", "log": "_f_log", "log2": "_f_log2",
    "sqrt": "_f_sqrt", "rsqrt": "_f_rsqrt", "tanh": "_m_tanh", "erf": "_m_erf",
    "sigmoid": "_f_sigmoid", "sin": "_f_sin", "cos": "_f_cos", "floor": "_f_floor",
    "ceil": "_f_ceil", "pow": "_f_pow",
}
"""Float math calls: IR name -> name of the helper in generated code."""


# --------------------------------------------------------------------- casts
def float_to_int(x: float, bits: int) -> int:
    """Truncate toward zero; nan gives 0, out-of-range values saturate (as PTX ``cvt.rzi``)."""
    if x != x:
        return 0
    lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    if x >= hi:
        return hi
    if x <= lo:
        return lo
    return int(x)


def int_to_float(x: int, precision: int) -> float:
    """Round an integer directly (no double rounding) to ``precision`` significand bits."""
    magnitude = abs(x)
    extra = magnitude.bit_length() - precision
    if extra <= 0:
        return float(x)
    quotient, remainder = divmod(magnitude, 1 << extra)
    half = 1 << (extra - 1)
    if remainder > half or (remainder == half and quotient & 1):
        quotient += 1
    value = math.ldexp(float(quotient), extra)
    return value if x >= 0 else -value


def int_to_f32(x: int) -> float:
    return int_to_float(x, 24) if abs(x) > (1 << 24) else float(x)


def int_to_f64(x: int) -> float:
    return int_to_float(x, 53) if abs(x) > (1 << 53) else float(x)


def int_to_f16(x: int) -> float:
    return round_f16(int_to_float(x, 11))


def int_to_bf16(x: int) -> float:
    return round_bf16(int_to_float(x, 8))


def helper_namespace() -> dict[str, object]:
    """Names that generated code may use (all start with ``_``)."""
    return {
        "_math": math, "_INF": INF, "_NAN": NAN, "_RF": F32_CELL,
        "_round_f32": round_f32, "_round_f16": round_f16, "_round_bf16": round_bf16,
        "_wrap": wrap_int, "_int_div": int_div, "_int_rem": int_rem, "_int_pow": int_pow,
        "_fdiv0": float_div0, "_frem": float_rem, "_fmax": fmax, "_fmin": fmin,
        "_f_exp": f_exp, "_f_exp2": f_exp2, "_f_log": f_log, "_f_log2": f_log2,
        "_f_sqrt": f_sqrt, "_f_rsqrt": f_rsqrt, "_m_tanh": math.tanh, "_m_erf": math.erf,
        "_f_sigmoid": f_sigmoid, "_f_sin": f_sin, "_f_cos": f_cos, "_f_floor": f_floor,
        "_f_ceil": f_ceil, "_f_pow": f_pow, "_f2i": float_to_int,
        "_i2f32": int_to_f32, "_i2f64": int_to_f64, "_i2f16": int_to_f16, "_i2bf16": int_to_bf16,
    }
