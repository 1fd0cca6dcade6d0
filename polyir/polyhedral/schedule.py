"""New schedules from isl's scheduler (Pluto-style) and their code.

``compute_schedule`` asks isl for a schedule that respects every memory
dependence (validity), keeps producers close to consumers (proximity = flow
and RAW dependences) and prefers outer loops that carry no dependence
(coincidence = the validity dependences), as Pluto does.
``reschedule_function`` regenerates a function's body from it.
"""
from __future__ import annotations

from dataclasses import replace

import islpy as isl

from polyir.errors import PolyirError
from polyir.ir.nodes import Function
from polyir.polyhedral.codegen import generate
from polyir.polyhedral.dependences import MEMORY_KINDS, Dependences, compute_dependences
from polyir.polyhedral.extract import Scop, extract
from polyir.polyhedral.legality import check_schedule


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

    Raises ``SchedulingError`` when isl finds no schedule or exceeds
    ``max_operations`` (isl's operation count; 0 = no bound)."""
    if isinstance(target, Dependences):
        deps = target
    else:
        deps = compute_dependences(target if isinstance(target, Scop) else extract(target))
    ctx = deps.scop.context.get_ctx()
    ctx.reset_operations()
    ctx.set_max_operations(max_operations)
    try:
        schedule = schedule_constraints(deps, accept_reassociation).compute_schedule()
    except isl.Error as error:
        raise SchedulingError(f"isl's scheduler failed on {deps.scop.function.name}: {error}") from None
    finally:
        ctx.set_max_operations(0)
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
                        wavefront: bool = True, fallback: bool = True) -> Function:
    """``function`` with its body generated from isl's schedule.

    When isl's scheduler finds no schedule (it sometimes reports "unable to
    carry dependences" even though the original order is valid), the body is
    regenerated from the original schedule when ``fallback`` is true, else
    ``SchedulingError`` is raised."""
    scop = extract(function)
    if scop.domain.is_empty():
        return replace(function, body=())
    deps = compute_dependences(scop)
    try:
        schedule = compute_schedule(deps, accept_reassociation, wavefront)
    except SchedulingError:
        if not fallback:
            raise
        schedule = scop.schedule
    return replace(function, body=generate(scop, schedule))
