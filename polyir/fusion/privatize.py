"""Buffer shrinking: a local buffer contracted to its footprint per iteration.

After fusion an intermediate is typically written and read inside one
iteration of some loop (a row of a normalisation, one element of an
element-wise chain, one accumulator of a matmul with its epilogue). For a
function-level local ``T``, :func:`shrink_buffer` finds the innermost loop
``L`` around every access to ``T``; when no value flows through ``T`` from
one iteration of ``L`` (or of a loop around it) to another (every flow
dependence on ``T`` is loop-independent at those levels, and every read of
``T`` reads a value written in the same iteration), ``T`` becomes a
loop-scoped local of ``L`` (``For.locals``) whose shape is its footprint box
in one iteration (dimensions of extent 1 dropped: a scalar ``t[]``, a row
``t[M]``), and every subscript is shifted by the box's lower corner.

A local that nothing reads any more is removed with its writes
(``remove-dead-statements``).

Refused (kept, with the reason) when the footprint's extent depends on the
iteration (a triangular footprint), when its corner is not one affine
expression, or when a value crosses iterations.
"""
from __future__ import annotations

from dataclasses import replace

import islpy as isl

from polyir.ir.affine import Aff
from polyir.ir.nodes import Assign, Buffer, For, FragmentLoad, FragmentStore, Function, If, Load, Node
from polyir.ir.types import MemorySpace
from polyir.ir.walk import STATEMENT_NODES, buffer_accesses, walk_nodes
from polyir.polyhedral.dependences import as_time_map
from polyir.polyhedral.equivalence import read_sources
from polyir.polyhedral.extract import NotPolyhedral, extract
from polyir.polyhedral.footprint import loop_footprints


class ShrinkRefused(ValueError):
    """The buffer cannot be shrunk; the message says why."""


def _enclosing_loop(function: Function, buffer: str) -> list[For]:
    """The loops (outermost first) around every access to ``buffer``."""
    best: list[For] | None = None

    def visit(nodes: tuple[Node, ...], loops: list[For]) -> None:
        nonlocal best
        for node in nodes:
            if isinstance(node, For):
                visit(node.body, loops + [node])
            elif isinstance(node, If):
                visit(node.then_body, loops)
                visit(node.else_body, loops)
            else:
                reads, writes = buffer_accesses((node,))
                if buffer in reads or buffer in writes:
                    if best is None:
                        best = list(loops)
                    else:
                        common = 0
                        while common < min(len(best), len(loops)) and best[common] is loops[common]:
                            common += 1
                        best = best[:common]

    visit(function.body, [])
    return best or []


def shrink_buffer(function: Function, name: str, ctx: isl.Context | None = None) -> Function:
    """``function`` with local ``name`` declared in the innermost loop around all
    its accesses, at its per-iteration footprint (see the module docstring);
    raises :class:`ShrinkRefused` with the reason."""
    local = next((b for b in function.locals if b.name == name), None)
    if local is None:
        raise ShrinkRefused(f"'{name}' is not a function-level local of '{function.name}'")
    if local.space not in (MemorySpace.GLOBAL, MemorySpace.LOCAL):
        raise ShrinkRefused(f"'{name}' lives in {local.space} memory, which the GPU mapping places")
    loops = _enclosing_loop(function, name)
    if not loops:
        raise ShrinkRefused(f"the accesses to '{name}' are not inside one loop")
    host = loops[-1]
    # all accesses are inside one top-level nest: analyse that nest alone
    top = next(k for k, node in enumerate(function.body) if node is loops[0])
    try:
        scop = extract(replace(function, body=(function.body[top],)), ctx)
    except NotPolyhedral as error:
        raise ShrinkRefused(str(error)) from None
    depth = len(loops)
    _require_private(scop, name, depth, loops)
    info = scop.loop(host.var)
    foot = loop_footprints(scop, info.id).get(name)
    if foot is None:
        raise ShrinkRefused(f"no footprint for '{name}'")
    outer = {loop.var for loop in loops}
    corners: list[Aff] = []
    extents: list[int | Aff] = []
    for low, high in foot.box:
        if low.kind != "aff" or high.kind != "aff" or not low.exact or not high.exact:
            raise ShrinkRefused(f"the footprint of '{name}' ({foot}) has a piecewise corner")
        extent = high.exprs[0] - low.exprs[0] + 1
        if extent.variables() & outer:
            raise ShrinkRefused(f"the footprint of '{name}' ({foot}) changes size with the iteration")
        corners.append(low.exprs[0])
        extents.append(extent)
    kept = [k for k, e in enumerate(extents) if not (isinstance(e, Aff) and e.is_constant and e.constant == 1)]
    shape = tuple(extents[k] for k in kept)
    new = Buffer(local.name, local.dtype, tuple(e if isinstance(e, Aff) else Aff.const(e) for e in shape),
                 local.space, local.loc)

    def remap(indices: tuple) -> tuple:
        out = []
        for k in kept:
            index = indices[k]
            if not isinstance(index, Aff):
                raise ShrinkRefused(f"'{name}' is subscripted by a gather")
            out.append(index - corners[k])
        return tuple(out)

    def rewrite_expr(expr):  # noqa: ANN001, ANN202  (Expr -> Expr)
        from polyir.ir.walk import map_loads
        return map_loads(expr, lambda load: Load(load.buffer, remap(load.indices))
                         if load.buffer == name else load)

    def rewrite(nodes: tuple[Node, ...]) -> tuple[Node, ...]:
        out: list[Node] = []
        for node in nodes:
            if isinstance(node, For):
                node = replace(node, body=rewrite(node.body),
                               locals=node.locals + ((new,) if node is host else ()))
            elif isinstance(node, If):
                node = replace(node, then_body=rewrite(node.then_body), else_body=rewrite(node.else_body))
            elif isinstance(node, Assign):
                indices = remap(node.indices) if node.buffer == name else node.indices
                node = replace(node, indices=indices, value=rewrite_expr(node.value))
            elif isinstance(node, (FragmentLoad, FragmentStore)) and node.buffer == name:
                raise ShrinkRefused(f"'{name}' is a tensor-core tile operand")
            out.append(node)
        return tuple(out)

    body = rewrite(function.body)
    return replace(function, body=body, locals=tuple(b for b in function.locals if b.name != name))


def _require_private(scop, name: str, depth: int, loops: list[For]) -> None:  # noqa: ANN001
    """Every read of ``name`` sees a write of the same iteration of ``loops``."""
    time = as_time_map(scop)
    sources, reads = read_sources(scop, name, time)
    if not reads.domain().is_subset(sources.domain()):
        raise ShrinkRefused(f"some read of '{name}' sees no write in the same iteration")
    if sources.is_empty():
        return
    pairs = sources.domain_factor_domain()          # reader -> writer
    prefix = time.apply_range(_prefix_projection(time, 2 * depth))
    shifts = pairs.apply_domain(prefix).apply_range(prefix).deltas()
    sets: list[isl.Set] = []
    shifts.foreach_set(sets.append)
    if any(not _is_origin(piece) for piece in sets):
        raise ShrinkRefused(f"a value of '{name}' crosses iterations of the loops around it "
                            f"({', '.join(loop.var for loop in loops)})")


def _prefix_projection(time: isl.UnionMap, width: int) -> isl.UnionMap:
    """``t -> t[:width]`` on the time space of ``time``."""
    maps: list[isl.Map] = []
    time.foreach_map(maps.append)
    space = maps[0].get_space().range()
    total = space.dim(isl.dim_type.set)
    identity = isl.Map.identity(space.map_from_set())
    return isl.UnionMap.from_map(identity.project_out(isl.dim_type.out, width, total - width))


def _is_origin(deltas: isl.Set) -> bool:
    """Whether every vector of ``deltas`` is zero."""
    n = deltas.dim(isl.dim_type.set)
    zero = isl.Set.universe(deltas.get_space())
    for k in range(n):
        zero = zero.fix_dim_si(k, 0)
    return deltas.is_subset(zero)


def shrink_buffers(function: Function, ctx: isl.Context | None = None,
                   refused: list[tuple[str, str]] | None = None) -> Function:
    """Every function-level local shrunk where :func:`shrink_buffer` allows
    (``(name, why)`` appended to ``refused`` for the others)."""
    for local in list(function.locals):
        if not any(isinstance(n, STATEMENT_NODES) for n in walk_nodes(function.body)):
            break
        try:
            function = shrink_buffer(function, local.name, ctx)
        except ShrinkRefused as error:
            if refused is not None:
                refused.append((local.name, str(error)))
    return function


__all__ = ["ShrinkRefused", "shrink_buffer", "shrink_buffers"]
