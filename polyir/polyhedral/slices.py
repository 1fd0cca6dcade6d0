"""Exact producer slices: which producer iterations a consumer iteration needs.

For a *producer* nest ``P`` (a top-level loop of a function), a *consumer*
nest ``C`` after it and a depth ``d``, the slice maps each value ``o`` of
``C``'s outer ``d`` loop variables to the iterations ``p`` of ``P``'s *chain*
(its outermost perfectly nested loops, the ones around all of its
statements) that write an element some statement of ``C`` reads during the
iterations ``o``::

    S = { o -> p : exists consumer instance x with x[:d] = o and producer
                   instance y with y[:m] = p, x reads e, y writes e }

It is an isl map, exact (no bounding box: MLIR's ``unionBoundingBox`` is what
made its bug #225248), and it is a *proposal*: whether running the producer's
chain body for every ``p`` in ``S(o)`` inside the consumer is correct is
decided by the full value-based check of the fused program
(``polyir.polyhedral.equivalence``). The slice also says how much work it
repeats: :attr:`Slice.recompute` is the fraction of extra producer chain
iterations (0 when every iteration is needed by one consumer iteration only;
0.125 for a 3x3/stride-2 pooling window after a convolution, and so on).
"""
from __future__ import annotations

from dataclasses import dataclass

import islpy as isl

from polyir.ir.nodes import For, Function
from polyir.polyhedral.extract import Scop, isl_name


class SliceError(ValueError):
    """The nests have no slice at this depth (no shared buffer, not a chain)."""


@dataclass(frozen=True)
class Slice:
    """The slice of ``producer`` (top-level index) for ``consumer`` at ``depth``.

    ``relation``: isl map ``_o[o...] -> _p[p...]`` with the function's symbols
    as parameters; ``outer``: the consumer's ``depth`` outer loop variables;
    ``chain``: the producer's chain loop variables; ``buffers``: what flows;
    ``recompute``: extra producer chain iterations run, as a fraction of its
    own (estimated at ``sizes``, see :func:`compute_slice`)."""

    producer: int
    consumer: int
    depth: int
    relation: isl.Map
    outer: tuple[str, ...]
    chain: tuple[str, ...]
    buffers: tuple[str, ...]
    recompute: float

    def __str__(self) -> str:
        return (f"slice of nest {self.producer} for nest {self.consumer} at depth {self.depth}: "
                f"{self.relation} (recomputes {self.recompute:.0%})")


def loop_chain(loop: For, limit: int | None = None) -> list[For]:
    """The outermost perfectly nested loops of ``loop`` (each loop's body is the next)."""
    chain = [loop]
    while (limit is None or len(chain) < limit) and len(chain[-1].body) == 1 \
            and isinstance(chain[-1].body[0], For):
        chain.append(chain[-1].body[0])
    return chain


def _project(scop: Scop, kind: str, nest: int, depth: int, tuple_name: str,
             buffers: set[str]) -> isl.UnionMap:
    """``tuple_name[first depth dims] -> element`` for the ``kind`` accesses of ``buffers``
    by the statements of top-level node ``nest``."""
    result = isl.UnionMap.empty(scop.context.get_space())
    for stmt in scop.statements_in_nest(nest):
        if len(stmt.dims) < depth:
            raise SliceError(f"statement {stmt.name} sits outside the first {depth} loops of its nest")
        dims = ", ".join(stmt.dims)
        proj = scop.isl_map(f"{scop.param_space} -> {{ {isl_name(stmt.name)}[{dims}] -> "
                            f"{tuple_name}[{', '.join(stmt.dims[:depth])}] }}")
        for access in stmt.accesses:
            if access.kind == kind and access.buffer in buffers:
                result = result.union(isl.UnionMap.from_map(access.relation).apply_domain(
                    isl.UnionMap.from_map(proj)))
    return result


def compute_slice(scop: Scop, producer: int, consumer: int, depth: int,
                  sizes: dict[str, int] | None = None) -> Slice:
    """The :class:`Slice` (see the module docstring). ``sizes`` (symbol values)
    are used only to estimate :attr:`Slice.recompute` (default: 64 each).
    Raises :class:`SliceError` when the consumer has no ``depth`` perfectly
    nested outer loops or the two nests share no buffer."""
    body = scop.function.body
    if not (0 <= producer < consumer < len(body)):
        raise SliceError(f"nests {producer} and {consumer} are not two top-level nodes in order")
    p_node, c_node = body[producer], body[consumer]
    if not isinstance(p_node, For) or not isinstance(c_node, For):
        raise SliceError("producer and consumer must be loop nests")
    outer = loop_chain(c_node, depth)
    if len(outer) < depth:
        raise SliceError(f"the consumer's outer loops are not a chain of {depth}")
    chain = loop_chain(p_node)
    written = {a.buffer for s in scop.statements_in_nest(producer) for a in s.writes}
    read = {a.buffer for s in scop.statements_in_nest(consumer) for a in s.reads}
    flows = written & read
    if not flows:
        raise SliceError(f"nest {consumer} reads nothing nest {producer} writes")
    reads = _project(scop, "read", consumer, depth, "_o", flows)
    writes = _project(scop, "write", producer, len(chain), "_p", flows)
    relation = reads.apply_range(writes.reverse())
    maps: list[isl.Map] = []
    relation.foreach_map(maps.append)
    if not maps:
        raise SliceError(f"no iteration of nest {consumer} reads what nest {producer} writes")
    single = maps[0]
    for extra in maps[1:]:
        single = single.union(extra)
    single = single.coalesce()
    return Slice(producer, consumer, depth, single, tuple(loop.var for loop in outer),
                 tuple(loop.var for loop in chain), tuple(sorted(flows)),
                 _recompute(scop, single, producer, len(chain), sizes))


def _box(target: isl.Set) -> list[tuple[int, int]] | None:
    """Constant ``(low, high)`` bounds of every dimension of a parameter-free
    set (None when some bound is not a single constant)."""
    bounds = []
    for k in range(target.dim(isl.dim_type.set)):
        ends = []
        for side in (target.dim_min(k), target.dim_max(k)):
            pieces: list = []
            side.foreach_piece(lambda _set, aff, found=pieces: found.append(aff))  # type: ignore[misc]
            if len(pieces) != 1 or not pieces[0].is_cst():
                return None
            ends.append(int(pieces[0].get_constant_val().to_python()))
        bounds.append((ends[0], ends[1]))
    return bounds


def _determined_out(piece: isl.Set) -> isl.Set:
    """``piece`` without the dimensions that are functions of the others
    (same number of integer points)."""
    k = piece.dim(isl.dim_type.set) - 1
    while k >= 0:
        as_map = isl.Map.from_domain(piece).move_dims(isl.dim_type.out, 0, isl.dim_type.in_, k, 1)
        if as_map.is_single_valued():
            piece = piece.project_out(isl.dim_type.set, k, 1)
        k -= 1
    return piece


def _count(target: isl.Set, cap: int = 100_000) -> int | None:
    """The integer points of a parameter-free set, or None when there may be
    more than ``cap`` to enumerate (then nothing is enumerated). The set is
    split into disjoint pieces; a piece that is a box once the dimensions
    fixed by the others are dropped is counted by the product of its extents,
    any other by isl's enumeration when its box holds at most what is left of ``cap``."""
    flat = target.flatten()
    if flat.is_empty():
        return 0
    pieces: list[isl.BasicSet] = []
    flat.make_disjoint().foreach_basic_set(pieces.append)
    total, budget = 0, cap
    for basic in pieces:
        piece = _determined_out(isl.Set.from_basic_set(basic))
        box = _box(piece)
        if box is None:
            return None
        product = 1
        hull = isl.Set.universe(piece.get_space())
        for k, (low, high) in enumerate(box):
            product *= max(0, high - low + 1)
            hull = hull.lower_bound_val(isl.dim_type.set, k, low).upper_bound_val(
                isl.dim_type.set, k, high)
        if hull.is_subset(piece):
            total += product
            continue
        if product > budget:
            return None
        count = int(piece.count_val().to_python())   # isl enumerates, no Python per point
        total += count
        budget -= count
    return total


def _recompute(scop: Scop, relation: isl.Map, producer: int, chain_depth: int,
               sizes: dict[str, int] | None) -> float:
    """How many times each needed producer chain iteration runs, minus one.

    Exactly 0 when no producer iteration is needed by two consumer iterations
    (the slice's inverse is single-valued). Otherwise ``pairs / distinct
    producer iterations - 1`` counted with the symbols fixed (at ``sizes``,
    capped at 16, so the count stays small), over the whole slice when it has
    at most 150 000 pairs, else over three windows of 8 (then 2) consumer
    iterations per loop (at the start, the middle and the end of the range): an estimate."""
    del producer, chain_depth
    if relation.reverse().is_single_valued():
        return 0.0
    values = {p: min(16, (sizes or {}).get(p, 16)) for p in scop.params}
    cons = " and ".join(f"{isl_name(p)} = {v}" for p, v in values.items()) or "true"
    fixed = relation.intersect_params(scop.isl_set(f"{scop.param_space} -> {{ : {cons} }}"))
    pairs = _count(_drop_params(fixed.wrap()), 150_000)
    produced = _count(_drop_params(fixed.range()), 150_000) if pairs is not None else None
    for width in (8, 2):
        if pairs is not None and produced is not None:
            break
        window = fixed.intersect_domain(_windows(scop, fixed.domain(), width))
        pairs = _count(_drop_params(window.wrap()), 150_000)
        produced = _count(_drop_params(window.range()), 150_000) if pairs is not None else None
    if not pairs or not produced:
        return 1.0  # too large to sample: assume heavy recomputation
    return max(0.0, pairs / produced - 1.0)


def _windows(scop: Scop, domain: isl.Set, width: int = 8) -> isl.Set:
    """Three boxes of ``width`` values per dimension of ``domain`` (parameters fixed):
    at the start, the middle and the end of each dimension's range."""
    n = domain.dim(isl.dim_type.set)
    bounds = []
    for k in range(n):
        ends = []
        for side in (domain.dim_min(k), domain.dim_max(k)):
            pieces: list = []
            side.foreach_piece(lambda _set, aff, found=pieces: found.append(aff))  # type: ignore[misc]
            ends.append(int(pieces[0].get_constant_val().to_python())
                        if len(pieces) == 1 and pieces[0].is_cst() else None)
        bounds.append(ends)
    names = ", ".join(f"x{j}" for j in range(n))
    union = None
    for position in ("start", "middle", "end"):
        cons = []
        for k, (low, high) in enumerate(bounds):
            if low is None or high is None:
                continue
            start = {"start": low, "middle": (low + high) // 2, "end": max(low, high - width + 1)}[position]
            cons.append(f"{start} <= x{k} < {start + width}")
        box = isl.Set(f"{scop.param_space} -> {{ _o[{names}] : {' and '.join(cons) or 'true'} }}",
                      context=scop.ctx).intersect_params(domain.params())
        union = box if union is None else union.union(box)
    assert union is not None
    return union


def _drop_params(s: isl.Set) -> isl.Set:
    """``s`` (whose parameters are fixed) as a parameter-free set."""
    n = s.dim(isl.dim_type.param)
    return s.project_out(isl.dim_type.param, 0, n) if n else s


def slice_for(function: Function, scop: Scop, producer: int, consumer: int, depth: int) -> Slice:
    """:func:`compute_slice` for ``function`` (which ``scop`` models)."""
    del function
    return compute_slice(scop, producer, consumer, depth)


__all__ = ["Slice", "SliceError", "compute_slice", "loop_chain"]
