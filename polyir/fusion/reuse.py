"""Reuse a fusion takes from a contraction: matrix products cut into matrix-vector products.

Fused at a depth whose loops hold a row loop of a matrix product (``y[i, j]
+= x[i, k] * W[j, k]`` fused at ``i`` with the LayerNorm that reads its rows,
or with the GELU that writes its input ``x``), the product runs once per row:
inside the fused loop every element of ``W`` is used once, a matrix-vector
product that loads an element per multiply-add. Left alone, ``auto-tile``
gives the product a register tile of ``mr`` rows, so ``W`` is loaded once
per ``mr`` rows. :func:`reuse_lost` estimates the extra bytes loaded; the
cost model (``polyir.fusion.cost.decide``) refuses a fusion whose lost reuse
exceeds the traffic it saves. Measured (one core, a stack of 8 Linear ->
LayerNorm -> GELU layers, d=64): at batch 8 fused 45 us a call, unfused
40 us; at batch 32, 93 us against 69 us; at batch 1 (one row: nothing to
lose) both 30 us.

A second estimate counts operands read again from beyond the cache: when
the fused loops cut the producer's product into blocks (GPT-2's QKV
projection fused into attention per image and head, each iteration one
block of rows and of columns), an operand no fused loop moves (the weights,
across images) whose footprint over one iteration of that loop exceeds the
L2 cache is streamed in again on every iteration (at batch 8, 7 MB of
weights 8 times against 19 MB of projections saved). Fused loops that are
the producer's own outer loops (an epilogue, a normalisation per image)
keep its loop order and count nothing. Measured on GPT-2's block at batch
8: the projection fused per head took 98 ms of the block's 250, alone 49 ms
and its attention 4 ms.

Softmax rows are left to the online traversal: a window holding a ``max``
reduction (attention's scores, its row maximum, its weighted sum of values)
is fused per row on purpose, and ``online-reductions`` then blocks the rows
again (``polyir.fusion.online_rows.block_rows``), which gives the products
their register tiles back: no matrix-vector estimate there, and the rows
(the innermost fused loop) are left out of the second.
"""
from __future__ import annotations

from math import prod

import islpy as isl

from polyir.ir.affine import Aff
from polyir.ir.nodes import Assign, For, Function, If
from polyir.ir.walk import loads, walk_nodes
from polyir.polyhedral.extract import affine_index, reduction_of
from polyir.polyhedral.slices import Slice, loop_chain
from polyir.target import Target
from polyir.tiling.sizes import register_tile


def _variables(indices: tuple[object, ...]) -> set[str] | None:
    found: set[str] = set()
    for index in indices:
        aff = affine_index(index)
        if aff is None:
            return None
        found |= set(aff.variables())
    return found


def _trip(loop: For, sizes: dict[str, int]) -> int:
    """``loop``'s iterations with symbols at ``sizes`` (64 when missing), outer
    loop variables at 64 too (a triangular bound: an estimate only)."""
    def value(aff: Aff) -> int:
        return aff.evaluate({v: sizes.get(v, 64) for v in aff.variables()})
    low = max(value(bound) for bound in loop.lower)
    high = min(value(bound) for bound in loop.upper)
    return max(0, -(-(high - low) // loop.step))


def contractions(node: object, path: tuple[For, ...] = ()) -> list[tuple[tuple[For, ...], Assign]]:
    """Every contraction statement in ``node`` (``X += A * B``: a sum of
    products of at least two buffers), with its loops, in program order (a
    padded convolution's guard adds no loop)."""
    if isinstance(node, Assign):
        update = reduction_of(node)
        operands = {ld.buffer for ld in loads(node.value) if ld.buffer != node.buffer}
        return [(path, node)] if update is not None and update[1] == "+" and len(operands) >= 2 else []
    found: list[tuple[tuple[For, ...], Assign]] = []
    if isinstance(node, For):
        for child in node.body:
            found += contractions(child, (*path, node))
    elif isinstance(node, If):
        for child in (*node.then_body, *node.else_body):
            found += contractions(child, path)
    return found


def has_row_maximum(node: object) -> bool:
    """Does ``node`` hold a ``max`` reduction (a softmax row's maximum)?"""
    updates = (reduction_of(stmt) for stmt in walk_nodes((node,))  # type: ignore[arg-type]
               if isinstance(stmt, Assign))
    return any(update is not None and update[1] == "max" for update in updates)


def _lost(nest: For, fused: set[str], function: Function, target: Target, sizes: dict[str, int],
          device: str) -> tuple[int, str]:
    """``(bytes, what)``: the reuse the contractions of ``nest`` lose when the
    loops ``fused`` run outside everything else (see the module docstring)."""
    total, what = 0, ""
    for path, stmt in contractions(nest):
        out = _variables(stmt.indices)
        if out is None:
            continue
        trips = {loop.var: _trip(loop, sizes) for loop in path}
        inner_out = {loop.var for loop in path if loop.var not in fused and loop.var in out}
        if not inner_out:
            continue   # the fused loops hold every output loop: an epilogue, tiled with it
        for buffer in dict.fromkeys(ld.buffer for ld in loads(stmt.value) if ld.buffer != stmt.buffer):
            used: set[str] = set()
            for ld in loads(stmt.value):
                if ld.buffer == buffer:
                    found = _variables(ld.indices)
                    used |= found if found is not None else set(trips)
            if not inner_out <= used:
                continue   # a loop inside the fused ones reuses it
            reusing = [v for v in fused if v in out and v not in used and trips.get(v, 1) > 1]
            if not reusing:
                continue
            rows = prod(trips[v] for v in reusing)
            element = _element(function, buffer, device)
            mr = register_tile(target, element, rows=rows).mr
            footprint = prod(trips[loop.var] for loop in path if loop.var not in fused and loop.var in used)
            lost = footprint * element * (rows - -(-rows // max(1, mr)))
            if lost > 0:
                total += lost
                what = what or (f"{stmt.buffer} += ... {buffer} ... would run as matrix-vector "
                                f"products, one per iteration of {', '.join(reusing)}: {buffer} "
                                f"loaded {rows} times instead of {-(-rows // max(1, mr))}")
    return total, what


def _operands(stmt: Assign, trips: dict[str, int]) -> dict[str, set[str]]:
    """The loop variables each operand buffer of ``stmt`` uses."""
    used: dict[str, set[str]] = {}
    for ld in loads(stmt.value):
        if ld.buffer != stmt.buffer:
            found = _variables(ld.indices)
            used.setdefault(ld.buffer, set()).update(found if found is not None else set(trips))
    return used


def _element(function: Function, buffer: str, device: str) -> int:
    known = function.buffers.get(buffer)
    return known.dtype.storage_bytes(device) if known is not None else 4


def _image(relation: isl.Map, first: list[int], dims: list[int]) -> isl.Set:
    """The producer points of ``dims`` that the consumer iterations whose outer
    loops are at ``first`` reach (the loops after them free)."""
    fixed = relation
    for position, value in enumerate(first):
        fixed = fixed.fix_val(isl.dim_type.in_, position, value)
    image = fixed.range()
    keep = set(dims)
    for position in reversed(range(image.dim(isl.dim_type.set))):
        if position not in keep:
            image = image.project_out(isl.dim_type.set, position, 1)
    return image


def _volume(image: isl.Set) -> int | None:
    if image.is_empty() or not image.is_bounded():
        return None
    volume = 1
    for position in range(image.dim(isl.dim_type.set)):
        volume *= image.dim_max_val(position).to_python() - image.dim_min_val(position).to_python() + 1
    return volume


def _restreamed_producer(function: Function, nest: For, piece: Slice, fixed: set[str],
                         consumer: list[For], cache: int, sizes: dict[str, int],
                         device: str) -> tuple[int, str]:
    """Bytes of the producer's contraction operands read again from beyond the
    cache (``fixed``: the producer loops one consumer iteration fixes) when the fused loops cut the producer into blocks (GPT-2's QKV
    projection fused into attention per image and head: one block of rows and
    columns per iteration): an operand no fused loop ``o`` moves (the
    weights, per image) whose footprint over one iteration of ``o`` exceeds
    ``cache`` is read once per iteration of ``o`` instead of once."""
    relation = piece.relation
    if relation.dim(isl.dim_type.param):
        return 0, ""   # symbolic sizes: no estimate
    chain = list(piece.chain[:relation.dim(isl.dim_type.out)])
    if set(chain[:len(consumer)]) <= fixed:
        # the fused loops are the producer's own outer loops, one consumer
        # iteration per producer iteration (an epilogue, a normalisation per
        # image): its loop order is kept, nothing is read more often than it was
        return 0, ""
    starts = [_trip_start(loop, sizes) for loop in consumer]
    total, what = 0, ""
    for path, stmt in contractions(nest):
        trips = {loop.var: _trip(loop, sizes) for loop in path}
        for buffer, used in _operands(stmt, trips).items():
            dims = [chain.index(v) for v in used if v in chain]
            inner = prod(trips[v] for v in used if v not in chain and v in trips)
            for depth, loop in enumerate(consumer):
                count = _trip(loop, sizes)
                if count <= 1:
                    continue
                here = _image(relation, starts[:depth + 1], dims)
                moved = starts[:depth] + [starts[depth] + loop.step]
                if not here.is_equal(_image(relation, moved, dims)):
                    continue   # the operand moves with this loop
                volume = _volume(here)
                if volume is None:
                    continue
                footprint = volume * inner * _element(function, buffer, device)
                if footprint > cache:
                    total += footprint * (count - 1)
                    what = what or (f"{stmt.buffer} += ... {buffer} ...: {footprint} bytes of "
                                    f"{buffer} read again from beyond the cache for each of the "
                                    f"{count} iterations of fused loop {loop.var}")
    return total, what


def _trip_start(loop: For, sizes: dict[str, int]) -> int:
    return max(bound.evaluate({v: sizes.get(v, 64) for v in bound.variables()}) for bound in loop.lower)


def _fixed_chain_vars(piece: Slice) -> set[str]:
    """The producer chain variables one consumer iteration fixes to one value."""
    fixed: set[str] = set()
    relation = piece.relation
    count = relation.dim(isl.dim_type.out)
    for k, var in enumerate(piece.chain[:count]):
        one = relation.project_out(isl.dim_type.out, k + 1, count - k - 1) \
            .project_out(isl.dim_type.out, 0, k)
        if one.is_single_valued():
            fixed.add(var)
    return fixed


def reuse_lost(function: Function, producer: int, consumer: int, depth: int, piece: Slice,
               target: Target, sizes: dict[str, int], device: str) -> tuple[int, str]:
    """``(bytes, why)``: the extra operand loads of the contractions in the
    producer and the consumer when fused at ``depth`` (``piece``: the slice);
    ``(0, "")`` on GPUs, and for windows the online traversal re-blocks."""
    if device != "cpu":
        return 0, ""
    producer_nest, consumer_nest = function.body[producer], function.body[consumer]
    assert isinstance(producer_nest, For) and isinstance(consumer_nest, For)
    # softmax rows: the online traversal blocks the innermost fused loop (the
    # rows) again, so neither matrix-vector products nor the rows' re-reads count
    rows = any(has_row_maximum(nest) for nest in (producer_nest, consumer_nest))
    fixed = _fixed_chain_vars(piece)
    lost, why = 0, ""
    if not rows:
        fused_consumer = {loop.var for loop in loop_chain(consumer_nest, depth)}
        lost_p, why_p = _lost(producer_nest, fixed, function, target, sizes, device)
        lost_c, why_c = _lost(consumer_nest, fused_consumer, function, target, sizes, device)
        lost, why = lost_p + lost_c, why_p or why_c
    cache = target.cache(2).size
    checked = depth - 1 if rows else depth
    again_p, note_p = _restreamed_producer(function, producer_nest, piece, fixed,
                                           loop_chain(consumer_nest, depth)[:checked], cache, sizes,
                                           device)
    return lost + again_p, why or note_p


__all__ = ["reuse_lost", "has_row_maximum", "contractions"]
