"""New schedules from isl's scheduler (Pluto-style) and their code.

``compute_schedule`` asks isl for a schedule that respects every memory
dependence (validity), keeps producers close to consumers (proximity = flow
and RAW dependences) and prefers outer loops that carry no dependence
(coincidence = the validity dependences), as Pluto does.
``reschedule_function`` regenerates a function's body from it.
"""
from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

import islpy as isl

from polyir.errors import PolyirError
from polyir.ir.nodes import Function
from polyir.polyhedral.codegen import generate
from polyir.polyhedral.dependences import MEMORY_KINDS, Dependences, compute_dependences
from polyir.polyhedral.extract import Scop, extract
from polyir.polyhedral.legality import check_schedule

if TYPE_CHECKING:
    from polyir.polyhedral.analysis import Analyses


class SchedulingError(PolyirError):
    """isl's scheduler found no schedule (it reports e.g. "unable to carry dependences")."""


def schedule_constraints(deps: Dependences, accept_reassociation: bool = False) -> isl.ScheduleConstraints:
    """isl schedule constraints for ``deps`` (see the module docstring)."""
    scop = deps.scop
    validity = deps.union(MEMORY_KINDS, accept_reassociation).coalesce()
    proximity = deps.union(("flow", "raw"), accept_reassociation).coalesce()
    return (isl.ScheduleConstraints.on_domain(scop.domain)
            .set_context(scop.context)
            .set_validity(validity)
            .set_proximity(proximity)
            .set_coincidence(validity))


MAX_OPERATIONS = 200_000
"""Default bound on isl's work for one scheduler call (the classic kernels need
at most 100 000; some random programs would otherwise take minutes)."""


def compute_schedule(target: Scop | Function | Dependences,
                     accept_reassociation: bool = False, wavefront: bool = True,
                     max_operations: int = MAX_OPERATIONS) -> isl.Schedule:
    """isl's schedule for ``target``, with :func:`wavefront_bands` applied
    unless ``wavefront`` is False; it is checked against the dependences.

    isl is asked to maximise coincidence (parallel band members) before
    proximity, so that fusing for locality does not serialise loops that were
    parallel (2mm, gemver). Raises ``SchedulingError`` when isl finds no
    schedule or exceeds ``max_operations`` (isl's operation count; 0 = no bound)."""
    if isinstance(target, Dependences):
        deps = target
    else:
        deps = compute_dependences(target if isinstance(target, Scop) else extract(target))
    ctx = deps.scop.context.get_ctx()
    ctx.reset_operations()
    ctx.set_max_operations(max_operations)
    coincidence = ctx.get_schedule_maximize_coincidence()
    ctx.set_schedule_maximize_coincidence(1)
    try:
        schedule = schedule_constraints(deps, accept_reassociation).compute_schedule()
    except isl.Error as error:
        raise SchedulingError(f"isl's scheduler failed on {deps.scop.function.name}: {error}") from None
    finally:
        ctx.set_max_operations(0)
        ctx.set_schedule_maximize_coincidence(coincidence)
    if wavefront:
        schedule = wavefront_bands(schedule)
    check_schedule(deps, schedule, accept_reassociation).require()
    return schedule


def wavefront_bands(schedule: isl.Schedule) -> isl.Schedule:
    """Skew each permutable band of two or more members with no coincident
    (parallel) member into a wavefront: its first member becomes the sum of
    all members. Every dependence inside such a band has non-negative
    components, so the sum is positive for each one the band carries and the
    remaining members carry none (they become parallel)."""

    def rewrite(node: isl.ScheduleNode) -> isl.ScheduleNode:
        if node.get_type() != isl.schedule_node_type.band:
            return node
        n = node.band_n_member()
        if n < 2 or not node.band_get_permutable() or \
                any(node.band_member_get_coincident(k) for k in range(n)):
            return node
        partial = node.band_get_partial_schedule()
        total = partial.get_at(0)
        for k in range(1, n):
            total = total.add(partial.get_at(k))
        node = node.delete().insert_partial_schedule(partial.set_at(0, total))
        node = node.band_set_permutable(1)
        for k in range(1, n):
            node = node.band_member_set_coincident(k, 1)
        return node

    return schedule.get_root().map_descendant_bottom_up(rewrite).get_schedule()


def reschedule_function(function: Function, accept_reassociation: bool = False,
                        wavefront: bool = True, fallback: bool = True,
                        deps: Dependences | None = None, original: bool = False,
                        analyses: Analyses | None = None) -> Function:
    """``function`` with its body generated from isl's schedule (from its
    original schedule when ``original``).

    ``deps``: the function's dependences when already known; ``analyses``: the
    pipeline's cache, which then also holds the new function's. When isl's
    scheduler finds no schedule (it sometimes reports "unable to carry
    dependences" even though the original order is valid), the body is
    regenerated from the original schedule when ``fallback`` is true, else
    ``SchedulingError`` is raised. Loops that the new code iterates exactly as
    an original loop keep its ``unroll``/``vectorize`` hints, and its
    ``parallel`` mark when the loop is still parallel in the new code."""
    if deps is None:
        deps = compute_dependences(extract(function))
    scop = deps.scop
    if scop.domain.is_empty():
        return replace(function, body=())
    if original:
        schedule = scop.schedule
    else:
        try:
            schedule = compute_schedule(deps, accept_reassociation, wavefront)
        except SchedulingError:
            if not fallback:
                raise
            schedule = scop.schedule
    result = replace(function, body=generate(scop, schedule))
    return keep_parallel_marks(result, accept_reassociation, scop.ctx, analyses)


def keep_parallel_marks(function: Function, accept_reassociation: bool = False,
                        ctx: isl.Context | None = None, analyses: Analyses | None = None) -> Function:
    """``function`` with the ``parallel`` mark removed from every loop that
    carries a dependence (isl codegen copies the marks of the original loops
    it iterates one to one, and a new schedule may have moved a dependence
    onto such a loop). Nothing is analysed when no loop is marked."""
    from polyir.ir.nodes import For
    from polyir.ir.walk import walk_nodes
    if not any(isinstance(n, For) and n.parallel for n in walk_nodes(function.body)):
        return function
    from polyir.polyhedral.extract import map_loops
    deps = analyses.dependences(function) if analyses is not None \
        else compute_dependences(extract(function, ctx))
    carrying = deps.carrying_loops(accept_reassociation)

    if not any(deps.scop.loops[ident].node.parallel for ident in carrying):
        return function

    def rewrite(loop: For, ident: int) -> For:
        return replace(loop, parallel=False) if loop.parallel and ident in carrying else loop

    return replace(function, body=map_loops(function.body, rewrite))
