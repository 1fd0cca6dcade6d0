"""The convolution register tile's policy (part of ``auto-tile``): which
bands get it (``autotile.candidate_plans`` asks :func:`_widened_pointwise`
and :func:`_short_reduction`, orders the role assignments by
:func:`_window_score` and takes :func:`_window_plans`), its register cap,
its blocks of input channels (:func:`window_kc`) and where its weight panel
is packed (:func:`_reuse_scope`). The mechanism is
``levels.window_register_plan``; docs/tiling.md step 2 has the figures.
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING

from polyir.ir.names import names_in
from polyir.ir.nodes import Assign, Function, Load, Node
from polyir.ir.walk import walk_nodes
from polyir.polyhedral.extract import affine_index, expr_loads
from polyir.target import Target
from polyir.tiling.bands import enclosing_loops
from polyir.tiling.levels import Contraction, window_register_plan, work
from polyir.tiling.passes import Pack
from polyir.tiling.sizes import RegisterTile, lanes, register_tile

if TYPE_CHECKING:
    from polyir.tiling.autotile import TilePlan


def _widened_pointwise(function: Function, c: Contraction, target: Target) -> bool:
    """A 1x1 convolution widened back to a tile (``widen.py``: the band is
    the channel block, the width and the input channels, no batch loop)
    whose weights stay the same across an enclosing loop (the output rows):
    the convolution register tile fits it as it fits a shared-weights band.
    With the plain orders instead, a 14-wide output vectorised along its
    width took 17x eager's time (MobileNetV2's 64 -> 384 expansion with batch
    norm and ReLU6 at 14x14: 2.7 ms against 0.16 ms). Only for an output
    narrower than two vectors (rows ``c.i``), where the plain orders cannot
    vectorise the width; a wider one keeps them (and attention's score
    tiles, also loop-scoped, keep their plans)."""
    width = c.extent(c.i)
    if c.batch or c.right is None or width is None \
            or width >= 2 * lanes(target, c.element_bytes):
        return False
    enclosing = enclosing_loops(function, c.band[0])
    if not any(b.name == c.output for loop in enclosing for b in loop.locals):
        return False   # not a widened accumulator tile (a loop-scoped local)
    return _reuse_scope(function, c) is not None


def _short_reduction(c: Contraction, target: Target) -> bool:
    """A 1x1 convolution whose sums are shorter than ``SHORT_REDUCTION_VECTORS``
    vectors: its register tile over the output channels would copy each
    accumulator tile in and out transposed (an element moved twice per
    ``K / lanes`` vector FMAs), which costs more than the product; the plans
    of a matrix product over the output's own layout come first
    (MobileNetV2's 1x1 from 16 channels to 96 at 112x112, one thread:
    1.5 -> 0.75 ms). Only when the output rows (``c.i``, the width) are at
    least two vectors long: a narrow output keeps the channels vectorised."""
    extents = [c.extent(k) for k in c.k]
    width = c.extent(c.i)
    vector = lanes(target, c.element_bytes)
    if any(e is None for e in extents) or width is None or width < 2 * vector:
        return False
    return math.prod(extents) < SHORT_REDUCTION_VECTORS * vector  # type: ignore[arg-type]


SHORT_REDUCTION_VECTORS = 4


def _window_score(c: Contraction, target: Target) -> float:
    """How well the register tile of roles ``c`` fits: FMAs per loaded vector
    times the share of the work in full tiles (known extents)."""
    m, n = c.extent(c.i), c.extent(c.j)
    tile = register_tile(target, c.element_bytes, m, n, WINDOW_REGISTERS)
    score = tile.accumulators / (tile.mr + tile.nr // tile.lanes)
    for extent, size in ((m, tile.mr), (n, tile.nr)):
        if extent is not None and extent > 0:
            score *= (extent - extent % size) / extent if extent >= size else extent / size
    return score


def _window_plans(function: Function, c: Contraction, target: Target, register_work: int
                  ) -> list[TilePlan]:
    """A convolution's register tile for roles ``c`` (``levels.window_register_plan``),
    when the column loop ``j`` has at least a vector of iterations and its
    operand can be read with unit stride along it (as it is, or packed with
    ``j`` last: not when ``j`` scales a subscript, a strided window)."""
    amount = work(c)
    n = c.extent(c.j)
    if c.right is None or (n is not None and n < lanes(target, c.element_bytes)) \
            or (amount is not None and amount < register_work):
        return []
    if not c.unit_right and c.right_order[-1] == len(c.right_order) - 1:
        return []  # j in the last subscript with a stride: packing keeps the stride
    tile = register_tile(target, c.element_bytes, c.extent(c.i), n, WINDOW_REGISTERS)
    if tile.nr < MIN_COLUMN_VECTORS * tile.lanes:
        return []
    pack_at = _reuse_scope(function, c)
    kc = None if pack_at is not None else window_kc(target, c, tile)
    steps = window_register_plan(c, tile, set(names_in(function)), pack_at, kc)
    pack = next((step for step in steps if isinstance(step, Pack)), None)
    where = "" if pack is None else \
        f", {c.right} packed with {c.j} last per iteration of loop {pack.at}"
    from polyir.tiling.autotile import TilePlan
    return [TilePlan(c.band, "window", steps,
                     f"convolution register tile (rows {c.i}, columns {c.j}, reduction "
                     f"{', '.join(c.k)}): Mr x Nr = {tile}{where}")]


def window_kc(target: Target, c: Contraction, tile: RegisterTile) -> int | None:
    """Iterations of the first reduction loop per block of a convolution's
    packed panel (``levels.window_register_plan``), or ``None`` for one block:
    the panel (every reduction iteration by ``Nr`` columns) is read once per
    row tile and should stay in L2 with room for the rows streaming through;
    above :data:`WINDOW_PANEL_SHARE` of L2 it is cut into the fewest equal
    blocks that fit, or a few more when that many divide the loop exactly. Measured on ResNet-18's 3x3 convolutions (one thread):
    256 channels at 14x14 3.75 -> 3.08 ms, 512 at 7x7 5.6 -> 4.5 ms; an eighth
    or a half of L2 did as well, blocks sized for L1 (BLIS's ``Kc``) worse
    (5.1 and 8.0 ms: the accumulators' transposed copies repeat per block)."""
    extents = [c.extent(k) for k in c.k]
    if any(e is None for e in extents) or not extents:
        return None
    first, rest = extents[0], math.prod(extents[1:])  # type: ignore[arg-type]
    assert first is not None
    budget = target.cache(2).size * WINDOW_PANEL_SHARE
    panel = first * rest * tile.nr * c.element_bytes
    if panel <= budget:
        return None
    blocks = math.ceil(panel / budget)
    # equal blocks where a count up to twice the fewest divides the loop:
    # every block then has a constant size (512 channels in 4 blocks of 128,
    # not 3 of 171 and a partial one), which the pack's lowering as
    # transposed blocks needs (``polyir.llvm.transposed_copy``)
    blocks = next((n for n in range(blocks, 2 * blocks + 1) if first % n == 0), blocks)
    size = math.ceil(first / blocks)
    return size if size < first else None


WINDOW_REGISTERS = 20
"""The most vector registers a convolution's register tile may count on
(accumulators, loaded weight vectors and one broadcast; the target's count
when smaller). With all 32 of AVX-512 the tile came out 6x64 (24
accumulators) and ran much slower than 8x32 or 7x32 (16 and 14): LLVM fully
unrolls the kernel window's short loops around the tile and the addresses
of their broadcasts compete for the rest (one thread, f32: ResNet-18's 3x3
at 64 channels and 56x56 3.2 -> 2.2 ms a call, at 512 and 7x7 6.2 -> 3.0 ms,
ResNet-50's 1x1 from 1024 channels at 14x14 2.3 -> 1.1 ms; a cap of 16
registers, 4x48 and 2x64, was slower again)."""

WINDOW_PANEL_SHARE = 0.25
"""The share of L2 a convolution's packed weight panel may take (:func:`window_kc`)."""

MIN_COLUMN_VECTORS = 2
"""The fewest vectors in a convolution register tile's columns (the
window plan's and, for a convolution, the plain register plan's). LLVM fully
unrolls a one-vector column loop (a constant trip count of 16 floats) before
its loop vectoriser runs and then vectorises the copies across the kernel
window instead: a ResNet block at 16 channels and 16x16 ran 17x slower (a
16x16 tile) than with the direct plan."""


def _reuse_scope(function: Function, c: Contraction) -> str | None:
    """The loop enclosing the band under which the column operand's packed panel
    is the same for every iteration of the loops between (a widened
    convolution's output-row loop does not move the weights): the innermost
    enclosing loop that the operand's subscripts use, above at least one that
    they do not (the outermost enclosing loop when none uses them); ``None``
    when the band's own column tile is the place (no enclosing loop, or the
    innermost one moves the operand)."""
    assert c.right is not None
    used: set[str] = set()
    for node in walk_nodes(function.body):
        for load in _loads_of(node, c.right):
            for index in load.indices:
                aff = affine_index(index)
                used |= set(aff.variables()) if aff is not None else set()
    enclosing = enclosing_loops(function, c.band[0])
    skipped: str | None = None
    for loop in reversed(enclosing):
        if loop.var in used:
            return loop.var if skipped is not None else None
        skipped = loop.var
    return skipped


def _loads_of(node: Node, buffer: str) -> list[Load]:
    if not isinstance(node, Assign):
        return []
    return [ld for ld in expr_loads(node.value) if ld.buffer == buffer]
