"""Registered passes of ``polyir.tiling``.

* ``distribute{loops=...}``: split imperfect loop nests so that bands become
  perfect (``polyir.tiling.distribute``); with ``loops`` only those loops, and
  a loop that cannot be split is an error; without, every imperfect loop is
  tried and the ones that cannot be split get a remark with the dependence.
* ``tile{loops=i,j,k sizes=64,64,256 names=ic,jc,kc}``: multi-level tiling
  (``polyir.tiling.tile``).
* ``interchange{loops=i,j,k order=i,k,j}``: loop interchange (``polyir.tiling.interchange``).
* ``split-tiles{at=ir loops=i,j pad=ib,jb}``: full/partial tile separation
  (``polyir.tiling.split``); with ``pad``, triangular tiles computed over their box
  (``polyir.tiling.pad``).
* ``unroll-jam{loops=i factors=8 depth=-1}``: register tiles (``polyir.tiling.unroll_jam``).
* ``lane-blocks{loop=j lanes=16 lane=j_lane}``: blocks of ``lanes`` reductions of
  growing length (Cholesky's), their shared part with a lane loop innermost
  (``polyir.tiling.lane_blocks``).
* ``copies{at=kc buffers=B blocks=jr order=0,1}``: scratchpads and packing
  (``polyir.tiling.copies``).
* ``pack{at=jr buffer=A along=j order=1,0}``: one operand's reads packed
  (transposed) in a local (``polyir.tiling.transpack``).
* ``hoist-copy{local=A_jr loop=i}``: the copy filling a loop-scoped local made
  once before loop ``i``, one block per iteration of the loops that move it
  (``polyir.tiling.hoist``).
* ``auto-tile``: the analytical policy choosing and applying the above
  (``polyir.tiling.autotile``).

The mechanism passes name loops by variable; each refuses with a typed error
(``IllegalTransform`` with the dependence and two instances, or
``UnsupportedNest`` naming the construct), which ``transform`` reports as a
``PassError``.
"""
from __future__ import annotations

from dataclasses import dataclass

from polyir.context import PassContext
from polyir.ir.nodes import Function, Module
from polyir.passes import register_pass
from polyir.tiling.distribute import distribute_function


@register_pass("distribute")
@dataclass(frozen=True)
class Distribute:
    """Split imperfect loop nests (``for i { init; for k { update } }``) into
    perfect ones where the dependences allow (loop distribution)."""

    loops: tuple[str, ...] = ()

    def run(self, module: Module, ctx: PassContext) -> Module:
        functions: list[Function] = []
        for function in module.functions:
            if function.kind != "host":
                functions.append(function)
                continue
            refused: list = []
            functions.append(distribute_function(function, self.loops, refused))
            for name, error in refused:
                ctx.remark("distribute", f"function '{function.name}', loop '{name}'",
                           f"not distributed: {error}")
        if all(a is b for a, b in zip(functions, module.functions, strict=True)):
            return module
        return Module(tuple(functions))


def _host_with_loop(module: Module, name: str) -> int:
    """Index of the host function that has loop ``name`` (UnknownLoop when none)."""
    from polyir.ir.names import UnknownLoop, loop_vars
    known: list[str] = []
    for position, function in enumerate(module.functions):
        if function.kind != "host":
            continue
        names = loop_vars(function.body)
        if name in names:
            return position
        known += names
    entry = module.entry.name if module.functions else "?"
    raise UnknownLoop(entry, name, known)


def _replace_function(module: Module, position: int, function: Function) -> Module:
    if function is module.functions[position]:
        return module
    functions = list(module.functions)
    functions[position] = function
    return Module(tuple(functions))


@register_pass("tile")
@dataclass(frozen=True)
class Tile:
    """Tile the band ``loops`` (outer to inner, each the only node of the one
    before) by ``sizes`` (0: not tiled): tile loops (named ``names``, default
    ``<loop>_t``) around point loops that keep the original variables; partial
    tiles get ``min`` bounds. ``ends``: loops whose tiles end at their end
    (the partial tile first). Refused with a witness when the band is not
    permutable."""

    loops: tuple[str, ...] = ()
    sizes: tuple[int, ...] = ()
    names: tuple[str, ...] = ()
    ends: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if len(self.loops) != len(self.sizes):
            raise ValueError(f"tile needs one size per loop ({len(self.loops)} loops, "
                             f"{len(self.sizes)} sizes)")

    def run(self, module: Module, ctx: PassContext) -> Module:
        from polyir.tiling.tile import tile_band
        if not self.loops:
            return module
        position = _host_with_loop(module, self.loops[0])
        function = tile_band(module.functions[position], self.loops, self.sizes, self.names,
                             ends=self.ends)
        return _replace_function(module, position, function)


@register_pass("interchange")
@dataclass(frozen=True)
class Interchange:
    """Reorder the band ``loops`` (outer to inner) to ``order`` (the same loop
    variables, outer to inner); triangular bounds are recomputed. Refused with
    a witness when a dependence forbids the new order."""

    loops: tuple[str, ...] = ()
    order: tuple[str, ...] = ()

    def run(self, module: Module, ctx: PassContext) -> Module:
        from polyir.tiling.interchange import interchange_band
        if not self.loops:
            return module
        position = _host_with_loop(module, self.loops[0])
        function = interchange_band(module.functions[position], self.loops, self.order)
        return _replace_function(module, position, function)


@register_pass("split-tiles")
@dataclass(frozen=True)
class SplitTiles:
    """Version the body of loop ``at`` into full tiles of the point loops
    ``loops`` (constant trip counts, every bound the full-tile test makes
    redundant dropped) and the partial tiles (the body as it was, renamed).
    ``pad``: names for the loops of the box tiles, the triangular tiles
    computed over their box into their local (``polyir.tiling.pad``)."""

    at: str = ""
    loops: tuple[str, ...] = ()
    pad: tuple[str, ...] = ()

    def run(self, module: Module, ctx: PassContext) -> Module:
        from polyir.tiling.split import split_tiles
        if not self.at:
            return module
        position = _host_with_loop(module, self.at)
        function, _ = split_tiles(module.functions[position], self.at, self.loops, pad=self.pad)
        if function is module.functions[position]:
            ctx.remark("split-tiles", f"function '{function.name}', loop '{self.at}'",
                       "not split: every named loop already runs full tiles only")
        return _replace_function(module, position, function)


@register_pass("unroll-jam")
@dataclass(frozen=True)
class UnrollJam:
    """Unroll each of ``loops`` by its factor in ``factors`` and jam the copies
    into the band below it (``depth``: into that many of its loops; 0: a plain
    unroll; -1: all): register tiles. A loop that is not a full tile gets a
    guard (or is strip-mined first). Refused with a witness when the loop
    cannot move inside the band."""

    loops: tuple[str, ...] = ()
    factors: tuple[int, ...] = ()
    depth: int = -1

    def __post_init__(self) -> None:
        if len(self.loops) != len(self.factors):
            raise ValueError(f"unroll-jam needs one factor per loop ({len(self.loops)} loops, "
                             f"{len(self.factors)} factors)")

    def run(self, module: Module, ctx: PassContext) -> Module:
        from polyir.tiling.unroll_jam import unroll_jam
        for loop, factor in zip(self.loops, self.factors, strict=True):
            position = _host_with_loop(module, loop)
            function, _ = unroll_jam(module.functions[position], loop, factor, self.depth)
            module = _replace_function(module, position, function)
        return module


@register_pass("lane-blocks")
@dataclass(frozen=True)
class LaneBlocks:
    """Run loop ``loop``, whose body starts with a reduction loop running to
    ``loop`` plus a constant, in blocks of ``lanes``: the part of the block's
    reductions they all share with the lanes a loop ``lane`` innermost (unrolled
    by ``unroll-jam{depth=0}``: a row block the CPU lowering runs across vector
    lanes), then each value's own rest in order. Refused with a witness when
    a dependence forbids it."""

    loop: str = ""
    lanes: int = 0
    lane: str = ""

    def run(self, module: Module, ctx: PassContext) -> Module:
        from polyir.tiling.lane_blocks import lane_blocks
        position = _host_with_loop(module, self.loop)
        function, _ = lane_blocks(module.functions[position], self.loop, self.lanes, self.lane)
        return _replace_function(module, position, function)


@register_pass("copies")
@dataclass(frozen=True)
class Copies:
    """Copy the footprint of each of ``buffers`` below one iteration of loop
    ``at`` into a loop-scoped local of ``at`` (``names``, default
    ``<buffer>_<at>``), redirect the accesses inside to it and copy written
    elements back: scratchpads, scalar replacement of accumulators, packing.
    ``blocks``: a loop inside ``at`` whose iterations each get one contiguous
    block (BLIS panels); ``order``: a permutation of the copied dimensions."""

    at: str = ""
    buffers: tuple[str, ...] = ()
    blocks: str = ""
    order: tuple[int, ...] = ()
    names: tuple[str, ...] = ()

    def run(self, module: Module, ctx: PassContext) -> Module:
        from polyir.tiling.copies import copy_buffer
        if not self.at:
            return module
        if self.names and len(self.names) != len(self.buffers):
            raise ValueError(f"copies: {len(self.buffers)} buffers but {len(self.names)} names")
        for k, buffer in enumerate(self.buffers):
            position = _host_with_loop(module, self.at)
            function, _ = copy_buffer(module.functions[position], self.at, buffer,
                                      self.blocks or None, self.order,
                                      self.names[k] if self.names else None)
            module = _replace_function(module, position, function)
        return module


@register_pass("pack")
@dataclass(frozen=True)
class Pack:
    """Copy the elements that the reads of ``buffer`` walking it with a stride
    along loop ``along`` touch below one iteration of loop ``at`` into a loop-scoped local of
    ``at`` laid out in ``order`` (``1,0``: transposed), and redirect those
    reads only (``polyir.tiling.transpack``): a column operand packed so that
    the vectorised loop reads it with unit stride."""

    at: str = ""
    buffer: str = ""
    along: str = ""
    order: tuple[int, ...] = ()
    name: str = ""

    def run(self, module: Module, ctx: PassContext) -> Module:
        from polyir.tiling.transpack import pack_operand
        if not self.at:
            return module
        position = _host_with_loop(module, self.at)
        function, _ = pack_operand(module.functions[position], self.at, self.buffer, self.along,
                                   self.order, self.name or None)
        return _replace_function(module, position, function)


@register_pass("hoist-copy")
@dataclass(frozen=True)
class HoistCopy:
    """Make the copy that fills loop-scoped ``local`` (a ``copies`` or ``pack``
    result) once, before loop ``loop``, instead of in every iteration of the
    loops between that do not move it; the local gets one block per iteration
    of the loops that do (``polyir.tiling.hoist``). Refused when the source
    is written inside ``loop`` or the copy's start moves with ``loop``."""

    local: str = ""
    loop: str = ""

    def run(self, module: Module, ctx: PassContext) -> Module:
        from polyir.tiling.hoist import hoist_copy
        if not self.local:
            return module
        position = _host_with_loop(module, self.loop)
        function, _ = hoist_copy(module.functions[position], self.local, self.loop)
        return _replace_function(module, position, function)


@register_pass("auto-tile")
@dataclass(frozen=True)
class AutoTile:
    """Tile every band by the analytical model of ``polyir.tiling.sizes`` for the
    target: matrix products get BLIS's plan (cache tiles, packed panels, a
    register tile), smaller ones the register tile, strided nests a
    unit-stride loop order. Each applied plan is a remark holding it as a
    pipeline of ``tile``/``interchange``/``copies``/``split-tiles``/``unroll-jam``
    passes; each band left alone says why. ``gemm_work`` and ``register_work``:
    the instance counts (known extents) from which each plan is used.
    ``parallel`` (on by default; it acts only on a target with more than one
    core, ``Target.cores``): mark the row-block loop of BLIS's plan
    ``parallel`` (and size the row blocks per core), so that the OpenMP
    runtime runs the row blocks on the cores, each with its own packed block
    and the same micro-kernel; ``parallel=false`` keeps every loop serial.
    ``widen`` (on by default): a fused reduction's scalar accumulator with its
    epilogue (a convolution with batch norm and ReLU fused at full depth) is
    first widened back to a tile of accumulators (``polyir.tiling.widen``), so
    that the direct-convolution or register plan applies; ``widen=false``
    leaves such bands as they are. ``spill`` (on by default): before that, a
    fused matrix product's scalar accumulator (a Linear layer with its
    epilogue) is spilled into its output cell and the nest distributed
    (``polyir.tiling.spill``), so that the matrix-product plan applies;
    ``spill=false`` leaves those as they are (then widening may take them).
    ``zero_pad`` (off by default; ``polyir.compile`` turns it on with
    ``fast_math``): a padded convolution's guarded update first reads a
    zero-padded copy of its input instead (``polyir.tiling.zero_pad``), so that its
    register tile has no branch; exact for finite weights (a weight that is
    infinite or NaN, times a padding zero, would add NaN).
    ``reassociate`` (off by default; ``polyir.compile`` turns it on with
    ``fast_math``, whose LLVM flags allow it): a float reduction along a
    unit-stride innermost loop that is no matrix product or convolution
    (softmax's and layer norm's row sums and maxima, ``sum(dim=-1)``) keeps
    its loops, with an ``analysis`` remark, for LLVM's vectoriser to run on
    vector accumulators, instead of rows unrolled and jammed into independent
    scalar sums (which exact builds need: there no add may change order)."""

    gemm_work: int = 1 << 21
    register_work: int = 1 << 15
    parallel: bool = True
    widen: bool = True
    spill: bool = True
    zero_pad: bool = False
    reassociate: bool = False

    def run(self, module: Module, ctx: PassContext) -> Module:
        from polyir.tiling.autotile import auto_tile_function
        if ctx.target.kind not in ("cpu", "interpret"):
            ctx.remark("auto-tile", f"module '{module.entry.name}'",
                       f"not tiled: the plans are for CPUs, not {ctx.target.name}")
            return module
        functions: list[Function] = []
        for function in module.functions:
            if function.kind != "host":
                functions.append(function)
                continue

            def remark(where: str, why: str, kind: str) -> None:
                ctx.remark("auto-tile", where, why, kind)

            functions.append(auto_tile_function(function, ctx.target, remark, self.gemm_work,
                                                self.register_work, self.parallel, self.widen,
                                                self.spill, self.zero_pad, self.reassociate))
        if all(a is b for a, b in zip(functions, module.functions, strict=True)):
            return module
        return Module(tuple(functions))
