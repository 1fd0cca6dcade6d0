"""Scratchpad copies and packing (mechanism): a tile's footprint in a local buffer.

``copy_buffer(function, at="kc", buffer="B")`` gives loop ``kc`` a loop-scoped
local ``B_kc`` holding the elements of ``B`` that one iteration of ``kc``
touches (its footprint, from isl: ``polyir.polyhedral.footprint``), copies
them in at the start of each iteration, redirects every access to ``B``
inside the loop to the copy, and (for written data) copies the written
elements back at the end::

    for kc ... {
      local B_kc: f32[256, 64] @local
      for B_kc_0 = kc to min(K, kc + 256) {                    # copy in
        for B_kc_1 = jc to min(N, jc + 64) {
          B_kc_in: B_kc[B_kc_0 - kc, B_kc_1 - jc] = B[B_kc_0, B_kc_1]
      ...  B[k, j]  becomes  B_kc[k - kc, j - jc]  ...

The copy is indexed relative to the footprint's lower corner; its shape is
the largest extent over all iterations (constants for constant tile sizes,
else symbolic; a dimension whose bounds isl cannot give as loop bounds is
copied whole).

**Layouts.** ``order`` permutes the copy's dimensions (a transposed panel);
``blocks=W`` (a loop inside ``at``) lays the copy out block by block, one
contiguous block per iteration of ``W`` (``B_kc[(jr - jc) // 32, k - kc, j - jr]``):
the packed panels of BLIS, read by the micro-kernel with unit stride whatever
the leading dimension of the original. A read-only block may repeat elements
another block holds (each block is a copy of its own footprint).

**Why it is exact.** Inside one iteration of ``at`` every access to the
buffer goes through the copy (all subscripts must be affine), the copy holds
the footprint's values at the start of the iteration, and the copy-back
writes exactly the elements written (refused when those do not fill the
copied box: writing back elements nobody wrote could race with another
iteration; a read buffer copies the whole box in first, so when no loop
around is parallel the elements of the box nobody wrote go back unchanged,
and a box that is not filled (a triangular tile) is accepted). The copy is
private to each iteration of ``at`` and of the
loops around it (``For.locals``). The statements' order is unchanged, which
``check_rewrite`` (ignoring the copy statements) confirms.

Refused (``UnsupportedNest``): gathers on the buffer inside ``at``, buffers
declared on loops, non-``Assign`` statements touching the buffer, blocked
layouts of written buffers, blocks whose footprint depends on loops between
``at`` and ``W``.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import islpy as isl

from polyir.ir.affine import Aff
from polyir.ir.names import claim_name, find_loop, names_in
from polyir.ir.nodes import (
    Assign,
    BinOp,
    Buffer,
    Call,
    Cast,
    Compare,
    Expr,
    For,
    Function,
    If,
    Index,
    Load,
    Node,
    Select,
)
from polyir.ir.types import MemorySpace
from polyir.ir.walk import STATEMENT_NODES, subtree_names, walk_nodes
from polyir.polyhedral.dependences import MEMORY_KINDS, Dependences, compute_dependences
from polyir.polyhedral.extract import Scop, aff_to_isl, affine_index, extract, isl_name
from polyir.polyhedral.footprint import Bound, Footprint, bounding_box, isl_aff_to_aff, loop_footprints
from polyir.polyhedral.legality import check_rewrite
from polyir.tiling.bands import (
    UnsupportedNest,
    band_path,
    band_scope,
    nest_function,
    nest_of,
    replace_node,
)
from polyir.tiling.split import enclosing_vars


@dataclass(frozen=True)
class CopyPlan:
    """How one buffer is copied: per dimension, the loop bounds of the copied
    box (lower max-list, upper min-list, exclusive), the index origin and
    the largest extent; the block index and count when blocked."""

    lower: tuple[tuple[Aff, ...], ...]
    upper: tuple[tuple[Aff, ...], ...]
    base: tuple[Aff, ...]
    extent: tuple[Aff, ...]
    order: tuple[int, ...]
    block_loop: For | None = None
    block_index: Aff | None = None
    blocks: Aff | None = None


# ------------------------------------------------------------------ isl helpers
def _symbolic_max(scop: Scop, values: isl.Set) -> Aff | None:
    """An affine expression of the symbols that is >= every value of the
    one-dimensional parametric set ``values``; ``None`` when isl gives none."""
    if values.is_empty():
        return Aff.const(0)
    values = values.intersect_params(scop.context)
    top = values.dim_max(0)
    pieces: list[isl.Aff] = []
    top.foreach_piece(lambda _set, aff: pieces.append(aff))
    names = {isl_name(p): p for p in scop.params}
    candidates = [isl_aff_to_aff(a, names) for a in pieces]
    if all(c.is_constant for c in candidates):
        return Aff.const(max(c.constant for c in candidates))
    # constants first (a constant shape stays on the stack), smallest first
    candidates.sort(key=lambda c: (not c.is_constant, c.constant if c.is_constant else 0))
    for candidate in candidates:
        text = aff_to_isl(candidate, {})
        bound = scop.isl_set(f"{scop.param_space} -> {{ [e] : e <= {text} }}")
        if values.is_subset(bound):
            return candidate
    return None


def _relation_values(scop: Scop, relation: isl.Map, outer: Sequence[str], rank: int,
                     expr: str) -> isl.Set:
    """``{ expr(o, x) : (o -> x) in relation }``: ``expr`` is isl text over the
    outer dims ``o<k>`` (named in ``outer``'s order) and element dims ``x<d>``."""
    plain = relation.reset_tuple_id(isl.dim_type.in_).reset_tuple_id(isl.dim_type.out)
    o = ", ".join(f"o{k}" for k in range(len(outer)))
    x = ", ".join(f"x{d}" for d in range(rank))
    value = scop.isl_map(f"{scop.param_space} -> {{ [[{o}] -> [{x}]] -> [e] : e = {expr} }}")
    return plain.wrap().apply(value)


def _bound_lists(bound: Bound, side: str) -> tuple[Aff, ...] | None:
    """A box bound as a loop bound list (max-list below, min-list above), or None."""
    if not bound.exact:
        return None
    if bound.kind == "aff" or (bound.kind == "max" and side == "lower") \
            or (bound.kind == "min" and side == "upper"):
        return bound.exprs
    return None


def plan_dimensions(scop: Scop, footprint: Footprint, shape: Sequence[Aff],
                    outer_names: dict[str, str]) -> tuple[list[tuple[Aff, ...]], list[tuple[Aff, ...]],
                                                          list[Aff], list[Aff]]:
    """Per dimension of ``footprint``'s box: copy-loop lower and upper lists,
    index origin and largest extent (symbols only)."""
    lowers: list[tuple[Aff, ...]] = []
    uppers: list[tuple[Aff, ...]] = []
    bases: list[Aff] = []
    extents: list[Aff] = []
    for d, (lo, hi) in enumerate(footprint.box):
        planned = _plan_dimension(scop, footprint, d, lo, hi, shape[d], outer_names)
        if planned is None:  # copied whole
            planned = (Aff.const(0),), (shape[d] - 1,), Aff.const(0), shape[d]
        low, high, base, extent = planned
        lowers.append(low)
        uppers.append(tuple(h + 1 for h in high))
        bases.append(base)
        extents.append(extent if not extent.is_constant else Aff.const(max(1, extent.constant)))
    return lowers, uppers, bases, extents


def _plan_dimension(scop: Scop, footprint: Footprint, d: int, lo: Bound, hi: Bound, size: Aff,
                    outer_names: dict[str, str]
                    ) -> tuple[tuple[Aff, ...], tuple[Aff, ...], Aff, Aff] | None:
    """Dimension ``d``'s copy-loop lower list, upper list (inclusive), origin and
    largest extent; ``None`` when no bounds are found (the dimension is copied whole).

    A piecewise side that no min/max list states takes one of its pieces that holds
    everywhere (a partial last tile makes isl give ``i + 5`` a piece of its own,
    ``31``), else the min/max list of the footprint without the strides around
    (:func:`_unstrided_side`); an upper list is kept only if the copy loops it
    bounds stay within the local's extent."""
    rank = len(footprint.box)
    low = _bound_lists(lo, "lower")
    if low is None:
        low = (_one_side(scop, footprint, d, lo, "lower", size, outer_names)
               or _unstrided_side(scop, footprint, d, "lower", size, outer_names))
    if low is None:
        return None
    # the origin: the lower bound using the most loop variables (a tile's corner);
    # the copy loops start at the max of ``low``, never below it
    base = max(low, key=lambda e: len([v for v in e.variables() if v in outer_names]))
    expr = f"x{d} - ({aff_to_isl(base, outer_names)}) + 1"
    extent = _symbolic_max(scop, _relation_values(scop, footprint.relation, footprint.outer,
                                                  rank, expr))
    if extent is None:
        return None
    high = _bound_lists(hi, "upper")
    if high is not None:
        return low, high, base, extent
    for guessed in (_one_side(scop, footprint, d, hi, "upper", size, outer_names),
                    _unstrided_side(scop, footprint, d, "upper", size, outer_names)):
        if guessed is not None and _within_extent(scop, footprint, guessed, base, extent,
                                                  outer_names):
            return low, guessed, base, extent
    return None


def _one_side(scop: Scop, footprint: Footprint, d: int, bound: Bound, side: str, extent: Aff,
              outer_names: dict[str, str]) -> tuple[Aff, ...] | None:
    """A loop bound list for dimension ``d`` when ``bound`` is a piecewise side that
    no single min/max list states: the first of its pieces that bounds every element
    of the footprint (``x_d >= e`` below, ``x_d <= e`` above), with the buffer's own
    bound (``0`` below, ``extent - 1`` above); ``None`` when no piece does."""
    rank = len(footprint.box)
    for expr in bound.exprs:
        text = aff_to_isl(expr, outer_names)
        gap = f"({text}) - x{d}" if side == "lower" else f"x{d} - ({text})"
        if _all_at_most_zero(scop, footprint, rank, gap):
            own = Aff.const(0) if side == "lower" else extent - 1
            return (expr,) if own == expr else (expr, own)
    return None


def _unstrided_side(scop: Scop, footprint: Footprint, d: int, side: str, extent: Aff,
                    outer_names: dict[str, str]) -> tuple[Aff, ...] | None:
    """A loop bound list for dimension ``d`` from the footprint with the strides of the
    loops around dropped (isl's existential variables), or ``None``.

    Below a strided loop isl states a side by cases of the loop variable's value and
    may write each case in other variables: chunks of 160 keys in a tile of 256 give
    the upper side ``r_tile + 159`` where ``r_chunk = r_tile`` and ``r_tile + 255``
    where ``r_chunk = r_tile + 160``, although ``min(r_tile + 255, r_chunk + 159)``
    holds everywhere. Without the strides the cases become that min-list. Each of its
    expressions is checked to bound every element of the real footprint; the buffer's
    own bound (``0`` below, ``extent - 1`` above) joins the list, so that a list looser
    than the real footprint never copies past the buffer."""
    relaxed = footprint.relation.remove_divs()
    lower, upper = bounding_box(scop, relaxed, footprint.outer)[d]
    bound = lower if side == "lower" else upper
    exprs = _bound_lists(bound, side)
    if exprs is None:
        return None
    rank = len(footprint.box)
    for expr in exprs:
        text = aff_to_isl(expr, outer_names)
        gap = f"({text}) - x{d}" if side == "lower" else f"x{d} - ({text})"
        if not _all_at_most_zero(scop, footprint, rank, gap):
            return None
    own = Aff.const(0) if side == "lower" else extent - 1
    return exprs if own in exprs else exprs + (own,)


def _within_extent(scop: Scop, footprint: Footprint, upper: tuple[Aff, ...], base: Aff,
                   extent: Aff, outer_names: dict[str, str]) -> bool:
    """Whether copy loops from ``base`` to ``min(upper)`` (inclusive) stay within
    ``extent`` elements at every iteration of the loops around that reaches the
    footprint (some expression of ``upper`` is at most ``base + extent - 1``)."""
    o = ", ".join(outer_names[v] for v in footprint.outer)
    start = aff_to_isl(base, outer_names)
    size = aff_to_isl(extent, outer_names)
    beyond = " and ".join(f"({aff_to_isl(e, outer_names)}) - ({start}) + 1 > {size}" for e in upper)
    over = scop.isl_set(f"{scop.param_space} -> {{ [{o}] : {beyond} }}")
    reached = footprint.relation.domain().reset_tuple_id()
    return bool(over.intersect(reached).intersect_params(scop.context).is_empty())


def _all_at_most_zero(scop: Scop, footprint: Footprint, rank: int, expr: str) -> bool:
    """Whether isl expression ``expr`` (over ``o<k>`` and ``x<d>``) is at most 0 for
    every pair of ``footprint``'s relation, under the function's assumptions."""
    values = _relation_values(scop, footprint.relation, footprint.outer, rank, expr)
    values = values.intersect_params(scop.context)
    return values.is_subset(scop.isl_set(f"{scop.param_space} -> {{ [e] : e <= 0 }}"))

# ------------------------------------------------------------------ rewriting
def _rewrite_expr(expr: Expr, buffer: str, local: str, index_of) -> Expr:
    if isinstance(expr, Load):
        inner = tuple(i if isinstance(i, Aff) else _rewrite_expr(i, buffer, local, index_of)
                      for i in expr.indices)
        if expr.buffer == buffer:
            return Load(local, index_of(inner))
        return Load(expr.buffer, inner)
    if isinstance(expr, BinOp):
        return BinOp(expr.op, _rewrite_expr(expr.lhs, buffer, local, index_of),
                     _rewrite_expr(expr.rhs, buffer, local, index_of))
    if isinstance(expr, Compare):
        return Compare(expr.op, _rewrite_expr(expr.lhs, buffer, local, index_of),
                       _rewrite_expr(expr.rhs, buffer, local, index_of))
    if isinstance(expr, Call):
        return Call(expr.fn, tuple(_rewrite_expr(a, buffer, local, index_of) for a in expr.args))
    if isinstance(expr, Select):
        return Select(_rewrite_expr(expr.cond, buffer, local, index_of),
                      _rewrite_expr(expr.if_true, buffer, local, index_of),
                      _rewrite_expr(expr.if_false, buffer, local, index_of))
    if isinstance(expr, Cast):
        return Cast(expr.dtype, _rewrite_expr(expr.value, buffer, local, index_of))
    return expr


def _rewrite(nodes: tuple[Node, ...], buffer: str, local: str, index_of) -> tuple[Node, ...]:
    out: list[Node] = []
    for node in nodes:
        if isinstance(node, For):
            node = replace(node, body=_rewrite(node.body, buffer, local, index_of))
        elif isinstance(node, If):
            node = replace(node, then_body=_rewrite(node.then_body, buffer, local, index_of),
                           else_body=_rewrite(node.else_body, buffer, local, index_of))
        elif isinstance(node, Assign):
            indices = tuple(i if isinstance(i, Aff) else _rewrite_expr(i, buffer, local, index_of)
                            for i in node.indices)
            target, value = node.buffer, _rewrite_expr(node.value, buffer, local, index_of)
            if target == buffer:
                target, indices = local, index_of(indices)
            node = replace(node, buffer=target, indices=indices, value=value)
        out.append(node)
    return tuple(out)


def _accesses(nodes: Sequence[Node], buffer: str) -> tuple[list[tuple[Index, ...]], bool, bool]:
    """Subscripts of every access to ``buffer`` under ``nodes``; whether it is read; written."""
    from polyir.polyhedral.extract import expr_loads
    found: list[tuple[Index, ...]] = []
    read = written = False
    for node in walk_nodes(nodes):
        if not isinstance(node, STATEMENT_NODES):
            continue
        if not isinstance(node, Assign):
            from polyir.ir.walk import node_accesses
            if buffer in set().union(*node_accesses(node)):
                raise UnsupportedNest(f"statement {node.name} accesses '{buffer}' as a fragment")
            continue
        loads = list(expr_loads(node.value))
        for index in node.indices:
            if not isinstance(index, Aff):
                loads.extend(expr_loads(index))
        for load in loads:
            if load.buffer == buffer:
                found.append(load.indices)
                read = True
        if node.buffer == buffer:
            found.append(node.indices)
            written = True
    return found, read, written


# ------------------------------------------------------------------ the mechanism
def _declaring_loop(function: Function, buffer: str) -> For | None:
    """The loop whose locals hold ``buffer``, or ``None`` for a function-level buffer."""
    holding = [node for node in function.body if buffer in subtree_names(node).locals]
    for node in walk_nodes(holding):
        if isinstance(node, For) and any(b.name == buffer for b in node.locals):
            return node
    return None


def _without_expansion(footprint: Footprint, rank: int) -> Footprint:
    """A loop-scoped local's footprint without the leading dimensions the
    polyhedral model expands it along (its loops' variables, fixed below a
    loop they enclose)."""
    extra = footprint.relation.dim(isl.dim_type.out) - rank
    if extra <= 0:
        return footprint

    def drop(relation: isl.Map) -> isl.Map:
        return relation.project_out(isl.dim_type.out, 0, extra)
    return Footprint(footprint.buffer, footprint.outer, drop(footprint.relation),
                     drop(footprint.reads), drop(footprint.writes), lambda: footprint.box[extra:])


def copy_buffer(function: Function, at: str, buffer: str, blocks: str | None = None,
                order: Sequence[int] = (), name: str | None = None,
                deps: Dependences | None = None, check: bool = True
                ) -> tuple[Function, tuple[str, ...]]:
    """``function`` with ``buffer``'s footprint below loop ``at`` copied into a
    loop-scoped local of ``at`` (named ``name``, default ``<buffer>_<at>``),
    every access inside redirected to it; also the names of the copy
    statements. ``blocks``: a loop inside ``at`` whose iterations get one
    contiguous block each; ``order``: a permutation of the copied dimensions.

    Raises ``UnknownLoop`` and ``UnsupportedNest`` (see the module docstring)."""
    scope = find_loop(function, at)
    buffers = function.buffers
    if buffer not in buffers:
        raise UnsupportedNest(f"function '{function.name}' has no buffer '{buffer}'")
    source = buffers[buffer]
    owner = _declaring_loop(function, buffer)
    if owner is not None and not (owner is scope or any(n is scope for n in walk_nodes(owner.body))):
        raise UnsupportedNest(f"'{buffer}' is a local of loop '{owner.var}', which does not enclose "
                              f"loop '{at}'")
    subscripts, read, written = _accesses(scope.body, buffer)
    if not subscripts:
        raise UnsupportedNest(f"loop '{at}' does not access '{buffer}'")
    for indices in subscripts:
        if any(affine_index(i) is None for i in indices):
            raise UnsupportedNest(f"'{buffer}' is accessed with a non-affine subscript inside loop "
                                  f"'{at}'")
    rank = source.rank
    if order and sorted(order) != list(range(rank)):
        raise UnsupportedNest(f"order {list(order)} is not a permutation of the {rank} dimensions "
                              f"of '{buffer}'")
    order = tuple(order) or tuple(range(rank))
    index = nest_of(function, scope)
    # the footprints need only the statements inside ``at`` and the loops around it;
    # the check needs the whole nest's dependences
    scop = extract(nest_function(function, index) if check
                   else band_scope(function, band_path(function, scope)))

    outer_vars = enclosing_vars(function, scope) + [scope.var]
    bound_here = set(outer_vars) | set(function.symbols)
    block_loop: For | None = None
    if blocks is not None:
        if written:
            raise UnsupportedNest(f"'{buffer}' is written inside loop '{at}': a blocked layout "
                                  f"would need disjoint blocks")
        block_loop = find_loop(function, blocks)
        if not any(n is block_loop for n in walk_nodes(scope.body)):
            raise UnsupportedNest(f"loop '{blocks}' is not inside loop '{at}'")
        inside, _, _ = _accesses(block_loop.body, buffer)
        if len(inside) != len(subscripts):
            raise UnsupportedNest(f"some accesses to '{buffer}' inside '{at}' are not inside "
                                  f"'{blocks}'")
        if len(block_loop.lower) != 1 or not block_loop.lower[0].variables() <= bound_here:
            raise UnsupportedNest(f"loop '{blocks}' needs one lower bound fixed in an iteration of "
                                  f"'{at}'")
        footprint = loop_footprints(scop, blocks)[buffer]
        between = set(enclosing_vars(function, block_loop)) - bound_here
        for lo, hi in footprint.box:
            for b in (lo, hi):
                used = {v for e in b.exprs for v in e.variables()} & between
                if used:
                    raise UnsupportedNest(f"the footprint of '{buffer}' below '{blocks}' depends on "
                                          f"loop(s) {', '.join(sorted(used))} between '{at}' and "
                                          f"'{blocks}'")
    else:
        footprint = loop_footprints(scop, at)[buffer]
    footprint = _without_expansion(footprint, rank)
    outer_names = {v: f"o{k}" for k, v in enumerate(footprint.outer)}
    lowers, uppers, bases, extents = plan_dimensions(scop, footprint, source.shape, outer_names)

    taken = names_in(function)
    local_name = name or claim_name(f"{buffer}_{at}", taken)
    if name is not None:
        if name in taken:
            raise UnsupportedNest(f"name '{name}' is already used in function '{function.name}'")
        taken.add(name)
    shape = [extents[d] for d in order]
    block_index: Aff | None = None
    if block_loop is not None:
        start = block_loop.lower[0]
        block_index = (Aff.var(block_loop.var) - start) // block_loop.step
        k = footprint.outer.index(block_loop.var)
        count = _symbolic_max(scop, _relation_values(
            scop, footprint.relation, footprint.outer, rank,
            f"floor((o{k} - ({aff_to_isl(start, outer_names)}))/{block_loop.step}) + 1"))
        if count is None:
            raise UnsupportedNest(f"cannot bound the number of iterations of loop '{blocks}'")
        shape = [count] + shape
    local = Buffer(local_name, source.dtype, tuple(shape), MemorySpace.LOCAL)

    def index_of(indices: tuple[Index, ...]) -> tuple[Index, ...]:
        affs = [affine_index(i) for i in indices]
        relative = [affs[d] - bases[d] for d in range(rank)]  # type: ignore[operator]
        picked = [relative[d] for d in order]
        return tuple([block_index] + picked) if block_index is not None else tuple(picked)

    body = _rewrite(scope.body, buffer, local_name, index_of)
    copy_names: list[str] = []
    prologue: list[Node] = []
    epilogue: list[Node] = []
    if read:
        copy_in = claim_name(f"{local_name}_in", taken)
        prologue.append(_copy_nest(local_name, buffer, lowers, uppers, bases, order, block_loop,
                                   block_index, copy_in, True, taken))
        copy_names.append(copy_in)
    if written:
        if not (read and _serial_around(function, scope)):
            _require_written_box(scop, footprint, lowers, uppers, outer_names, buffer, at)
        copy_out = claim_name(f"{local_name}_out", taken)
        epilogue.append(_copy_nest(local_name, buffer, lowers, uppers, bases, order, None, None,
                                   copy_out, False, taken))
        copy_names.append(copy_out)
    new_scope = replace(scope, locals=scope.locals + (local,),
                        body=tuple(prologue) + body + tuple(epilogue))
    result = replace_node(function, scope, (new_scope,))
    if check:
        deps = deps if deps is not None else compute_dependences(scop, MEMORY_KINDS)
        check_rewrite(deps, nest_function(result, index), what=f"copying '{buffer}' at '{at}'",
                      ignore=copy_names).require()
    return result, tuple(copy_names)


def _copy_nest(local: str, buffer: str, lowers: list[tuple[Aff, ...]], uppers: list[tuple[Aff, ...]],
               bases: list[Aff], order: tuple[int, ...], block_loop: For | None,
               block_index: Aff | None, statement: str, copy_in: bool, taken: set[str]) -> Node:
    """The loops copying the box into the local (``copy_in``) or back."""
    rank = len(lowers)
    variables = [claim_name(f"{local}_{d}", taken) for d in range(rank)]
    env: dict[str, Aff] = {}
    block_var: str | None = None
    if block_loop is not None:
        block_var = claim_name(f"{local}_b", taken)
        env[block_loop.var] = Aff.var(block_var)
    element = tuple(Aff.var(v) for v in variables)
    relative = [element[d] - bases[d].substitute(env) for d in range(rank)]
    picked = tuple(relative[d] for d in order)
    local_index: tuple[Index, ...] = picked
    if block_index is not None:
        local_index = (block_index.substitute(env),) + picked
    if copy_in:
        stmt: Node = Assign(statement, local, local_index, Load(buffer, element))
    else:
        stmt = Assign(statement, buffer, element, Load(local, local_index))
    # the block loop outermost (each block written whole), then the source's
    # dimensions in order (rows read contiguously)
    nest: Node = stmt
    for d in reversed(range(rank)):
        nest = For(variables[d], tuple(b.substitute(env) for b in lowers[d]),
                   tuple(b.substitute(env) for b in uppers[d]), (nest,))
    if block_loop is not None and block_var is not None:
        nest = For(block_var, block_loop.lower, block_loop.upper, (nest,), step=block_loop.step)
    return nest


def _serial_around(function: Function, scope: For) -> bool:
    """Neither ``scope`` nor a loop around it is ``parallel``: no other iteration
    runs while one iteration of ``scope`` holds its copy."""
    return not scope.parallel and not any(find_loop(function, v).parallel
                                          for v in enclosing_vars(function, scope))


def _require_written_box(scop: Scop, footprint: Footprint, lowers: list[tuple[Aff, ...]],
                         uppers: list[tuple[Aff, ...]], outer_names: dict[str, str], buffer: str,
                         at: str) -> None:
    """Refuse a copy-back unless the elements written are exactly the copied box."""
    o = ", ".join(outer_names[v] for v in footprint.outer)
    x = ", ".join(f"x{d}" for d in range(len(lowers)))
    cons: list[str] = []
    for d, (low, up) in enumerate(zip(lowers, uppers, strict=True)):
        cons += [f"x{d} >= {aff_to_isl(b, outer_names)}" for b in low]
        cons += [f"x{d} < {aff_to_isl(b, outer_names)}" for b in up]
    box = scop.isl_map(f"{scop.param_space} -> {{ [{o}] -> [{x}] : {' and '.join(cons) or 'true'} }}")
    writes = footprint.writes.reset_tuple_id(isl.dim_type.in_).reset_tuple_id(isl.dim_type.out)
    box = box.intersect_domain(writes.domain())
    if not box.is_equal(writes):
        raise UnsupportedNest(f"the elements of '{buffer}' written below loop '{at}' do not fill a "
                              f"box: copying the box back could overwrite elements nobody wrote")


__all__ = ["copy_buffer", "CopyPlan", "plan_dimensions"]
