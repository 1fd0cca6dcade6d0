"""``auto-tile``: find the bands worth tiling, choose a plan from the Target,
apply it, prove it (policy; the mechanisms are ``tile.py`` and its siblings).

For every band (a maximal chain of perfectly nested loops, after fusion and
distribution) of every host function:

0. a band whose innermost body is a reduction into a scalar local followed
   by its epilogue first loses the scalar: a matrix product's (one reduction
   loop, ``acc = acc + x * y``: a Linear layer with bias, GELU, a residual
   add) is spilled into the output cell the epilogue stores to and the nest
   distributed (``spill.spill_for_tiling``, where the product then gets a
   plan below); a convolution's (a kernel window, fused with batch norm and
   ReLU) is widened to a tile (``widen.widen_function``, proven); either way
   the plans below see the reduction as a perfect band;
1. a matrix-product-like band (``levels.contraction_roles``) with a
   rectangular iteration space and one reduction loop gets BLIS's plan
   (``levels.gemm_plan``, sizes from ``sizes.gemm_sizes``); a smaller one,
   one with several reduction loops, or a triangular one (``j <= i``: the
   tiles are over-approximated, the full ones below the diagonal get the
   micro-kernel with constant trip counts, the diagonal ones keep the exact
   bounds) the register tile alone (``levels.register_plan``);
2. any other band whose innermost loop walks memory with a stride gets the
   loop order with unit-stride innermost accesses, when a dependence does
   not forbid it (``orders.unit_stride_order``); a direct convolution first
   with its output-channel loop unrolled and jammed into that order
   (``orders.reuse_loop``: one loaded input vector, several accumulators);
3. a band whose innermost loop is a float reduction for all its statements
   (a matrix-vector product: ``x[i] += A[i, j] * y[j]``) gets an outer loop
   that every statement's element moves with unrolled and jammed into it
   (``levels.jam_plan``, ``sizes.reduction_jam`` rows): independent sums
   instead of one chain of dependent adds, each sum in its original order;
   first by the vector lanes when the CPU lowering runs the jammed copies
   as lanes (``orders.lanes_for``, ``polyir.llvm.row_block``).
   It is tried before an order whose innermost loop would still walk a
   column (``orders.strided_along``), after the others;
4. a loop whose body starts with a reduction running to it (Cholesky's
   ``A[i, j] -= A[i, k] * A[j, k]``, ``k < j``) runs in blocks of the vector
   lanes, the part of their reductions they share across the lanes
   (``orders.lane_blocks_for``, ``polyir.tiling.lane_blocks``; proven on the
   rolled form, the lane loop's unroll after it is not proven again).

A plan is a pipeline of the explicit mechanism passes; it is applied without
the per-step checks and proven once, against the original nest's
dependences, by ``check_rewrite`` (up to its trailing full/partial split and
unroll-and-jam, see :func:`proven_prefix`) (every statement instance mapped back to
the original through the origins the mechanisms report; the copy statements
of the scratchpads are proven by their construction). A plan that fails to
apply or to prove leaves the band as it was, and the next candidate is
tried. With ``parallel`` (the pass's default; ``auto-tile{parallel=false}``
turns it off) the row-block loop of BLIS's plan is marked ``parallel`` on a
multi-core target (``Target.cores > 1``) when no dependence relates two rows. Every decision is a remark: ``applied`` ones carry the plan as a
pipeline string that ``polyir.transform`` replays, ``missed`` ones the reason
(a dependence with two instances, an unsupported construct).

Tiling, interchange, unroll-and-jam and packing change no sum's order for any
element: the results stay bit-equal to the original program's.
"""
from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from polyir.errors import PolyirError
from polyir.ir.canonical import canonical_form
from polyir.ir.names import names_in
from polyir.ir.nodes import For, Function, If, Node
from polyir.passes import format_pipeline
from polyir.polyhedral.dependences import MEMORY_KINDS, Dependences, compute_dependences
from polyir.polyhedral.extract import NotPolyhedral, extract
from polyir.polyhedral.legality import (
    Origin,
    check_permutable,
    check_permutation,
    check_rewrite,
    compose_origins,
)
from polyir.target import Target
from polyir.tiling.bands import (
    BandPath,
    band_path,
    band_scope,
    band_surroundings,
    nest_dependences,
    nest_function,
    nest_of,
    perfect_chain,
    without_statements,
)
from polyir.tiling.copies import copy_buffer
from polyir.tiling.hoisting import hoist_copies
from polyir.tiling.interchange import interchange_band
from polyir.tiling.lane_blocks import lane_blocks
from polyir.tiling.levels import (
    ELEMENT_BYTES,
    Contraction,
    column_operand_strided,
    contraction_options,
    gemm_plan,
    jam_plan,
    order_plan,
    packed_register_plan,
    register_plan,
    trip_count,
    work,
)
from polyir.tiling.orders import (
    lane_blocks_for,
    lane_blocks_plan,
    lanes_for,
    packed_rows_plan,
    reduction_chains,
    reuse_loop,
    strided_along,
    unit_stride_order,
)
from polyir.tiling.passes import (
    Copies,
    Interchange,
    LaneBlocks,
    Pack,
    SplitTiles,
    Tile,
    UnrollJam,
)
from polyir.tiling.sizes import gemm_sizes, lanes, reduction_jam, register_tile
from polyir.tiling.spill import spill_for_tiling
from polyir.tiling.split import split_tiles
from polyir.tiling.tile import tile_band
from polyir.tiling.transpack import pack_operand
from polyir.tiling.unroll_jam import unroll_jam
from polyir.tiling.widen import widen_function
from polyir.tiling.window_plans import (  # noqa: F401  (WINDOW_* re-exported)
    MIN_COLUMN_VECTORS,
    SHORT_REDUCTION_VECTORS,
    WINDOW_PANEL_SHARE,
    WINDOW_REGISTERS,
    _loads_of,
    _short_reduction,
    _widened_pointwise,
    _window_plans,
    _window_score,
    window_kc,
)
from polyir.tiling.zero_pad import pad_function

Remark = Callable[[str, str, str], None]
"""``remark(where, why, kind)``."""


@dataclass(frozen=True)
class TilePlan:
    """One band's plan: ``kind`` (``gemm``, ``register``, ``order``, ``direct``, ``lanes``, ``rows``,
    ``jam`` or ``blocks``), the
    mechanism passes ``steps`` and what the cost model chose (``why``)."""

    band: tuple[str, ...]
    kind: str
    steps: tuple[object, ...]
    why: str
    parallel: tuple[str, ...] = ()
    """``(tile loop, band loop)``: the tile loop to run in parallel on a
    multi-core target when no dependence crosses two values of the band loop."""

    @property
    def band_order(self) -> tuple[str, ...]:
        """The band's loop order after the plan's first interchange (an
        ``order`` plan's new order), else the band as it was."""
        first = self.steps[0] if self.steps else None
        return first.order if isinstance(first, Interchange) else self.band

    @property
    def pipeline(self) -> str:
        """The plan as a pipeline string (``polyir.transform`` replays it)."""
        return format_pipeline(self.steps)


def find_bands(function: Function) -> list[list[For]]:
    """Every maximal band of ``function``: a loop that is not the only node of an
    enclosing loop's body, and the loops perfectly nested below it."""
    found: list[list[For]] = []

    def visit(nodes: Sequence[Node], inside_single: bool) -> None:
        for node in nodes:
            if isinstance(node, For):
                chain = perfect_chain(node)
                if not inside_single:
                    found.append(chain)
                innermost = chain[-1]
                visit(innermost.body, False)
            elif isinstance(node, If):
                visit(node.then_body, False)
                visit(node.else_body, False)

    visit(function.body, False)
    return found


# ------------------------------------------------------------------ choosing
def candidate_plans(function: Function, chain: Sequence[For], target: Target,
                    gemm_work: int, register_work: int, parallel: bool = False,
                    reassociate: bool = False) -> list[TilePlan]:
    """The plans worth trying for the band ``chain``, best first. With
    ``reassociate`` (fast math), a band whose innermost loop is a unit-stride
    float reduction and no matrix product or convolution gets the one plan
    ``keep``: LLVM's vectoriser may then reorder the sums and runs the loop as
    it stands on vector accumulators, which beats any number of jammed
    scalar chains."""
    plans: list[TilePlan] = []
    band = tuple(loop.var for loop in chain)
    options = contraction_options(function, chain)
    if reassociate and not options and reduction_chains(function, chain) is not None \
            and not strided_along(chain, chain[-1].var):
        return [TilePlan(band, "keep", (),
                         f"reduction along {chain[-1].var}, unit stride: left to the vectoriser "
                         f"(fast math lets it reorder the sums)")]
    # a convolution: a kernel window or a stride (any roles), or channels first
    # (the vectorised channels not the output's last dimension, the weights
    # shared by the batch loops: a 1x1 convolution, whose matrix-product plan
    # would vectorise the short output width)
    windows = [c for c in options if c.windowed
               or ((c.shared_right or _widened_pointwise(function, c, target))
                   and c.output_order != tuple(range(len(c.output_order)))
                   and not _short_reduction(c, target))]
    for option in sorted(windows, key=lambda c: -_window_score(c, target)):
        plans += _window_plans(function, option, target, register_work)
    if options:
        plans += _contraction_plans(function, options[0], target, gemm_work, register_work,
                                    parallel)
    orders = [TilePlan(band, "order", order_plan(band, order),
                       f"loop {order[-1]} innermost: unit-stride accesses")
              for order in unit_stride_order(function, chain)]
    # a direct convolution: the unit-stride order with the output-channel
    # loop unrolled and jammed into it (one input vector, several accumulators)
    for plan in [p for p in orders if not strided_along(chain, p.band_order[-1])]:
        reuse = reuse_loop(function, chain, plan.band_order)
        if reuse is not None:
            factor = min(reduction_jam(target, 1), trip_count(_band_loop(chain, reuse)) or 1)
            if factor > 1:
                plans.append(TilePlan(band, "direct", plan.steps + jam_plan(reuse, factor),
                                      f"{plan.why}; loop {reuse} unrolled by {factor} and jammed "
                                      f"(each loaded value reused by {factor} accumulators)"))
    # an order whose innermost loop still walks a column comes after the jam
    plans += [p for p in orders if not strided_along(chain, p.band_order[-1])]
    rows = reduction_chains(function, chain)
    if rows is not None:
        across = _lanes_plan(function, chain, rows, target)
        if across is not None:
            plans.append(across)
        packed = _packed_rows(function, chain, rows, target)
        if packed is not None:
            plans.append(packed)
        factor = reduction_jam(target, len(chain[-1].body))
        plans.append(TilePlan(band, "jam", jam_plan(rows, factor),
                              f"reduction along {chain[-1].var}: loop {rows} unrolled by {factor} "
                              f"and jammed ({factor} independent sums per statement)"))
    plans += [p for p in orders if strided_along(chain, p.band_order[-1])]
    blocks = _lane_blocks_plan(function, chain, target)
    if blocks is not None:
        plans.append(blocks)
    return plans


def _lane_blocks_plan(function: Function, chain: Sequence[For], target: Target) -> TilePlan | None:
    """Reductions of growing length (Cholesky's ``A[i, j] -= A[i, k] * A[j, k]``,
    ``k < j``) run in blocks of the vector lanes, their shared part across the
    lanes (``orders.lane_blocks_for``), when the band's innermost loop is that
    loop and runs at least that many times (or unknown)."""
    count = lane_blocks_for(function, chain[-1], target.vector_bits)
    if count is None:
        return None
    extent = trip_count(chain[-1])
    if extent is not None and extent < count:
        return None
    var = chain[-1].var
    return TilePlan(tuple(loop.var for loop in chain), "blocks", lane_blocks_plan(function, var, count),
                    f"reductions of loop {var} in blocks of {count}: the part they share vectorised "
                    f"across the lanes (each sum in its order), the rest of each in order")


def _lanes_plan(function: Function, chain: Sequence[For], rows: str, target: Target
                ) -> TilePlan | None:
    """The row sums run across a vector of rows (``levels.lanes_plan``): the
    row loop unrolled by the target's lanes and jammed, when the jammed block
    is one the CPU lowering runs as vector lanes (``polyir.llvm.row_block``,
    each row's sum in its order) and the rows are at least that many (or
    unknown)."""
    count = lanes_for(function, chain, rows, target.vector_bits)
    if count is None:
        return None
    extent = trip_count(_band_loop(chain, rows))
    if extent is not None and extent < count:
        return None
    band = tuple(loop.var for loop in chain)
    return TilePlan(band, "lanes", jam_plan(rows, count),
                    f"reduction along {chain[-1].var} vectorised across {count} rows of {rows} "
                    f"(each sum in its order, the block of columns transposed in registers)")


def _packed_rows(function: Function, chain: Sequence[For], rows: str, target: Target
                 ) -> TilePlan | None:
    """The row sums vectorised across ``PACK_ROW_VECTORS`` vectors of rows with
    the column-walking reads packed transposed (``orders.packed_rows_plan``),
    when the rows are at least two such tiles (or unknown) and the elements
    are f32/f64."""
    buffer = function.buffers.get(chain[-1].body[0].buffer)  # type: ignore[union-attr]
    if buffer is None or buffer.dtype not in ELEMENT_BYTES:
        return None
    tile = PACK_ROW_VECTORS * lanes(target, ELEMENT_BYTES[buffer.dtype])
    extent = trip_count(_band_loop(chain, rows))
    if extent is not None and extent < 2 * tile:
        return None
    steps = packed_rows_plan(function, chain, rows, tile)
    if steps is None:
        return None
    band = tuple(loop.var for loop in chain)
    return TilePlan(band, "rows", steps,
                    f"reduction along {chain[-1].var} vectorised across {tile} rows of {rows} "
                    f"(each sum in its order), column reads packed transposed")


PACK_ROW_VECTORS = 2
"""Vectors of rows in a packed row tile (:func:`_packed_rows`)."""


def _contraction_plans(function: Function, c: Contraction, target: Target, gemm_work: int,
                       register_work: int, parallel: bool = False) -> list[TilePlan]:
    amount = work(c)
    m, n = c.extent(c.i), c.extent(c.j)
    k = c.extent(c.k[0]) if len(c.k) == 1 else None
    if n is not None and n < lanes(target, c.element_bytes):
        return []
    plans: list[TilePlan] = []
    roles = f"rows {c.i}, columns {c.j}, reduction {', '.join(c.k)}"
    taken = names_in(function)
    # BLIS's cache blocks pay for one product of at least ``gemm_work``; a batch
    # of smaller ones (a Linear layer fused per sequence) gets the register
    # tile, whose column panel ``hoist_copies`` can make once for the batch
    batches = [c.extent(b) for b in c.batch]
    known = [b for b in batches if b is not None]
    each = None if amount is None or len(known) < len(batches) else amount // max(1, math.prod(known))
    if len(c.k) == 1 and c.rectangular and (each is None or each >= gemm_work):
        sizes = gemm_sizes(target, c.element_bytes, m, n, k, target.cores if parallel else 1)
        steps = gemm_plan(c, sizes, set(taken))
        blocks = next(step for step in steps if isinstance(step, Tile))
        # the row blocks in parallel, unless a batch loop outside them runs
        # at least once per core (it is left to ``mark-parallel{outermost=true}``:
        # one dispatch for the nest, not one per batch iteration)
        batched = any((c.extent(b) or target.cores) >= target.cores for b in c.batch)
        plans.append(TilePlan(c.band, "gemm", steps, f"matrix product ({roles}): {sizes}",
                              () if batched else (blocks.names[0], c.i)))
    if amount is None or amount >= register_work:
        tile = register_tile(target, c.element_bytes, m, n)
        if c.windowed and tile.nr < MIN_COLUMN_VECTORS * tile.lanes:
            return plans  # a convolution: the direct plan instead (see MIN_COLUMN_VECTORS)
        # a triangular band's diagonal tiles computed over their box (the
        # micro-kernel, not a row loop of variable length per row), each plan
        # tried first with them, then without
        boxes = (True, False) if not c.rectangular else (False,)
        box_why = {True: ", diagonal tiles over their box", False: ""}
        # the packed panel is read by every row tile: worth a copy from two on
        if column_operand_strided(c) and (m is None or m >= 2 * tile.mr):
            plans += [TilePlan(c.band, "register",
                               packed_register_plan(c, tile, set(taken), box=box),
                               f"register tile ({roles}): Mr x Nr = {tile}, column operand "
                               f"{c.right} packed transposed per column tile{box_why[box]}")
                      for box in boxes]
        elif not c.rectangular:
            # a triangular band: column tiles on a fixed grid outside, the row
            # tiles inside start at each column tile (fewer partial tiles than
            # column tiles starting at each row tile: covariance 3.2x -> 2.3x)
            plans += [TilePlan(c.band, "register",
                               packed_register_plan(c, tile, set(taken), pack=False, box=box),
                               f"register tile ({roles}): Mr x Nr = {tile}, column tiles "
                               f"outer{box_why[box]}")
                      for box in boxes]
        plans += [TilePlan(c.band, "register", register_plan(c, tile, set(taken), box=box),
                           f"register tile ({roles}): Mr x Nr = {tile}{box_why[box]}")
                  for box in boxes]
    return plans


# ------------------------------------------------------------------ applying
def apply_steps(function: Function, steps: Sequence[object]
                ) -> tuple[Function, dict[str, Origin], set[str]]:
    """``function`` with the mechanism ``steps`` applied without their checks;
    the origins of the statements they created and the copy statements (to be
    proven by :func:`prove`)."""
    origins: dict[str, Origin] = {}
    copies: set[str] = set()
    for step in steps:
        new: dict[str, Origin] = {}
        if isinstance(step, Tile):
            function = tile_band(function, step.loops, step.sizes, step.names, check=False,
                                 ends=step.ends)
        elif isinstance(step, Interchange):
            function = interchange_band(function, step.loops, step.order, check=False)
        elif isinstance(step, Copies):
            for position, buffer in enumerate(step.buffers):
                name = step.names[position] if step.names else None
                function, made = copy_buffer(function, step.at, buffer, step.blocks or None,
                                             step.order, name, check=False)
                copies.update(made)
        elif isinstance(step, Pack):
            function, made = pack_operand(function, step.at, step.buffer, step.along, step.order,
                                          step.name or None, check=False)
            copies.update(made)
        elif isinstance(step, SplitTiles):
            function, new = split_tiles(function, step.at, step.loops, check=False, pad=step.pad)
        elif isinstance(step, UnrollJam):
            for loop, factor in zip(step.loops, step.factors, strict=True):
                function, more = unroll_jam(function, loop, factor, step.depth, check=False)
                new.update(more)
        elif isinstance(step, LaneBlocks):
            function, new = lane_blocks(function, step.loop, step.lanes, step.lane, check=False)
        else:
            raise TypeError(f"not a tiling mechanism pass: {step!r}")
        if new:
            for name, origin in new.items():
                if origin.statement in copies:
                    copies.add(name)
            origins = compose_origins(origins, {k: v for k, v in new.items() if k not in copies})
    return function, origins, copies


def proven_prefix(steps: Sequence[object]) -> int:
    """How many of ``steps`` :func:`auto_tile_function` proves with
    ``check_rewrite``: all but the trailing ``split-tiles`` and plain unrolls
    (``unroll-jam`` with ``depth=0``). Neither reorders a statement instance:
    the split versions a proven tile into full and partial tiles (the same
    instances, each in its original order), the unroll repeats the body in
    sequence. Proving their output again costs isl seconds on a matrix
    product for no new fact (the explicit passes still prove each step)."""
    cut = len(steps)
    while cut:
        step = steps[cut - 1]
        if not (isinstance(step, SplitTiles) or (isinstance(step, UnrollJam) and step.depth == 0)):
            break
        cut -= 1
    return cut


def prove(deps: Dependences, result: Function, index: int, origins: dict[str, Origin],
          copies: set[str], what: str, nests: int = 1) -> None:
    """Raise ``IllegalTransform`` unless the ``nests`` top-level nests of
    ``result`` from ``index`` on (the rewrite of the original's nest
    ``index``) run the original instances in an order the dependences allow."""
    rewritten = replace(result, body=result.body[index:index + nests])
    check_rewrite(deps, rewritten, what=what, origins=origins, ignore=copies).require()


def auto_tile_function(function: Function, target: Target, remark: Remark,
                       gemm_work: int = 1 << 21, register_work: int = 1 << 15,
                       parallel: bool = False, widen: bool = True, spill: bool = True,
                       zero_pad: bool = False, reassociate: bool = False) -> Function:
    """``function`` with every band tiled by the plan the cost model chooses
    (see the module docstring); ``remark(where, why, kind)`` hears every
    decision. With ``spill``, fused matrix products' scalar accumulators are
    first spilled into their output cells where the product then gets a plan
    (``polyir.tiling.spill.spill_for_tiling``); with ``widen``, the other fused
    reductions' (convolutions') are then widened to tiles
    (``polyir.tiling.widen.widen_function``). With ``zero_pad``, guarded sums
    (padded convolutions) first read zero-padded copies of their inputs
    (``polyir.tiling.zero_pad.pad_function``: exact for finite weights). With
    ``reassociate`` (fast math), unit-stride float reductions are left to the
    vectoriser (:func:`candidate_plans`). Returns ``function`` itself when no
    plan applies."""
    if zero_pad:
        function = pad_function(function, remark)
    # Spill before widening: widening also fits a matrix product (one row of
    # accumulators, no loop blocked) and would leave the spill no scalar, the
    # product a matrix-vector row sum instead of the gemm plan.
    if spill:
        function = spill_for_tiling(
            function, lambda f, band: [p.kind for p in candidate_plans(f, band, target, gemm_work,
                                                                       register_work, parallel)],
            remark)
    widened: dict[int, tuple[Function, Dependences]] = {}   # the nests widening analysed
    if widen:
        function = widen_function(function, target, remark, reduction_jam(target, 1), widened)
    # a band's dependences: the nest's when widening analysed it unchanged,
    # else those of the band's scope (``bands.band_scope``), by nest and path
    deps_cache: dict[tuple[int, BandPath | None], Dependences] = {}
    # Decisions by the nest's canonical form and its plans: a nest the same as
    # one planned before up to names (a repeated layer) takes the plan proven
    # there, without its dependences and proofs again (``polyir.ir.canonical``).
    decided: dict[str, _Decision] = {}
    # The unrolls of lane blocks' lane loops wait until every band is planned:
    # the later bands of the same nest are then proven against the rolled form
    # (lu: 1.9 s of isl against the 16 jammed copies, 0.2 s rolled).
    deferred: list[object] = []
    for chain in find_bands(function):
        head = chain[0].var
        where = f"function '{function.name}', loop '{head}'"
        try:
            current = _loop(function, head)
        except KeyError:
            continue
        chain = perfect_chain(current)[:len(chain)]
        plans = candidate_plans(function, chain, target, gemm_work, register_work, parallel,
                                reassociate)
        if not plans:
            continue
        if plans[0].kind == "keep":
            remark(where, plans[0].why, "analysis")
            continue
        index = nest_of(function, chain[0])
        form = canonical_form(function, (function.body[index],))
        key = "\n".join([form.key, form.canonical(head), *(_shape_of(plan) for plan in plans)])
        known = decided.get(key)
        deps: Dependences | None = None
        scope: BandPath | None = None
        if known is None:
            known = decided[key] = _Decision()
            try:
                scope, deps = _band_dependences(function, chain[0], index, widened, deps_cache)
            except NotPolyhedral as error:
                known.failures.append(form.canonical(f"not tiled: {error}"))
        for text in known.failures if deps is None else ():   # the same nest, decided before
            remark(where, form.actual(text), "missed")
        if deps is None and known.chosen is None:
            continue
        for position, plan in enumerate(plans):
            if deps is None and position != known.chosen:
                continue
            try:
                result, copies, added, rest = _apply_plan(function, plan, index, head, deps, scope)
            except PolyirError as error:
                text = f"{plan.kind} plan not applied: {error}"
                known.failures.append(form.canonical(text))
                remark(where, text, "missed")
                continue
            known.chosen = position
            deferred.extend(rest)
            result, hoisted = hoist_copies(result, copies, target, where, remark)
            pipeline = format_pipeline(plan.steps + tuple(hoisted))
            if parallel and plan.parallel and target.cores > 1 \
                    and _enough_blocks(result, plan.parallel[0], target.cores):
                if deps is not None:
                    known.independent = independent_along(deps, plan.parallel[1])
                if known.independent:
                    result = mark_loop_parallel(result, plan.parallel[0])
                    pipeline += f",mark-parallel{{loops={plan.parallel[0]}}}"
            remark(where, f"{plan.why}: {pipeline}", "applied")
            function = result
            for cached in [k for k in deps_cache if added or k[0] == index]:
                del deps_cache[cached]  # this nest changed (and with added nests, the later ones moved)
            break
    if deferred:
        try:
            function, _, _ = apply_steps(function, deferred)
        except PolyirError as error:  # a later plan moved a lane loop: it stays rolled (correct)
            remark(f"function '{function.name}'", f"lane loops not unrolled: {error}", "missed")
    return function


def _shape_of(plan: TilePlan) -> str:
    """``plan``'s kind and steps with every name left out (the names a plan
    makes up, ``i_t`` or ``A_pack``, have no canonical form): two nests the same
    up to names get plans of the same shape, since the plans are a function of
    the nest, its buffers and the target (checked, not assumed)."""
    return re.sub(r"[A-Za-z_][A-Za-z0-9_]*", "_", f"{plan.kind} {format_pipeline(plan.steps)} "
                                                  f"{bool(plan.parallel)}")


@dataclass
class _Decision:
    """What :func:`auto_tile_function` decided for one nest and its plans: the
    missed remarks (names canonical), the plan applied (position among the
    plans) and whether its parallel loop was found independent."""

    failures: list[str] = field(default_factory=list)
    chosen: int | None = None
    independent: bool = False


def _band_dependences(function: Function, top: For, index: int,
                      widened: dict[int, tuple[Function, Dependences]],
                      cache: dict[tuple[int, BandPath | None], Dependences]
                      ) -> tuple[BandPath | None, Dependences]:
    """The dependences that prove a plan of the band whose outermost loop is
    ``top`` (in nest ``index``) and the scope they cover: the whole nest's when
    widening analysed this very nest (``None``), else the band's scope's."""
    known = widened.get(index)
    if known is not None and nest_function(known[0], index) == nest_function(function, index):
        return None, known[1]
    path = band_path(function, top)
    if (index, path) not in cache:
        cache[(index, path)] = compute_dependences(extract(band_scope(function, path)), MEMORY_KINDS)
    return path, cache[(index, path)]


def _apply_plan(function: Function, plan: TilePlan, index: int, head: str,
                deps: Dependences | None, scope: BandPath | None = None
                ) -> tuple[Function, set[str], int, list[object]]:
    """``function`` with ``plan`` applied to its nest ``index``, the copy
    statements, the top-level nests it added and the steps deferred to the end
    (a lane block's unrolls). With ``deps`` (the nest's dependences) the plan is
    checked and proven first (``PolyirError`` when it is not legal); without,
    it is known legal (the same nest up to names was proven). ``scope``: the
    band's path when ``deps`` are its scope's (:func:`bands.band_scope`), the
    proof then of the same scope of the result; ``None``: the whole nest's."""
    if deps is not None:
        if plan.kind == "gemm":
            check_permutable(deps, list(plan.band)).require()
        elif plan.kind in ("order", "direct"):
            order = plan.steps[0].order  # type: ignore[attr-defined]
            check_permutation(deps, list(plan.band),
                              [list(plan.band).index(v) for v in order]).require()
    cut = proven_prefix(plan.steps)
    proven, origins, copies = apply_steps(function, plan.steps[:cut])
    # a top-level loop's lane blocks add its remainder loop after it
    added = len(proven.body) - len(function.body)
    if added and not (plan.kind == "blocks" and added == 1):
        raise PolyirError("the plan changed the number of top-level nests")
    if deps is not None:
        what = f"the {plan.kind} plan of loop '{head}'"
        bare = without_statements(proven, copies)
        if scope is not None and scope[1] and \
                band_surroundings(bare, scope) == band_surroundings(function, scope):
            check_rewrite(deps, band_scope(bare, scope), what=what, origins=origins).require()
        else:   # the whole nest's proof: no scope, or the plan changed loops around the band
            whole = deps if scope is None or not scope[1] else nest_dependences(function, index)
            prove(whole, proven, index, origins, copies, what, 1 + added)
    if plan.kind == "blocks":
        return proven, copies, added, list(plan.steps[cut:])
    result, _, _ = apply_steps(proven, plan.steps[cut:])
    return result, copies, added, []


def independent_along(deps: Dependences, var: str) -> bool:
    """Does no dependence of ``deps`` relate two instances with different values
    of loop ``var`` (every direction along it ``=``)? Then any loop whose
    iterations take disjoint ranges of ``var`` (its tile loop, wherever the
    plan puts it) may run them in parallel."""
    loop = deps.scop.loop(var).id
    for dep in deps.memory():
        if loop not in dep.common or dep.direction[dep.common.index(loop)] != "=":
            return False
    return True


def _enough_blocks(function: Function, var: str, cores: int) -> bool:
    """Does the row-block loop ``var`` run at least ``cores`` times (or an
    unknown number)? One block of 96 output channels left the whole
    product on one core and, marked parallel, kept ``mark-parallel
    {outermost=true}`` from the loops around it (a 1x1 convolution's output
    rows: MobileNetV2's 16 -> 96 channels at 112x112 ran at the same speed
    on two threads as on one)."""
    count = trip_count(_loop(function, var))
    return count is None or count >= cores


def mark_loop_parallel(function: Function, var: str) -> Function:
    """``function`` with loop ``var`` marked ``parallel``."""
    from dataclasses import replace

    from polyir.tiling.bands import replace_node
    loop = _loop(function, var)
    return replace_node(function, loop, [replace(loop, parallel=True)])


def _band_loop(chain: Sequence[For], var: str) -> For:
    return next(loop for loop in chain if loop.var == var)


def _loop(function: Function, var: str) -> For:
    from polyir.ir.names import UnknownLoop, find_loop
    try:
        return find_loop(function, var)
    except UnknownLoop:
        raise KeyError(var) from None


__all__ = ["TilePlan", "find_bands", "candidate_plans", "apply_steps", "proven_prefix", "prove",
           "hoist_copies", "independent_along", "mark_loop_parallel", "auto_tile_function"]
