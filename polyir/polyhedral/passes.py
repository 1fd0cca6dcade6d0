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

from collections.abc import Callable
from dataclasses import dataclass, replace

from polyir.context import PassContext
from polyir.ir.nodes import For, Function, Module
from polyir.passes import register_pass
from polyir.polyhedral.dependences import Dependences, compute_dependences
from polyir.polyhedral.extract import NotPolyhedral, extract, map_loops
from polyir.polyhedral.schedule import SchedulingError, reschedule_function


def mark_parallel(function: Function, accept_reassociation: bool = False,
                  deps: Dependences | None = None, loops: tuple[str, ...] = ()) -> Function:
    """``function`` with ``parallel=True`` on every loop that carries no dependence
    (only on the loops named in ``loops`` when given; an unknown name raises
    ``polyir.ir.names.UnknownLoop``). ``deps``: the function's dependences, when
    already known. Returns ``function`` itself when no loop changes."""
    if deps is None:
        deps = compute_dependences(extract(function))
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
    naming the dependence it carries and two instances it would reorder."""

    accept_reassociation: bool = False
    loops: tuple[str, ...] = ()

    def run(self, module: Module, ctx: PassContext) -> Module:
        def change(function: Function) -> Function:
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
            try:
                return reschedule_function(function, self.accept_reassociation, deps=deps,
                                           fallback=False, analyses=ctx.analyses)
            except SchedulingError as error:
                ctx.remark("reschedule", f"function '{function.name}'",
                           f"kept the original schedule: {error}")
                return reschedule_function(function, deps=deps, original=True, analyses=ctx.analyses)
        return each_host_function(module, ctx, "reschedule", change)
