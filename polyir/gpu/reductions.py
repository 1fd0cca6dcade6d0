"""Parallel loops whose iterations reduce into shared elements stay serial on the GPU.

``mark-parallel{accept_reassociation=true}`` marks a loop parallel although
reduction statements in it (``X[f] = X[f] + e``) update the same elements from
different iterations. The CPU backend privatises such reductions
(``polyir.cpu.reductions``); the GPU mapping has no privatisation or atomics,
so mapping that loop to threads would race and lose updates. Before mapping,
:func:`serialise_shared_reductions` clears ``parallel`` on every such loop and
says so. A loop shares reduction elements when the self-dependence of a
reduction statement (isl, exact) is carried by it; for IR the polyhedral
extraction refuses, the CPU's syntactic test
(:func:`polyir.cpu.reductions.privatised_reductions`) decides.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from polyir.cpu.reductions import privatised_reductions
from polyir.ir.nodes import Assign, Buffer, For, Function, Module, Node
from polyir.ir.walk import map_loops, walk_nodes


def _global_buffers(function: Function) -> set[str]:
    """Buffers every thread sees: parameters and function locals with a symbolic
    shape (the mapping makes constant-shaped locals private to a thread or
    block, and loop-scoped locals are private to their iteration)."""
    found = {p.name for p in function.params if isinstance(p, Buffer)}
    found |= {b.name for b in function.locals if not all(d.is_constant for d in b.shape)}
    return found


def _reduction_loops(function: Function) -> set[str]:
    """Variables of parallel, unmapped loops with a reduction statement inside."""
    from polyir.polyhedral.extract import reduction_of

    found = set()
    for loop in walk_nodes(function.body):
        if isinstance(loop, For) and loop.parallel and loop.mapping is None and any(
                isinstance(n, Assign) and reduction_of(n) is not None
                for n in walk_nodes(loop.body)):
            found.add(loop.var)
    return found


def shared_reduction_loops(function: Function) -> dict[str, list[str]] | None:
    """Parallel loop variable -> the buffers its iterations reduce into in
    shared elements (exact, from the reductions' self-dependences); ``None``
    when the function is not polyhedral (barriers, launches)."""
    from polyir.polyhedral.dependences import compute_dependences
    from polyir.polyhedral.extract import NotPolyhedral

    candidates = _reduction_loops(function)
    if not candidates:
        return {}
    try:
        deps = compute_dependences(function)
    except NotPolyhedral:
        return None
    visible = _global_buffers(function)
    found: dict[str, list[str]] = {}
    for dep in deps.items:
        if not dep.reduction or dep.buffer not in visible:
            continue
        for ident in dep.carried_loops():
            var = deps.scop.loops[ident].var
            if var in candidates and dep.buffer not in found.setdefault(var, []):
                found[var].append(dep.buffer)
    return found


def serialise_shared_reductions(module: Module,
                                report: Callable[[str, str], None] | None = None) -> Module:
    """``module`` with ``parallel`` cleared on every host loop whose body reduces
    into elements shared by its iterations; ``report(where, why)`` is called
    for each such loop. Returns ``module`` itself when nothing changes."""
    changed = False
    functions: list[Function] = []
    for function in module.functions:
        if function.kind != "host":
            functions.append(function)
            continue
        names = _global_buffers(function)
        exact = shared_reduction_loops(function)

        def serialise(loop: For, function: Function = function, names: set[str] = names,
                      exact: dict[str, list[str]] | None = exact) -> Node:
            nonlocal changed
            if not loop.parallel or loop.mapping is not None:
                return loop
            if exact is not None:
                shared = exact.get(loop.var, [])
            else:
                shared = [r.buffer for r in privatised_reductions(loop, names)]
            if not shared:
                return loop
            changed = True
            if report is not None:
                buffers = ", ".join(f"'{name}'" for name in shared)
                report(f"function '{function.name}', loop '{loop.var}'",
                       f"iterations reduce into shared elements of {buffers}; the GPU mapping "
                       f"does not privatise reductions, so the loop runs serially")
            return replace(loop, parallel=False)

        functions.append(replace(function, body=map_loops(function.body, serialise)))
    return Module(tuple(functions)) if changed else module
