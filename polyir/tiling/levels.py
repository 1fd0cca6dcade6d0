"""Multi-level plans (policy): which loops play which role, and the pipeline
of mechanism passes that tiles them.

:func:`contraction_roles` recognises a matrix-product-like band: one
statement ``X[..., i, j] += ... A[.., i, .., k, ..] ... B[.., k, .., j, ..]``
(any loop order, transposed operands, extra factors that do not depend on
``i`` and ``j``, batch loops that index ``X``): ``j`` the column loop (``B``
depends on it, ``A`` does not), ``i`` the row loop (``A`` depends on it, ``B``
does not), ``k`` the reduction loop, the other loops of ``X`` batch loops.

Plans are data: tuples of pass instances (``Tile``, ``Interchange``,
``Copies``, ``SplitTiles``, ``UnrollJam``) that print as a pipeline
(``polyir.passes.format_pipeline``) and replay exactly:

* :func:`gemm_plan`: BLIS's five loops around a micro-kernel,
  ``j_c, k_c, i_c, j_r, i_r`` (``Nc, Kc, Mc, Nr, Mr``), the right operand
  packed per ``k_c`` in ``Kc x Nr`` panels, the left per ``i_c`` in ``Mr``-row
  panels laid out column by column, the ``Mr x Nr`` accumulators in a
  loop-scoped local (registers), full tiles split from partial ones, the rows
  of the register tile unrolled;
* :func:`register_plan`: the register tile alone (small products, several
  reduction loops);
* :func:`packed_register_plan`: the register tile with a column operand
  that walks memory with a stride along ``j`` packed transposed per column
  tile (``pack``), reused by every row tile;
* :func:`order_plan`: an interchange giving the innermost loop unit-stride
  accesses;
* :func:`jam_plan`: an innermost reduction loop (a matrix-vector product's
  row sums) with several rows unrolled and jammed into it, so that
  independent sums hide the latency of each add
  (:func:`reduction_chains` finds the loop); :func:`lanes_for` sizes it to
  the vector lanes when the CPU lowering runs the copies as lanes
  (``polyir.llvm.row_block``: the block of the matrix transposed in
  registers, each sum in its order); :func:`lane_blocks_for` sizes the
  blocks of reductions of growing length (Cholesky's) the same way.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from polyir.ir.nodes import Assign, For, Function, Load
from polyir.ir.types import DType
from polyir.polyhedral.extract import affine_index, expr_loads, reduction_of
from polyir.tiling.passes import Copies, Interchange, Pack, SplitTiles, Tile, UnrollJam
from polyir.tiling.sizes import GemmSizes, RegisterTile

ELEMENT_BYTES = {DType.F32: 4, DType.F64: 8}


@dataclass(frozen=True)
class Contraction:
    """The roles of a matrix-product-like band (see the module docstring)."""

    band: tuple[str, ...]
    batch: tuple[str, ...]
    i: str
    j: str
    k: tuple[str, ...]
    output: str
    left: str | None
    right: str | None
    left_order: tuple[int, ...]
    right_order: tuple[int, ...]
    extents: tuple[tuple[str, int | None], ...]
    element_bytes: int
    rectangular: bool
    rows_grow: bool = False
    """A triangular band whose rows reach further as the column grows
    (``j >= i``: the triangle's wide end at the last columns)."""
    output_order: tuple[int, ...] = ()
    """A permutation of the output's dimensions putting ``j``'s last."""
    windowed: bool = False
    """An operand subscript combines two band loops or scales one (a convolution)."""
    unit_right: bool = True
    """The column operand walks memory with unit stride along ``j``."""
    shared_right: bool = False
    """There are batch loops and the column operand uses none of them (a
    convolution's weights, shared by every output row and image)."""

    def extent(self, var: str) -> int | None:
        return dict(self.extents).get(var)


def _vars(indices: Sequence[object]) -> set[str]:
    found: set[str] = set()
    for index in indices:
        aff = affine_index(index)
        if aff is None:
            return {"<gather>"}
        found |= set(aff.variables())
    return found


def trip_count(loop: For) -> int | None:
    """The constant trip count of ``loop``, when its bounds are constants."""
    if len(loop.lower) == 1 and len(loop.upper) == 1 and loop.lower[0].is_constant \
            and loop.upper[0].is_constant:
        return max(0, -(-(loop.upper[0].constant - loop.lower[0].constant) // loop.step))
    return None


def largest_trip_count(loop: For) -> int | None:
    """The most iterations ``loop`` can run when a constant bounds them: its constant
    trip count, or for a tile's loop ``i = a to min(N, a + 48)`` (a lower bound that
    one of the upper bounds exceeds by a constant) that constant over the step."""
    known = trip_count(loop)
    if known is not None or len(loop.lower) != 1:
        return known
    spans = [(upper - loop.lower[0]) for upper in loop.upper]
    widths = [span.constant for span in spans if span.is_constant]
    if not widths:
        return None
    return max(0, -(-min(widths) // loop.step))


def _order_last(indices: Sequence[object], var: str) -> tuple[int, ...]:
    """A permutation of the dimensions putting the (first) one that uses ``var`` last."""
    dims = list(range(len(indices)))
    for d, index in enumerate(indices):
        aff = affine_index(index)
        if aff is not None and var in aff.variables():
            return tuple([e for e in dims if e != d] + [d])
    return tuple(dims)


def contraction_roles(function: Function, chain: Sequence[For]) -> Contraction | None:
    """The roles of the band ``chain`` when it is matrix-product-like, else ``None``
    (the first of :func:`contraction_options`)."""
    options = contraction_options(function, chain)
    return options[0] if options else None


def contraction_options(function: Function, chain: Sequence[For]) -> list[Contraction]:
    """Every assignment of roles that makes the band ``chain`` matrix-product-like,
    the column loop ``j`` the output's last-dimension loop first (a
    convolution has two: the output width with the input as column operand,
    the output channel with the weights)."""
    if len(chain) < 3:
        return []
    body = chain[-1].body
    if len(body) != 1 or not isinstance(body[0], Assign):
        return []
    stmt = body[0]
    update = reduction_of(stmt)
    if update is None or update[1] != "+":
        return []
    buffers = function.buffers
    out = buffers.get(stmt.buffer)
    if out is None or out.dtype not in ELEMENT_BYTES:
        return []
    band = [loop.var for loop in chain]
    out_vars = _vars(stmt.indices)
    if "<gather>" in out_vars:
        return []
    parallel = [v for v in band if v in out_vars]
    reduction = [v for v in band if v not in out_vars]
    if not reduction or len(parallel) < 2:
        return []
    loads = [ld for ld in expr_loads(stmt.value) if ld.buffer != stmt.buffer]
    if any("<gather>" in _vars(ld.indices) for ld in loads):
        return []
    operands = [ld for ld in loads if _vars(ld.indices) & set(band)]
    if len(operands) != 2:
        return []
    # j: the output's last-dimension loop if an operand uses it and the other does not
    candidates = []
    last = affine_index(stmt.indices[-1]) if stmt.indices else None
    if last is not None:
        candidates += [v for v in band if v in last.variables() and v in parallel]
    candidates += [v for v in reversed(parallel) if v not in candidates]
    found: list[Contraction] = []
    for j in candidates:
        users = [ld for ld in operands if j in _vars(ld.indices)]
        if len(users) != 1:
            continue
        right: Load = users[0]
        left: Load = next(ld for ld in operands if ld is not right)
        rows = [v for v in reversed(parallel) if v != j and v in _vars(left.indices)
                and v not in _vars(right.indices)]
        if not rows:
            continue
        i = rows[0]
        if any(v not in _vars(left.indices) or v not in _vars(right.indices) for v in reduction):
            continue
        batch = tuple(v for v in band if v in parallel and v not in (i, j))
        rectangular = all(not (set(b.variables()) & set(band)) for loop in chain
                          for b in loop.lower + loop.upper) and all(loop.step == 1 for loop in chain)
        extents = tuple((loop.var, largest_trip_count(loop)) for loop in chain)
        loops = {loop.var: loop for loop in chain}
        rows_grow = any(j in b.variables() and b.coefficient(j) > 0 for b in loops[i].upper) \
            or any(i in b.variables() and b.coefficient(i) > 0 for b in loops[j].lower)
        found.append(Contraction(
            tuple(band), batch, i, j, tuple(reduction), stmt.buffer, left.buffer, right.buffer,
            _order_last(left.indices, i), _order_last(right.indices, j), extents,
            ELEMENT_BYTES[out.dtype], rectangular, rows_grow,
            output_order=_order_last(stmt.indices, j), windowed=_windowed(operands, band),
            unit_right=_unit_along(right, j),
            shared_right=bool(batch) and not set(batch) & _vars(right.indices)))
    return found


def _windowed(operands: Sequence[Load], band: Sequence[str]) -> bool:
    """Does an operand subscript combine two band loops (``oh + kh``: a kernel
    window) or scale one (``2 * ow``: a stride)? Then the band is a
    convolution rather than a matrix product."""
    for load in operands:
        for index in load.indices:
            aff = affine_index(index)
            if aff is None:
                continue
            used = [v for v in aff.variables() if v in band]
            if len(used) > 1 or any(abs(aff.coefficient(v)) > 1 for v in used):
                return True
    return False


def _unit_along(load: Load, var: str) -> bool:
    """Does ``load`` walk memory with unit stride along ``var`` (``var`` in its
    last subscript only, with coefficient +-1)?"""
    affs = [affine_index(i) for i in load.indices]
    if not affs or any(a is None for a in affs):
        return False
    last = affs[-1]
    return last is not None and abs(last.coefficient(var)) == 1 \
        and all(a is not None and var not in a.variables() for a in affs[:-1])


def _fresh(base: str, taken: set[str]) -> str:
    from polyir.ir.names import claim_name
    return claim_name(base, taken)


def _prefix(c: Contraction) -> tuple[list[object], list[str]]:
    """The interchange putting the batch loops outermost, then ``i, j``, then the
    reduction loops (a no-op plan step is left out); the band's new order."""
    order = list(c.batch) + [c.i, c.j] + list(c.k)
    steps: list[object] = []
    if order != list(c.band):
        steps.append(Interchange(tuple(c.band), tuple(order)))
    return steps, order


def gemm_plan(c: Contraction, sizes: GemmSizes, taken: set[str]) -> tuple[object, ...]:
    """BLIS's plan for a contraction with one reduction loop (see the module docstring)."""
    (k,) = c.k
    steps, _ = _prefix(c)
    ic, jc, kc = _fresh(f"{c.i}_c", taken), _fresh(f"{c.j}_c", taken), _fresh(f"{k}_c", taken)
    ir, jr = _fresh(f"{c.i}_r", taken), _fresh(f"{c.j}_r", taken)
    tile = sizes.register
    # batch loops the column operand does not use (a Linear layer over a
    # sequence of batches, ``y[t, b, n] += x[b, t, k] * W[n, k]``) run inside
    # the column panel's loops, as more rows: the panel is packed once, not
    # once per batch iteration (BERT's in-projection at batch 8: 2304 x 768
    # packed 128 times, half of the layer's time)
    fold = c.shared_right and any((c.extent(b) or 2) > 1 for b in c.batch)
    blocks = (*c.batch, ic) if fold else (ic,)
    steps += [
        Tile((c.i, c.j, k), (sizes.mc, sizes.nc, sizes.kc), (ic, jc, kc)),
        Interchange((*blocks, jc, kc), (jc, kc, *blocks)),
        Tile((c.i, c.j), (tile.mr, tile.nr), (ir, jr)),
        Interchange((ir, jr, c.i, c.j, k), (jr, ir, k, c.i, c.j)),
    ]
    if c.right is not None and c.right != c.left:
        steps.append(Copies(kc, (c.right,), jr, _identity_or(c.right_order)))
    if c.left is not None and c.left != c.right:
        steps.append(Copies(ic, (c.left,), ir, _identity_or(c.left_order)))
    steps += [
        Copies(ir, (c.output,)),
        SplitTiles(ir, (c.i, c.j)),
        UnrollJam((c.i,), (tile.mr,), 0),
    ]
    return tuple(steps)


def register_plan(c: Contraction, tile: RegisterTile, taken: set[str],
                  box: bool = False) -> tuple[object, ...]:
    """The register tile alone: ``i_r, j_r`` tiles around the reduction loops,
    the accumulators in a local of ``j_r``, full tiles split, rows unrolled
    (with ``box``, :func:`split_steps`' box tiles too)."""
    steps, _ = _prefix(c)
    ir, jr = _fresh(f"{c.i}_r", taken), _fresh(f"{c.j}_r", taken)
    steps += [
        Tile((c.i, c.j), (tile.mr, tile.nr), (ir, jr)),
        Interchange((ir, jr, c.i, c.j) + c.k, (ir, jr) + c.k + (c.i, c.j)),
        Copies(jr, (c.output,)),
    ]
    return tuple(steps) + split_steps(c, tile, jr, taken, box)


def split_steps(c: Contraction, tile: RegisterTile, at: str, taken: set[str],
                box: bool = False) -> tuple[object, ...]:
    """Full tiles split from the rest below ``at``, their ``Mr`` rows unrolled.
    With ``box`` (a triangular band), the tiles on the diagonal are computed
    over their whole box into the accumulators' local (``split-tiles{pad=}``,
    ``polyir.tiling.pad``) and unrolled too: the micro-kernel instead of a
    row loop of variable length per row."""
    if not box:
        return (SplitTiles(at, (c.i, c.j)), UnrollJam((c.i,), (tile.mr,), 0))
    ib, jb = _fresh(f"{c.i}_b", taken), _fresh(f"{c.j}_b", taken)
    return (SplitTiles(at, (c.i, c.j), (ib, jb)), UnrollJam((c.i, ib), (tile.mr, tile.mr), 0))


def column_operand_strided(c: Contraction) -> bool:
    """Does the column operand walk memory with a stride along ``j`` (``j`` not
    in its last subscript: ``syrk``'s ``A[j, k]``)? The register tile's
    vectorised loop ``j`` then gathers it unless it is packed transposed."""
    return c.right is not None and c.right_order != tuple(range(len(c.right_order))) \
        and c.right_order[-1] != len(c.right_order) - 1


def packed_register_plan(c: Contraction, tile: RegisterTile, taken: set[str],
                         pack: bool = True, box: bool = False) -> tuple[object, ...]:
    """The register tile with the column operand packed transposed: ``j_r``
    outermost, the ``Nr`` columns of the right operand that one ``j_r`` reads
    copied (``pack``) into a local laid out with ``j`` last, so the
    vectorised ``j`` loop reads it with unit stride; every row tile ``i_r``
    inside reuses the panel. Accumulators, split and unroll as in
    :func:`register_plan` (``box``: see :func:`split_steps`)."""
    assert c.right is not None
    order = list(c.batch) + [c.j, c.i] + list(c.k)
    steps: list[object] = [Interchange(tuple(c.band), tuple(order))] if order != list(c.band) else []
    ir, jr = _fresh(f"{c.i}_r", taken), _fresh(f"{c.j}_r", taken)
    # the column tiles of a triangle widening with the columns end at the last
    # column: the partial one is the first, the narrowest
    ends = (c.j,) if c.rows_grow else ()
    steps += [
        Tile((c.j, c.i), (tile.nr, tile.mr), (jr, ir), ends),
        Interchange((jr, ir, c.j, c.i) + c.k, (jr, ir) + c.k + (c.i, c.j)),
    ]
    if pack:
        steps.append(Pack(jr, c.right, c.j, c.right_order))
    steps.append(Copies(ir, (c.output,)))
    return tuple(steps) + split_steps(c, tile, ir, taken, box)


def window_register_plan(c: Contraction, tile: RegisterTile, taken: set[str],
                         pack_at: str | None = None, kc: int | None = None) -> tuple[object, ...]:
    """A convolution's register tile with the column operand (the weights,
    ``j`` the output channel) packed with ``j`` last: ``j_r`` outermost, then
    the batch loops (batch, output rows), so that every batch iteration
    reuses the packed panel; ``i_r`` (output columns, whatever the stride),
    the reduction loops (input channels, kernel window), then the
    ``Mr x Nr`` register tile, its accumulators in a local of ``i_r`` laid
    out with ``j`` last, full tiles split, rows unrolled::

        for j_r, <batch>, i_r { acc[Mr, Nr] ; for <k...> { for i, j { acc[i, j] += x[.. i ..] * w_p[k.., j] } } }

    ``pack_at``: a loop enclosing the band to pack the panel under instead of
    ``j_r`` (the loops between do not move the weights: a widened
    convolution's output rows reuse one packed block).

    ``kc``: blocks of that many iterations of the first reduction loop (the
    input channels), their loop ``k_c`` just inside ``j_r``, the panel packed
    per block: a panel of the whole reduction that would not stay in L2
    across the row tiles (512 channels of a 3x3 kernel: 884 KiB at
    ``Nr = 48``) becomes several that do. Each output element still sums in
    its order (the blocks run in order, each whole, for every element).
    """
    assert c.right is not None
    order = [c.j, *c.batch, c.i, *c.k]
    steps: list[object] = [Interchange(tuple(c.band), tuple(order))] if order != list(c.band) else []
    ir, jr = _fresh(f"{c.i}_r", taken), _fresh(f"{c.j}_r", taken)
    steps += [
        Tile((c.j,), (tile.nr,), (jr,)),
        Tile((c.i,), (tile.mr,), (ir,)),
    ]
    if kc is not None and c.k:
        k0c = _fresh(f"{c.k[0]}_c", taken)
        steps += [
            Tile((c.k[0],), (kc,), (k0c,)),
            Interchange((jr, c.j, *c.batch, ir, c.i, k0c, *c.k),
                        (jr, k0c, *c.batch, ir, *c.k, c.i, c.j)),
        ]
        pack_at = pack_at or k0c
    else:
        steps.append(Interchange((jr, c.j, *c.batch, ir, c.i, *c.k),
                                 (jr, *c.batch, ir, *c.k, c.i, c.j)))
    if c.right_order[-1] != len(c.right_order) - 1 or not c.unit_right:
        steps.append(Pack(pack_at or jr, c.right, c.j, c.right_order))
    steps += [
        Copies(ir, (c.output,), "", _identity_or(c.output_order)),
        SplitTiles(ir, (c.i, c.j)),
        UnrollJam((c.i,), (tile.mr,), 0),
    ]
    return tuple(steps)


def _identity_or(order: tuple[int, ...]) -> tuple[int, ...]:
    return () if order == tuple(range(len(order))) else order


def jam_plan(var: str, factor: int) -> tuple[object, ...]:
    """Unroll ``var`` by ``factor`` and jam the copies into the innermost loop:
    ``factor`` independent accumulations per statement."""
    return (UnrollJam((var,), (factor,), -1),)


def order_plan(band: Sequence[str], order: Sequence[str]) -> tuple[object, ...]:
    """One interchange of ``band`` to ``order``."""
    return (Interchange(tuple(band), tuple(order)),)


def work(c: Contraction) -> int | None:
    """The number of statement instances, when every extent is known."""
    total = 1
    for _, extent in c.extents:
        if extent is None:
            return None
        total *= extent
    return total


__all__ = ["Contraction", "contraction_roles", "contraction_options", "window_register_plan", "gemm_plan",
           "register_plan", "order_plan", "jam_plan", "packed_register_plan", "column_operand_strided",
           "trip_count", "largest_trip_count", "work", "ELEMENT_BYTES"]
