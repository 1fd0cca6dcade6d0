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

from polyir.ir.nodes import Function
from polyir.polyhedral.codegen import generate
from polyir.polyhedral.dependences import MEMORY_KINDS, Dependences, compute_dependences
from polyir.polyhedral.extract import Scop, extract
from polyir.polyhedral.legality import check_schedule


def schedule_constraints(deps: Dependences, accept_reassociation: bool = False) -> isl.ScheduleConstraints:
    """isl schedule constraints for ``deps`` (see the module docstring)."""
    scop = deps.scop
    validity = deps.union(MEMORY_KINDS, accept_reassociation)
    proximity = deps.union(("flow", "raw"), accept_reassociation)
    return (isl.ScheduleConstraints.on_domain(scop.domain)
            .set_context(scop.context)
            .set_validity(validity)
            .set_proximity(proximity)
            .set_coincidence(validity))


def compute_schedule(target: Scop | Function | Dependences,
                     accept_reassociation: bool = False) -> isl.Schedule:
    """isl's schedule for ``target``; it is checked against the dependences."""
    if isinstance(target, Dependences):
        deps = target
    else:
        deps = compute_dependences(target if isinstance(target, Scop) else extract(target))
    schedule = schedule_constraints(deps, accept_reassociation).compute_schedule()
    check_schedule(deps, schedule, accept_reassociation).require()
    return schedule


def reschedule_function(function: Function, accept_reassociation: bool = False) -> Function:
    """``function`` with its body generated from isl's schedule."""
    scop = extract(function)
    if scop.domain.is_empty():
        return replace(function, body=())
    deps = compute_dependences(scop)
    schedule = compute_schedule(deps, accept_reassociation)
    return replace(function, body=generate(scop, schedule))
