"""MLIR values as polyir expressions: types, affine maps, ``arith`` and ``math``.

The importer keeps one :class:`Value` per SSA value:

* :class:`MemrefValue`  a memref: the polyir buffer it names;
* :class:`IndexValue`   an ``index``: an ``i64`` expression, plus its ``Aff``
  when it is affine in loop variables and size symbols, or the alternatives
  of an ``affine.min``/``affine.max`` (usable in loop bounds);
* :class:`ScalarValue`  anything else: a polyir value expression and its type.

The functions here translate pure operations (no memory effects) into these
values. They raise :class:`NotSupported` with the reason; the importer turns
that into ``UnsupportedMLIR`` naming the operation and its position.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Union

from xdsl.dialects import builtin
from xdsl.ir.affine import (
    AffineBinaryOpExpr,
    AffineBinaryOpKind,
    AffineConstantExpr,
    AffineDimExpr,
    AffineExpr,
    AffineSymExpr,
)

from polyir.ir.affine import Aff
from polyir.ir.interp.scalar import round_bf16, round_f16, round_f32
from polyir.ir.nodes import BinOp, Buffer, Call, Cast, Compare, Const, Expr, Load, Select, Var
from polyir.ir.parser import index_to_aff
from polyir.ir.types import INDEX, DType
from polyir.ir.walk import aff_to_expr


class NotSupported(Exception):
    """An operation, type or value outside the imported subset (the reason)."""


@dataclass(frozen=True)
class MemrefValue:
    buffer: Buffer


@dataclass(frozen=True)
class IndexValue:
    """An ``index`` value: ``expr`` (i64) always; ``aff`` when affine;
    ``choices`` = ("min" | "max", affs) for the result of affine.min/max."""

    expr: Expr
    aff: Aff | None = None
    choices: tuple[str, tuple[Aff, ...]] | None = None

    @staticmethod
    def affine(aff: Aff) -> IndexValue:
        return IndexValue(aff_to_expr(aff), aff)


@dataclass(frozen=True)
class ScalarValue:
    expr: Expr
    dtype: DType


Value = Union[MemrefValue, IndexValue, ScalarValue]

_HALF = (DType.F16, DType.BF16)


# ---------------------------------------------------------------------- types
def dtype_of(type_: Any) -> DType:
    """The polyir type of an MLIR element type; ``index`` is ``i64``."""
    if isinstance(type_, builtin.Float16Type):
        return DType.F16
    if isinstance(type_, builtin.BFloat16Type):
        return DType.BF16
    if isinstance(type_, builtin.Float32Type):
        return DType.F32
    if isinstance(type_, builtin.Float64Type):
        return DType.F64
    if isinstance(type_, builtin.IndexType):
        return INDEX
    if isinstance(type_, builtin.IntegerType) and type_.signedness.data is builtin.Signedness.SIGNLESS:
        width = type_.width.data
        found = {1: DType.BOOL, 8: DType.I8, 32: DType.I32, 64: DType.I64}.get(width)
        if found is not None:
            return found
    raise NotSupported(f"type {type_} has no polyir equivalent (polyir has f16, bf16, f32, f64, "
                       f"i1, i8, i32, i64 and index)")


# ------------------------------------------------------------ affine <-> expr
def _i64(value: int) -> Const:
    return Const(int(value), INDEX)


def floordiv_expr(value: Expr, divisor: int) -> Expr:
    """``floor(value / divisor)`` for ``divisor > 0`` from C division."""
    quotient = BinOp("/", value, _i64(divisor))
    negative_remainder = Compare("<", BinOp("%", value, _i64(divisor)), _i64(0))
    return Select(negative_remainder, BinOp("-", quotient, _i64(1)), quotient)


def mod_expr(value: Expr, divisor: int) -> Expr:
    """``value mod divisor`` in ``[0, divisor)`` from the C remainder."""
    remainder = BinOp("%", value, _i64(divisor))
    return Select(Compare("<", remainder, _i64(0)), BinOp("+", remainder, _i64(divisor)), remainder)


def subscript_of(value: IndexValue) -> Aff | Expr:
    """A subscript: the ``Aff`` when there is one, else the value expression."""
    if value.aff is not None:
        return value.aff
    aff = index_to_aff(value.expr)
    return aff if aff is not None else value.expr


def _constant_divisor(expr: AffineExpr, what: str) -> int:
    if not isinstance(expr, AffineConstantExpr) or expr.value <= 0:
        raise NotSupported(f"'{what}' by {expr}: polyir divides affine expressions by positive "
                           f"constants only")
    return expr.value


def affine_to_aff(expr: AffineExpr, operand: Callable[[bool, int], Aff]) -> Aff:
    """An MLIR affine expression as an ``Aff``; ``operand(is_symbol, position)``
    gives the ``Aff`` of a dimension or symbol (raising ``NotSupported``)."""
    if isinstance(expr, AffineConstantExpr):
        return Aff.const(expr.value)
    if isinstance(expr, AffineDimExpr):
        return operand(False, expr.position)
    if isinstance(expr, AffineSymExpr):
        return operand(True, expr.position)
    assert isinstance(expr, AffineBinaryOpExpr)
    lhs = affine_to_aff(expr.lhs, operand)
    kind = expr.kind
    if kind is AffineBinaryOpKind.Add:
        return lhs + affine_to_aff(expr.rhs, operand)
    if kind is AffineBinaryOpKind.Mul:
        rhs = affine_to_aff(expr.rhs, operand)
        if not (lhs.is_constant or rhs.is_constant):
            raise NotSupported(f"product of two non-constant affine expressions ({expr})")
        return lhs * rhs
    divisor = _constant_divisor(expr.rhs, kind.get_token())
    if kind is AffineBinaryOpKind.FloorDiv:
        return lhs // divisor
    if kind is AffineBinaryOpKind.CeilDiv:
        return (lhs + (divisor - 1)) // divisor
    return lhs % divisor


def affine_to_expr(expr: AffineExpr, operands: Sequence[IndexValue], num_dims: int) -> Expr:
    """An MLIR affine expression as an ``i64`` value expression over ``operands``."""
    if isinstance(expr, AffineConstantExpr):
        return _i64(expr.value)
    if isinstance(expr, AffineDimExpr):
        return operands[expr.position].expr
    if isinstance(expr, AffineSymExpr):
        return operands[num_dims + expr.position].expr
    assert isinstance(expr, AffineBinaryOpExpr)
    lhs = affine_to_expr(expr.lhs, operands, num_dims)
    kind = expr.kind
    if kind in (AffineBinaryOpKind.Add, AffineBinaryOpKind.Mul):
        return BinOp("+" if kind is AffineBinaryOpKind.Add else "*", lhs,
                     affine_to_expr(expr.rhs, operands, num_dims))
    divisor = _constant_divisor(expr.rhs, kind.get_token())
    if kind is AffineBinaryOpKind.FloorDiv:
        return floordiv_expr(lhs, divisor)
    if kind is AffineBinaryOpKind.CeilDiv:
        return Call("neg", (floordiv_expr(Call("neg", (lhs,)), divisor),))
    return mod_expr(lhs, divisor)


def _operand_aff(operands: Sequence[IndexValue], num_dims: int, what: str) -> Callable[[bool, int], Aff]:
    def operand(is_symbol: bool, position: int) -> Aff:
        value = operands[num_dims + position if is_symbol else position]
        if value.aff is None:
            raise NotSupported(f"{what} uses a value that is not affine in loop variables and "
                               f"size symbols")
        return value.aff
    return operand


def apply_map(expr: AffineExpr, operands: Sequence[IndexValue], num_dims: int) -> IndexValue:
    """One result of an affine map applied to ``operands`` (dims first)."""
    try:
        aff = affine_to_aff(expr, _operand_aff(operands, num_dims, "the map"))
    except NotSupported:
        return IndexValue(affine_to_expr(expr, operands, num_dims))
    return IndexValue.affine(aff)


def bound_affs(results: Sequence[AffineExpr], operands: Sequence[IndexValue], num_dims: int,
               upper: bool) -> tuple[Aff, ...]:
    """The ``Aff``s of a loop bound map (a max for lower bounds, a min for upper).

    An operand that is the result of ``affine.min`` (in an upper bound) or
    ``affine.max`` (in a lower bound) is expanded into the bound when the
    bound grows with it (coefficient > 0, outside any floordiv/mod).
    """
    wanted = "min" if upper else "max"
    found: list[Aff] = []
    for expr in results:
        found.extend(_bound_result(expr, operands, num_dims, wanted, "upper" if upper else "lower"))
    return tuple(dict.fromkeys(found))


def _bound_result(expr: AffineExpr, operands: Sequence[IndexValue], num_dims: int, wanted: str,
                  which: str) -> list[Aff]:
    placeholders: dict[str, tuple[Aff, ...]] = {}

    def operand(is_symbol: bool, position: int) -> Aff:
        index = num_dims + position if is_symbol else position
        value = operands[index]
        if value.aff is not None:
            return value.aff
        if value.choices is not None and value.choices[0] == wanted:
            name = f"%{index}"
            placeholders[name] = value.choices[1]
            return Aff.var(name)
        raise NotSupported(f"the {which} bound uses a value that is not affine in loop variables "
                           f"and size symbols (an affine.{wanted} result is allowed, a loaded or "
                           f"computed value is not)")

    combined = [affine_to_aff(expr, operand)]
    for name, choices in placeholders.items():
        if combined[0].coefficient(name) <= 0 or any(
                name in atom.expr.variables() for atom, _ in combined[0].terms if not isinstance(atom, str)):
            raise NotSupported(f"the {which} bound {expr} does not grow with its affine.{wanted} "
                               f"operand, so it is not a {wanted} of affine expressions")
        combined = [aff.substitute({name: choice}) for aff in combined for choice in choices]
    return combined


# ------------------------------------------------------------------- constants
def constant_value(attr: Any, dtype: DType) -> Expr:
    """The polyir constant of an ``arith.constant`` value attribute."""
    if isinstance(attr, builtin.FloatAttr):
        value = float(attr.value.data)
        if dtype is DType.F16:
            value = round_f16(value)
        elif dtype is DType.BF16:
            value = round_bf16(value)
        elif dtype is DType.F32:
            value = round_f32(value)
        return Const(value, dtype)
    if isinstance(attr, builtin.IntegerAttr):
        value = int(attr.value.data)
        if dtype is DType.BOOL:
            return Const(bool(value & 1), dtype)
        bits = 64 if dtype is INDEX else dtype.bits
        value = ((value + (1 << (bits - 1))) % (1 << bits)) - (1 << (bits - 1))
        return Const(value, dtype)
    raise NotSupported(f"constant {attr} is not a scalar (dense and other attributes are not imported)")


# -------------------------------------------------------------- arith and math
def _wide(expr: Expr, dtype: DType) -> Expr:
    """f16/bf16 values are widened to f32 before arithmetic (polyir computes
    them in f32 and rounds on store; MLIR rounds every operation)."""
    return Cast(DType.F32, expr) if dtype in _HALF else expr


def _rounded(expr: Expr, dtype: DType) -> Expr:
    return Cast(dtype, expr) if dtype in _HALF else expr


def _float_op(op: str, a: ScalarValue, b: ScalarValue) -> Expr:
    return _rounded(BinOp(op, _wide(a.expr, a.dtype), _wide(b.expr, b.dtype)), a.dtype)


def _is_nan(expr: Expr) -> Expr:
    return Compare("!=", expr, expr)


def _not(expr: Expr) -> Expr:
    return Call("not", (expr,))


_CMPF = {"olt": "<", "ole": "<=", "ogt": ">", "oge": ">=", "oeq": "==", "une": "!="}
_CMPF_UNORDERED = {"uge": "<", "ugt": "<=", "ule": ">", "ult": ">="}   # u<op> == not (a <inverse> b)
_CMPI_SIGNED = {"slt": "<", "sle": "<=", "sgt": ">", "sge": ">=", "eq": "==", "ne": "!="}
_CMPI_UNSIGNED = {"ult": "<", "ule": "<=", "ugt": ">", "uge": ">="}


def compare_float(predicate: str, a: Expr, b: Expr) -> Expr:
    """``arith.cmpf``: ordered predicates are polyir's comparisons (false on NaN,
    except ``!=``); unordered ones are the negation of the opposite ordered one."""
    if predicate in _CMPF:
        return Compare(_CMPF[predicate], a, b)
    if predicate in _CMPF_UNORDERED:
        return _not(Compare(_CMPF_UNORDERED[predicate], a, b))
    if predicate == "one":
        return BinOp("or", Compare("<", a, b), Compare(">", a, b))
    if predicate == "ueq":
        return _not(BinOp("or", Compare("<", a, b), Compare(">", a, b)))
    if predicate == "ord" and a == b:
        return Compare("==", a, a)
    if predicate == "uno" and a == b:
        return _is_nan(a)
    if predicate == "ord":
        return BinOp("and", Compare("==", a, a), Compare("==", b, b))
    if predicate == "uno":
        return BinOp("or", _is_nan(a), _is_nan(b))
    return Const(predicate == "true", DType.BOOL)


def compare_int(predicate: str, a: Expr, b: Expr, dtype: DType) -> Expr:
    """``arith.cmpi`` on signless integers (``i1`` included: true is -1 signed)."""
    if dtype is DType.BOOL:
        flipped = {"slt": ">", "sle": ">=", "sgt": "<", "sge": "<=", "eq": "==", "ne": "!="}
        op = _CMPI_UNSIGNED.get(predicate) or flipped[predicate]
        return Compare(op, a, b)
    if predicate in _CMPI_SIGNED:
        return Compare(_CMPI_SIGNED[predicate], a, b)
    # unsigned order: when the signs differ, the non-negative one is the smaller
    op = _CMPI_UNSIGNED[predicate]
    zero = Const(0, dtype)
    same_sign = Compare("==", Compare("<", a, zero), Compare("<", b, zero))
    smaller_is_a = Compare(">=", a, zero) if op in ("<", "<=") else Compare("<", a, zero)
    return Select(same_sign, Compare(op, a, b), smaller_is_a)


def _zero_extended(expr: Expr, source: DType, target: DType) -> Expr:
    """``arith.extui``: the unsigned value of ``expr`` in the wider ``target``."""
    if source is DType.BOOL:
        return Cast(target, expr)
    wide = Cast(target, expr)
    return Select(Compare("<", expr, Const(0, source)),
                  BinOp("+", wide, Const(1 << source.bits, target)), wide)


def _from_bool_signed(expr: Expr, target: DType) -> Expr:
    """A signed conversion of ``i1``: true is -1."""
    minus_one: Expr = Const(-1.0 if target.is_float else -1, target)
    zero: Expr = Const(0.0 if target.is_float else 0, target)
    return Select(expr, minus_one, zero)


def cast_value(name: str, value: ScalarValue, target: DType) -> Expr:
    """The casts of ``arith`` (``index`` is ``i64`` here)."""
    source, expr = value.dtype, value.expr
    if source is target and name in ("arith.index_cast", "arith.index_castui"):
        return expr
    if name in ("arith.extf", "arith.truncf", "arith.fptosi"):
        if name == "arith.fptosi" and target is DType.BOOL:
            raise NotSupported("fptosi to i1 is not imported")
        return Cast(target, expr)
    if name in ("arith.sitofp", "arith.extsi", "arith.index_cast"):
        if source is DType.BOOL:
            return _from_bool_signed(expr, target)
        if target is DType.BOOL:
            return Compare("!=", BinOp("%", expr, Const(2, source)), Const(0, source))
        return Cast(target, expr)
    if name == "arith.trunci":
        if target is DType.BOOL:
            return Compare("!=", BinOp("%", expr, Const(2, source)), Const(0, source))
        return Cast(target, expr)
    if name in ("arith.extui", "arith.index_castui", "arith.uitofp"):
        if target is DType.BOOL:
            return Compare("!=", BinOp("%", expr, Const(2, source)), Const(0, source))
        if source is DType.BOOL:
            return Cast(target, expr)
        if source.bits >= 64:
            if name == "arith.index_castui" and target.is_int:
                return Cast(target, expr)
            raise NotSupported(f"unsigned conversion of a {source} value (polyir has no unsigned 64-bit type)")
        if target.is_float:
            return Cast(target, _zero_extended(expr, source, DType.I64))
        if target.bits <= source.bits:
            return Cast(target, expr)
        return _zero_extended(expr, source, target)
    raise NotSupported(f"conversion {name} is not imported")


_FLOAT_BINARY = {"arith.addf": "+", "arith.subf": "-", "arith.mulf": "*", "arith.divf": "/",
                 "arith.remf": "%"}
_INT_BINARY = {"arith.addi": "+", "arith.subi": "-", "arith.muli": "*", "arith.divsi": "/",
               "arith.remsi": "%"}
_MATH_UNARY = {"math.exp": "exp", "math.exp2": "exp2", "math.log": "log", "math.log2": "log2",
               "math.sqrt": "sqrt", "math.rsqrt": "rsqrt", "math.tanh": "tanh", "math.erf": "erf",
               "math.sin": "sin", "math.cos": "cos", "math.floor": "floor", "math.ceil": "ceil"}
CASTS = ("arith.extf", "arith.truncf", "arith.fptosi", "arith.sitofp", "arith.uitofp",
         "arith.extsi", "arith.extui", "arith.trunci", "arith.index_cast", "arith.index_castui")


def _int_floordiv(a: Expr, b: Expr, dtype: DType, ceil: bool) -> Expr:
    """``floordivsi`` / ``ceildivsi`` from C division: adjust the truncated
    quotient by one when the remainder is non-zero and the signs say so."""
    zero = Const(0, dtype)
    quotient = BinOp("/", a, b)
    inexact = Compare("!=", BinOp("%", a, b), zero)
    opposite = Compare("!=", Compare("<", a, zero), Compare("<", b, zero))
    if ceil:
        return Select(BinOp("and", inexact, _not(opposite)), BinOp("+", quotient, Const(1, dtype)), quotient)
    return Select(BinOp("and", inexact, opposite), BinOp("-", quotient, Const(1, dtype)), quotient)


def scalar_op(name: str, args: Sequence[ScalarValue], result: DType, attrs: dict[str, Any]) -> Expr:
    """The expression of a pure ``arith``/``math`` operation on scalar operands
    (``index`` operands given as ``i64`` values)."""
    dtype = args[0].dtype if args else result
    exprs = [a.expr for a in args]
    if name in _FLOAT_BINARY:
        return _float_op(_FLOAT_BINARY[name], args[0], args[1])
    if name in _INT_BINARY:
        if dtype is DType.BOOL:
            raise NotSupported(f"{name} on i1 is not imported")
        return BinOp(_INT_BINARY[name], exprs[0], exprs[1])
    if name in ("arith.floordivsi", "arith.ceildivsi"):
        return _int_floordiv(exprs[0], exprs[1], dtype, name == "arith.ceildivsi")
    if name in ("arith.andi", "arith.ori", "arith.xori"):
        if dtype is not DType.BOOL:
            raise NotSupported(f"bitwise {name} on {dtype} (polyir has logical operations on i1 only)")
        if name == "arith.xori":
            return Compare("!=", exprs[0], exprs[1])
        return BinOp("and" if name == "arith.andi" else "or", exprs[0], exprs[1])
    if name in ("arith.maxnumf", "arith.minnumf", "arith.maxsi", "arith.minsi"):
        return Call("max" if "max" in name else "min", (exprs[0], exprs[1]))
    if name in ("arith.maximumf", "arith.minimumf"):
        # NaN-propagating, unlike polyir's max/min (fmax semantics)
        choice = Call("max" if name == "arith.maximumf" else "min", (exprs[0], exprs[1]))
        return Select(_is_nan(exprs[0]), exprs[0], Select(_is_nan(exprs[1]), exprs[1], choice))
    if name == "arith.negf":
        return Call("neg", (exprs[0],))
    if name in ("math.absf", "math.absi"):
        return Call("abs", (exprs[0],))
    if name in _MATH_UNARY:
        if not dtype.is_float:
            raise NotSupported(f"{name} on {dtype}")
        return _rounded(Call(_MATH_UNARY[name], (_wide(exprs[0], dtype),)), dtype)
    if name == "math.powf":
        return _rounded(Call("pow", (_wide(exprs[0], dtype), _wide(exprs[1], dtype))), dtype)
    if name == "math.fpowi":
        exponent = Cast(DType.F32 if dtype in _HALF else dtype, exprs[1])
        return _rounded(Call("pow", (_wide(exprs[0], dtype), exponent)), dtype)
    if name == "arith.select":
        return Select(exprs[0], exprs[1], exprs[2])
    if name == "arith.cmpf":
        return compare_float(attrs["predicate"], exprs[0], exprs[1])
    if name == "arith.cmpi":
        return compare_int(attrs["predicate"], exprs[0], exprs[1], dtype)
    if name in CASTS:
        return cast_value(name, args[0], result)
    raise NotSupported("no polyir equivalent")


def reads(expr: Expr | Aff, buffers: frozenset[str] | set[str] | None = None) -> bool:
    """Whether ``expr`` loads from any buffer (of ``buffers``, when given)."""
    if isinstance(expr, Load):
        if buffers is None or expr.buffer in buffers:
            return True
        return any(reads(i, buffers) for i in expr.indices if not isinstance(i, Aff))
    if isinstance(expr, (Const, Var, Aff)):
        return False
    if isinstance(expr, (BinOp, Compare)):
        return reads(expr.lhs, buffers) or reads(expr.rhs, buffers)
    if isinstance(expr, Call):
        return any(reads(a, buffers) for a in expr.args)
    if isinstance(expr, Select):
        return reads(expr.cond, buffers) or reads(expr.if_true, buffers) or reads(expr.if_false, buffers)
    assert isinstance(expr, Cast)
    return reads(expr.value, buffers)


def size(expr: Expr | Aff) -> int:
    """The number of nodes of a value expression (an ``Aff`` counts one)."""
    if isinstance(expr, (Const, Var, Aff)):
        return 1
    if isinstance(expr, Load):
        return 1 + sum(size(i) for i in expr.indices)
    if isinstance(expr, (BinOp, Compare)):
        return 1 + size(expr.lhs) + size(expr.rhs)
    if isinstance(expr, Call):
        return 1 + sum(size(a) for a in expr.args)
    if isinstance(expr, Select):
        return 1 + size(expr.cond) + size(expr.if_true) + size(expr.if_false)
    assert isinstance(expr, Cast)
    return 1 + size(expr.value)
