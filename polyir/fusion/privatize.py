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

from dataclasses import dataclass, replace

import islpy as isl

from polyir.ir.affine import Aff
from polyir.ir.canonical import CanonicalForm, canonical_form
from polyir.ir.nodes import (
    Assign,
    Barrier,
    Buffer,
    For,
    FragmentLoad,
    FragmentStore,
    Function,
    If,
    Launch,
    Load,
    Node,
)
from polyir.ir.types import MemorySpace
from polyir.ir.walk import STATEMENT_NODES, subtree_accesses, walk_nodes
from polyir.polyhedral.dependences import as_time_map
from polyir.polyhedral.equivalence import read_sources
from polyir.polyhedral.extract import NotPolyhedral, extract
from polyir.polyhedral.footprint import loop_footprints


class ShrinkRefused(ValueError):
    """The buffer cannot be shrunk; the message says why."""


def _enclosing_loop(function: Function, buffer: str) -> list[For]:
    """The loops (outermost first) around every access to ``buffer``; none when the
    accesses are in more than one top-level node."""
    touching = [node for node in function.body if buffer in set().union(*subtree_accesses(node))]
    if len(touching) != 1:
        return []
    best: list[For] | None = None

    def visit(nodes: tuple[Node, ...], loops: list[For]) -> None:
        nonlocal best
        for node in nodes:
            if buffer not in set().union(*subtree_accesses(node)):
                continue
            if isinstance(node, For):
                visit(node.body, loops + [node])
            elif isinstance(node, If):
                visit(node.then_body, loops)
                visit(node.else_body, loops)
            elif best is None:
                best = list(loops)
            else:
                common = 0
                while common < min(len(best), len(loops)) and best[common] is loops[common]:
                    common += 1
                best = best[:common]

    visit((touching[0],), [])
    return best or []


@dataclass(frozen=True)
class ShrinkPlan:
    """Where and how a local shrinks: declared in loop ``host``, the dimensions
    ``kept`` (of extent other than 1) with extents ``shape``, every subscript
    shifted by ``corners`` (one per original dimension)."""

    host: str
    kept: tuple[int, ...]
    shape: tuple[Aff, ...]
    corners: tuple[Aff, ...]

    def renamed(self, mapping: dict[str, str]) -> ShrinkPlan:
        """The plan with loop variables (and buffers) renamed by ``mapping``."""
        return ShrinkPlan(mapping.get(self.host, self.host), self.kept,
                          tuple(a.rename(mapping) for a in self.shape),
                          tuple(a.rename(mapping) for a in self.corners))


def shrink_buffer(function: Function, name: str, ctx: isl.Context | None = None) -> Function:
    """``function`` with local ``name`` declared in the innermost loop around all
    its accesses, at its per-iteration footprint (see the module docstring);
    raises :class:`ShrinkRefused` with the reason."""
    return apply_shrink(function, name, plan_shrink(function, name, ctx))


def plan_shrink(function: Function, name: str, ctx: isl.Context | None = None) -> ShrinkPlan:
    """The :class:`ShrinkPlan` for local ``name``; raises :class:`ShrinkRefused`."""
    local, loops = _local_and_loops(function, name)
    host = loops[-1]
    # all accesses are inside one top-level nest (perhaps under an ``if``): analyse it
    # alone, and only its statements that access the buffer (the questions below,
    # its read sources and its footprint, are about those alone), so that a nest
    # holding many locals is not analysed whole once per local
    top = _top_level_index(function, loops[0])
    try:
        scop = extract(replace(function, body=_touching(function.body[top], name)), ctx)
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
    kept = tuple(k for k, e in enumerate(extents)
                 if not (isinstance(e, Aff) and e.is_constant and e.constant == 1))
    shape = tuple(Aff.lift(extents[k]) for k in kept)
    return ShrinkPlan(host.var, kept, shape, tuple(corners))


def _touching(node: Node, buffer: str) -> tuple[Node, ...]:
    """``node`` without the statements (and the loops and ifs left empty) that do
    not access ``buffer``; barriers and launches stay (extraction refuses them)."""
    if buffer not in set().union(*subtree_accesses(node)) and \
            not any(isinstance(n, (Barrier, Launch)) for n in walk_nodes((node,))):
        return ()
    if isinstance(node, For):
        body = tuple(kept for child in node.body for kept in _touching(child, buffer))
        return (node if body == node.body else replace(node, body=body),)
    if isinstance(node, If):
        then = tuple(kept for child in node.then_body for kept in _touching(child, buffer))
        other = tuple(kept for child in node.else_body for kept in _touching(child, buffer))
        return (replace(node, then_body=then, else_body=other),)
    return (node,)


def _local_and_loops(function: Function, name: str) -> tuple[Buffer, list[For]]:
    """The local ``name`` and the loops around all its accesses; refuses what no
    analysis can shrink."""
    local = next((b for b in function.locals if b.name == name), None)
    if local is None:
        raise ShrinkRefused(f"'{name}' is not a function-level local of '{function.name}'")
    if local.space not in (MemorySpace.GLOBAL, MemorySpace.LOCAL):
        raise ShrinkRefused(f"'{name}' lives in {local.space} memory, which the GPU mapping places")
    loops = _enclosing_loop(function, name)
    if not loops:
        raise ShrinkRefused(f"the accesses to '{name}' are not inside one loop")
    return local, loops


def _top_level_index(function: Function, loop: For) -> int:
    """The position of the top-level node that is or holds ``loop`` (a nest may
    sit under a top-level ``if``)."""
    return next(k for k, node in enumerate(function.body)
                if any(inner is loop for inner in walk_nodes((node,))))


def apply_shrink(function: Function, name: str, plan: ShrinkPlan) -> Function:
    """``function`` with local ``name`` shrunk as ``plan`` says (the mechanism;
    :func:`plan_shrink` proves it may)."""
    local, loops = _local_and_loops(function, name)
    host = next((loop for loop in loops if loop.var == plan.host), None)
    if host is None:
        raise ShrinkRefused(f"no loop '{plan.host}' around every access to '{name}'")
    kept, corners = plan.kept, plan.corners
    new = Buffer(local.name, local.dtype, plan.shape, local.space, local.loc)

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

    body = list(function.body)
    top = _top_level_index(function, loops[0])
    body[top] = rewrite((body[top],))[0]     # every access to name is inside loops[0]
    return replace(function, body=tuple(body), locals=tuple(b for b in function.locals if b.name != name))


def _require_private(scop, name: str, depth: int, loops: list[For]) -> None:  # noqa: ANN001
    """Every read of ``name`` sees a write of the same iteration of ``loops``."""
    time = as_time_map(scop)
    sources, reads = read_sources(scop, name)
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
    (``(name, why)`` appended to ``refused`` for the others). A local whose nest is
    the same up to names as one already decided (a stack of identical layers)
    gets that decision, renamed, without asking isl again."""
    decided: dict[str, tuple[CanonicalForm, ShrinkPlan | str]] = {}
    for local in list(function.locals):
        if not any(isinstance(n, STATEMENT_NODES) for n in walk_nodes(function.body)):
            break
        try:
            _, loops = _local_and_loops(function, local.name)
            form = canonical_form(function, (loops[0],), {"shrunk": {local.name}})
            known = decided.get(form.key)
            if known is None:
                try:
                    plan = plan_shrink(function, local.name, ctx)
                except ShrinkRefused as error:
                    decided[form.key] = (form, form.canonical(str(error)))
                    raise
                decided[form.key] = (form, plan)
            else:
                first, outcome = known
                if isinstance(outcome, str):
                    raise ShrinkRefused(form.actual(outcome))
                plan = outcome.renamed(form.renaming(first))
            function = apply_shrink(function, local.name, plan)
        except ShrinkRefused as error:
            if refused is not None:
                refused.append((local.name, str(error)))
    return function


__all__ = ["ShrinkPlan", "ShrinkRefused", "apply_shrink", "plan_shrink", "shrink_buffer", "shrink_buffers"]
