"""Loop orders and row plans (policy helpers of ``auto-tile``, split from
``levels``): which loop of a band walks memory with unit stride
(:func:`stride_score`, :func:`unit_stride_order`, :func:`strided_along`),
the reductions whose rows can be jammed or vectorised across lanes
(:func:`reduction_chains`, :func:`lanes_for`, :func:`lane_blocks_for`), the
loop a direct convolution reuses a loaded value along (:func:`reuse_loop`),
and the packed row tiles of column-walking reads (:func:`packed_rows_plan`).
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from polyir.errors import PolyirError
from polyir.ir.affine import Aff
from polyir.ir.names import find_loop, fresh_name, names_in
from polyir.ir.nodes import Assign, For, Function, If
from polyir.ir.walk import substitute_node
from polyir.polyhedral.extract import affine_index, expr_loads, reduction_of
from polyir.tiling.levels import ELEMENT_BYTES, _fresh, _order_last, _vars, trip_count
from polyir.tiling.passes import Copies, Interchange, LaneBlocks, Pack, SplitTiles, Tile, UnrollJam


def stride_score(chain: Sequence[For], var: str, function: Function) -> int:
    """How well ``var`` suits the innermost position of the band: +2 per access
    with unit stride along it (last subscript ``var + c``, ``var`` nowhere else),
    +1 when the written element moves with it (a vectorisable loop, not a
    reduction), -2 per access walking a non-last dimension with it."""
    stmts = [n for n in _statements(chain[-1].body)]
    score = 0
    for stmt in stmts:
        accesses = [ld.indices for ld in expr_loads(stmt.value)] + [stmt.indices]
        for indices in accesses:
            if not indices:
                continue
            affs = [affine_index(x) for x in indices]
            if any(a is None for a in affs):
                continue
            used = [d for d, a in enumerate(affs) if a is not None and var in a.variables()]
            if not used:
                continue
            last = affs[-1]
            if used == [len(affs) - 1] and last is not None and abs(last.coefficient(var)) == 1:
                score += 2
            else:
                score -= 2
        target = [affine_index(x) for x in stmt.indices]
        if any(a is not None and var in a.variables() for a in target):
            score += 1
    return score


def _statements(nodes: Sequence[object]) -> list[Assign]:
    from polyir.ir.walk import walk_nodes
    return [n for n in walk_nodes(nodes) if isinstance(n, Assign)]  # type: ignore[arg-type]


def unit_stride_order(function: Function, chain: Sequence[For]) -> list[tuple[str, ...]]:
    """Band orders to try, best first, that move the loop with the best
    :func:`stride_score` innermost (the others keep their order); empty when
    the current innermost loop is already among the best."""
    band = [loop.var for loop in chain]
    scores = {v: stride_score(chain, v, function) for v in band}
    current = scores[band[-1]]
    better = sorted((v for v in band if scores[v] > current), key=lambda v: -scores[v])
    return [tuple([w for w in band if w != v] + [v]) for v in better]


def strided_along(chain: Sequence[For], var: str) -> bool:
    """Does an access of the band's statements walk memory with a stride along
    ``var`` (``var`` in a subscript other than the last, or with a coefficient
    other than +-1)? Such a loop innermost vectorises into gathers."""
    for stmt in _statements(chain[-1].body):
        for indices in [ld.indices for ld in expr_loads(stmt.value)] + [stmt.indices]:
            affs = [affine_index(x) for x in indices]
            for d, aff in enumerate(affs):
                if aff is None or var not in aff.variables():
                    continue
                if d != len(affs) - 1 or abs(aff.coefficient(var)) != 1:
                    return True
    return False


def reduction_chains(function: Function, chain: Sequence[For]) -> str | None:
    """The band loop to unroll and jam around an innermost reduction: when
    statements of the innermost loop accumulate (``X[f] = X[f] op e``) into a
    float element that does not move with it (a chain of dependent
    operations, one per iteration, that no vectoriser may reorder without
    fast math), the innermost other band loop that every such statement's
    element moves with (its unrolled copies are independent chains); else
    ``None``. Other statements may share the loop (``bicg``'s column sums);
    whether the jam is legal for them is the mechanism's proof."""
    if len(chain) < 2:
        return None
    inner = chain[-1]
    body = inner.body
    if not body or not all(isinstance(n, Assign) for n in body):
        return None
    buffers = function.buffers
    written: list[set[str]] = []
    for stmt in body:
        assert isinstance(stmt, Assign)
        used = _vars(stmt.indices)
        buffer = buffers.get(stmt.buffer)
        if "<gather>" in used or inner.var in used or reduction_of(stmt) is None \
                or buffer is None or not buffer.dtype.is_float:
            continue  # not a chain (the unroll-and-jam proof covers it)
        written.append(used)
    if not written:
        return None
    for loop in reversed(chain[:-1]):
        if all(loop.var in used for used in written) and loop.step == 1:
            return loop.var
    return None


def reuse_loop(function: Function, chain: Sequence[For], order: Sequence[str]) -> str | None:
    """For the band ``chain`` run in ``order``: the loop to unroll and jam into
    the innermost one so that a loaded value serves several accumulators (a
    direct convolution's output-channel loop: the input element
    ``x[n, c, oh + kh, ow + kw]`` does not depend on it, the weight
    ``w[oc, c, kh, kw]`` is the same for the whole innermost ``ow`` loop),
    else ``None``. The innermost body (under guards) must be one float
    ``+=`` statement whose element moves with the innermost loop; the loop
    chosen is the innermost outer loop, with step 1 and a known trip count,
    that the written element moves with and some operand load does not use."""
    if len(chain) < 3:
        return None
    body = list(chain[-1].body)
    while len(body) == 1 and isinstance(body[0], If) and not body[0].else_body:
        body = list(body[0].then_body)
    if len(body) != 1 or not isinstance(body[0], Assign):
        return None
    stmt = body[0]
    update = reduction_of(stmt)
    buffer = function.buffers.get(stmt.buffer)
    if update is None or update[1] != "+" or buffer is None or buffer.dtype not in ELEMENT_BYTES:
        return None
    written = _vars(stmt.indices)
    inner = order[-1]
    if "<gather>" in written or inner not in written:
        return None
    loads = [ld for ld in expr_loads(stmt.value) if ld.buffer != stmt.buffer]
    used = [_vars(ld.indices) for ld in loads]
    if any("<gather>" in u for u in used) or len(loads) < 2:
        return None
    loops = {loop.var: loop for loop in chain}
    for var in reversed(order[:-1]):
        loop = loops[var]
        if var in written and loop.step == 1 and trip_count(loop) is not None \
                and any(var not in u and inner in u for u in used):
            return var
    return None


def strided_reads(function: Function, chain: Sequence[For], var: str
                  ) -> tuple[tuple[str, tuple[int, ...]], ...]:
    """The buffers the band's innermost statements read walking a non-last
    dimension with loop ``var`` (a column of a row-major matrix) and never
    write in the band, each with the permutation putting that dimension last
    (its packed, transposed layout); empty when a subscript is not affine."""
    stmts = _statements(chain[-1].body)
    written = {stmt.buffer for stmt in stmts}
    found: dict[str, tuple[int, ...]] = {}
    for stmt in stmts:
        for load in expr_loads(stmt.value):
            if load.buffer in written or load.buffer in found or len(load.indices) < 2:
                continue
            affs = [affine_index(x) for x in load.indices]
            if any(a is None for a in affs):
                return ()
            used = [d for d, a in enumerate(affs) if a is not None and var in a.variables()]
            if used and used[-1] != len(affs) - 1 and function.buffers.get(load.buffer) is not None:
                found[load.buffer] = _order_last(load.indices, var)
    return tuple(found.items())


def pack_reuse(function: Function, chain: Sequence[For], buffer: str, inside: Sequence[str]) -> int:
    """How many times each element a packed copy of ``buffer`` holds is read,
    the copy made outside the band loops ``inside``: the least, over the
    band's reads of ``buffer``, product of the trip counts of the loops of
    ``inside`` that its subscripts do not use (an unknown trip count counts
    as 2: some reuse). 1 for a matrix every element of which is read once."""
    loops = {loop.var: loop for loop in chain}
    least: int | None = None
    for stmt in _statements(chain[-1].body):
        for load in expr_loads(stmt.value):
            if load.buffer != buffer:
                continue
            used = _vars(load.indices)
            reuse = 1
            for var in inside:
                if var not in used:
                    reuse *= trip_count(loops[var]) or 2
            least = reuse if least is None else min(least, reuse)
    return least or 1


def packed_rows_plan(function: Function, chain: Sequence[For], rows: str, rows_tile: int
                     ) -> tuple[object, ...] | None:
    """Row sums (:func:`reduction_chains`: each row's sum along the innermost
    loop a chain that must keep its order) vectorised across rows instead:
    loop ``rows`` tiled by ``rows_tile`` (a multiple of the vector lanes) and
    moved innermost, so each element's sum still runs in its order while a
    vector holds ``rows_tile`` of them; the reads walking a column with
    ``rows`` (:func:`strided_reads`) packed transposed per row tile
    (``pack``), the sums of the row tile kept in a local, full tiles split.
    ``None`` when no read needs the packing or none would be reused
    (:func:`pack_reuse`): a matrix read once (a plain matrix-vector product)
    costs a whole extra pass to pack, which measured slower than the
    unroll-and-jam plan (``mvt``, ``bicg`` at n = 1000, f32)."""
    band = [loop.var for loop in chain]
    below = band[band.index(rows):]
    packed = tuple((buffer, permutation) for buffer, permutation in strided_reads(function, chain, rows)
                   if pack_reuse(function, chain, buffer, below) >= 2)
    if not packed:
        return None
    taken = set(names_in_function(function))
    tile_var = _fresh(f"{rows}_p", taken)
    order = [v for v in below if v != rows] + [rows]
    steps: list[object] = [Tile((rows,), (rows_tile,), (tile_var,)),
                           Interchange(tuple(below), tuple(order))]
    steps += [Pack(tile_var, buffer, rows, permutation) for buffer, permutation in packed]
    outputs = []
    for stmt in _statements(chain[-1].body):
        used = _vars(stmt.indices)
        if rows in used and chain[-1].var not in used and stmt.buffer not in outputs:
            outputs.append(stmt.buffer)
    if outputs:
        steps.append(Copies(tile_var, tuple(outputs)))
    steps.append(SplitTiles(tile_var, (rows,)))
    return tuple(steps)


def names_in_function(function: Function) -> set[str]:
    from polyir.ir.names import names_in
    return names_in(function)


def lanes_for(function: Function, chain: Sequence[For], rows: str, vector_bits: int) -> int | None:
    """How many rows of the innermost reduction (:func:`reduction_chains`) to
    unroll and jam so that the CPU lowering runs the jammed copies as the
    lanes of one vector (``polyir.llvm.row_block``: each row's sum in its
    order, the block of a matrix read by rows transposed in registers): the
    lanes of a ``vector_bits`` vector of the statement's element type, when
    the jammed block would be one the lowering recognises (the band's
    innermost body one statement reading nothing of the buffer it writes;
    checked by the lowering's own ``match_row_block`` on the copies); else
    ``None``."""
    from polyir.llvm.row_block import aliased_reads, match_row_block
    inner = chain[-1]
    if len(inner.body) != 1 or not isinstance(inner.body[0], Assign):
        return None
    stmt = inner.body[0]
    buffer = function.buffers.get(stmt.buffer)
    if buffer is None or buffer.dtype not in ELEMENT_BYTES:
        return None
    count = vector_bits // (8 * ELEMENT_BYTES[buffer.dtype])
    if count < 4:
        return None
    copies: list[Assign] = []
    for r in range(count):
        copy = substitute_node(stmt, {rows: Aff.var(rows) + r})
        assert isinstance(copy, Assign)
        copies.append(replace(copy, name=f"{stmt.name}_{r}"))
    jammed = replace(inner, body=tuple(copies))
    block = match_row_block(jammed, function, lambda dtype: count)
    if block is None or aliased_reads(block):
        return None
    return count


def lane_blocks_for(function: Function, loop: For, vector_bits: int) -> int | None:
    """How many values of ``loop`` to run as one lane block
    (``polyir.tiling.lane_blocks``: reductions of growing length, Cholesky's,
    their shared part jammed): the lanes of a ``vector_bits`` vector of the
    reduction's element type, when ``loop`` has the shape the mechanism
    rewrites and the jammed part is a row block the CPU lowering runs across
    lanes (its own ``match_row_block``, on the rewritten loop); else ``None``."""
    from polyir.llvm.row_block import match_row_block
    from polyir.tiling.lane_blocks import lane_block_shape, lane_blocks
    from polyir.tiling.unroll_jam import unroll_jam
    shape = lane_block_shape(loop)
    if shape is None:
        return None
    _, statement = shape
    buffer = function.buffers.get(statement.buffer)
    if buffer is None or buffer.dtype not in ELEMENT_BYTES:
        return None
    count = vector_bits // (8 * ELEMENT_BYTES[buffer.dtype])
    if count < 4:
        return None
    lane = lane_name(function, loop.var)
    try:
        blocked, _ = lane_blocks(function, loop.var, count, lane, check=False)
        blocked, _ = unroll_jam(blocked, lane, count, 0, check=False)
        shared = find_loop(blocked, loop.var).body[0]  # the blocks keep the loop's name
    except PolyirError:
        return None
    if not isinstance(shared, For) or match_row_block(shared, blocked, lambda dtype: count) is None:
        return None
    return count


def lane_name(function: Function, loop: str) -> str:
    """The name of the lane loop a lane block of ``loop`` gets (fresh in ``function``)."""
    return fresh_name(f"{loop}_lane", names_in(function))


def lane_blocks_plan(function: Function, loop: str, lanes: int) -> tuple[object, ...]:
    """Blocks of ``lanes`` values of ``loop`` (``lane-blocks``), the shared part's
    lane loop then unrolled (``unroll-jam{depth=0}``: the copies the lowering
    runs as lanes)."""
    lane = lane_name(function, loop)
    return (LaneBlocks(loop, lanes, lane), UnrollJam((lane,), (lanes,), 0))


__all__ = ["stride_score", "unit_stride_order", "strided_along", "reduction_chains", "reuse_loop",
           "strided_reads", "pack_reuse", "packed_rows_plan", "lanes_for", "lane_blocks_for",
           "lane_blocks_plan", "lane_name", "names_in_function"]
