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
from dataclasses import dataclass, replace

from polyir.errors import PolyirError
from polyir.ir.affine import Aff
from polyir.ir.names import find_loop, fresh_name, names_in
from polyir.ir.nodes import Assign, For, Function, If, Load
from polyir.ir.types import DType
from polyir.ir.walk import substitute_node
from polyir.polyhedral.extract import affine_index, expr_loads, reduction_of
from polyir.tiling.passes import Copies, Interchange, LaneBlocks, Pack, SplitTiles, Tile, UnrollJam
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
    steps += [
        Tile((c.i, c.j, k), (sizes.mc, sizes.nc, sizes.kc), (ic, jc, kc)),
        Interchange((ic, jc, kc), (jc, kc, ic)),
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


# ------------------------------------------------------------------ loop order
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


__all__ = ["Contraction", "contraction_roles", "contraction_options", "window_register_plan", "gemm_plan", "register_plan", "order_plan",
           "jam_plan", "lanes_for", "reduction_chains", "packed_register_plan", "packed_rows_plan",
           "strided_reads", "column_operand_strided", "pack_reuse", "reuse_loop", "strided_along",
           "unit_stride_order", "stride_score", "trip_count", "largest_trip_count", "work", "ELEMENT_BYTES"]
