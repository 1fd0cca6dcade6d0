"""Split a host function into kernels: one per top-level loop nest, canonically named.

The CPU backend compiles each kernel as its own LLVM module (so the optimiser
never sees a whole model at once, and its cost stays linear in the number of
nests) and an entry function that allocates the shared locals and calls the
kernels in order (``polyir.cpu.entry``).

:func:`split_function` groups the top-level nodes of a function: every
top-level ``For`` or ``If`` starts a new group unless the current group holds
none yet, so scalar statements before or after a nest travel with it. Each
group becomes a :class:`Kernel`: a ``Function`` whose parameters are the
buffers the group uses (in order of first use), then every size symbol it
needs as an explicit ``Symbol``; a local used by this group only becomes the
kernel's own local (zero-filled at each call, as it was for the whole
function); a local used by several groups is allocated by the entry and passed
in.

Kernels are *canonical*: buffers are renamed ``b0, b1, ...``, symbols ``n0,
n1, ...``, loop variables ``v0, v1, ...`` and statements ``S0, S1, ...``, all
in order of first appearance, and the function is named ``kernel``. Two nests
that differ only in names (the layers of a stack of identical layers) have
the same canonical text, hence the same :attr:`Kernel.key`; the backend
compiles that text once and calls it for both.
"""
from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from polyir.ir.affine import Aff, Constraint, FloorDiv, Mod
from polyir.ir.nodes import (
    Assign,
    BinOp,
    Buffer,
    Call,
    Cast,
    Compare,
    Const,
    Expr,
    For,
    Function,
    If,
    Index,
    Load,
    Node,
    Select,
    Symbol,
    Var,
)
from polyir.ir.printer import print_function
from polyir.ir.types import DType
from polyir.ir.walk import buffers_used, walk_nodes


@dataclass(frozen=True)
class Kernel:
    """A canonical kernel and how one call site binds it.

    ``function``: the canonical ``Function`` (parameters ``b0..`` then
    ``n0..``); ``text``: its printed form; ``key``: a hash of ``text``;
    ``buffers``: the caller's buffer passed for each buffer parameter;
    ``symbols``: the caller's symbol passed for each ``Symbol`` parameter.
    """

    function: Function
    text: str
    key: str
    buffers: tuple[str, ...]
    symbols: tuple[str, ...]


@dataclass(frozen=True)
class SplitFunction:
    """``function`` as kernels called in order; ``shared_locals`` are the locals
    the entry allocates (used by more than one kernel)."""

    function: Function
    kernels: tuple[Kernel, ...]
    shared_locals: tuple[Buffer, ...]

    def entry_text(self) -> str:
        """What the entry function depends on, as text (its cache key): the
        signature, the shared locals, and each call's kernel and arguments
        (which determine the function, hence also which locals the entry
        clears: :func:`reads_initial`)."""
        header = print_function(replace(self.function, body=(), locals=self.shared_locals))
        calls = [f"call {k.key}({', '.join(k.buffers)}; {', '.join(k.symbols)})" for k in self.kernels]
        return header + "\n".join(calls)

    @property
    def distinct(self) -> dict[str, Kernel]:
        """One kernel per key, in order of first call."""
        found: dict[str, Kernel] = {}
        for kernel in self.kernels:
            found.setdefault(kernel.key, kernel)
        return found


def splittable(function: Function) -> bool:
    """Whether every node is an ``Assign``, ``For`` or ``If`` (what the CPU runs;
    anything else is left whole, for the lowering to refuse with its own error)."""
    return all(isinstance(node, (Assign, For, If)) for node in walk_nodes(function.body))


def group_nodes(body: Sequence[Node]) -> list[tuple[Node, ...]]:
    """The top-level nodes in groups: a ``For``/``If`` starts a new group
    unless the group so far has none."""
    groups: list[list[Node]] = []
    has_nest = False
    for node in body:
        nest = isinstance(node, (For, If))
        if not groups or (nest and has_nest):
            groups.append([])
            has_nest = False
        groups[-1].append(node)
        has_nest = has_nest or nest
    return [tuple(group) for group in groups]


def split_function(function: Function) -> SplitFunction:
    """``function`` as canonical kernels (see the module docstring)."""
    groups = group_nodes(function.body)
    local_names = {buffer.name for buffer in function.locals}
    users: dict[str, int] = {}
    used_by_group = [buffers_used(group) for group in groups]
    for used in used_by_group:
        for name in used & local_names:
            users[name] = users.get(name, 0) + 1
    shared = tuple(b for b in function.locals if users.get(b.name, 0) > 1)
    private = {b.name for b in function.locals if users.get(b.name, 0) == 1}
    buffers = function.buffers
    kernels = tuple(_canonical_kernel(group, buffers, private) for group in groups)
    return SplitFunction(function, kernels, shared)


INITIAL_READS_OPERATIONS = 50_000_000
"""isl operations :func:`reads_initial` may take (past them: every local is cleared)."""

_SINK = "initial_reads_sink"


def reads_initial(function: Function, names: Sequence[str]) -> frozenset[str]:
    """The locals of ``names`` that some read may see unwritten, starting with
    the zeros a fresh local holds; the others need no clearing. A local is
    safe when the first top-level node that touches it does not read it and
    writes every element any statement reads (isl: the images of the access
    relations over their domains, not a dataflow analysis): every read then
    comes later and finds its element written. First each first node is
    analysed alone: a local it writes in full is safe whatever reads it later
    (every intermediate of a model; ResNet-18's analysis: 0.37 s of one
    extraction of every node before). The others are analysed with every node
    that touches them. The statements are cut down to their accesses of the
    locals, so one extraction serves them all. When the analysis cannot say
    (a data-dependent subscript, a construct without a polyhedral model, more
    than :data:`INITIAL_READS_OPERATIONS` isl operations), every local asked
    about is in. Clearing ResNet-18's 35 MB of intermediates cost about 1.5%
    of a call, MobileNetV2's 5%."""
    from polyir.ir.walk import buffer_accesses

    wanted = set(names)
    if not wanted or _SINK in function.buffers:
        return frozenset(wanted)
    first: dict[str, int] = {}
    for index, node in enumerate(function.body):
        reads, writes = buffer_accesses((node,))
        for name in sorted((reads | writes) & wanted):
            if name not in first:
                first[name] = index
                if name in reads:   # read by its first node: the full analysis says
                    first[name] = -1
    rest = wanted - _written_whole(function, {name: k for name, k in first.items() if k >= 0})
    return frozenset(_reads_before_writes(function, rest)) if rest else frozenset()


def _analysed(function: Function, wanted: set[str], nodes: Sequence[Node]) -> Any:
    """The scop of ``nodes`` cut down to their accesses of ``wanted`` (reads
    that are not of ``wanted`` dropped; a statement that only reads them
    writes a scalar sink), on a context limited to
    :data:`INITIAL_READS_OPERATIONS` operations."""
    import islpy as isl

    from polyir.ir.walk import buffer_accesses, loads, node_accesses, node_exprs
    from polyir.polyhedral.extract import extract
    from polyir.transforms._util import prune_leaves

    def reduced(node: Node) -> Node | None:
        if not isinstance(node, Assign):
            return None
        reads, writes = node_accesses(node)
        if not (reads | writes) & wanted:
            return None
        kept: list[Expr] = [ld for e in node_exprs(node) for ld in loads(e) if ld.buffer in wanted]
        value: Expr = Const(0.0, DType.F32) if not kept else kept[0] if len(kept) == 1 \
            else Call("max", tuple(kept))
        if node.buffer in wanted:
            return replace(node, value=value)
        return replace(node, buffer=_SINK, indices=(), value=value)

    body: list[Node] = []
    for node in nodes:
        reads, writes = buffer_accesses((node,))
        if (reads | writes) & wanted:
            body.extend(prune_leaves((node,), lambda leaf: reduced(leaf) is not None))
    body = [_map_leaves(node, reduced) for node in body]
    sink = Buffer(_SINK, DType.F32, ())
    ctx = isl.Context()
    ctx.set_max_operations(INITIAL_READS_OPERATIONS)
    return extract(replace(function, body=tuple(body), locals=function.locals + (sink,)), ctx)


def _written_whole(function: Function, first: dict[str, int]) -> set[str]:
    """The locals of ``first`` (local -> the first top-level node that touches
    it, which does not read it) that their first node writes in full, every
    element of their shape, exactly (no gather). Each node is analysed alone,
    for the locals it comes first for."""
    import islpy as isl

    from polyir.polyhedral.extract import NotPolyhedral, aff_to_isl, isl_name

    whole: set[str] = set()
    buffers = function.buffers
    for index in sorted(set(first.values())):
        wanted = {name for name, k in first.items() if k == index}
        try:
            scop = _analysed(function, wanted, [function.body[index]])
            for name in sorted(wanted):
                writes = [(st, a) for st in scop for a in st.accesses if a.buffer == name]
                if not writes or any(not a.exact or a.kind != "write" for _, a in writes):
                    continue
                shape = buffers[name].shape
                dims = ", ".join(f"_o{k}" for k in range(len(shape)))
                bounds = " and ".join(f"0 <= _o{k} < {aff_to_isl(extent, {})}"
                                      for k, extent in enumerate(shape)) or "true"
                full = scop.isl_set(f"{scop.param_space} -> {{ {isl_name(name)}[{dims}] : {bounds} }}")
                if full.intersect_params(scop.context).is_subset(_images(writes)):
                    whole.add(name)
        except (isl.Error, NotPolyhedral):
            continue
    return whole


def _reads_before_writes(function: Function, wanted: set[str]) -> set[str]:
    """:func:`reads_initial`'s full analysis of ``wanted``: every node that touches them."""
    import islpy as isl

    from polyir.polyhedral.extract import NotPolyhedral

    try:
        scop = _analysed(function, wanted, function.body)
        found: set[str] = set()
        for name in wanted:
            accesses = [(s, a) for s in scop for a in s.accesses if a.buffer == name]
            read = [(s, a) for s, a in accesses if a.kind == "read"]
            if not read:
                continue
            if any(not a.exact for _, a in accesses):
                found.add(name)
                continue
            first = min(s.nest for s, _ in accesses)
            if any(s.nest == first for s, _ in read):
                found.add(name)
                continue
            written = _images([(s, a) for s, a in accesses if s.nest == first and a.kind == "write"])
            if written is None or not _images(read).is_subset(written):
                found.add(name)
        return found
    except (isl.Error, NotPolyhedral):
        return set(wanted)


def _images(accesses: Sequence[tuple[Any, Any]]) -> Any:
    """The union of the elements the accesses touch over their statements' domains."""
    result = None
    for statement, access in accesses:
        image = access.relation.intersect_domain(statement.domain).range()
        result = image if result is None else result.union(image)
    return result


def _map_leaves(node: Node, change: Any) -> Node:
    if isinstance(node, For):
        return replace(node, body=tuple(_map_leaves(n, change) for n in node.body))
    if isinstance(node, If):
        return replace(node, then_body=tuple(_map_leaves(n, change) for n in node.then_body),
                       else_body=tuple(_map_leaves(n, change) for n in node.else_body))
    return change(node)


def kernel_key(text: str) -> str:
    """The hash that names a kernel text (also its LLVM symbol)."""
    return hashlib.sha256(text.encode()).hexdigest()[:24]


# ---------------------------------------------------------------- renaming
class _Canonicaliser:
    """Renames one group's buffers, symbols, loop variables and statements in
    order of first appearance."""

    def __init__(self, buffers: dict[str, Buffer], private: set[str]):
        self.buffers = buffers
        self.private = private
        self.buffer_names: dict[str, str] = {}
        self.scoped: set[str] = set()   # loop-scoped locals (``For.locals``): declared in place
        self.symbol_names: dict[str, str] = {}
        self.loops = 0
        self.statements = 0

    # -- names ---------------------------------------------------------
    def buffer(self, name: str) -> str:
        new = self.buffer_names.get(name)
        if new is None:
            new = f"b{len(self.buffer_names)}"
            self.buffer_names[name] = new
            for dim in self.buffers[name].shape:  # shape symbols in order of use too
                self.aff(dim, {})
        return new

    def variable(self, name: str, scope: dict[str, str]) -> str:
        bound = scope.get(name)
        if bound is not None:
            return bound
        new = self.symbol_names.get(name)
        if new is None:
            new = f"n{len(self.symbol_names)}"
            self.symbol_names[name] = new
        return new

    # -- affine ----------------------------------------------------------
    def aff(self, aff: Aff, scope: dict[str, str]) -> Aff:
        names = [atom for atom, _ in aff.terms if isinstance(atom, str)]
        if len(names) == len(aff.terms):   # no // or %: the names change, nothing else
            mapping = {name: self.variable(name, scope) for name in names}
            return aff._renamed(mapping) if mapping else aff
        result = Aff.const(aff.constant)
        for atom, coeff in aff.terms:
            if isinstance(atom, str):
                result = result + Aff.var(self.variable(atom, scope)) * coeff
            elif isinstance(atom, FloorDiv):
                result = result + (self.aff(atom.expr, scope) // atom.divisor) * coeff
            else:
                assert isinstance(atom, Mod)
                result = result + (self.aff(atom.expr, scope) % atom.divisor) * coeff
        return result

    def constraint(self, c: Constraint, scope: dict[str, str]) -> Constraint:
        return Constraint(self.aff(c.lhs, scope), c.op, self.aff(c.rhs, scope))

    # -- expressions -------------------------------------------------------
    def index(self, index: Index, scope: dict[str, str]) -> Index:
        return self.aff(index, scope) if isinstance(index, Aff) else self.expr(index, scope)

    def expr(self, expr: Expr, scope: dict[str, str]) -> Expr:
        if isinstance(expr, Const):
            return expr
        if isinstance(expr, Var):
            return Var(self.variable(expr.name, scope))
        if isinstance(expr, Load):
            name = self.buffer(expr.buffer)
            return Load(name, tuple(self.index(i, scope) for i in expr.indices))
        if isinstance(expr, BinOp):
            return BinOp(expr.op, self.expr(expr.lhs, scope), self.expr(expr.rhs, scope))
        if isinstance(expr, Compare):
            return Compare(expr.op, self.expr(expr.lhs, scope), self.expr(expr.rhs, scope))
        if isinstance(expr, Call):
            return Call(expr.fn, tuple(self.expr(a, scope) for a in expr.args))
        if isinstance(expr, Select):
            return Select(self.expr(expr.cond, scope), self.expr(expr.if_true, scope),
                          self.expr(expr.if_false, scope))
        assert isinstance(expr, Cast)
        return Cast(expr.dtype, self.expr(expr.value, scope))

    # -- nodes ---------------------------------------------------------------
    def nodes(self, nodes: Sequence[Node], scope: dict[str, str]) -> tuple[Node, ...]:
        return tuple(self.node(node, scope) for node in nodes)

    def node(self, node: Node, scope: dict[str, str]) -> Node:
        if isinstance(node, Assign):
            value = self.expr(node.value, scope)  # loads first: the order they are read
            indices = tuple(self.index(i, scope) for i in node.indices)
            name = f"S{self.statements}"
            self.statements += 1
            return replace(node, name=name, buffer=self.buffer(node.buffer), indices=indices,
                           value=value, loc=None)
        if isinstance(node, For):
            lower = tuple(self.aff(a, scope) for a in node.lower)
            upper = tuple(self.aff(a, scope) for a in node.upper)
            var = f"v{self.loops}"
            self.loops += 1
            extra: dict[str, Any] = {}
            loop_locals = getattr(node, "locals", ())
            if loop_locals:  # loop-scoped buffers are renamed where they are declared
                for buffer in loop_locals:
                    self.scoped.add(buffer.name)
                    self.buffer(buffer.name)
                extra["locals"] = tuple(self.renamed_buffer(b.name) for b in loop_locals)
            body = self.nodes(node.body, {**scope, node.var: var})
            return replace(node, var=var, lower=lower, upper=upper, body=body, loc=None, **extra)
        assert isinstance(node, If)
        conditions = tuple(self.constraint(c, scope) for c in node.conditions)
        return replace(node, conditions=conditions, then_body=self.nodes(node.then_body, scope),
                       else_body=self.nodes(node.else_body, scope), loc=None)

    def renamed_buffer(self, name: str) -> Buffer:
        buffer = self.buffers[name]
        shape = tuple(self.aff(dim, {}) for dim in buffer.shape)
        return replace(buffer, name=self.buffer_names[name], shape=shape, loc=None)


def _canonical_kernel(group: tuple[Node, ...], buffers: dict[str, Buffer],
                      private: set[str]) -> Kernel:
    canon = _Canonicaliser(buffers, private)
    body = canon.nodes(group, {})
    order = [name for name in canon.buffer_names if name not in canon.scoped]
    params: list[Buffer | Symbol] = [canon.renamed_buffer(n) for n in order if n not in private]
    locals_ = tuple(canon.renamed_buffer(n) for n in order if n in private)
    symbols = list(canon.symbol_names)
    params += [Symbol(canon.symbol_names[s]) for s in symbols]
    function = Function("kernel", tuple(params), body, locals_)
    text = print_function(function)
    return Kernel(function, text, kernel_key(text),
                  tuple(n for n in order if n not in private), tuple(symbols))
