"""Hypothesis strategies of random, valid polyir programs.

``programs()`` draws modules with one host function: imperfect and perfect
loop nests, parametric, constant, triangular and ``max``/``min`` bounds,
steps, shifted, strided, reversed, transposed and gathered accesses,
reductions, recurrences and in-place stencils along any loop level, scalar
temporaries (numeric and bool), lookup tables, affine ``if``s, a mix of
buffer and ``Symbol`` parameters, and optionally correct ``parallel`` marks.

Every program is in bounds for *every* value >= 1 of its size symbols (see
``_access``), reads no memory before writing it (locals: tables are read only
after the nest that writes every element, a temporary only after its write in
the same block, write-only scratch arrays never), and keeps its values finite
and well-conditioned whatever the trip counts (see ``_values``).
"""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from functools import partial
from typing import Any, TypeVar

from hypothesis import strategies as st

from polyir.ir.affine import Aff, Constraint
from polyir.ir.names import unique_loop_vars
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
    Select,
    Symbol,
)
from polyir.ir.types import DType, MemorySpace
from polyir.testing import _marks, _values
from polyir.testing._access import AccessDrawer, BufferPlan, LoopVar, _Scope, cover

T = TypeVar("T")

SYMBOL_NAMES = ("N", "M", "P")
INPUT_NAMES = ("A", "B", "C", "D", "E", "F")
INDEX_BUFFER_NAME = "G"
LOOP_NAMES = ("i", "j", "k", "l")
HALF_TYPES = (DType.F16, DType.BF16)

__all__ = ["programs", "BufferPlan", "LoopVar"]


@st.composite
def _span(draw: Callable[[st.SearchStrategy[Any]], Any], builder: _ProgramBuilder, make: Callable[[], T]) -> T:
    """Runs ``make`` with ``builder`` drawing through this strategy's ``draw``."""
    outer, builder.draw = builder.draw, draw
    try:
        return make()
    finally:
        builder.draw = outer


class _ProgramBuilder(AccessDrawer):
    """Draws one program; every choice goes through ``draw`` so Hypothesis can
    shrink it (the first option of each choice is the simplest)."""

    def __init__(self, draw: Callable[[st.SearchStrategy[Any]], Any], options: dict[str, Any]):
        self.draw = draw
        self.max_depth: int = options["max_depth"]
        self.remaining: int = options["max_statements"]
        self.allow_ifs: bool = options["allow_ifs"]
        self.allow_steps: bool = options["steps"]
        self.allow_locals: bool = options["locals"]
        self.allow_gathers: bool = options["gathers"]
        self.allow_bools: bool = options["bools"]
        self.allow_math: bool = options["math"]
        self.perfect: bool | None = options["perfect"]
        self.mark: bool = options["mark_parallel"]
        self.all_bounded: bool = options["bounded"]
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
        self.approximate_calls = False

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
        full = [d for d in self.float_dtypes if d not in HALF_TYPES]
        if self.allow_math and full and (len(full) == len(self.float_dtypes) or self.chance(50)):
            # exp/tanh/sigmoid only where no half-precision rounding can amplify their ulps
            self.float_dtypes, self.approximate_calls = tuple(full), True
        self.main_dtype = self.pick(self.float_dtypes)
        self._plan_parameters()
        if self.chance(20):
            self.name_offset, self.name_stride = self.draw(st.integers(1, 9)), self.draw(st.integers(1, 3))
        perfect = self.chance(25) if self.perfect is None else self.perfect
        if perfect and self.max_depth >= 1:
            body = self.perfect_nests()
        else:
            body = self.block(_Scope(), depth=0, top_level=True)
        if self.mark:
            body = _marks.mark_parallel(body, lambda: not self.chance(15))
        return Module((unique_loop_vars(self._function(body)),))

    def _dtype(self, role: str = "output") -> DType:
        if self.allow_bools and self.chance(8 if role == "output" else 12):
            return DType.BOOL
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
            plan = BufferPlan(INPUT_NAMES[index], self._dtype(role), rank, role,
                              needs=[[] for _ in range(rank)],
                              bounded=role == "input" or self.all_bounded or self.chance(55))
            (self.outputs if role == "output" else self.inputs).append(plan)
        if self.allow_gathers and self.ints and self.chance(25):
            rank = self.draw(st.integers(1, 2))
            self.inputs.append(BufferPlan(INDEX_BUFFER_NAME, self.pick((DType.I32, DType.I64)), rank, "input",
                                          needs=[[] for _ in range(rank)]))

    def _function(self, body: tuple[Node, ...]) -> Function:
        params: list[Buffer | Symbol] = []
        for plan in sorted(self.inputs + self.outputs, key=lambda p: p.name):
            shape = tuple(cover(needs) if needs else self._default_extent() for needs in plan.needs)
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
                               tuple(cover(needs) if needs else self._default_extent() for needs in p.needs),
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
    def spanned(self, make: Callable[[], T]) -> T:
        """``make()`` with its draws grouped into one Hypothesis span, so the
        shrinker can delete the whole node it builds in one step."""
        return self.draw(_span(self, make))

    def next_node(self, nodes: list[Node],
                  make: Callable[[], tuple[list[Node], _Scope]]) -> tuple[list[Node], _Scope] | None:
        """The next node(s) of a body of ``nodes`` (at least one, at most three),
        or None to end it. Called inside ``spanned``: each node's continue flag
        and draws form one span, so deleting that span deletes exactly that
        node (the first node's flag is drawn but ignored, so any node can go)."""
        if self.remaining <= 0 or len(nodes) >= 3:
            return None
        another = self.chance(60)  # shrinks toward no
        if nodes and not another:
            return None
        return make()

    def block(self, scope: _Scope, depth: int, top_level: bool = False) -> tuple[Node, ...]:
        """One to three nodes (at least one statement in total)."""
        nodes: list[Node] = []
        while True:
            made = self.spanned(partial(self.next_node, nodes, partial(self.block_node, scope, depth, top_level)))
            if made is None:
                return tuple(nodes)
            nodes += made[0]
            scope = made[1]

    def block_node(self, scope: _Scope, depth: int, top_level: bool) -> tuple[list[Node], _Scope]:
        """One node of a block (two for a temporary and its first reader) and
        the scope for the nodes after it."""
        # simplest first: Hypothesis shrinks toward the first kinds
        kinds = {"statement": 4}
        if self.allow_locals and self.remaining >= 2:
            kinds["temp"] = 2
            if self.allow_bools:
                kinds["bool_temp"] = 1
        if depth < self.max_depth:
            kinds["loop"] = 6 if depth == 0 else 4
        if self.allow_ifs:
            kinds["if"] = 2
        if self.allow_locals and self.remaining >= 2 and top_level and self.max_depth >= 1:
            kinds["table"] = 1
        kind = self.weighted(kinds)
        if kind == "loop":
            return [self.loop(scope, depth)], scope
        if kind == "if":
            return [self.if_node(scope, depth)], scope
        if kind == "table":
            return [self.table_nest()], scope
        if kind in ("temp", "bool_temp"):
            node, scope = self.temporary(scope, kind == "bool_temp")
            # a temporary is there to be read
            return [node, self.statement(scope, use=scope.temps[-1])], scope
        return [self.statement(scope)], scope

    def flat_block(self, scope: _Scope) -> tuple[Node, ...]:
        """One to three statements (the body of a perfect nest)."""
        nodes: list[Node] = []
        while True:
            made = self.spanned(partial(self.next_node, nodes, partial(self.flat_node, scope)))
            if made is None:
                return tuple(nodes)
            nodes += made[0]
            scope = made[1]

    def flat_node(self, scope: _Scope) -> tuple[list[Node], _Scope]:
        """A statement, or a temporary and its first reader."""
        kind = "statement"
        if self.allow_locals and self.remaining >= 2:
            kind = self.weighted({"statement": 4, "temp": 1, "bool_temp": 1 if self.allow_bools else 0})
        if kind == "statement":
            return [self.statement(scope)], scope
        node, scope = self.temporary(scope, kind == "bool_temp")
        return [node, self.statement(scope, use=scope.temps[-1])], scope

    def perfect_nests(self) -> tuple[Node, ...]:
        """One or two perfect nests: chains of loops, statements only innermost."""
        nests: list[Node] = []
        for _ in range(1 + int(self.chance(30))):
            if self.remaining <= 0:
                break
            depth = self.draw(st.integers(min(2, self.max_depth), self.max_depth))

            def inner(scope: _Scope, level: int = 1, depth: int = depth) -> tuple[Node, ...]:
                if level == depth:
                    return self.flat_block(scope)
                return (self.loop(scope, level, lambda s: inner(s, level + 1)),)

            nests.append(self.loop(_Scope(), 0, inner))
        return tuple(nests)

    def temporary(self, scope: _Scope, is_bool: bool) -> tuple[Node, _Scope]:
        """A 0-d local written here; the scope in which later nodes may read it."""
        if is_bool:
            temp = self._new_local(DType.BOOL, 0, "temp")
            return self.assign(temp, (), _values.condition(self, scope)), scope.with_temp(temp)
        temp = self._new_local(self.main_dtype, 0, "temp")
        value, temp.bounded = self._once_written_value(scope, temp.dtype)
        return self.assign(temp, (), value), scope.with_temp(temp)

    def loop(self, scope: _Scope, depth: int,
             inner: Callable[[_Scope], tuple[Node, ...]] | None = None) -> For:
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
        inner_scope = scope.enter(LoopVar(name, extent, low))
        body = inner(inner_scope) if inner is not None else self.block(inner_scope, depth + 1)
        return For(name, lower, upper, body, step=step)

    def if_node(self, scope: _Scope, depth: int) -> If:
        conditions = tuple(self.constraint(scope) for _ in range(self.draw(st.integers(1, 2))))
        with_else = self.remaining >= 2 and self.chance(40)
        self.remaining -= int(with_else)  # keep a statement for the else branch
        then_body = self.block(scope, depth)
        self.remaining += int(with_else)
        else_body = self.block(scope, depth) if with_else and self.remaining > 0 else ()
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
        value, table.bounded = self._once_written_value(scope, table.dtype)
        node: Node = self.assign(table, indices, value)
        for d in reversed(range(rank)):
            node = For(LOOP_NAMES[d], (Aff.const(0),), (shape[d],), (node,))
        self.tables_ready.append(table)
        return node

    def _once_written_value(self, scope: _Scope, dtype: DType) -> tuple[Expr, bool]:
        """The value of a temporary or table and whether it is in the unit range.
        It reads only unit temporaries and tables, so magnitudes cannot compound
        through chains of temporaries; it may read updated buffers."""
        tables = self.tables_ready
        self.tables_ready = [t for t in tables if t.bounded]
        unit_scope = _Scope(scope.loops, tuple(t for t in scope.temps if t.bounded or t.dtype is DType.BOOL))
        try:
            if self.chance(35):
                return _values.small_expr(self, unit_scope, dtype), False
            return _values.unit_expr(self, unit_scope, dtype), True
        finally:
            self.tables_ready = tables

    def statement(self, scope: _Scope, use: BufferPlan | None = None) -> Assign:
        """One assignment to an output (or, rarely, a write-only scratch array);
        with ``use`` (a temporary in scope), its value certainly reads it."""
        targets = list(self.outputs)
        if self.allow_locals and self.chance(10):
            dtype = self._dtype()
            targets = [self._new_local(DType.F32 if dtype is DType.BOOL else dtype,
                                       self.draw(st.integers(0, 2)), "scratch")]
        plan = self.pick(targets)
        indices = self.subscripts(plan, scope)
        itself = Load(plan.name, indices)
        if plan.role == "scratch":  # write-only: never read, not even by itself
            value = _values.big_expr(self, scope, plan.dtype)
        elif plan.dtype is DType.BOOL:
            shifted = self.shifted(plan, indices, scope)
            value = _values.bool_update(self, scope, plan, itself,
                                        None if shifted is None else Load(plan.name, shifted))
        elif plan.bounded:
            value = self._bounded_update(plan, indices, scope)
        else:
            value = self._accumulating_update(plan, indices, scope)
        if use is not None:
            value = self._with_temporary(plan, itself, value, use, scope)
        return self.assign(plan, indices, value)

    def _with_temporary(self, plan: BufferPlan, itself: Load, value: Expr, temp: BufferPlan,
                        scope: _Scope) -> Expr:
        """``value`` combined with a read of ``temp`` without leaving ``plan``'s
        magnitude class (``select(b0[], v, A[i])``, ``0.5*v + 0.5*t0[]``, ``v + t0[]``)."""
        read = Load(temp.name, ())
        if temp.dtype is DType.BOOL:
            if plan.dtype is DType.BOOL:
                return BinOp("and", read, value)
            other = itself if plan.role != "scratch" else _values.unit_expr(self, scope, plan.dtype, 1)
            return Select(read, value, other)
        if plan.dtype is DType.BOOL:  # comparing a computed value would not be exact
            return value
        if plan.role != "scratch" and plan.bounded:
            if temp.bounded:
                converted = _values.to_unit(read, temp.dtype, plan.dtype, exact_source=False)
            elif plan.dtype.is_float:  # float -> float: always possible
                as_float = _values.convert(read, temp.dtype, plan.dtype, exact_source=False)
                assert as_float is not None
                converted = _values.squash(self, as_float, plan.dtype)
            else:
                converted = None
            if converted is None:
                return value
            if plan.dtype.is_float:
                return _values.convex(plan.dtype, [(0.5, value), (0.5, converted)])
            return _values.mean(self, value, converted, plan.dtype)
        converted = _values.convert(read, temp.dtype, plan.dtype, exact_source=False)
        return value if converted is None else BinOp("+", value, converted)

    def _self_read(self, plan: BufferPlan, indices: tuple[Aff, ...], scope: _Scope) -> Load:
        """``plan`` read at a neighbour of ``indices`` (or at ``indices``)."""
        shifted = self.shifted(plan, indices, scope)
        return Load(plan.name, indices if shifted is None else shifted)

    def _bounded_update(self, plan: BufferPlan, indices: tuple[Aff, ...], scope: _Scope) -> Expr:
        """A unit value for a bounded output, often reading the output itself."""
        dtype = plan.dtype
        itself = Load(plan.name, indices)
        kind = self.weighted({"assign": 2, "stencil": 4, "blend": 2, "max": 2, "product": 1, "select": 1})
        if kind == "stencil":
            if not dtype.is_float:
                return _values.mean(self, self._self_read(plan, indices, scope),
                                    _values.unit_expr(self, scope, dtype, 1), dtype)
            weights = self.pick(_values.CONVEX_WEIGHTS)
            terms = [(w, self._self_read(plan, indices, scope) if n == 0 or self.chance(60)
                      else _values.unit_expr(self, scope, dtype, 1)) for n, w in enumerate(weights)]
            return _values.convex(dtype, terms)
        if kind == "blend" and dtype.is_float:
            weight = self.pick((0.5, 0.25, 0.75))
            return _values.convex(dtype, [(weight, itself), (1.0 - weight, _values.unit_expr(self, scope, dtype))])
        if kind == "max":
            return Call(self.pick(("max", "min")), (itself, _values.unit_expr(self, scope, dtype)))
        if kind == "product" and dtype.is_float:
            return BinOp("*", itself, _values.unit_expr(self, scope, dtype))
        if kind == "select":
            return Select(_values.condition(self, scope), itself, _values.unit_expr(self, scope, dtype))
        return _values.unit_expr(self, scope, dtype)

    def _accumulating_update(self, plan: BufferPlan, indices: tuple[Aff, ...], scope: _Scope) -> Expr:
        """A value for an output that may grow linearly (sums, recurrences)."""
        dtype = plan.dtype
        itself = Load(plan.name, indices)
        kind = self.weighted({"assign": 3, "reduce": 4, "scale": 1, "max": 1, "blend": 2, "recurrence": 3})
        if kind == "reduce":
            term = _values.unit_expr(self, scope, dtype) if self.flag() else _values.small_expr(self, scope, dtype)
            return BinOp(self.pick(("+", "-")), itself, term)
        if kind == "scale" and dtype.is_float:
            return BinOp("+", BinOp("*", itself, Const(0.5, dtype)), _values.small_expr(self, scope, dtype))
        if kind == "blend":
            return _values.mean(self, itself, _values.big_expr(self, scope, dtype), dtype)
        if kind == "max":
            return Call(self.pick(("max", "min")), (itself, _values.big_expr(self, scope, dtype)))
        if kind == "recurrence":
            return BinOp("+", self._self_read(plan, indices, scope), _values.unit_expr(self, scope, dtype))
        return _values.big_expr(self, scope, dtype)

    def assign(self, plan: BufferPlan, indices: tuple[Aff, ...], value: Expr) -> Assign:
        name = f"S{self.name_offset + self.name_stride * self.statement_count}"
        self.statement_count += 1
        self.remaining -= 1
        return Assign(name, plan.name, indices, value)

    def _new_local(self, dtype: DType, rank: int, role: str,
                   shape: tuple[Aff, ...] | None = None) -> BufferPlan:
        prefix = {"temp": "b" if dtype is DType.BOOL else "t", "table": "T", "scratch": "W"}[role]
        name = f"{prefix}{sum(1 for p in self.locals if p.name.startswith(prefix))}"
        plan = BufferPlan(name, dtype, rank, role, shape=() if rank == 0 else shape,
                          needs=[[] for _ in range(rank)])
        self.locals.append(plan)
        return plan


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
             steps: bool = True, bools: bool | None = None, gathers: bool = True, math: bool = True,
             perfect: bool | None = None, mark_parallel: bool = False,
             bounded: bool = False) -> st.SearchStrategy[Module]:
    """A strategy of random valid modules with one host function ``f``.

    ``max_depth`` bounds loop nesting, ``max_statements`` the number of
    statements; ``symbolic=False`` gives constant bounds only; ``allow_ifs``
    enables affine ``if``s; ``dtypes`` are the floating types buffers may
    have, and ``ints`` adds some ``i32`` buffers (and an ``i32``/``i64`` index
    buffer ``G``); ``locals`` enables scalar temporaries, lookup tables and
    write-only scratch arrays; ``steps`` enables loop steps above 1; ``bools``
    adds bool buffers and bool temporaries (default: as ``ints``, so
    ``ints=False`` still means floating buffers only); ``gathers`` adds gathered reads
    ``E[abs(cast<i64>(G[i])) % N]``; ``math`` adds ``exp``/``tanh``/``sigmoid``
    (in programs without f16/bf16 values). ``perfect=True`` makes every
    program one or two perfect nests, ``False`` never forces one, ``None``
    (default) about 30%. ``mark_parallel=True`` marks loops ``parallel`` where
    they provably carry no dependence (never elsewhere). ``bounded=True``
    makes every output *bounded*: its values stay in [-1, 1] (ints in
    [-4, 4]) for any sizes, instead of some outputs growing linearly.

    Programs are in bounds for every symbol value >= 1 (see
    ``symbol_values``), read no uninitialised memory, keep values finite and
    well-conditioned, and shrink toward one statement in one loop.
    """
    if max_depth < 0 or max_statements < 1:
        raise ValueError("programs() needs max_depth >= 0 and max_statements >= 1")
    for name in dtypes:
        if not DType(name).is_float:
            raise ValueError(f"dtypes lists floating types only (use ints=True for i32), not {name!r}")
    if not dtypes:
        raise ValueError("programs() needs at least one floating type in dtypes")
    options = dict(max_depth=max_depth, max_statements=max_statements, allow_ifs=allow_ifs,
                   dtypes=tuple(dtypes), ints=ints, locals=locals, steps=steps,
                   gathers=gathers, math=math, perfect=perfect, mark_parallel=mark_parallel,
                   bounded=bounded, bools=ints if bools is None else bools)

    @st.composite
    def draw_program(draw: Callable[[st.SearchStrategy[Any]], Any]) -> Module:
        return _ProgramBuilder(draw, options).build(symbolic)

    return draw_program()
