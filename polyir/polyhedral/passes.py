"""Registered passes of the polyhedral layer.

* ``mark-parallel{accept_reassociation=false}``: sets ``parallel`` on every
  loop that carries no dependence (with ``accept_reassociation``, the
  self-dependences of reductions such as ``C[i] = C[i] + e`` do not count,
  so a reduction loop may be reordered; results then change by rounding).
* ``reschedule{accept_reassociation=false}``: regenerates each host
  function from isl's Pluto-style schedule.

Functions that the polyhedral layer cannot model (barriers, launches) and
GPU kernels are left unchanged; a function for which isl's scheduler finds
no schedule is regenerated from its original schedule.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from polyir.ir.nodes import For, Function, Module
from polyir.passes import register_pass
from polyir.polyhedral.dependences import compute_dependences
from polyir.polyhedral.extract import NotPolyhedral, extract, map_loops
from polyir.polyhedral.schedule import SchedulingError, reschedule_function


def mark_parallel(function: Function, accept_reassociation: bool = False) -> Function:
    """``function`` with ``parallel=True`` on every loop that carries no dependence."""
    deps = compute_dependences(extract(function))
    carrying = deps.carrying_loops(accept_reassociation)

    def rewrite(loop: For, ident: int) -> For:
        if ident in carrying or loop.parallel or loop.mapping is not None:
            return loop
        return replace(loop, parallel=True)

    return replace(function, body=map_loops(function.body, rewrite))


def _each_function(module: Module, change) -> Module:
    functions = []
    for function in module.functions:
        if function.kind != "host":
            functions.append(function)
            continue
        try:
            functions.append(change(function))
        except (NotPolyhedral, SchedulingError):
            functions.append(function)
    return Module(tuple(functions))


@register_pass("mark-parallel")
@dataclass(frozen=True)
class MarkParallel:
    """Mark every loop that carries no dependence as parallel."""

    accept_reassociation: bool = False

    def run(self, module: Module) -> Module:
        return _each_function(module, lambda f: mark_parallel(f, self.accept_reassociation))


@register_pass("reschedule")
@dataclass(frozen=True)
class Reschedule:
    """Regenerate each function from isl's Pluto-style schedule."""

    accept_reassociation: bool = False

    def run(self, module: Module) -> Module:
        return _each_function(module, lambda f: reschedule_function(f, self.accept_reassociation))
