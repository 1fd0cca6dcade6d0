"""Value types and promotion for the ``@polyir.kernel`` frontend.

A lowered Python value carries a :class:`VType`: its IR element type and
whether it is *weak*. Weak values come from Python scalars (literals, loop
variables, ``int``/``float`` arguments); strong ones from array elements.
Promotion follows numpy's rules for Python scalars (NEP 50): the array's dtype
wins over a weak scalar of the same kind, ``int`` combined with a float gives
a float, and two weak values combine as Python does (``int + float -> float``,
computed in ``f64``). Helpers here also build the expressions that give
Python's floor division and modulo on top of the IR's C-style ``/`` and ``%``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Union

import numpy as np

from polyir.ir.affine import Aff
from polyir.ir.nodes import BinOp, Call, Cast, Compare, Const, Expr, Select
from polyir.ir.types import DType

I64 = DType.I64
F64 = DType.F64
BOOL = DType.BOOL


@dataclass(frozen=True)
class VType:
    """The type of a lowered value: an IR dtype, weak when it is a Python scalar."""

    dtype: DType
    weak: bool = False


WEAK_INT = VType(I64, True)
WEAK_FLOAT = VType(F64, True)


@dataclass(frozen=True)
class Val:
    """A lowered value: an expression, or an affine integer (``aff``), or both.

    Affine values (loop variables, size symbols, integer constants and their
    affine combinations) keep their ``Aff`` so that subscripts, bounds and
    conditions stay affine; ``as_expr`` gives the value expression.
    """

    vtype: VType
    expr: Union[Expr, None] = None
    aff: Union[Aff, None] = None

    def as_expr(self) -> Expr:
        if self.expr is not None:
            return self.expr
        assert self.aff is not None
        return aff_to_expr(self.aff)

    @property
    def dtype(self) -> DType:
        return self.vtype.dtype


def const_val(value: Union[int, float, bool]) -> Val:
    """The weak value of a Python literal."""
    if isinstance(value, bool):
        return Val(VType(BOOL, True), Const(value, BOOL))
    if isinstance(value, int):
        return Val(WEAK_INT, Const(value, I64), Aff.const(value))
    return Val(WEAK_FLOAT, Const(float(value), F64))


def aff_val(aff: Aff) -> Val:
    """An affine integer value (weak ``i64``)."""
    if aff.is_constant:
        return Val(WEAK_INT, Const(aff.constant, I64), aff)
    return Val(WEAK_INT, None, aff)


# ------------------------------------------------------------------ promotion
def _strong_promote(a: DType, b: DType) -> DType:
    if a is b:
        return a
    if DType.BF16 in (a, b):
        other = b if a is DType.BF16 else a
        if other.is_float and other.bits > 16:
            return other
        return DType.F32 if other is DType.F16 else DType.BF16
    return DType.from_numpy(np.promote_types(a.numpy, b.numpy))


def promote(a: VType, b: VType) -> VType:
    """The common type of two operands (numpy rules; Python scalars are weak)."""
    if a.weak and b.weak:
        if a.dtype.is_float or b.dtype.is_float:
            return WEAK_FLOAT
        if a.dtype is BOOL and b.dtype is BOOL:
            return VType(BOOL, True)
        return WEAK_INT
    if a.weak or b.weak:
        weak, strong = (a, b) if a.weak else (b, a)
        if weak.dtype.is_float and not strong.dtype.is_float:
            return VType(F64)
        if strong.dtype is BOOL and weak.dtype is not BOOL:
            return VType(I64)
        return strong
    return VType(_strong_promote(a.dtype, b.dtype))


def arithmetic_type(a: VType, b: VType) -> VType:
    """Like :func:`promote`, but booleans count as integers (``True + True == 2``)."""
    result = promote(a, b)
    if result.dtype is BOOL:
        return VType(I64, result.weak)
    return result


# ------------------------------------------------------------------ constants
def convert_constant(value: Union[int, float, bool], dtype: DType) -> Union[int, float, bool]:
    """A Python literal converted as a cast to ``dtype`` would convert it."""
    if dtype is BOOL:
        return bool(value)
    if dtype.is_int:
        return int(value)
    return float(value)


def convert(val: Val, dtype: DType) -> Expr:
    """``val`` as an expression of ``dtype`` (folding casts of literals)."""
    if val.dtype is dtype:
        return val.as_expr()
    expr = val.as_expr()
    if isinstance(expr, Const) and not (dtype.is_int and isinstance(expr.value, float)
                                        and not float(expr.value).is_integer()):
        try:
            return Const(convert_constant(expr.value, dtype), dtype)
        except (OverflowError, ValueError):
            pass
    return Cast(dtype, expr)


def zero(dtype: DType) -> Const:
    return Const(convert_constant(0, dtype), dtype)


def one(dtype: DType) -> Const:
    return Const(convert_constant(1, dtype), dtype)


def negate(expr: Expr) -> Expr:
    """``-expr``; a literal is negated in place (the IR's negative constants)."""
    if isinstance(expr, Const) and not isinstance(expr.value, bool):
        return Const(-expr.value, expr.dtype)
    return Call("neg", (expr,))


# ------------------------------------------------------- Python integer semantics
def floor_div(a: Expr, b: Expr, dtype: DType) -> Expr:
    """``a // b`` with Python's rounding toward minus infinity (integers)."""
    quotient = BinOp("/", a, b)
    remainder = BinOp("%", a, b)
    return Select(_needs_adjust(remainder, b, dtype), BinOp("-", quotient, one(dtype)), quotient)


def python_mod(a: Expr, b: Expr, dtype: DType) -> Expr:
    """``a % b`` with the sign of ``b``, as in Python (integers)."""
    remainder = BinOp("%", a, b)
    return Select(_needs_adjust(remainder, b, dtype), BinOp("+", remainder, b), remainder)


def _needs_adjust(remainder: Expr, divisor: Expr, dtype: DType) -> Expr:
    """True when C's truncated remainder has the opposite sign of the divisor."""
    z = zero(dtype)
    if isinstance(divisor, Const) and divisor.value > 0:
        return Compare("<", remainder, z)
    negative_r = BinOp("and", Compare("<", remainder, z), Compare(">", divisor, z))
    positive_r = BinOp("and", Compare(">", remainder, z), Compare("<", divisor, z))
    return BinOp("or", negative_r, positive_r)


def aff_to_expr(aff: Aff) -> Expr:
    """The ``i64`` value expression of an affine expression (floor semantics kept);
    see :func:`polyir.ir.walk.aff_to_expr`."""
    from polyir.ir.walk import aff_to_expr as shared
    return shared(aff)
