"""Registered passes of the polyhedral layer.

* ``mark-parallel{accept_reassociation=false}``: sets ``parallel`` on every
  loop that carries no dependence (with ``accept_reassociation``, the
  self-dependences of reductions such as ``C[i] = C[i] + e`` do not count,
  so a reduction loop may be reordered; results then change by rounding).
* ``reschedule{accept_reassociation=false}``: regenerates each host
  function from isl's Pluto-style schedule.

Both read the dependences from ``ctx.analyses`` (computed once per function
for the whole pipeline). Functions the polyhedral layer cannot model
(barriers, launches) and GPU kernels are left unchanged, with a remark; a
function for which isl's scheduler finds no schedule is regenerated from its
original schedule, with a remark.
"""
from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from functools import partial

import islpy as isl

from polyir.context import PassContext
from polyir.ir.nodes import For, Function, If, Module
from polyir.ir.walk import walk_nodes
from polyir.passes import register_pass
from polyir.polyhedral.dependences import MEMORY_KINDS, Dependences, compute_dependences
from polyir.polyhedral.extract import NotPolyhedral, Scop, extract, isl_name, map_loops
from polyir.polyhedral.schedule import SchedulingError, reschedule_function


def mark_parallel(function: Function, accept_reassociation: bool = False,
                  deps: Dependences | None = None, loops: tuple[str, ...] = ()) -> Function:
    """``function`` with ``parallel=True`` on every loop that carries no dependence
    (only on the loops named in ``loops`` when given; an unknown name raises
    ``polyir.ir.names.UnknownLoop``). ``deps``: the function's dependences, when
    already known. Returns ``function`` itself when no loop changes."""
    if deps is None:
        deps = compute_dependences(extract(function), MEMORY_KINDS)  # what carrying_loops reads
    carrying = deps.carrying_loops(accept_reassociation)
    wanted = {deps.scop.loop(name).id for name in loops} if loops else None
    changed = False

    def rewrite(loop: For, ident: int) -> For:
        nonlocal changed
        if ident in carrying or loop.parallel or loop.mapping is not None \
                or (wanted is not None and ident not in wanted):
            return loop
        changed = True
        return replace(loop, parallel=True)

    body = map_loops(function.body, rewrite)
    return replace(function, body=body) if changed else function


def outermost_parallel_loops(deps: Dependences, min_trip: int = 2) -> list[int]:
    """Ids of the loops :func:`mark_outermost_parallel` marks: in pre-order, each
    loop that carries no memory dependence and may run at least
    ``min_trip``, with no parallel (or GPU-mapped) loop around or inside it and
    none chosen around it. A parallel loop runs its nested parallel loops
    serially on the CPU, so one loop per nest is what counts: the outermost,
    whose iterations hold the most work per dispatch."""
    carrying = deps.carrying_loops(False)
    return _outermost_free(deps.scop, min_trip, lambda ident: ident in carrying)


def _outermost_free(scop: Scop, min_trip: int, carries: Callable[[int], bool]) -> list[int]:
    """:func:`outermost_parallel_loops` with ``carries(loop id)`` answering
    whether a loop carries a dependence (asked only of the candidates, in
    pre-order)."""
    loops = scop.loops
    taken: set[int] = set()    # parallel already, or holding such a loop
    for ident, info in loops.items():
        if info.node.parallel or info.node.mapping is not None:
            up: int | None = ident
            while up is not None and up not in taken:
                taken.add(up)
                up = loops[up].parent
    chosen: list[int] = []
    blocked = {i for i, info in loops.items()      # a loop inside a chosen or parallel loop
               if info.node.parallel or info.node.mapping is not None}
    for ident in sorted(loops):
        info = loops[ident]
        if info.parent is not None and info.parent in blocked:
            blocked.add(ident)
            continue
        if ident in taken:
            continue
        trip = _constant_trip(info.node)
        if trip is not None and trip < min_trip:
            continue
        if carries(ident):
            continue
        chosen.append(ident)
        blocked.add(ident)
    return chosen


def carries_conflict(scop: Scop, ident: int) -> bool:
    """Does loop ``ident`` of ``scop`` carry a memory dependence? True when two
    instances of statements inside it, in the same iteration of every loop
    around it and in different iterations of it, touch one element and one of
    them writes (a may-write counts). The same answer as
    ``ident in compute_dependences(scop, MEMORY_KINDS).carrying_loops()``
    (every write or read before a write, killed or not, is a memory
    dependence), from one emptiness test instead of isl's dataflow analysis
    of every buffer: the CPU pipeline asks it of a few candidate loops per
    nest (:func:`mark_outermost_parallel`)."""
    position = scop.loops[ident].depth - 1     # of the loop among a statement's dims
    inside = [s for s in scop.statements.values() if ident in s.loops]
    if not inside:
        return False
    space = scop.context.get_space()
    writes = isl.UnionMap.empty(space)
    accesses = isl.UnionMap.empty(space)
    prefix = isl.UnionMap.empty(space)
    for statement in inside:
        outer = ", ".join(statement.dims[:position + 1])
        prefix = prefix.union(isl.UnionMap.from_map(scop.isl_map(
            f"{scop.param_space} -> {{ {isl_name(statement.name)}[{', '.join(statement.dims)}] -> "
            f"[{outer}] }}")))
        for access in statement.accesses:
            relation = isl.UnionMap.from_map(access.relation)
            accesses = accesses.union(relation)
            if access.kind == "write":
                writes = writes.union(relation)
    if writes.is_empty():
        return False
    pairs = writes.apply_range(accesses.reverse())        # S1[i] -> S2[j]: same element
    outer_pairs = pairs.apply_domain(prefix).apply_range(prefix)
    moved = scop.isl_set(f"{scop.param_space} -> {{ [{', '.join(['0'] * position + ['x'])}] : x != 0 }}")
    return not outer_pairs.deltas().intersect(isl.UnionSet.from_set(moved)).is_empty()


def _constant_trip(loop: For) -> int | None:
    """The trip count of ``loop`` when its bounds are constants."""
    if not all(b.is_constant for b in loop.lower + loop.upper):
        return None
    low = max(b.constant for b in loop.lower)
    high = min(b.constant for b in loop.upper)
    return max(0, -(-(high - low) // loop.step))


def mark_outermost_parallel(function: Function, min_trip: int = 2) -> Function:
    """``function`` with ``parallel=True`` on the loops
    :func:`outermost_parallel_loops` picks (the CPU backend's one loop per
    nest on the thread team). Each top-level loop nest is analysed alone (a
    loop's carried dependences are between instances inside it), and only
    when it has no parallel loop and some loop that may run ``min_trip``
    times: many small problems instead of one over the whole function.
    Returns ``function`` itself when nothing changes."""
    body: list = []
    changed = False
    for node in function.body:
        if not isinstance(node, For) or not _worth_analysing(node, min_trip):
            body.append(node)
            continue
        scop = extract(replace(function, body=(node,)))
        chosen = set(_outermost_free(scop, min_trip, partial(carries_conflict, scop)))
        if chosen:
            changed = True
            node = map_loops((node,), _marker(chosen))[0]
        body.append(node)
    return replace(function, body=tuple(body)) if changed else function


def _marker(chosen: set[int]) -> Callable[[For, int], For]:
    """A ``map_loops`` rewrite marking the loops whose ids are in ``chosen``."""
    def mark(loop: For, ident: int) -> For:
        return replace(loop, parallel=True) if ident in chosen else loop
    return mark


def _worth_analysing(nest: For, min_trip: int) -> bool:
    """Some loop of ``nest`` has no parallel or GPU-mapped loop around or
    inside it and a trip count that is not a constant below ``min_trip`` (a
    candidate of :func:`outermost_parallel_loops`: the packing of a matrix
    product's panel beside its parallel row blocks, say)."""
    def busy(loop: For) -> bool:
        return loop.parallel or loop.mapping is not None

    def free(nodes: tuple, around_busy: bool) -> bool:
        for node in nodes:
            if isinstance(node, If):
                if free(node.then_body + node.else_body, around_busy):
                    return True
            elif isinstance(node, For):
                if around_busy or busy(node):
                    continue          # everything inside is taken too
                inside = [n for n in walk_nodes(node.body) if isinstance(n, For)]
                trip = _constant_trip(node)
                if not any(busy(n) for n in inside) and (trip is None or trip >= min_trip):
                    return True
                if free(node.body, False):
                    return True
        return False

    return free((nest,), False)


def each_host_function(module: Module, ctx: PassContext, pass_name: str,
                       change: Callable[[Function], Function]) -> Module:
    """``module`` with ``change`` applied to every host function; a function the
    polyhedral layer cannot model is kept, with a remark naming why."""
    functions = []
    for function in module.functions:
        if function.kind != "host":
            functions.append(function)
            continue
        try:
            functions.append(change(function))
        except NotPolyhedral as error:
            ctx.remark(pass_name, f"function '{function.name}'", f"not transformed: {error}")
            functions.append(function)
    if all(a is b for a, b in zip(functions, module.functions, strict=True)):
        return module  # unchanged: later passes reuse its analyses
    return Module(tuple(functions))


@register_pass("mark-parallel")
@dataclass(frozen=True)
class MarkParallel:
    """Mark every loop that carries no dependence as parallel (``loops``: only
    these loops, named by variable); a loop left sequential gets a remark
    naming the dependence it carries and two instances it would reorder.
    ``outermost``: only the outermost such loop of each nest that has no
    parallel loop yet, skipping loops of a constant trip count below
    ``min_trip`` (:func:`mark_outermost_parallel`; what the CPU pipeline runs
    on more than one core, after ``auto-tile``), without remarks."""

    accept_reassociation: bool = False
    loops: tuple[str, ...] = ()
    outermost: bool = False
    min_trip: int = 2

    def run(self, module: Module, ctx: PassContext) -> Module:
        def change(function: Function) -> Function:
            if self.outermost:
                return mark_outermost_parallel(function, self.min_trip)
            deps = ctx.analyses.dependences(function)
            result = mark_parallel(function, self.accept_reassociation, deps, self.loops)
            _remark_sequential(ctx, function, deps, self.accept_reassociation, self.loops)
            return result
        return each_host_function(module, ctx, "mark-parallel", change)


def _remark_sequential(ctx: PassContext, function: Function, deps: Dependences,
                       accept_reassociation: bool, loops: tuple[str, ...] = ()) -> None:
    """One remark per loop left sequential: the first dependence it carries."""
    from polyir.polyhedral.legality import check_parallel
    carrying = deps.carrying_loops(accept_reassociation)
    for ident in sorted(carrying):
        info = deps.scop.loops[ident]
        if info.node.parallel or info.node.mapping is not None or (loops and info.var not in loops):
            continue
        answer = check_parallel(deps, ident, accept_reassociation)
        why = answer.reason + (f"; witness: {answer.witness}" if answer.witness else "")
        ctx.remark("mark-parallel", f"function '{function.name}', loop '{info.var}'",
                   f"stays sequential: {why}")


@register_pass("reschedule")
@dataclass(frozen=True)
class Reschedule:
    """Regenerate each function from isl's Pluto-style schedule."""

    accept_reassociation: bool = False

    def run(self, module: Module, ctx: PassContext) -> Module:
        def change(function: Function) -> Function:
            deps = ctx.analyses.dependences(function)
            where = f"function '{function.name}'"
            try:
                result = reschedule_function(function, self.accept_reassociation, deps=deps,
                                             fallback=False, analyses=ctx.analyses)
            except SchedulingError as error:
                ctx.remark("reschedule", where, f"kept the original schedule: {error}")
                return reschedule_function(function, deps=deps, original=True, analyses=ctx.analyses)
            new_deps = ctx.analyses.dependences(result)
            before = parallel_degrees(deps.scop, _uncarried(deps, self.accept_reassociation))
            after = statement_degrees(parallel_degrees(new_deps.scop,
                                                       _uncarried(new_deps, self.accept_reassociation)),
                                      before)
            lost = sorted(s for s in before if after.get(s, 0) < before[s])
            if lost:
                ctx.remark("reschedule", where,
                           f"kept the original schedule: isl's schedule leaves fewer parallel loops "
                           f"around {', '.join(f'{s} ({before[s]} -> {after.get(s, 0)})' for s in lost)}")
                return reschedule_function(function, deps=deps, original=True, analyses=ctx.analyses)
            return result
        return each_host_function(module, ctx, "reschedule", change)


def _uncarried(deps: Dependences, accept_reassociation: bool) -> set[int]:
    carrying = deps.carrying_loops(accept_reassociation)
    return {ident for ident in deps.scop.loops if ident not in carrying}


def parallel_degrees(scop: Scop, parallel_loops: Iterable[int]) -> dict[str, int]:
    """Statement name -> its degree of parallelism: the dimension of its
    instances projected onto the enclosing loops in ``parallel_loops`` (ids), so
    a loop that runs one iteration for it (``i == 0``) does not count and one
    that isl's code generation removed is not missed. A copy that isl codegen
    made of a statement (``S0_1``, absent from ``original_names``) counts as the
    statement; a statement gets the smallest degree of its copies."""
    chosen = set(parallel_loops)
    found: dict[str, int] = {}
    for name, stmt in scop.statements.items():
        keep = [k for k, loop in enumerate(stmt.loops) if loop in chosen]
        domain = stmt.domain
        for k in reversed(range(len(stmt.loops))):
            if k not in keep:
                domain = domain.project_out(isl.dim_type.set, k, 1)
        hull = domain.affine_hull()
        fixed = sum(1 for c in hull.get_constraints() if c.is_equality()
                    and any(not c.get_coefficient_val(isl.dim_type.set, k).is_zero()
                            for k in range(len(keep))))
        found[name] = len(keep) - fixed
    return found


def statement_degrees(degrees: dict[str, int], originals: Iterable[str]) -> dict[str, int]:
    """``degrees`` with codegen copies (``S0_1``) folded into their statement (the minimum)."""
    names = set(originals)
    folded: dict[str, int] = {}
    for name, degree in degrees.items():
        base = name if name in names else re.sub(r"_\d+$", "", name)
        folded[base] = min(folded.get(base, degree), degree)
    return folded
