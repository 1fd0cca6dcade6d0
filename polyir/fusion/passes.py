"""Registered fusion passes.

* ``fuse{mode=greedy max_depth=0 tolerance=0.3}``: the greedy policy
  (``polyir.fusion.policy``): producer-consumer fusion (``mode=producer``),
  sibling fusion (``mode=sibling``) or both (``greedy``), within
  :data:`FUSION_OPERATIONS` isl operations per function. Every fusion made is
  an ``applied`` remark holding the explicit step that replays it; every
  producer-consumer pair left apart a ``missed`` remark with the reason.
* ``fuse-nests{producer=S3 consumer=S7 depth=2}``: one explicit
  producer-consumer fusion; nests are named by a statement they hold. A
  refusal is an error (``IllegalTransform`` with the reason and witness).
* ``shrink-buffers``: every local contracted to its footprint per iteration
  of the innermost loop around its accesses (``polyir.fusion.privatize``),
  then locals nothing reads removed with their writes.
* ``online-reductions{tile=256 rows=0}``: reduce-reduce fusion (``polyir.fusion.online``):
  online softmax statistics and fused attention over key tiles, ``rows``
  query rows against each tile (``polyir.fusion.online_rows``; ``0``: chosen
  from the target, see :func:`auto_rows`).
* ``single-pass-moments{min_bytes=-1}``: mean and variance sums in one
  traversal (``polyir.fusion.moments``) for rows larger than ``min_bytes``
  (``-1``: the Target's L1 size).
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from polyir.context import PassContext
from polyir.fusion.graph import NestGraph
from polyir.fusion.moments import single_pass_moments
from polyir.fusion.online import DEFAULT_ROWS, DEFAULT_TILE, online_reductions, pull_consumers
from polyir.fusion.policy import FusionOptions, plan_and_fuse, sibling_traversal_conflict
from polyir.fusion.privatize import shrink_buffers
from polyir.fusion.producer_consumer import FusionRefused, fuse_into
from polyir.fusion.sibling import common_depth, fuse_siblings
from polyir.ir.nodes import Barrier, Function, Launch, Module
from polyir.ir.walk import walk_nodes
from polyir.passes import register_pass
from polyir.polyhedral.analysis import AnalysisLimit
from polyir.target import Target

MODES = ("greedy", "producer", "sibling")

FUSION_OPERATIONS = 50_000_000
"""isl operations the ``fuse`` pass may spend on one function (its legality
checks, slices and footprints); past it the function is kept unfused, with a
remark."""


def _each_host(module: Module, change: Callable[[Function], Function]) -> Module:
    functions = [change(f) if f.kind == "host" else f for f in module.functions]
    if all(a is b for a, b in zip(functions, module.functions, strict=True)):
        return module
    return Module(tuple(functions))


@register_pass("fuse")
@dataclass(frozen=True)
class Fuse:
    """Fuse loop nests greedily by the cost model: producers into consumers at the
    best legal depth (their intermediates then shrink with ``shrink-buffers``),
    and sibling nests that read the same data."""

    mode: str = "greedy"
    max_depth: int = 0
    tolerance: float = 0.3

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}, not {self.mode!r}")
        if self.max_depth < 0 or self.tolerance < 0:
            raise ValueError("max_depth and tolerance must be >= 0")

    def run(self, module: Module, ctx: PassContext) -> Module:
        options = FusionOptions(self.max_depth, self.tolerance)

        def change(function: Function) -> Function:
            where = f"function '{function.name}'"
            if any(isinstance(n, (Barrier, Launch)) for n in walk_nodes(function.body)):
                ctx.remark("fuse", where, "not fused: it holds GPU-mapped code (barriers or launches)")
                return function
            original, said = function, len(ctx.remarks)
            try:
                with ctx.analyses.bounded(f"fusing {where}", FUSION_OPERATIONS):
                    if self.mode in ("greedy", "producer"):
                        function, report = plan_and_fuse(function, ctx.target, ctx.analyses.isl, options)
                        for step in report.steps:
                            ctx.remark("fuse", where, f"{step} ({step.reason})", kind="applied")
                        for (producer, consumer), why in report.unfused.items():
                            ctx.remark("fuse", f"{where}, nests {producer} -> {consumer}",
                                       f"not fused: {why}")
                    if self.mode in ("greedy", "sibling"):
                        function = _fuse_siblings(function, ctx, where, self.max_depth)
            except AnalysisLimit as error:
                del ctx.remarks[said:]    # the steps of a fusion given up
                ctx.remark("fuse", where, f"not fused (kept as it was): {error}")
                return original
            return function

        return _each_host(module, change)


def _fuse_siblings(function: Function, ctx: PassContext, where: str, max_depth: int) -> Function:
    changed = True
    while changed:
        changed = False
        graph = NestGraph(function)
        for nest in graph.nests:
            for other, shared in graph.siblings(nest.index):
                a, b = function.body[nest.index], function.body[other]
                depth = common_depth(a, b)  # type: ignore[arg-type]
                if max_depth:
                    depth = min(depth, max_depth)
                why = None
                while depth and (conflict := sibling_traversal_conflict(a, b, depth, shared)):  # type: ignore[arg-type]
                    why, depth = why or conflict, depth - 1
                if depth == 0:
                    if why:
                        ctx.remark("fuse", f"{where}, siblings {nest.name} and {graph.nests[other].name}",
                                   f"not fused: {why}")
                    continue
                try:
                    function = fuse_siblings(function, nest.index, other, depth, ctx.analyses.isl)
                except FusionRefused as error:
                    ctx.remark("fuse", f"{where}, siblings {nest.name} and {graph.nests[other].name}",
                               f"not fused: {error.message}")
                    continue
                ctx.remark("fuse", where, f"siblings {nest.name} and {graph.nests[other].name} share "
                                          f"{', '.join(sorted(shared))}: fused at depth {depth}",
                           kind="applied")
                changed = True
                break
            if changed:
                break
    return function


@register_pass("fuse-nests")
@dataclass(frozen=True)
class FuseNests:
    """Fuse the nest holding statement ``producer`` into the nest holding
    statement ``consumer`` at ``depth`` (one explicit step; legality checked)."""

    producer: str
    consumer: str
    depth: int = 1

    def run(self, module: Module, ctx: PassContext) -> Module:
        def change(function: Function) -> Function:
            graph = NestGraph(function)
            try:
                first, second = graph.by_name(self.producer), graph.by_name(self.consumer)
            except KeyError:
                return function  # the statements live in another function
            if first.index >= second.index:
                raise FusionRefused(f"nest {self.producer} does not come before nest {self.consumer}")
            return fuse_into(function, first.index, second.index, self.depth, ctx.analyses.isl).function

        return _each_host(module, change)


@register_pass("shrink-buffers")
@dataclass(frozen=True)
class ShrinkBuffers:
    """Contract every local to its footprint per iteration of the innermost loop
    around its accesses (a scalar, a row, a tile), declared at that loop; remove
    locals nothing reads."""

    def run(self, module: Module, ctx: PassContext) -> Module:
        from polyir.transforms.remove_dead_statements import remove_dead_in_function as remove_dead

        def change(function: Function) -> Function:
            refused: list[tuple[str, str]] = []
            result = remove_dead(shrink_buffers(remove_dead(function), ctx.analyses.isl, refused))
            if result == function:
                return function
            for name, why in refused:
                ctx.remark("shrink-buffers", f"function '{function.name}', local '{name}'",
                           f"kept at full size: {why}")
            return result

        return _each_host(module, change)


def auto_rows(target: Target, tile: int) -> int:
    """Query rows per block against each key tile (``online-reductions{rows=0}``):
    on a CPU, a multiple of the f32 register tile's rows (so the block's score
    product ``q . k`` fills register tiles), at most 8 of them, and at most what
    keeps the block's scores and weights (``2 x rows x tile`` floats) within a
    quarter of the L2 cache, next to the key and value tiles. Elsewhere 1 (the
    interpreter gains nothing; the GPU maps rows itself)."""
    if target.kind != "cpu":
        return DEFAULT_ROWS
    from polyir.tiling.sizes import register_tile
    mr = register_tile(target, 4).mr
    fits = target.cache(2).size // 4 // (2 * tile * 4 * mr)
    return mr * max(1, min(8, fits))


@register_pass("online-reductions")
@dataclass(frozen=True)
class OnlineReductions:
    """Reduce-reduce fusion (``polyir.fusion.online``): a max over an axis and the
    sums that use it through ``exp(x - max)`` (softmax statistics, attention's
    ``P.V``) become one traversal over tiles of ``tile`` values with running
    values and the correction ``exp(m_prev - m)``; the producer of ``x`` moves
    into the tile. Nests that read a cascade's results are first fused into
    its row loops (proved by the equivalence check). Runs before
    ``shrink-buffers``. Every rewrite and every cascade left alone is a remark."""

    tile: int = DEFAULT_TILE
    rows: int = 0

    def __post_init__(self) -> None:
        if self.tile < 1:
            raise ValueError(f"tile must be >= 1, not {self.tile}")
        if self.rows < 0:
            raise ValueError(f"rows must be >= 0 (0: from the target), not {self.rows}")

    def run(self, module: Module, ctx: PassContext) -> Module:
        rows = self.rows or auto_rows(ctx.target, self.tile)

        def change(function: Function) -> Function:
            original = function
            function, notes = pull_consumers(function, ctx.analyses.isl)
            result = online_reductions(function, self.tile, rows, explicit=bool(self.rows))
            if result.function is function:
                result = replace(result, function=original)   # pulling alone is no gain
                notes = [n for n in notes if n[2] != "applied"]
            for where, why, kind in notes + result.notes:
                ctx.remark("online-reductions", where, why, kind=kind)
            return result.function

        return _each_host(module, change)


@register_pass("single-pass-moments")
@dataclass(frozen=True)
class SinglePassMoments:
    """Mean and variance in one traversal (``polyir.fusion.moments``): the sum of
    ``(x - mean)^2`` computed beside the sum of ``x`` as shifted sums with a
    repair term, for rows larger than ``min_bytes`` (``-1``: the Target's L1
    data cache, below which the second traversal reads cache). Every rewrite
    and every refusal is a remark."""

    min_bytes: int = -1

    def run(self, module: Module, ctx: PassContext) -> Module:
        limit = ctx.target.cache(1).size if self.min_bytes < 0 else self.min_bytes

        def change(function: Function) -> Function:
            result = single_pass_moments(function, limit)
            for where, why, kind in result.notes:
                ctx.remark("single-pass-moments", where, why, kind=kind)
            return result.function

        return _each_host(module, change)
