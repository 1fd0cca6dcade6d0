"""IR -> isl: iteration domains, access relations and the original schedule.

``extract(function)`` returns a :class:`Scop`, the polyhedral view of one
function:

* every statement ``S`` enclosed by loops ``i, j`` becomes the isl tuple
  ``S[i, j]`` whose parameters are the function's symbols; its domain holds
  the loop bounds, strides and the conditions of enclosing ``if``s (an
  ``else`` branch contributes the negation, a union);
* the context is :func:`polyir.polyhedral.assumptions.assumptions`: every
  symbol ``>= 0`` and every buffer dimension ``>= 0`` (an empty array is a
  legal argument); backends check the symbols at call time;
* read and write access relations ``S[i, j] -> C[i, j]``; a non-affine
  subscript (a gather) makes that buffer dimension a *may* access over the
  whole extent of the dimension;
* a loop-scoped local (``For.locals``) is *expanded* along its loop and the
  loops around it: an access ``t[f]`` under ``for i { local t; for j ... }``
  is the access ``t[i, f]``, so iterations of ``i`` never depend on each other
  through ``t`` (each has its own copy), and a buffer shrunk into a loop
  carries no false dependence on that loop;
* the original schedule as an isl schedule tree (bands for loops, sequences
  for the textual order) and as a union map.

Loops are numbered in pre-order (then-branch before else-branch); the number
is the loop's *id*, used by every other module to name a loop.

Refuses (``NotPolyhedral``) ``barrier`` and ``launch`` nodes and duplicate
statement names.
"""
from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace

import islpy as isl

from polyir.errors import PolyirError
from polyir.ir.affine import Aff, Constraint, FloorDiv
from polyir.ir.fragments import MMA_SHAPES
from polyir.ir.nodes import (
    Assign,
    Barrier,
    BinOp,
    Buffer,
    Call,
    Cast,
    Compare,
    Const,
    Expr,
    For,
    FragmentFill,
    FragmentLoad,
    FragmentMMA,
    FragmentStore,
    Function,
    If,
    Launch,
    Load,
    Module,
    Node,
    Select,
    Var,
    to_affine,
)
from polyir.polyhedral.assumptions import assumptions
from polyir.polyhedral.memo import ISL_MEMO

ISL_KEYWORDS = frozenset({
    "exists", "and", "or", "implies", "not", "mod", "floor", "ceil", "ceild",
    "floord", "min", "max", "rat", "infty", "NaN", "true", "false", "domain",
    "range", "params", "cst", "div", "to", "of", "new", "try", "catch",
})


class NotPolyhedral(PolyirError):
    """A function that the polyhedral layer cannot model; names the construct."""


def isl_name(name: str) -> str:
    """The identifier used for ``name`` inside isl text (keywords get a ``_`` suffix)."""
    return name + "_" if name in ISL_KEYWORDS else name


# ------------------------------------------------------------ affine -> isl text
def aff_to_isl(aff: Aff, names: dict[str, str]) -> str:
    """isl text of ``aff`` with variables renamed through ``names``."""
    parts: list[str] = []
    for atom, coeff in aff.terms:
        if isinstance(atom, str):
            text = names.get(atom, isl_name(atom))
        elif isinstance(atom, FloorDiv):
            text = f"floor(({aff_to_isl(atom.expr, names)})/{atom.divisor})"
        else:
            text = f"(({aff_to_isl(atom.expr, names)}) mod {atom.divisor})"
        parts.append(f"{coeff}*{text}")
    parts.append(f"{aff.constant}")
    return " + ".join(parts)


def constraint_to_isl(c: Constraint, names: dict[str, str]) -> str:
    expr, is_eq = c.as_nonnegative()
    return f"{aff_to_isl(expr, names)} {'=' if is_eq else '>='} 0"


def negated_constraint_to_isl(c: Constraint, names: dict[str, str]) -> str:
    expr, is_eq = c.as_nonnegative()
    text = aff_to_isl(expr, names)
    return f"({text} < 0 or {text} > 0)" if is_eq else f"{text} < 0"


# ------------------------------------------------------------------ data
@dataclass(frozen=True)
class LoopInfo:
    """A ``For`` node of the function: its pre-order id, depth (1 = outermost)
    and the id of the enclosing loop (``None`` at top level)."""

    id: int
    var: str
    depth: int
    parent: int | None
    node: For
    nest: int  # index of the top-level node that holds it


@dataclass(frozen=True)
class Access:
    """One access of a statement: ``relation`` maps the statement's instances
    to buffer elements; ``exact`` is False for may-accesses (gathers)."""

    statement: str
    buffer: str
    kind: str  # "read" | "write"
    relation: isl.Map
    exact: bool

    def __repr__(self) -> str:
        verb = f"{self.kind}s" if self.exact else f"may {self.kind}"
        return f"<Access: {self.statement} {verb} {self.buffer}>"


@dataclass(frozen=True)
class StatementInfo:
    """One polyhedral statement."""

    name: str
    node: Node
    loop_vars: tuple[str, ...]   # original names, outermost first
    dims: tuple[str, ...]        # names of the isl dimensions
    loops: tuple[int, ...]       # enclosing loop ids, outermost first
    nest: int                    # index of the top-level node holding it
    order: int                   # textual position among statements
    domain: isl.Set
    positions: tuple[int, ...] = ()  # textual position at each depth (2d+1 schedule)
    accesses: tuple[Access, ...] = ()
    reduction: tuple[str, str] | None = None   # (buffer, op) when a reduction

    def __repr__(self) -> str:
        return f"<StatementInfo {self.name}[{', '.join(self.loop_vars)}]: {len(self.accesses)} accesses>"

    @property
    def reads(self) -> list[Access]:
        return [a for a in self.accesses if a.kind == "read"]

    @property
    def writes(self) -> list[Access]:
        return [a for a in self.accesses if a.kind == "write"]


@dataclass(frozen=True, eq=False)
class Scop:
    """The polyhedral view of a function (see the module docstring); a frozen
    record (do not mutate its dicts). Iterating gives the statements
    (:class:`StatementInfo`) in textual order; ``str`` prints each one's
    domain, accesses and schedule."""

    function: Function
    params: tuple[str, ...]
    context: isl.Set
    statements: dict[str, StatementInfo]
    loops: dict[int, LoopInfo]
    schedule: isl.Schedule

    def __iter__(self) -> Iterator[StatementInfo]:
        return iter(self.statements.values())

    def __len__(self) -> int:
        return len(self.statements)

    def __repr__(self) -> str:
        from polyir.polyhedral.report import scop_summary, short
        return short(f"<{scop_summary(self)}>")

    def __str__(self) -> str:
        from polyir.polyhedral.report import scop_text
        return scop_text(self)

    def _repr_markdown_(self) -> str:
        from polyir.polyhedral.report import scop_markdown
        return scop_markdown(self)

    @property
    def param_space(self) -> str:
        return "[" + ", ".join(isl_name(p) for p in self.params) + "]"

    @property
    def ctx(self) -> isl.Context:
        """The isl context every object of this scop lives on."""
        return self.context.get_ctx()

    def isl_set(self, text: str) -> isl.Set:
        """``isl.Set`` from text, on this scop's context."""
        return isl.Set(text, context=self.ctx)

    def isl_map(self, text: str) -> isl.Map:
        """``isl.Map`` from text, on this scop's context."""
        return isl.Map(text, context=self.ctx)

    def isl_union_map(self, text: str) -> isl.UnionMap:
        """``isl.UnionMap`` from text, on this scop's context."""
        return isl.UnionMap(text, context=self.ctx)

    def isl_union_set(self, text: str) -> isl.UnionSet:
        """``isl.UnionSet`` from text, on this scop's context."""
        return isl.UnionSet(text, context=self.ctx)

    @property
    def domain(self) -> isl.UnionSet:
        result = isl.UnionSet.empty(self.context.get_space())
        for s in self.statements.values():
            result = result.union(isl.UnionSet.from_set(s.domain))
        return result

    def access_map(self, kind: str, exact: bool | None = None,
                   buffer: str | None = None) -> isl.UnionMap:
        """Union of the accesses of ``kind`` (``read``/``write``), optionally only
        exact (``True``) or only may (``False``) ones, optionally of one buffer."""
        result = isl.UnionMap.empty(self.context.get_space())
        for s in self.statements.values():
            for a in s.accesses:
                if a.kind != kind or (exact is not None and a.exact != exact):
                    continue
                if buffer is not None and a.buffer != buffer:
                    continue
                result = result.union(isl.UnionMap.from_map(a.relation))
        return result

    @property
    def reads(self) -> isl.UnionMap:
        return self.access_map("read")

    @property
    def writes(self) -> isl.UnionMap:
        return self.access_map("write")

    @property
    def schedule_map(self) -> isl.UnionMap:
        return self.schedule.get_map().intersect_domain(self.domain)

    @property
    def buffers(self) -> list[str]:
        seen: list[str] = []
        for s in self.statements.values():
            for a in s.accesses:
                if a.buffer not in seen:
                    seen.append(a.buffer)
        return seen

    def schedule_vectors(self) -> dict[str, list[str | int]]:
        """Each statement's 2d+1 schedule ``[p0, i1, p1, ..., id, pd]`` with
        dims as names and positions as ints."""
        result: dict[str, list[str | int]] = {}
        for s in self.statements.values():
            vec: list[str | int] = [s.positions[0]]
            for dim, pos in zip(s.dims, s.positions[1:], strict=False):
                vec += [dim, pos]
            result[s.name] = vec
        return result

    def schedule_from_vectors(self, vectors: dict[str, list[str | int]]) -> isl.UnionMap:
        """The union map of per-statement schedule vectors (entries: dim names,
        ints or isl affine text), padded with zeros to a common length."""
        width = max((len(v) for v in vectors.values()), default=0)
        result = isl.UnionMap.empty(self.context.get_space())
        for name, vec in vectors.items():
            s = self.statements[name]
            padded = [str(x) for x in vec] + ["0"] * (width - len(vec))
            text = (f"{self.param_space} -> {{ {isl_name(name)}[{', '.join(s.dims)}] -> "
                    f"[{', '.join(padded)}] }}")
            result = result.union(isl.UnionMap.from_map(self.isl_map(text).intersect_domain(s.domain)))
        return result

    def loop(self, key: int | str) -> LoopInfo:
        """A loop by id, or by variable name (unique in a verified function);
        raises ``polyir.ir.names.UnknownLoop`` for a name no loop has."""
        from polyir.ir.names import UnknownLoop
        if isinstance(key, int):
            if key not in self.loops:
                raise UnknownLoop(self.function.name, str(key), [lp.var for lp in self.loops.values()])
            return self.loops[key]
        found = [lp for lp in self.loops.values() if lp.var == key]
        if len(found) != 1:
            raise UnknownLoop(self.function.name, key, [lp.var for lp in self.loops.values()])
        return found[0]

    def statements_in(self, loop_id: int) -> list[StatementInfo]:
        return [s for s in self.statements.values() if loop_id in s.loops]

    def statements_in_nest(self, nest: int) -> list[StatementInfo]:
        return [s for s in self.statements.values() if s.nest == nest]


# ------------------------------------------------------------ traversal
def walk_loops(body: tuple[Node, ...]) -> Iterator[tuple[For, int]]:
    """Every ``For`` under ``body`` in pre-order with its loop id."""
    counter = [0]

    def visit(nodes: tuple[Node, ...]) -> Iterator[tuple[For, int]]:
        for node in nodes:
            if isinstance(node, For):
                ident = counter[0]
                counter[0] += 1
                yield node, ident
                yield from visit(node.body)
            elif isinstance(node, If):
                yield from visit(node.then_body)
                yield from visit(node.else_body)

    yield from visit(body)


def map_loops(body: tuple[Node, ...], rewrite: Callable[[For, int], For]) -> tuple[Node, ...]:
    """Rebuild ``body`` with each ``For`` replaced by ``rewrite(loop, id)``
    (applied to the loop whose body is already rewritten; ids as in ``walk_loops``)."""
    from dataclasses import replace
    counter = [0]

    def visit(nodes: tuple[Node, ...]) -> tuple[Node, ...]:
        out: list[Node] = []
        for node in nodes:
            if isinstance(node, For):
                ident = counter[0]
                counter[0] += 1
                out.append(rewrite(replace(node, body=visit(node.body)), ident))
            elif isinstance(node, If):
                out.append(replace(node, then_body=visit(node.then_body),
                                   else_body=visit(node.else_body)))
            else:
                out.append(node)
        return tuple(out)

    return visit(body)


def expr_loads(expr: Expr) -> Iterator[Load]:
    """Every ``Load`` in a value expression, including those in gather subscripts."""
    if isinstance(expr, Load):
        yield expr
        for index in expr.indices:
            if not isinstance(index, Aff):
                yield from expr_loads(index)
    elif isinstance(expr, (BinOp, Compare)):
        yield from expr_loads(expr.lhs)
        yield from expr_loads(expr.rhs)
    elif isinstance(expr, Call):
        for arg in expr.args:
            yield from expr_loads(arg)
    elif isinstance(expr, Select):
        yield from expr_loads(expr.cond)
        yield from expr_loads(expr.if_true)
        yield from expr_loads(expr.if_false)
    elif isinstance(expr, Cast):
        yield from expr_loads(expr.value)
    elif isinstance(expr, (Const, Var)):
        return
    else:
        raise NotPolyhedral(f"unknown expression {expr!r}")


def affine_index(index: object) -> Aff | None:
    """The ``Aff`` of a subscript, or ``None`` for a non-affine (gather) subscript."""
    if isinstance(index, Aff):
        return index
    return to_affine(index)  # type: ignore[arg-type]


REDUCTION_OPS = {"+": "+", "*": "*", "max": "max", "min": "min"}


def reduction_of(node: Node) -> tuple[str, str] | None:
    """``(buffer, op)`` when ``node`` is ``X[f] = X[f] op e`` (or ``e op X[f]``)
    with ``op`` in ``+ * max min`` and ``X`` not read in ``e``; else ``None``."""
    if not isinstance(node, Assign):
        return None
    value = node.value
    if isinstance(value, BinOp) and value.op in ("+", "*"):
        op, operands = value.op, (value.lhs, value.rhs)
    elif isinstance(value, Call) and value.fn in ("max", "min"):
        op, operands = value.fn, (value.args[0], value.args[1])
    else:
        return None
    indices = tuple(affine_index(i) for i in node.indices)
    if any(i is None for i in indices):
        return None
    for pos, operand in enumerate(operands):
        other = operands[1 - pos]
        if (isinstance(operand, Load) and operand.buffer == node.buffer
                and tuple(affine_index(i) for i in operand.indices) == indices
                and all(ld.buffer != node.buffer for ld in expr_loads(other))):
            return node.buffer, op
    return None


# ------------------------------------------------------------ extraction
@dataclass
class _Frame:
    loop_vars: tuple[str, ...]
    dims: tuple[str, ...]
    names: dict[str, str]           # IR name -> isl name
    constraints: tuple[str, ...]    # isl text, conjunction
    loops: tuple[int, ...]
    positions: tuple[int, ...] = ()     # 2d+1 positions of the enclosing loops
    counter: list[int] = field(default_factory=lambda: [0])  # next position here


class _Extractor:
    def __init__(self, function: Function, ctx: isl.Context):
        self.ctx = ctx
        self.function = function
        self.buffers: dict[str, Buffer] = function.buffers
        self.params = function.symbols
        self.param_text = "[" + ", ".join(isl_name(p) for p in self.params) + "]"
        self.statements: dict[str, StatementInfo] = {}
        self.loops: dict[int, LoopInfo] = {}
        self.loop_counter = 0
        self.scoped: dict[str, tuple[str, ...]] = {}  # loop-scoped local -> its loops' variables
        self.context = self._context()
        self.context_text = str(self.context)
        # statements under the same loops and conditions share their domain, and an access
        # text repeated there (a reduction's read and write) its relation: each is parsed once,
        # without a tuple name, and named per statement; across extractions (the passes
        # extract a nest again after each change) the domains come from ISL_MEMO (an access
        # relation is cheaper to build again than to parse back from the memo's text)
        self._domains: dict[tuple[tuple[str, ...], tuple[str, ...]], isl.Set] = {}
        self._relations: dict[tuple[object, ...], isl.Map] = {}

    def _context(self) -> isl.Set:
        parts = [f"{aff_to_isl(aff, {})} >= 0" for aff in assumptions(self.function)]
        body = " and ".join(parts) if parts else "true"
        return isl.Set(f"{self.param_text} -> {{ : {body} }}", context=self.ctx)

    # -- traversal
    def run(self) -> Scop:
        top = _Frame((), (), {}, (), ())
        schedules = []
        for index, node in enumerate(self.function.body):
            sched = self._visit(node, top, index, None)
            if sched is not None:
                schedules.append(sched)
        schedule = _sequence(schedules)
        if schedule is None:
            schedule = isl.Schedule.from_domain(isl.UnionSet.empty(self.context.get_space()))
        return Scop(self.function, self.params, self.context, self.statements,
                    self.loops, schedule)

    def _visit(self, node: Node, frame: _Frame, nest: int,
               parent: int | None) -> isl.Schedule | None:
        if isinstance(node, For):
            return self._visit_for(node, frame, nest, parent)
        if isinstance(node, If):
            then_frame = _Frame(frame.loop_vars, frame.dims, frame.names,
                                frame.constraints + tuple(
                                    constraint_to_isl(c, frame.names) for c in node.conditions),
                                frame.loops, frame.positions, frame.counter)
            else_cond = "(" + " or ".join(
                negated_constraint_to_isl(c, frame.names) for c in node.conditions) + ")"
            else_frame = _Frame(frame.loop_vars, frame.dims, frame.names,
                                frame.constraints + ((else_cond,) if node.conditions else ("false",)),
                                frame.loops, frame.positions, frame.counter)
            parts = [self._visit(n, then_frame, nest, parent) for n in node.then_body]
            parts += [self._visit(n, else_frame, nest, parent) for n in node.else_body]
            return _sequence([p for p in parts if p is not None])
        if isinstance(node, (Barrier, Launch)):
            kind = "barrier" if isinstance(node, Barrier) else "launch"
            where = f" at {node.loc}" if node.loc is not None else ""
            raise NotPolyhedral(f"'{kind}'{where} in {self.function.name} has no polyhedral model")
        return self._visit_statement(node, frame, nest)

    def _visit_for(self, loop: For, frame: _Frame, nest: int,
                   parent: int | None) -> isl.Schedule | None:
        ident = self.loop_counter
        self.loop_counter += 1
        self.loops[ident] = LoopInfo(ident, loop.var, len(frame.loop_vars) + 1, parent, loop, nest)
        dim = isl_name(loop.var)
        taken = set(frame.dims) | {isl_name(p) for p in self.params}
        while dim in taken:
            dim = dim + "_"
        names = dict(frame.names)
        outer_names = frame.names
        names[loop.var] = dim
        for local in loop.locals:
            self.scoped[local.name] = frame.loop_vars + (loop.var,)
        bounds = [f"{dim} >= {aff_to_isl(lb, outer_names)}" for lb in loop.lower]
        bounds += [f"{dim} < {aff_to_isl(ub, outer_names)}" for ub in loop.upper]
        if loop.step != 1:
            options = []
            for k, lb in enumerate(loop.lower):
                is_max = " and ".join(
                    [f"{aff_to_isl(lb, outer_names)} >= {aff_to_isl(o, outer_names)}"
                     for m, o in enumerate(loop.lower) if m != k] or ["true"])
                options.append(f"(({dim} - ({aff_to_isl(lb, outer_names)})) mod {loop.step} = 0"
                               f" and {is_max})")
            bounds.append("(" + " or ".join(options) + ")")
        position = frame.counter[0]
        frame.counter[0] += 1
        inner = _Frame(frame.loop_vars + (loop.var,), frame.dims + (dim,), names,
                       frame.constraints + tuple(bounds), frame.loops + (ident,),
                       frame.positions + (position,), [0])
        parts = [self._visit(n, inner, nest, ident) for n in loop.body]
        body = _sequence([p for p in parts if p is not None])
        if body is None:
            return None
        members = [s for s in self.statements.values() if ident in s.loops]
        pieces = "; ".join(f"{s.name}[{', '.join(s.dims)}] -> [({s.dims[len(frame.dims)]})]"
                           for s in members)
        prefix = f"{self.param_text} -> " if self.params else ""  # "[] -> [...]" misparses
        band = isl.MultiUnionPwAff(f"{prefix}[{{ {pieces} }}]", context=self.ctx)
        return body.insert_partial_schedule(band)

    def _visit_statement(self, node: Node, frame: _Frame, nest: int) -> isl.Schedule:
        name = node.name  # type: ignore[union-attr]
        if name in self.statements:
            raise NotPolyhedral(f"statement name {name} used twice in {self.function.name}")
        tuple_text = f"{isl_name(name)}[{', '.join(frame.dims)}]"
        shape = (frame.dims, frame.constraints)
        unnamed = self._domains.get(shape)
        if unnamed is None:
            cond = " and ".join(frame.constraints) if frame.constraints else "true"
            text = f"{self.param_text} -> {{ [{', '.join(frame.dims)}] : {cond} }}"
            unnamed = ISL_MEMO.answer(
                "domain", self.ctx, (text, self.context_text),
                lambda: isl.Set(text, context=self.ctx).intersect_params(self.context).coalesce(),
                isl.Set)
            self._domains[shape] = unnamed
        domain = unnamed.set_tuple_name(isl_name(name))
        position = frame.counter[0]
        frame.counter[0] += 1
        info = StatementInfo(name, node, frame.loop_vars, frame.dims, frame.loops, nest,
                             len(self.statements), domain, frame.positions + (position,),
                             reduction=reduction_of(node))
        info = replace(info, accesses=tuple(self._accesses(node, info, frame, tuple_text)))
        self.statements[name] = info
        return isl.Schedule.from_domain(isl.UnionSet.from_set(domain))

    # -- accesses
    def _accesses(self, node: Node, info: StatementInfo, frame: _Frame,
                  tuple_text: str) -> list[Access]:
        found: list[Access] = []

        def add(kind: str, buffer: str, indices: tuple[object, ...] | None,
                region: tuple[int, ...] | None = None) -> None:
            found.append(self._access(info, frame, tuple_text, kind, buffer, indices, region))

        if isinstance(node, Assign):
            for load in expr_loads(node.value):
                add("read", load.buffer, load.indices)
            for index in node.indices:
                if not isinstance(index, Aff):
                    for load in expr_loads(index):
                        add("read", load.buffer, load.indices)
            add("write", node.buffer, node.indices)
        elif isinstance(node, FragmentFill):
            for load in expr_loads(node.value):
                add("read", load.buffer, load.indices)
            add("write", node.fragment, None)
        elif isinstance(node, FragmentLoad):
            rows, cols = MMA_SHAPES[node.shape].role_shape(node.role)
            region = (rows, cols) if node.layout == "row" else (cols, rows)
            add("read", node.buffer, node.indices, region)
            add("write", node.fragment, None)
        elif isinstance(node, FragmentMMA):
            for operand in (node.a, node.b, node.acc):
                add("read", operand, None)
            add("write", node.result, None)
        elif isinstance(node, FragmentStore):
            rows, cols = MMA_SHAPES[node.shape].role_shape("acc")
            region = (rows, cols) if node.layout == "row" else (cols, rows)
            add("read", node.fragment, None)
            add("write", node.buffer, node.indices, region)
        else:
            raise NotPolyhedral(f"unknown statement {node!r}")
        return found

    def _access(self, info: StatementInfo, frame: _Frame, tuple_text: str, kind: str,
                buffer: str, indices: tuple[object, ...] | None,
                region: tuple[int, ...] | None) -> Access:
        if buffer not in self.buffers:
            raise NotPolyhedral(f"statement {info.name} accesses unknown buffer {buffer!r}")
        shape = self.buffers[buffer].shape
        outs = [f"_o{k}" for k in range(len(shape))]
        constraints: list[str] = []
        exact = True
        for k, extent in enumerate(shape):
            full = f"0 <= _o{k} < {aff_to_isl(extent, {})}"
            if indices is None:
                constraints.append(full)
                continue
            aff = affine_index(indices[k])
            if aff is None:
                constraints.append(full)
                exact = False
                continue
            sub = aff_to_isl(aff, frame.names)
            extra = 0
            if region is not None and k >= len(shape) - 2:
                extra = region[k - (len(shape) - 2)] - 1
            if extra:
                constraints.append(f"{sub} <= _o{k} <= ({sub}) + {extra}")
            else:
                constraints.append(f"_o{k} = {sub}")
        copy = [frame.names[v] for v in self.scoped.get(buffer, ())]  # expanded loop-scoped local
        outs = [f"_c{k}" for k in range(len(copy))] + outs
        constraints += [f"_c{k} = {dim}" for k, dim in enumerate(copy)]
        cond = " and ".join(constraints) if constraints else "true"
        access_shape = (frame.dims, frame.constraints, buffer, tuple(outs), cond)
        unnamed = self._relations.get(access_shape)
        if unnamed is None:
            text = (f"{self.param_text} -> {{ [{', '.join(frame.dims)}] -> "
                    f"{isl_name(buffer)}[{', '.join(outs)}] : {cond} }}")
            unnamed = isl.Map(text, context=self.ctx).intersect_domain(
                self._domains[(frame.dims, frame.constraints)]).coalesce()
            self._relations[access_shape] = unnamed
        relation = unnamed.set_tuple_name(isl.dim_type.in_, isl_name(info.name))
        return Access(info.name, buffer, kind, relation, exact)


def _sequence(parts: list[isl.Schedule]) -> isl.Schedule | None:
    if not parts:
        return None
    result = parts[0]
    for part in parts[1:]:
        result = result.sequence(part)
    return result


def function_of(ir: Function | Module) -> Function:
    """``ir`` itself for a function, the entry (first host) function of a module;
    raises ``TypeError`` for anything else."""
    if isinstance(ir, Function):
        return ir
    if isinstance(ir, Module):
        return ir.entry
    raise TypeError(f"expected polyir IR (a Module or a Function), not {type(ir).__name__}")


def extract(function: Function | Module, ctx: isl.Context | None = None) -> Scop:
    """The :class:`Scop` of ``function`` (a module: its entry function) on the
    isl context ``ctx`` (default: islpy's process-wide one; a compilation
    passes its own, see ``polyir.polyhedral.analysis.Analyses``). Raises
    ``NotPolyhedral`` for barriers, launches and duplicate statement names."""
    return _Extractor(function_of(function), isl.DEFAULT_CONTEXT if ctx is None else ctx).run()
