"""Hypothesis strategies of random, valid polyir programs.

``programs()`` draws modules with one host function: imperfect loop nests,
parametric, constant, triangular and ``max``/``min`` bounds, steps, shifted,
strided, reversed and transposed accesses, reductions, scalar temporaries,
lookup tables, affine ``if``s, and a mix of buffer and ``Symbol`` parameters.

Every program is in bounds for *every* value >= 1 of its size symbols:

* each loop variable ``v`` is known to lie in ``[low, E - 1]`` where ``E`` (its
  *extent*) is a size symbol or a constant, and ``low`` a constant: the lower
  bound is ``>= low`` and the upper bound is ``min(E, ...)`` or ``E - c``;
* a subscript is an affine expression of loop variables whose smallest value
  is provably ``>= 0``; its largest value, plus one, is an affine expression in
  the symbols with non-negative coefficients;
* each parameter dimension is the coefficient-wise maximum of what its
  subscripts need (e.g. ``2*N + 3``), which dominates each of them whenever
  the symbols are >= 0.

Local arrays are read only after a nest that writes every element, and a
scalar temporary only after its write in the same block, so no program reads
memory that native code would leave undefined. See ``_values`` for how values
stay finite.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from hypothesis import strategies as st

from polyir.ir.affine import Aff, Constraint
from polyir.ir.nodes import (
    Assign,
    BinOp,
    Buffer,
    Call,
    Const,
    Expr,
    For,
    Function,
    If,
    Load,
    Module,
    Node,
    Symbol,
)
from polyir.ir.types import DType, MemorySpace
from polyir.testing import _values

T = TypeVar("T")

SYMBOL_NAMES = ("N", "M", "P")
INPUT_NAMES = ("A", "B", "C", "D", "E", "F")
LOOP_NAMES = ("i", "j", "k", "l")


@dataclass(frozen=True)
class LoopVar:
    """A loop variable in scope: every value it takes lies in ``[low, extent - 1]``."""

    name: str
    extent: Aff
    low: int


@dataclass
class BufferPlan:
    """A buffer being generated. ``role`` is ``input`` (never written),
    ``output`` (parameter, updated), ``table`` (local, written once by a full
    nest and read-only afterwards), ``scratch`` (local, write-only) or ``temp``
    (0-d local written once per block before its reads)."""

    name: str
    dtype: DType
    rank: int
    role: str
    shape: tuple[Aff, ...] | None = None
    needs: list[list[Aff]] = field(default_factory=list)


@dataclass(frozen=True)
class _Scope:
    loops: tuple[LoopVar, ...] = ()
    temps: tuple[BufferPlan, ...] = ()

    def enter(self, loop: LoopVar) -> _Scope:
        return _Scope(self.loops + (loop,), self.temps)


def _nonnegative_for_positive_symbols(expr: Aff) -> bool:
    """True when ``expr`` (in symbols only) is >= 0 whenever every symbol is >= 1."""
    return all(c >= 0 for _, c in expr.terms) and \
        expr.evaluate({name: 1 for name in expr.variables()}) >= 0


def _extreme(expr: Aff, loops: Sequence[LoopVar], largest: bool) -> Aff:
    """The largest (or smallest) value of ``expr`` over the loop ranges, in symbols."""
    mapping: dict[str, Aff] = {}
    for loop in loops:
        coefficient = expr.coefficient(loop.name)
        if coefficient == 0:
            continue
        upper = (coefficient > 0) == largest
        mapping[loop.name] = loop.extent - 1 if upper else Aff.const(loop.low)
    return expr.substitute(mapping)


def _cover(needs: Sequence[Aff]) -> Aff:
    """An affine size >= every need for symbols >= 1: the coefficient-wise maximum."""
    coefficients: dict[str, int] = {}
    constant = 0
    for need in needs:
        for name in need.variables():
            coefficients[name] = max(coefficients.get(name, 0), need.coefficient(name))
        constant = max(constant, need.constant)
    size = Aff.const(constant)
    for name, coefficient in sorted(coefficients.items()):
        size = size + coefficient * Aff.var(name)
    smallest = size.evaluate({name: 1 for name in size.variables()})
    return size + (1 - smallest) if smallest < 1 else size


class _ProgramBuilder:
    """Draws one program; every choice goes through ``draw`` so Hypothesis can
    shrink it (the first option of each choice is the simplest)."""

    def __init__(self, draw: Callable[[st.SearchStrategy[Any]], Any], options: dict[str, Any]):
        self.draw = draw
        self.max_depth: int = options["max_depth"]
        self.remaining: int = options["max_statements"]
        self.allow_ifs: bool = options["allow_ifs"]
        self.allow_steps: bool = options["steps"]
        self.allow_locals: bool = options["locals"]
        self.symbols: tuple[str, ...] = ()
        self.used_symbols: set[str] = set()
        self.inputs: list[BufferPlan] = []
        self.outputs: list[BufferPlan] = []
        self.tables_ready: list[BufferPlan] = []
        self.locals: list[BufferPlan] = []
        self.statement_count = 0
        self.name_offset = 0
        self.name_stride = 1
        self.float_dtypes = tuple(DType(d) for d in options["dtypes"])
        self.ints = options["ints"]

    # -- choices ----------------------------------------------------------
    def pick(self, options: Sequence[T]) -> T:
        return options[self.draw(st.integers(0, len(options) - 1))] if len(options) > 1 else options[0]

    def flag(self) -> bool:
        return bool(self.draw(st.booleans()))

    def weighted(self, options: Mapping[T, int]) -> T:
        """One key of ``options`` with probability proportional to its weight;
        shrinks toward the first key."""
        keys = list(options)
        if len(keys) == 1:
            return keys[0]
        roll = self.draw(st.integers(0, sum(options.values()) - 1))
        for key in keys:
            roll -= options[key]
            if roll < 0:
                return key
        return keys[-1]

    def chance(self, percent: int) -> bool:
        """True with about ``percent``% probability; shrinks toward False."""
        return self.draw(st.integers(0, 99)) >= 100 - percent

    # -- program ----------------------------------------------------------
    def build(self, symbolic: bool) -> Module:
        if symbolic:
            self.symbols = SYMBOL_NAMES[: self.draw(st.integers(1, len(SYMBOL_NAMES)))]
        self.main_dtype = self.pick(self.float_dtypes)
        self._plan_parameters()
        if self.chance(20):
            self.name_offset, self.name_stride = self.draw(st.integers(1, 9)), self.draw(st.integers(1, 3))
        body = self.block(_Scope(), depth=0, top_level=True)
        return Module((self._function(body),))

    def _dtype(self) -> DType:
        if self.ints and self.chance(15):
            return DType.I32
        if len(self.float_dtypes) > 1 and self.chance(25):
            return self.pick(self.float_dtypes)
        return self.main_dtype

    def _plan_parameters(self) -> None:
        count = self.draw(st.integers(1, len(INPUT_NAMES) - 2))
        for index in range(count):
            rank = self.weighted({1: 4, 2: 4, 0: 1, 3: 2})
            role = "output" if index == 0 or self.chance(30) else "input"
            plan = BufferPlan(INPUT_NAMES[index], self._dtype(), rank, role,
                              needs=[[] for _ in range(rank)])
            (self.outputs if role == "output" else self.inputs).append(plan)

    def _function(self, body: tuple[Node, ...]) -> Function:
        params: list[Buffer | Symbol] = []
        for plan in sorted(self.inputs + self.outputs, key=lambda p: p.name):
            shape = tuple(_cover(needs) if needs else self._default_extent() for needs in plan.needs)
            params.append(Buffer(plan.name, plan.dtype, shape))
        defined = {p.shape[d].terms[0][0] for p in params if isinstance(p, Buffer)
                   for d in range(p.rank)
                   if len(p.shape[d].terms) == 1 and p.shape[d].terms[0][1] == 1
                   and p.shape[d].constant == 0}
        for p in params:
            if isinstance(p, Buffer):
                for dim in p.shape:
                    self.used_symbols |= dim.variables()
        for name in self.symbols:
            if name in self.used_symbols and (name not in defined or self.chance(25)):
                params.insert(self.draw(st.integers(0, len(params))), Symbol(name))
        locals_ = tuple(Buffer(p.name, p.dtype, p.shape if p.shape is not None else
                               tuple(_cover(needs) if needs else self._default_extent() for needs in p.needs),
                               MemorySpace.GLOBAL) for p in self.locals)
        return Function("f", tuple(params), body, locals_)

    def _default_extent(self) -> Aff:
        if self.symbols:
            self.used_symbols.add(self.symbols[0])
            return Aff.var(self.symbols[0])
        return Aff.const(4)

    def extent(self) -> Aff:
        """A loop extent: a size symbol or a constant."""
        if self.symbols and not self.chance(25):
            name = self.pick(self.symbols)
            self.used_symbols.add(name)
            return Aff.var(name)
        return Aff.const(self.draw(st.integers(1, 6)))

    # -- structure ----------------------------------------------------------
    def block(self, scope: _Scope, depth: int, top_level: bool = False) -> tuple[Node, ...]:
        """One to three nodes (at least one statement in total)."""
        nodes: list[Node] = []
        wanted = self.draw(st.integers(1, 3))
        while len(nodes) < wanted and self.remaining > 0:
            kinds = {"statement": 4}
            if depth < self.max_depth:
                kinds["loop"] = 6 if depth == 0 else 4
            if self.allow_ifs:
                kinds["if"] = 1
            if self.allow_locals and self.remaining >= 2:
                kinds["temp"] = 1
                if top_level and self.max_depth >= 1:
                    kinds["table"] = 1
            kind = self.weighted(kinds)
            if kind == "loop":
                nodes.append(self.loop(scope, depth))
            elif kind == "if":
                nodes.append(self.if_node(scope, depth))
            elif kind == "temp":
                temp = self._new_local(self.main_dtype, 0, "temp")
                nodes.append(self.assign(temp, (), self._once_written_value(scope, temp.dtype)))
                scope = _Scope(scope.loops, scope.temps + (temp,))
            elif kind == "table":
                nodes.append(self.table_nest())
            else:
                nodes.append(self.statement(scope))
        return tuple(nodes)

    def loop(self, scope: _Scope, depth: int) -> For:
        name = LOOP_NAMES[depth] if depth < len(LOOP_NAMES) else f"v{depth}"
        extent = self.extent()
        outer = self.pick(scope.loops) if scope.loops else None
        lower_kind = self.weighted({"zero": 6, "const": 1, "outer": 2, "max": 2, "max_const": 1})
        if lower_kind in ("outer", "max") and outer is None:
            lower_kind = "zero"
        if lower_kind == "const":
            low = self.draw(st.integers(1, 2))
            lower: tuple[Aff, ...] = (Aff.const(low),)
        elif lower_kind == "outer":
            assert outer is not None
            lower, low = (Aff.var(outer.name),), outer.low
        elif lower_kind == "max":
            assert outer is not None
            floor, shift = self.draw(st.integers(0, 1)), self.pick((-1, 0, 1))
            lower, low = (Aff.const(floor), Aff.var(outer.name) + shift), max(floor, outer.low + shift)
        elif lower_kind == "max_const":
            a, b = self.draw(st.integers(0, 2)), self.draw(st.integers(0, 2))
            lower, low = (Aff.const(a), Aff.const(b)), max(a, b)
        else:
            lower, low = (Aff.const(0),), 0
        upper_kind = self.weighted({"extent": 6, "min_outer": 2, "min_const": 1, "minus": 1})
        if upper_kind == "min_outer" and outer is not None:
            upper: tuple[Aff, ...] = (extent, Aff.var(outer.name) + self.draw(st.integers(1, 2)))
        elif upper_kind == "min_const":
            upper = (extent, Aff.const(self.draw(st.integers(1, 6))))
        elif upper_kind == "minus":
            upper = (extent - self.draw(st.integers(1, 2)),)
        else:
            upper = (extent,)
        if len(upper) > 1 and self.flag():
            upper = upper[::-1]
        step = self.weighted({1: 8, 2: 2, 3: 1}) if self.allow_steps else 1
        body = self.block(scope.enter(LoopVar(name, extent, low)), depth + 1)
        return For(name, lower, upper, body, step=step)

    def if_node(self, scope: _Scope, depth: int) -> If:
        conditions = tuple(self.constraint(scope) for _ in range(self.draw(st.integers(1, 2))))
        then_body = self.block(scope, depth)
        else_body = self.block(scope, depth) if self.remaining > 0 and self.chance(35) else ()
        return If(conditions, then_body, else_body)

    def constraint(self, scope: _Scope) -> Constraint:
        op = self.pick(("<", ">=", "<=", ">", "=="))
        loops = scope.loops
        kind = self.weighted({"two": 3, "const": 3, "sum": 2, "mod": 1, "symbol": 1, "fixed": 1})
        if kind in ("two", "sum") and len(loops) < 2:
            kind = "const"
        if kind in ("const", "mod") and not loops:
            kind = "symbol"
        if kind == "symbol" and not self.symbols:
            kind = "fixed"
        if kind == "two":
            a, b = self.pick(loops), self.pick(loops)
            return Constraint(Aff.var(a.name), op, Aff.var(b.name))
        if kind == "sum":
            a, b = self.pick(loops), self.pick(loops)
            bound = self.extent()
            return Constraint(Aff.var(a.name) + Aff.var(b.name), op, bound)
        if kind == "const":
            return Constraint(Aff.var(self.pick(loops).name), op, Aff.const(self.draw(st.integers(0, 4))))
        if kind == "mod":
            return Constraint(Aff.var(self.pick(loops).name) % 2, "==", Aff.const(self.draw(st.integers(0, 1))))
        if kind == "symbol":
            name = self.pick(self.symbols)
            self.used_symbols.add(name)
            return Constraint(Aff.var(name), op, Aff.const(self.draw(st.integers(1, 6))))
        return Constraint(Aff.const(self.draw(st.integers(0, 3))), op, Aff.const(self.draw(st.integers(0, 3))))

    def table_nest(self) -> Node:
        """A local array written in full by its own nest, read-only afterwards."""
        rank = self.draw(st.integers(1, min(2, self.max_depth)))
        shape = tuple(self.extent() for _ in range(rank))
        table = self._new_local(self.main_dtype, rank, "table", shape)
        scope = _Scope(tuple(LoopVar(LOOP_NAMES[d], shape[d], 0) for d in range(rank)))
        indices = tuple(Aff.var(LOOP_NAMES[d]) for d in range(rank))
        node: Node = self.assign(table, indices, self._once_written_value(scope, table.dtype))
        for d in reversed(range(rank)):
            node = For(LOOP_NAMES[d], (Aff.const(0),), (shape[d],), (node,))
        self.tables_ready.append(table)
        return node

    def _once_written_value(self, scope: _Scope, dtype: DType) -> Expr:
        """The value of a temporary or table: small, and reading no other
        temporary or table, so magnitudes cannot compound through chains."""
        tables, self.tables_ready = self.tables_ready, []
        try:
            return _values.small_expr(self, _Scope(scope.loops), dtype)
        finally:
            self.tables_ready = tables

    def statement(self, scope: _Scope) -> Assign:
        targets = list(self.outputs)
        if self.allow_locals and self.chance(10):
            targets = [self._new_local(self._dtype(), self.draw(st.integers(0, 2)), "scratch")]
        plan = self.pick(targets)
        indices = self.subscripts(plan, scope)
        kind = self.weighted({"assign": 4, "reduce": 4, "scale": 1, "max": 1, "blend": 2})
        dtype = plan.dtype
        itself = Load(plan.name, indices)
        if kind == "reduce":
            value: Expr = BinOp(self.pick(("+", "-")), itself,
                                                _values.small_expr(self, scope, dtype))
        elif kind == "scale" and dtype.is_float:
            value = BinOp("+", BinOp("*", itself, Const(0.5, dtype)),
                                  _values.small_expr(self, scope, dtype))
        elif kind == "blend":
            value = _values.mean(self, itself, _values.big_expr(self, scope, dtype), dtype)
        elif kind == "max":
            value = Call(self.pick(("max", "min")), (itself, _values.big_expr(self, scope, dtype)))
        else:
            value = _values.big_expr(self, scope, dtype)
        return self.assign(plan, indices, value)

    def assign(self, plan: BufferPlan, indices: tuple[Aff, ...], value: Expr) -> Assign:
        name = f"S{self.name_offset + self.name_stride * self.statement_count}"
        self.statement_count += 1
        self.remaining -= 1
        return Assign(name, plan.name, indices, value)

    def _new_local(self, dtype: DType, rank: int, role: str,
                   shape: tuple[Aff, ...] | None = None) -> BufferPlan:
        prefix = {"temp": "t", "table": "T", "scratch": "W"}[role]
        name = f"{prefix}{sum(1 for p in self.locals if p.role == role)}"
        plan = BufferPlan(name, dtype, rank, role, shape=() if rank == 0 else shape,
                          needs=[[] for _ in range(rank)])
        self.locals.append(plan)
        return plan

    # -- subscripts ---------------------------------------------------------
    def subscripts(self, plan: BufferPlan, scope: _Scope) -> tuple[Aff, ...]:
        """In-bounds subscripts for every dimension of ``plan``. Dimension ``d``
        prefers the loop at depth ``d`` (``A[i, j]``), sometimes with the two
        innermost loops swapped (``A[j, i]``, a transposed access)."""
        order = scope.loops
        if plan.rank >= 2 and len(order) >= 2 and self.chance(30):
            order = order[:-2] + (order[-1], order[-2])
        return tuple(self.subscript(plan, d, scope.loops, order) for d in range(plan.rank))

    def subscript(self, plan: BufferPlan, dim: int, loops: tuple[LoopVar, ...],
                  preferred: tuple[LoopVar, ...]) -> Aff:
        """An in-bounds subscript for dimension ``dim`` of ``plan``."""
        index = self._draw_subscript(loops, preferred, dim)
        if plan.shape is not None:
            extent = plan.shape[dim]
            if not self._fits(index, loops, extent):
                matching = [v for v in loops if v.extent == extent]
                index = Aff.var(matching[-1].name) if matching else Aff.const(0)
            return index
        need = _extreme(index, loops, largest=True) + 1
        assert _nonnegative_for_positive_symbols(_extreme(index, loops, largest=False)), index
        self.used_symbols |= need.variables()
        plan.needs[dim].append(need)
        return index

    @staticmethod
    def _fits(index: Aff, loops: Sequence[LoopVar], extent: Aff) -> bool:
        low, high = _extreme(index, loops, False), _extreme(index, loops, True)
        return _nonnegative_for_positive_symbols(low) and \
            _nonnegative_for_positive_symbols(extent - 1 - high)

    def _draw_subscript(self, loops: tuple[LoopVar, ...], preferred: tuple[LoopVar, ...], dim: int) -> Aff:
        if not loops:
            return Aff.const(self.draw(st.integers(0, 2)))
        kind = self.weighted({"var": 10, "const": 1, "shift": 2, "stride": 2, "sum": 1, "reverse": 1})
        default = preferred[min(dim, len(preferred) - 1)]
        loop = default if self.chance(50) else self.pick(loops)
        v = Aff.var(loop.name)
        if kind == "const":
            return Aff.const(self.draw(st.integers(0, 2)))
        if kind == "shift":
            return v + self.pick(tuple(c for c in (1, -1, 2, -2) if c >= -loop.low) or (1,))
        if kind == "stride":
            return 2 * v + self.draw(st.integers(0, 1))
        if kind == "sum":
            return v + Aff.var(self.pick(loops).name)
        if kind == "reverse":
            self.used_symbols |= loop.extent.variables()
            return loop.extent - 1 - v
        return v


def _pretty_module(module: Module, printer: Any, cycle: bool) -> None:
    """Show a failing example as parseable IR text instead of a dataclass dump."""
    try:
        text = str(module).rstrip()
    except Exception:  # unprintable IR: fall back to the dataclass repr
        printer.text(repr(module))
        return
    printer.text(f'polyir.parse("""\n{text}\n""")')


def _register_pretty_printer() -> None:
    try:
        from hypothesis.vendor import pretty
        pretty.for_type_by_name(Module.__module__, Module.__qualname__, _pretty_module)
    except (ImportError, AttributeError):  # an internal Hypothesis API; only cosmetic
        pass


_register_pretty_printer()


def programs(max_depth: int = 4, max_statements: int = 5, symbolic: bool = True, allow_ifs: bool = True,
             dtypes: Sequence[str] = ("f32", "f64"), *, ints: bool = True, locals: bool = True,
             steps: bool = True) -> st.SearchStrategy[Module]:
    """A strategy of random valid modules with one host function ``f``.

    ``max_depth`` bounds loop nesting, ``max_statements`` the number of
    statements; ``symbolic=False`` gives constant bounds only; ``allow_ifs``
    enables affine ``if``s; ``dtypes`` are the floating types buffers may
    have, and ``ints`` adds some ``i32`` buffers; ``locals`` enables scalar
    temporaries, lookup tables and write-only scratch arrays; ``steps``
    enables loop steps above 1. Programs are in bounds for every symbol
    value >= 1 (see ``symbol_values``) and shrink toward one statement in
    one loop.
    """
    if max_depth < 0 or max_statements < 1:
        raise ValueError("programs() needs max_depth >= 0 and max_statements >= 1")
    for name in dtypes:
        if not DType(name).is_float:
            raise ValueError(f"dtypes lists floating types only (use ints=True for i32), not {name!r}")
    options = dict(max_depth=max_depth, max_statements=max_statements, allow_ifs=allow_ifs,
                   dtypes=tuple(dtypes), ints=ints, locals=locals, steps=steps)

    @st.composite
    def draw_program(draw: Callable[[st.SearchStrategy[Any]], Any]) -> Module:
        return _ProgramBuilder(draw, options).build(symbolic)

    return draw_program()
