"""Value expressions for generated programs, built so results stay finite.

Two magnitude classes keep every generated program well-conditioned:

* *small* expressions read only values that never grow: read-only inputs
  (random values in [-1, 1] or small ints), scalar temporaries and lookup
  tables written once from small values, loop variables, small constants.
  They combine at most two such leaves.
* *big* expressions may also read buffers the program updates. They grow
  only additively (``big + small``), through means (``(big + big) * 0.5``),
  ``max``/``min``/``select`` or halving, never by multiplying two big values.

So a buffer grows at most linearly with the number of statement
executions, and floating rounding stays far below the default tolerances of
``assert_equivalent``. ``select`` conditions compare only values that are
exact in every order of evaluation (inputs, loop variables, constants), so
reordering a reduction cannot flip a branch.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from polyir.ir.nodes import BinOp, Call, Cast, Compare, Const, Expr, Load, Select, Var
from polyir.ir.types import DType

if TYPE_CHECKING:
    from polyir.testing.strategies import _ProgramBuilder, _Scope

FLOAT_CONSTANTS = (1.0, 0.5, -1.0, 2.0, -0.5, 0.25, 0.0, 1.5)
INT_CONSTANTS = (1, 2, -1, 0, 3, -2)
COMPARE_OPS = ("<", ">", "<=", ">=", "==", "!=")


def constant(builder: _ProgramBuilder, dtype: DType) -> Const:
    """A small constant of ``dtype``."""
    if dtype.is_float:
        return Const(builder.pick(FLOAT_CONSTANTS), dtype)
    if dtype is DType.BOOL:
        return Const(builder.flag(), dtype)
    return Const(builder.pick(INT_CONSTANTS), dtype)


def convert(value: Expr, source: DType, target: DType, *, exact_source: bool) -> Expr | None:
    """``value`` (of type ``source``) as a ``target`` value, or ``None`` when the
    conversion could change under reordering (float -> int of a computed value)."""
    if source is target:
        return value
    if source.is_float and target.is_int:
        if not exact_source:
            return None
        # Inputs lie in [-1, 1]; scale by a power of two (exact) before truncating.
        return Cast(target, BinOp("*", value, Const(4.0, source)))
    return Cast(target, value)


def index_value(builder: _ProgramBuilder, scope: _Scope, dtype: DType) -> Expr:
    """A loop variable or size symbol converted to ``dtype``."""
    names = [v.name for v in scope.loops] + list(builder.symbols)
    name = builder.pick(names)
    if name in builder.symbols:
        builder.used_symbols.add(name)
    return Var(name) if dtype is DType.I64 else Cast(dtype, Var(name))


def small_leaf(builder: _ProgramBuilder, scope: _Scope, dtype: DType) -> Expr:
    """A leaf whose magnitude never grows (see the module docstring)."""
    kinds = ["const", "input"] if builder.inputs else ["const"]
    if scope.loops or builder.symbols:
        kinds.append("index")
    if scope.temps:
        kinds.append("temp")
    if builder.tables_ready:
        kinds.append("table")
    kind = builder.weighted({k: w for k, w in
                             (("const", 2), ("input", 5), ("index", 1), ("temp", 3), ("table", 3))
                             if k in kinds})
    if kind == "input":
        plan = builder.pick(builder.inputs)
        load = Load(plan.name, builder.subscripts(plan, scope))
        return convert(load, plan.dtype, dtype, exact_source=True)  # type: ignore[return-value]
    if kind == "temp":
        temp = builder.pick(scope.temps)
        converted = convert(Load(temp.name, ()), temp.dtype, dtype, exact_source=False)
        if converted is not None:
            return converted
    if kind == "table":
        plan = builder.pick(builder.tables_ready)
        converted = convert(Load(plan.name, builder.subscripts(plan, scope)), plan.dtype, dtype,
                            exact_source=False)
        if converted is not None:
            return converted
    if kind == "index":
        return index_value(builder, scope, dtype)
    return constant(builder, dtype)


def small_expr(builder: _ProgramBuilder, scope: _Scope, dtype: DType) -> Expr:
    """A small expression: one leaf, or two leaves combined once."""
    shape = builder.weighted({"leaf": 3, "binary": 3, "call": 1, "select": 1, "neg": 1})
    if shape == "leaf":
        return small_leaf(builder, scope, dtype)
    if shape == "neg":
        return Call("neg", (small_leaf(builder, scope, dtype),))
    if shape == "select":
        return Select(condition(builder, scope), small_leaf(builder, scope, dtype),
                      small_leaf(builder, scope, dtype))
    lhs, rhs = small_leaf(builder, scope, dtype), small_leaf(builder, scope, dtype)
    if shape == "call":
        return Call(builder.pick(("max", "min")), (lhs, rhs))
    return BinOp(builder.pick(("+", "*", "-")), lhs, rhs)


def big_leaf(builder: _ProgramBuilder, scope: _Scope, dtype: DType) -> Expr:
    """A read of a buffer the program updates, or a small leaf."""
    if builder.outputs and builder.flag():
        plan = builder.pick(builder.outputs)
        converted = convert(Load(plan.name, builder.subscripts(plan, scope)), plan.dtype, dtype,
                            exact_source=False)
        if converted is not None:
            return converted
    return small_leaf(builder, scope, dtype)


def big_expr(builder: _ProgramBuilder, scope: _Scope, dtype: DType, depth: int = 2) -> Expr:
    """An expression that may read updated buffers but grows only additively."""
    if depth == 0:
        return big_leaf(builder, scope, dtype)
    shape = builder.weighted({"leaf": 3, "small": 2, "add": 3, "mean": 2, "minmax": 1, "select": 1,
                              "halve": 1})
    if shape == "leaf":
        return big_leaf(builder, scope, dtype)
    if shape == "small":
        return small_expr(builder, scope, dtype)
    if shape == "add":
        return BinOp(builder.pick(("+", "-")), big_expr(builder, scope, dtype, depth - 1),
                     small_expr(builder, scope, dtype))
    if shape == "mean":
        return mean(builder, big_expr(builder, scope, dtype, depth - 1), big_expr(builder, scope, dtype, depth - 1),
                    dtype)
    if shape == "minmax":
        return Call(builder.pick(("max", "min")), (big_expr(builder, scope, dtype, depth - 1),
                                                     big_expr(builder, scope, dtype, depth - 1)))
    if shape == "select":
        return Select(condition(builder, scope), big_expr(builder, scope, dtype, depth - 1),
                      big_expr(builder, scope, dtype, depth - 1))
    factor = Const(builder.pick((0.5, -0.5)), dtype) if dtype.is_float else Const(-1, dtype)
    return BinOp("*", big_expr(builder, scope, dtype, depth - 1), factor)


def mean(builder: _ProgramBuilder, a: Expr, b: Expr, dtype: DType) -> Expr:
    """``(a + b) * 0.5`` (``(a + b) / 2`` on ints): never larger than ``a`` or ``b``,
    so recurrences such as ``A[i, j] = (A[i - 1, j] + A[i, j - 1]) * 0.5`` stay bounded."""
    total = BinOp("+", a, b)
    return BinOp("*", total, Const(0.5, dtype)) if dtype.is_float else BinOp("/", total, Const(2, dtype))


def condition(builder: _ProgramBuilder, scope: _Scope) -> Expr:
    """A boolean that every evaluation order computes identically."""
    op = builder.pick(COMPARE_OPS)
    if builder.inputs and (not scope.loops or builder.flag()):
        plan = builder.pick(builder.inputs)
        zero: Const = Const(0.0, plan.dtype) if plan.dtype.is_float else Const(0, plan.dtype)
        return Compare(op, Load(plan.name, builder.subscripts(plan, scope)), zero)
    if scope.loops:
        lhs = Var(builder.pick(scope.loops).name)
        if builder.flag():
            return Compare(op, lhs, Var(builder.pick(scope.loops).name))
        return Compare(op, lhs, Const(builder.pick((1, 2, 0, 3)), DType.I64))
    return Compare(op, Const(builder.pick((1, 2)), DType.I64), Const(builder.pick((1, 2)), DType.I64))
