"""Hoisting a copy out of the loops that do not move it (mechanism).

``hoist_copy(function, local="B_jr", loop="i")`` takes a copy that ``copies``
or ``pack`` made (a loop-scoped local ``B_jr`` of loop ``jr``, filled at the
start of each iteration of ``jr`` by one copy nest ``B_jr[...] = B[...]``)
and makes it once, before loop ``i`` (``i`` encloses ``jr``, or is ``jr``),
instead of once per iteration of every loop between::

    for i ... {                          local B_jr: f32[kt, 4, 64, 64]   # one block per (kt, jr)
      for kt ... {                       for kt_h ... {                     # the kept loops, replayed
        for jr = kt to ... step 64 {       for jr_h = kt_h to ... step 64 {
          local B_jr: f32[64, 64]            <copy nest into block (kt_h, jr_h)>
          <copy nest>               ->   for i ... { for kt ... { for jr ... {
          ... B_jr[k, j - jr] ...              ... B_jr[kt // 256, (jr - kt) // 64, k, j - jr] ...

The loops from ``loop`` down to the copy's loop split in two. *Kept* loops are
the ones the copy's start depends on: the loops whose variables appear in the
copy nest's lower bounds or in its index origin, and the loops their lower
bounds use in turn. They are replayed before ``loop`` (same lower bound and
step; upper bounds without the terms that use other loops of the chain, so
they iterate a superset), and the local gets one block per iteration of them
(block index ``(v - lower) // step``, most significant first). The other
loops, ``loop`` among them, are *projected*: the block of kept values ``d``
holds the union over them of what the copy held (isl: the copy statement's
footprint with their dimensions projected out, its box planned as ``copies``
plans one), so a causal key range (``min(i + 1, jr + 64)``) still gets one
block per key tile.

**Why it is exact.** (1) The source buffer is not written anywhere inside
``loop`` and the hoisted copy runs just before it, so it copies the values
every original copy saw. (2) The original copy wrote every element of the
local that its iteration reads (isl: the local's reads below the copy's loop
are a subset of its writes there, per iteration), and no node before the
copy nest in that loop touches the local, so each redirected read took its
value from its own iteration's copy: that element lies in the iteration's
footprint, hence in the union box of its kept values, at the same place
relative to the block's origin. (3) Kept values map to distinct blocks (the
block index is injective along a loop of fixed lower bound and step), every
iteration that ran originally is replayed (only upper bounds are relaxed),
and the copy loops are clipped to the source's and the block's bounds, so
the extra iterations of a relaxed bound copy harmless in-bounds elements.
(4) Nothing else writes the local. The statements and their order are
otherwise unchanged. When ``loop`` or a loop around it is ``parallel`` the
hoisted copy is still exact: it is made before ``loop`` and only read inside.

Refused (``UnsupportedNest``): a local that is not loop-scoped, written other
than by one copy nest at the start of its loop (a written buffer's copy-back,
a blocked layout), a copy not of the form ``L[x_p - c] = S[x]`` over its own
loops; ``loop`` not around the copy's loop; the source written inside
``loop`` or declared inside it; a kept loop with several lower bounds or no
upper bound left after the relaxation; ``loop`` itself kept (the copy's start
moves with it); reads of the local the copy does not cover; symbolic block
counts isl cannot bound.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import islpy as isl

from polyir.ir.affine import Aff
from polyir.ir.names import claim_name, find_loop, names_in
from polyir.ir.nodes import Assign, Buffer, For, Function, If, Index, Load, Node
from polyir.ir.types import MemorySpace
from polyir.ir.walk import walk_nodes
from polyir.polyhedral.extract import Scop, aff_to_isl, affine_index, extract
from polyir.polyhedral.footprint import Footprint, bounding_box, loop_footprints, statement_footprints
from polyir.tiling.bands import UnsupportedNest, nest_function, nest_of, replace_node
from polyir.tiling.copies import (
    _accesses,
    _declaring_loop,
    _rewrite,
    _symbolic_max,
    _without_expansion,
    plan_dimensions,
)
from polyir.tiling.split import enclosing_vars


@dataclass(frozen=True)
class CopyNest:
    """A copy nest ``for x_p(0) ... for x_p(r-1) { L[x_p(j) - origin_j] = S[x] }``:
    the node, its statement, the source, the copy loops by source dimension and
    ``perm[j]``, the source dimension of the local's dimension ``j``, with its
    origin ``origin[j]`` (an affine expression of the loops around)."""

    node: Node
    statement: Assign
    source: str
    loops: tuple[For, ...]
    perm: tuple[int, ...]
    origin: tuple[Aff, ...]


@dataclass(frozen=True)
class HoistPlan:
    """What :func:`hoist_copy` did: the local's loop, the kept and projected
    loops (outermost first) and the local's new shape (the block counts of the
    kept loops, then the copied box)."""

    at: str
    kept: tuple[str, ...]
    projected: tuple[str, ...]
    shape: tuple[Aff, ...]


def find_copy(function: Function, local: str) -> tuple[For, CopyNest]:
    """The loop declaring ``local`` and its copy nest; ``UnsupportedNest`` when
    ``local`` is not a loop-scoped local filled by one copy nest at the start
    of that loop and written nowhere else."""
    at = _declaring_loop(function, local)
    if at is None:
        raise UnsupportedNest(f"'{local}' is not a loop-scoped local")
    writers = [n for n in walk_nodes(function.body) if isinstance(n, Assign) and n.buffer == local]
    if len(writers) != 1:
        raise UnsupportedNest(f"'{local}' is written by {len(writers)} statements, not one copy")
    statement = writers[0]
    for position, node in enumerate(at.body):
        loops: list[For] = []
        inner: Node = node
        while isinstance(inner, For) and len(inner.body) == 1:
            loops.append(inner)
            inner = inner.body[0]
        if inner is not statement:
            continue
        _, touched_before, written_before = _accesses(at.body[:position], local)
        if touched_before or written_before:
            raise UnsupportedNest(f"'{local}' is read before its copy in loop '{at.var}'")
        return at, _copy_nest(node, statement, tuple(loops), local)
    raise UnsupportedNest(f"the copy into '{local}' is not a nest of its own at the top of loop "
                          f"'{at.var}'")


def _copy_nest(node: Node, statement: Assign, loops: tuple[For, ...], local: str) -> CopyNest:
    value = statement.value
    variables = [loop.var for loop in loops]
    if not isinstance(value, Load) or len(value.indices) != len(loops) \
            or len(statement.indices) != len(loops) or any(loop.step != 1 for loop in loops):
        raise UnsupportedNest(f"'{local}' is not filled by a plain copy over its own loops")
    source_vars: list[str] = []
    for index in value.indices:
        if not (isinstance(index, Aff) and len(index.variables()) == 1
                and index == Aff.var(next(iter(index.variables())))):
            raise UnsupportedNest(f"the copy into '{local}' reads a subscript that is not a copy loop")
        source_vars.append(next(iter(index.variables())))
    if sorted(source_vars) != sorted(variables):
        raise UnsupportedNest(f"the copy into '{local}' does not read one element per iteration")
    perm: list[int] = []
    origin: list[Aff] = []
    for index in statement.indices:
        if not isinstance(index, Aff):
            raise UnsupportedNest(f"the copy into '{local}' writes a non-affine subscript")
        used = [v for v in index.variables() if v in variables]
        if len(used) != 1 or index.coefficient(used[0]) != 1:
            raise UnsupportedNest(f"the copy into '{local}' is not a shifted permutation")
        perm.append(source_vars.index(used[0]))
        origin.append(Aff.var(used[0]) - index)
    if sorted(perm) != list(range(len(perm))):
        raise UnsupportedNest(f"the copy into '{local}' is not a permutation of the source's dimensions")
    by_dimension = tuple(loops[variables.index(v)] for v in source_vars)
    return CopyNest(node, statement, value.buffer, by_dimension, tuple(perm), tuple(origin))


def _chain(function: Function, at: For, loop: str) -> list[For]:
    """The loops from ``loop`` down to ``at`` (inclusive), outermost first."""
    names = enclosing_vars(function, at) + [at.var]
    if loop not in names:
        raise UnsupportedNest(f"loop '{loop}' does not enclose the copy's loop '{at.var}'")
    return [find_loop(function, v) for v in names[names.index(loop):]]


def kept_loops(chain: Sequence[For], copy: CopyNest) -> list[For]:
    """The loops of ``chain`` that the copy's start depends on (see the module
    docstring), outermost first."""
    chain_vars = {c.var for c in chain}
    used: set[str] = set()
    for aff in copy.origin:
        used |= set(aff.variables())
    for copy_loop in copy.loops:
        for bound in copy_loop.lower:
            used |= set(bound.variables())
    kept = used & chain_vars
    grown = True
    while grown:
        grown = False
        for c in chain:
            if c.var in kept:
                more = {v for b in c.lower for v in b.variables()} & chain_vars - kept
                if more:
                    kept |= more
                    grown = True
    return [c for c in chain if c.var in kept]


def hoist_copy(function: Function, local: str, loop: str) -> tuple[Function, HoistPlan]:
    """``function`` with the copy filling loop-scoped ``local`` made once before
    loop ``loop`` (see the module docstring), and what was done. Raises
    ``UnknownLoop`` and ``UnsupportedNest``."""
    at, copy = find_copy(function, local)
    chain = _chain(function, at, loop)
    hoisted = chain[0]
    source = function.buffers[copy.source]
    owner = _declaring_loop(function, copy.source)
    if owner is not None and any(n is owner for n in walk_nodes((hoisted,))):
        raise UnsupportedNest(f"'{copy.source}' is a local declared inside loop '{loop}'")
    _, _, written = _accesses(hoisted.body, copy.source)
    if written:
        raise UnsupportedNest(f"'{copy.source}' is written inside loop '{loop}': a copy made "
                              f"before it could go stale")
    kept = kept_loops(chain, copy)
    if any(k.var == hoisted.var for k in kept):
        raise UnsupportedNest(f"the copy into '{local}' starts where loop '{loop}' says: it moves "
                              f"with it")
    kept_vars = [k.var for k in kept]
    projected = [c.var for c in chain if c.var not in kept_vars]
    outside = enclosing_vars(function, hoisted)
    visible = set(outside) | set(kept_vars) | set(function.symbols)
    for k in kept:
        if len(k.lower) != 1:
            raise UnsupportedNest(f"kept loop '{k.var}' has several lower bounds")
    uppers = [tuple(u for u in k.upper if u.variables() <= visible) for k in kept]
    for k, upper in zip(kept, uppers, strict=True):
        if not upper:
            raise UnsupportedNest(f"kept loop '{k.var}' has no upper bound without loops "
                                  f"'{', '.join(projected)}'")

    scop = extract(nest_function(function, nest_of(function, at)))
    _require_covered(scop, at, local, function.buffers[local].rank)
    footprint = statement_footprints(scop, [copy.statement.name], at.var)[copy.source]
    footprint = _project(scop, footprint, set(projected))
    outer_names = {v: f"o{k}" for k, v in enumerate(footprint.outer)}
    lowers, uppers_x, bases, extents = plan_dimensions(scop, footprint, source.shape, outer_names)
    counts = _block_counts(scop, footprint, outside, kept, uppers)

    taken = names_in(function)
    new_vars = {k.var: claim_name(f"{k.var}_h", taken) for k in kept}
    renamed = {v: Aff.var(name) for v, name in new_vars.items()}
    blocks = [(Aff.var(k.var) - k.lower[0]) // k.step for k in kept]
    shape = tuple(counts) + tuple(extents[d] for d in copy.perm)
    new_local = Buffer(local, source.dtype, shape, MemorySpace.LOCAL)

    # the reads: L[y] -> L[blocks, y_j + origin_j - base'_p(j)]
    def index_of(indices: tuple[Index, ...]) -> tuple[Index, ...]:
        affs = [affine_index(i) for i in indices]
        moved: list[Index] = []
        for j, d in enumerate(copy.perm):
            aff = affs[j]
            if aff is None:
                raise UnsupportedNest(f"'{local}' is read with a non-affine subscript")
            moved.append(aff + copy.origin[j] - bases[d])
        return tuple(blocks) + tuple(moved)

    body = tuple(n for n in at.body if n is not copy.node)
    new_at = replace(at, locals=tuple(b for b in at.locals if b.name != local),
                     body=_rewrite(body, local, local, index_of))
    function = replace_node(function, at, (new_at,))

    # the hoisted nest: the kept loops replayed around the clipped copy loops
    rank = source.rank
    variables = [claim_name(f"{local}_h{d}", taken) for d in range(rank)]
    element = [Aff.var(v) for v in variables]
    block_index = [b.substitute(renamed) for b in blocks]
    statement = Assign(copy.statement.name, local,
                       tuple(block_index) + tuple(element[d] - bases[d].substitute(renamed)
                                                  for d in copy.perm),
                       Load(copy.source, tuple(element)))
    nest: Node = statement
    for d in reversed(copy.perm):
        low = tuple(b.substitute(renamed) for b in _with(lowers[d], Aff.const(0)))
        high = _with(_with(uppers_x[d], source.shape[d]), bases[d] + extents[d])
        nest = For(variables[d], low, tuple(b.substitute(renamed) for b in high), (nest,))
    for k, upper in zip(reversed(kept), reversed(uppers), strict=True):
        nest = For(new_vars[k.var],
                   tuple(b.substitute(renamed) for b in k.lower),
                   tuple(b.substitute(renamed) for b in upper), (nest,), step=k.step)
    hoisted = find_loop(function, loop)
    function = replace_node(function, hoisted, (nest, hoisted))
    function = _declare(function, nest, new_local)
    plan = HoistPlan(at.var, tuple(kept_vars), tuple(projected), shape)
    return function, plan


def _with(bounds: tuple[Aff, ...], extra: Aff) -> tuple[Aff, ...]:
    return bounds if extra in bounds else bounds + (extra,)


def _declare(function: Function, node: Node, buffer: Buffer) -> Function:
    """``function`` with ``buffer`` declared on the innermost loop around ``node``
    (at function level when none)."""
    around = _loops_around(function, node)
    if not around:
        return replace(function, locals=function.locals + (buffer,))
    owner = around[-1]
    return replace_node(function, owner, (replace(owner, locals=owner.locals + (buffer,)),))


def _loops_around(function: Function, target: Node) -> list[For]:
    """The loops around ``target`` (by identity), outermost first."""
    path: list[For] = []

    def visit(nodes: Sequence[Node], chain: list[For]) -> bool:
        for node in nodes:
            if node is target:
                path.extend(chain)
                return True
            if isinstance(node, For) and visit(node.body, chain + [node]):
                return True
            if isinstance(node, If) and (visit(node.then_body, chain) or visit(node.else_body, chain)):
                return True
        return False

    visit(function.body, [])
    return path


def _require_covered(scop: Scop, at: For, local: str, rank: int) -> None:
    """Refuse unless every element of ``local`` read below an iteration of ``at``
    is written there (by its copy)."""
    footprint = _without_expansion(loop_footprints(scop, at.var)[local], rank)
    if not footprint.reads.is_subset(footprint.writes):
        raise UnsupportedNest(f"some reads of '{local}' in loop '{at.var}' are not of elements its "
                              f"copy wrote")


def _project(scop: Scop, footprint: Footprint, projected: set[str]) -> Footprint:
    """``footprint`` as a function of its outer loops except ``projected`` (the
    union over those)."""
    relation = footprint.relation
    for k in reversed(range(len(footprint.outer))):
        if footprint.outer[k] in projected:
            relation = relation.project_out(isl.dim_type.in_, k, 1)
    outer = tuple(v for v in footprint.outer if v not in projected)
    for k in range(len(outer)):
        relation = relation.set_dim_name(isl.dim_type.in_, k, f"o{k}")
    empty = isl.Map.empty(relation.get_space())
    return Footprint(footprint.buffer, outer, relation, relation, empty,
                     bounding_box(scop, relation, outer))


def _block_counts(scop: Scop, footprint: Footprint, outside: Sequence[str], kept: Sequence[For],
                  uppers: Sequence[tuple[Aff, ...]]) -> list[Aff]:
    """Per kept loop, a bound on its block index plus one over the replayed
    (relaxed) iterations, for the outer values that reach the copy."""
    names = {v: f"o{k}" for k, v in enumerate(list(outside) + [k.var for k in kept])}
    dims = ", ".join(names.values())
    constraints: list[str] = []
    exists: list[str] = []
    for position, k in enumerate(kept):
        v, low = names[k.var], aff_to_isl(k.lower[0], names)
        constraints.append(f"{v} >= {low}")
        constraints += [f"{v} < {aff_to_isl(u, names)}" for u in uppers[position]]
        if k.step != 1:
            exists.append(f"e{position}")
            constraints.append(f"{v} = {low} + {k.step} * e{position}")
    body = " and ".join(constraints) or "true"
    if exists:
        body = f"exists ({', '.join(exists)} : {body})"
    replayed = scop.isl_set(f"{scop.param_space} -> {{ [{dims}] : {body} }}")
    # the outer loops' values that reach the copy
    reached = footprint.relation.domain()
    reached = reached.project_out(isl.dim_type.set, len(outside),
                                  reached.dim(isl.dim_type.set) - len(outside))
    reached = reached.reset_tuple_id().add_dims(isl.dim_type.set, len(kept))
    replayed = replayed.intersect(reached)
    counts: list[Aff] = []
    for k in kept:
        v, low = names[k.var], aff_to_isl(k.lower[0], names)
        value = scop.isl_map(f"{scop.param_space} -> {{ [{dims}] -> [e] : "
                             f"e = floor(({v} - ({low})) / {k.step}) + 1 }}")
        count = _symbolic_max(scop, replayed.apply(value))
        if count is None:
            raise UnsupportedNest(f"cannot bound the iterations of kept loop '{k.var}'")
        counts.append(count if not count.is_constant else Aff.const(max(1, count.constant)))
    return counts


__all__ = ["hoist_copy", "find_copy", "kept_loops", "HoistPlan", "CopyNest"]
