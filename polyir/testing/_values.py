"""Value expressions for generated programs, built so results stay finite.

Every numeric buffer and temporary belongs to one magnitude class:

* *unit* values lie in ``[-1, 1]`` (floats) or ``[-4, 4]`` (ints) whatever the
  trip counts: read-only inputs (random in that range), *bounded* outputs
  (every statement that writes one stores a unit expression), unit
  temporaries and tables. Unit expressions combine unit values only in ways
  that stay in the range: convex combinations (weights summing to <= 1),
  products, ``max``/``min``, ``select``, negation, ``sqrt(abs(u))``,
  ``u / (2.0 + abs(x))``, ``u / sqrt(abs(x) + 1.0)``, casts between f32 and
  f64, and squashes of *any* value ``x`` (``tanh(x)``, ``sigmoid(x)``,
  ``exp(-abs(x))``, ``x / (1.0 + abs(x))``). So a bounded output may read
  itself and other updated buffers at any subscript (recurrences, in-place
  stencils, ``C[i] = max(C[i], ...)``, ``C[i] = 0.5*C[i] + 0.5*x``) and still
  never grow.
* *small* values never grow either but are not in the unit range: loop
  variables and symbols used as values, small constants, one product or sum
  of two small leaves (the old class; temporaries with such values are read
  only by small expressions).
* *big* values are *accumulating* outputs. They grow only additively
  (``big + unit``, ``C[i] = C[i] + A[i, k]``), through means, ``max``/``min``,
  ``select`` or halving, never by multiplying two big values, so they grow
  at most linearly with the number of statement executions.

Every operation used is 1-Lipschitz or better on the values it sees, so a
rounding difference (a legal reordering of a float reduction, a 1-ulp
``exp``) is never amplified. ``select`` conditions and bool buffers are
*exact*: they compare inputs, loop variables and constants, or combine other
exact bools, so every evaluation order computes them identically. Float to
int casts apply to inputs only (``cast<i32>(A[i] * 4.0)``).

The approximate functions ``exp``, ``tanh`` and ``sigmoid`` (native code uses
polynomial versions within a few ulp) appear only in programs with no f16
or bf16 value, where a 1-ulp difference cannot flip a half-precision
rounding; division and ``sqrt`` are correctly rounded everywhere and appear
in every program.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from hypothesis import strategies as st

from polyir.ir.nodes import BinOp, Call, Cast, Compare, Const, Expr, Load, Select, Var
from polyir.ir.types import DType

if TYPE_CHECKING:
    from polyir.testing._access import BufferPlan, _Scope
    from polyir.testing.strategies import _ProgramBuilder

FLOAT_CONSTANTS = (1.0, 0.5, -1.0, 2.0, -0.5, 0.25, 0.0, 1.5)
INT_CONSTANTS = (1, 2, -1, 0, 3, -2)
UNIT_FLOAT_CONSTANTS = (0.5, 1.0, -0.5, 0.25, 0.0, -1.0, 0.75)
UNIT_INT_CONSTANTS = (1, 0, -1, 2, 3, -2)
COMPARE_OPS = ("<", ">", "<=", ">=", "==", "!=")
CONVEX_WEIGHTS = ((0.5, 0.5), (0.25, 0.75), (0.75, 0.25), (0.5, 0.25), (0.5, 0.25, 0.25),
                  (0.25, 0.25, 0.25, 0.25))
"""Weights of convex combinations; each row sums to at most 1."""


def _float(value: float, dtype: DType) -> Const:
    return Const(value, dtype)


def constant(builder: _ProgramBuilder, dtype: DType) -> Const:
    """A small constant of ``dtype``."""
    if dtype.is_float:
        return Const(builder.pick(FLOAT_CONSTANTS), dtype)
    if dtype is DType.BOOL:
        return Const(builder.flag(), dtype)
    return Const(builder.pick(INT_CONSTANTS), dtype)


def unit_constant(builder: _ProgramBuilder, dtype: DType) -> Const:
    """A constant inside the unit range of ``dtype``."""
    if dtype.is_float:
        return Const(builder.pick(UNIT_FLOAT_CONSTANTS), dtype)
    return Const(builder.pick(UNIT_INT_CONSTANTS), dtype)


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


def to_unit(value: Expr, source: DType, target: DType, *, exact_source: bool) -> Expr | None:
    """A unit ``source`` value as a unit ``target`` value (``None`` if impossible)."""
    if source.is_int and target.is_float:
        # ints lie in [-4, 4]: a quarter of them (exact) is in [-1, 1]
        return BinOp("*", Cast(target, value), Const(0.25, target))
    return convert(value, source, target, exact_source=exact_source)


def index_value(builder: _ProgramBuilder, scope: _Scope, dtype: DType) -> Expr:
    """A loop variable or size symbol converted to ``dtype``."""
    names = [v.name for v in scope.loops] + list(builder.symbols)
    name = builder.pick(names)
    if name in builder.symbols:
        builder.used_symbols.add(name)
    return Var(name) if dtype is DType.I64 else Cast(dtype, Var(name))


def _numeric(plans: list[BufferPlan] | tuple[BufferPlan, ...], unit_only: bool = False) -> list[BufferPlan]:
    return [p for p in plans if p.dtype is not DType.BOOL and (p.bounded or not unit_only)]


# ---------------------------------------------------------------- small values
def small_leaf(builder: _ProgramBuilder, scope: _Scope, dtype: DType) -> Expr:
    """A leaf whose magnitude never grows (see the module docstring)."""
    inputs = _numeric(builder.inputs)
    temps = _numeric(scope.temps)
    tables = _numeric(builder.tables_ready)
    kinds = {"const": 1}
    if inputs:
        kinds["input"] = 5
    if scope.loops or builder.symbols:
        kinds["index"] = 1
    if temps:
        kinds["temp"] = 3
    if tables:
        kinds["table"] = 3
    kind = builder.weighted(kinds)
    if kind == "input":
        plan = builder.pick(inputs)
        load = Load(plan.name, builder.read_indices(plan, scope))
        return convert(load, plan.dtype, dtype, exact_source=True)  # type: ignore[return-value]
    if kind == "temp":
        temp = builder.pick(temps)
        converted = convert(Load(temp.name, ()), temp.dtype, dtype, exact_source=False)
        if converted is not None:
            return converted
    if kind == "table":
        plan = builder.pick(tables)
        converted = convert(Load(plan.name, builder.read_indices(plan, scope)), plan.dtype, dtype,
                            exact_source=False)
        if converted is not None:
            return converted
    if kind == "index":
        return index_value(builder, scope, dtype)
    return constant(builder, dtype)


def small_expr(builder: _ProgramBuilder, scope: _Scope, dtype: DType) -> Expr:
    """A small expression: one leaf, or two leaves combined once."""
    shape = builder.weighted({"leaf": 3, "binary": 3, "call": 1, "select": 1, "neg": 1, "unit": 2})
    if shape == "leaf":
        return small_leaf(builder, scope, dtype)
    if shape == "unit":
        return unit_expr(builder, scope, dtype, 1)
    if shape == "neg":
        return Call("neg", (small_leaf(builder, scope, dtype),))
    if shape == "select":
        return Select(condition(builder, scope), small_leaf(builder, scope, dtype),
                      small_leaf(builder, scope, dtype))
    lhs, rhs = small_leaf(builder, scope, dtype), small_leaf(builder, scope, dtype)
    if shape == "call":
        return Call(builder.pick(("max", "min")), (lhs, rhs))
    return BinOp(builder.pick(("+", "*", "-")), lhs, rhs)


# ----------------------------------------------------------------- unit values
def unit_leaf(builder: _ProgramBuilder, scope: _Scope, dtype: DType) -> Expr:
    """A read of a value in the unit range, or a unit constant."""
    inputs = _numeric(builder.inputs)
    outputs = _numeric(builder.outputs, unit_only=True)
    temps = _numeric(scope.temps, unit_only=True)
    tables = _numeric(builder.tables_ready, unit_only=True)
    kinds = {"const": 1}
    if inputs:
        kinds["input"] = 5
    if outputs:
        kinds["output"] = 8
    if builder.outputs and dtype.is_float:
        kinds["squashed"] = 3
    if temps:
        kinds["temp"] = 3
    if tables:
        kinds["table"] = 3
    if (scope.loops or builder.symbols) and dtype.is_float:
        kinds["index"] = 1
    kind = builder.weighted(kinds)
    if kind == "input":
        plan = builder.pick(inputs)
        load = Load(plan.name, builder.read_indices(plan, scope))
        return to_unit(load, plan.dtype, dtype, exact_source=True)  # type: ignore[return-value]
    if kind == "squashed":
        return squash(builder, big_leaf(builder, scope, dtype, always=True), dtype)
    if kind in ("output", "temp", "table"):
        plan = builder.pick({"output": outputs, "temp": temps, "table": tables}[kind])
        indices = {"output": builder.updated_read_indices, "temp": lambda p, s: (),
                   "table": builder.read_indices}[kind](plan, scope)
        converted = to_unit(Load(plan.name, indices), plan.dtype, dtype, exact_source=False)
        if converted is not None:
            return converted
    if kind == "index":
        return squash(builder, index_value(builder, scope, dtype), dtype)
    return unit_constant(builder, dtype)


def squash(builder: _ProgramBuilder, value: Expr, dtype: DType) -> Expr:
    """A float ``value`` of any magnitude mapped into ``[-1, 1]``."""
    form = "ratio"
    if builder.approximate_calls and builder.chance(75):
        # a remainder spreads Hypothesis' endpoint-heavy integers evenly over three forms
        form = ("tanh", "sigmoid", "exp")[builder.draw(st.integers(0, 99)) % 3]
    if form == "tanh":
        return Call("tanh", (value,))
    if form == "sigmoid":
        return Call("sigmoid", (value,))
    if form == "exp":
        return Call("exp", (Call("neg", (Call("abs", (value,)),)),))
    return BinOp("/", value, BinOp("+", _float(1.0, dtype), Call("abs", (value,))))


def unit_expr(builder: _ProgramBuilder, scope: _Scope, dtype: DType, depth: int = 2) -> Expr:
    """An expression whose value stays in the unit range whatever it reads."""
    if depth == 0:
        return unit_leaf(builder, scope, dtype)
    if not dtype.is_float:
        shape = builder.weighted({"leaf": 4, "minmax": 2, "select": 2, "neg": 1, "mean": 2, "abs": 1,
                                  "rem": 1})
        if shape == "leaf":
            return unit_leaf(builder, scope, dtype)
        if shape == "mean":
            return mean(builder, unit_expr(builder, scope, dtype, depth - 1),
                        unit_expr(builder, scope, dtype, depth - 1), dtype)
        if shape == "rem":
            return BinOp("%", unit_expr(builder, scope, dtype, depth - 1), Const(3, dtype))
        return _unit_common(builder, scope, dtype, depth, shape)
    shape = builder.weighted({"leaf": 4, "convex": 3, "product": 2, "minmax": 2, "select": 2, "neg": 1,
                              "squash": 4, "divide": 2, "cast": 1, "sqrt": 1})
    if shape == "leaf":
        return unit_leaf(builder, scope, dtype)
    if shape == "convex":
        weights = builder.pick(CONVEX_WEIGHTS)
        return convex(dtype, [(w, unit_expr(builder, scope, dtype, depth - 1)) for w in weights])
    if shape == "product":
        return BinOp("*", unit_expr(builder, scope, dtype, depth - 1), unit_expr(builder, scope, dtype, depth - 1))
    if shape == "squash":
        return squash(builder, big_expr(builder, scope, dtype, depth - 1), dtype)
    if shape == "divide":
        numerator = unit_expr(builder, scope, dtype, depth - 1)
        other = big_expr(builder, scope, dtype, depth - 1)
        if builder.flag():
            return BinOp("/", numerator, Call("sqrt", (BinOp("+", Call("abs", (other,)), _float(1.0, dtype)),)))
        return BinOp("/", numerator, BinOp("+", _float(2.0, dtype), Call("abs", (other,))))
    if shape == "sqrt":
        return Call("sqrt", (Call("abs", (unit_expr(builder, scope, dtype, depth - 1),)),))
    if shape == "cast":
        inner_dtype = DType.F64 if dtype is not DType.F64 else DType.F32
        inner = unit_expr(builder, scope, inner_dtype, depth - 1)
        if builder.flag():
            inner = BinOp("*", inner, unit_constant(builder, inner_dtype))
        return Cast(dtype, inner)
    return _unit_common(builder, scope, dtype, depth, shape)


def _unit_common(builder: _ProgramBuilder, scope: _Scope, dtype: DType, depth: int, shape: str) -> Expr:
    """Unit-preserving shapes shared by floats and ints."""
    if shape == "minmax":
        return Call(builder.pick(("max", "min")), (unit_expr(builder, scope, dtype, depth - 1),
                                                     unit_expr(builder, scope, dtype, depth - 1)))
    if shape == "select":
        return Select(condition(builder, scope), unit_expr(builder, scope, dtype, depth - 1),
                      unit_expr(builder, scope, dtype, depth - 1))
    if shape == "abs":
        return Call("abs", (unit_expr(builder, scope, dtype, depth - 1),))
    return Call("neg", (unit_expr(builder, scope, dtype, depth - 1),))


def convex(dtype: DType, terms: list[tuple[float, Expr]]) -> Expr:
    """``w0*t0 + w1*t1 + ...`` (weights summing to <= 1: stays in the terms' range)."""
    total: Expr | None = None
    for weight, term in terms:
        part = BinOp("*", _float(weight, dtype), term)
        total = part if total is None else BinOp("+", total, part)
    assert total is not None
    return total


# ------------------------------------------------------------------ big values
def big_leaf(builder: _ProgramBuilder, scope: _Scope, dtype: DType, always: bool = False) -> Expr:
    """A read of a buffer the program updates (``always`` when there is one), or a small leaf."""
    outputs = _numeric(builder.outputs)
    if outputs and (always or builder.flag()):
        plan = builder.pick(outputs)
        converted = convert(Load(plan.name, builder.updated_read_indices(plan, scope)), plan.dtype, dtype,
                            exact_source=False)
        if converted is not None:
            return converted
    return small_leaf(builder, scope, dtype)


def big_expr(builder: _ProgramBuilder, scope: _Scope, dtype: DType, depth: int = 2) -> Expr:
    """An expression that may read updated buffers but grows only additively."""
    if depth == 0:
        return big_leaf(builder, scope, dtype)
    shape = builder.weighted({"leaf": 3, "small": 2, "add": 3, "mean": 2, "minmax": 1, "select": 1,
                              "halve": 1, "unit": 1})
    if shape == "leaf":
        return big_leaf(builder, scope, dtype)
    if shape == "small":
        return small_expr(builder, scope, dtype)
    if shape == "unit":
        return unit_expr(builder, scope, dtype, depth - 1)
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


# ------------------------------------------------------------------ bool values
def condition(builder: _ProgramBuilder, scope: _Scope, depth: int = 1) -> Expr:
    """A boolean that every evaluation order computes identically (exact)."""
    bools = [p for p in scope.temps if p.dtype is DType.BOOL]
    masks = [p for p in builder.inputs + builder.outputs if p.dtype is DType.BOOL]
    kinds = {"compare": 6}
    if bools:
        kinds["temp"] = 6
    if masks:
        kinds["mask"] = 2
    if depth > 0:
        kinds["combine"] = 2
        kinds["not"] = 1
    kind = builder.weighted(kinds)
    if kind == "temp":
        return Load(builder.pick(bools).name, ())
    if kind == "mask":
        plan = builder.pick(masks)
        return Load(plan.name, builder.read_indices(plan, scope))
    if kind == "combine":
        return BinOp(builder.pick(("and", "or")), condition(builder, scope, depth - 1),
                     condition(builder, scope, depth - 1))
    if kind == "not":
        return Call("not", (condition(builder, scope, depth - 1),))
    return _compare(builder, scope)


def _compare(builder: _ProgramBuilder, scope: _Scope) -> Expr:
    op = builder.pick(COMPARE_OPS)
    inputs = _numeric(builder.inputs)
    if inputs and (not scope.loops or builder.flag()):
        plan = builder.pick(inputs)
        zero: Const = Const(0.0, plan.dtype) if plan.dtype.is_float else Const(0, plan.dtype)
        return Compare(op, Load(plan.name, builder.subscripts(plan, scope)), zero)
    if scope.loops:
        lhs = Var(builder.pick(scope.loops).name)
        if builder.flag():
            return Compare(op, lhs, Var(builder.pick(scope.loops).name))
        return Compare(op, lhs, Const(builder.pick((1, 2, 0, 3)), DType.I64))
    return Compare(op, Const(builder.pick((1, 2)), DType.I64), Const(builder.pick((1, 2)), DType.I64))


def bool_update(builder: _ProgramBuilder, scope: _Scope, plan: BufferPlan, itself: Load,
                shifted: Load | None) -> Expr:
    """The value stored into a bool output: exact, possibly reading the output
    itself (``F[i] = F[i] or ...``) or a neighbour (``F[i] = F[i - 1] != ...``)."""
    kind = builder.weighted({"assign": 3, "accumulate": 3, "chain": 2})
    if kind == "accumulate":
        return BinOp(builder.pick(("or", "and")), itself, condition(builder, scope))
    if kind == "chain" and shifted is not None:
        return Compare(builder.pick(("!=", "==")), shifted, condition(builder, scope))
    return condition(builder, scope)
