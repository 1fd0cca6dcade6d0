"""Block / warp / MMA tile sizes for tensor-core contractions (policy).

A small analytical model over a fixed candidate list (CUTLASS-like shapes,
``../shared/notes/tile-sizes.md``), read from the ``Target``'s per-SM facts:

* **registers per thread**: ``WM*WN/32`` f32 accumulators + ``(WM/16)*4 +
  (WN/16)*4`` operand registers + about 40 for addresses and the epilogue;
  at most ``max_registers_per_thread`` (255) and at most 200 to stay clear of spills;
* **shared memory per block**: two stages of padded A and B tiles
  (:func:`shared_bytes`; the epilogue runs in registers, no output staging
  tile); within ``shared_memory_bytes``;
* **blocks per SM**: limited by shared memory, registers and threads;
* **time**: ``ceil(tiles / SMs)`` (wave quantisation) times the cost of one
  tile, ``BM*BN + w*(BM+BN)`` (MMA work plus operand traffic, whose ratio is
  the tile's arithmetic intensity); with symbolic sizes the cost per output
  element.

The mechanism (``polyir.gpu.tensorcore``) takes any :class:`TileConfig`; this
module only chooses one (policy lives in ``polyir.tiling``, mechanism in
``polyir.gpu``).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from polyir.errors import CompileError
from polyir.target import Target

PAD_HALVES = 8
"""Padding (elements) added to each row of a 16-bit shared tile: 16 bytes, so
that the 8 rows one ``ldmatrix`` phase reads fall on different banks."""
PAD_F32 = 4
"""Padding of each row of the f32 output staging tile."""


@dataclass(frozen=True)
class TileConfig:
    """Block tile ``bm x bn x bk`` computed by ``warps_m x warps_n`` warps, each
    warp a ``bm/warps_m x bn/warps_n`` tile of 16x16 MMA tiles; ``stages``
    shared-memory buffers of the A and B tiles (2: double buffering; more:
    a deeper ``cp.async`` pipeline)."""

    bm: int
    bn: int
    bk: int
    warps_m: int
    warps_n: int
    stages: int = 2

    def __post_init__(self) -> None:
        if self.bk % 16 or self.bk <= 0:
            raise CompileError(f"tile k size {self.bk} is not a positive multiple of 16")
        for size, warps, what in ((self.bm, self.warps_m, "m"), (self.bn, self.warps_n, "n")):
            if warps <= 0 or size <= 0 or size % (16 * warps):
                raise CompileError(f"tile {what} size {size} is not a multiple of 16 x "
                                   f"{warps} warps")
        if not 2 <= self.stages <= 8:
            raise CompileError(f"{self.stages} pipeline stages: between 2 and 8 are supported")

    @property
    def warp_m(self) -> int:
        return self.bm // self.warps_m

    @property
    def warp_n(self) -> int:
        return self.bn // self.warps_n

    @property
    def threads(self) -> int:
        return 32 * self.warps_m * self.warps_n

    def registers(self) -> int:
        """Estimated registers per thread."""
        acc = self.warp_m * self.warp_n // 32
        operands = (self.warp_m // 16) * 4 + (self.warp_n // 16) * 4
        return acc + operands + 40

    def shared_bytes(self, element_bytes: int = 2, stages: int | None = None,
                     staged: bool = False) -> int:
        """Shared memory per block: ``stages`` (default: the config's) padded A and B tiles (the
        operands' layouts may transpose a tile; the larger padding counts),
        and with ``staged`` the f32 C staging tile (the register epilogue
        needs none: ``polyir.ptx.staging``)."""
        pad = PAD_HALVES
        a = max(self.bm * (self.bk + pad), self.bk * (self.bm + pad)) * element_bytes
        b = max(self.bk * (self.bn + pad), self.bn * (self.bk + pad)) * element_bytes
        c = self.bm * (self.bn + PAD_F32) * 4
        return (self.stages if stages is None else stages) * (a + b) + (c if staged else 0)

    def __str__(self) -> str:
        text = f"{self.bm}x{self.bn}x{self.bk} warps {self.warps_m}x{self.warps_n}"
        return text if self.stages == 2 else f"{text} stages {self.stages}"


CANDIDATES = (
    TileConfig(128, 128, 32, 2, 4),
    TileConfig(128, 64, 32, 2, 2),
    TileConfig(64, 128, 32, 2, 2),
    TileConfig(64, 64, 32, 2, 2),
    TileConfig(64, 32, 32, 2, 1),
    TileConfig(32, 32, 32, 1, 1),
)


def blocks_per_sm(config: TileConfig, target: Target) -> int:
    """How many blocks of ``config`` fit on one SM at once (0: none fits)."""
    shared = config.shared_bytes()
    if shared > target.shared_memory_bytes or config.registers() > min(
            200, target.max_registers_per_thread):
        return 0
    by_shared = target.shared_memory_per_sm // shared
    by_regs = target.registers_per_sm // (config.registers() * config.threads)
    by_threads = target.max_threads_per_sm // config.threads
    return max(0, min(by_shared, by_regs, by_threads, 32))


TRAFFIC_WEIGHT = 64
"""Cost of one row or column of operand traffic relative to one output
element's MMA work, per k: about the flop/byte balance of the GPU's global
memory (~200 on an H200) over the L2 reuse grouped blocks get (~3x)."""


def tile_cost(config: TileConfig) -> int:
    """Relative time of one block tile per k step: MMA work plus operand traffic."""
    return config.bm * config.bn + TRAFFIC_WEIGHT * (config.bm + config.bn)


def choose_tiles(target: Target, m: int | None, n: int | None, batch: int | None = 1
                 ) -> TileConfig:
    """The candidate with the least estimated time for an ``m x n`` output
    (``None``: size unknown at compile time) on ``target``: every SM runs
    ``ceil(tiles / SMs)`` tiles one after the other (wave quantisation), each
    costing :func:`tile_cost`; with unknown sizes, the least cost per output
    element. Candidates that do not fit an SM (:func:`blocks_per_sm`) are skipped."""
    best: tuple[float, TileConfig] | None = None
    for config in CANDIDATES:
        if blocks_per_sm(config, target) == 0:
            continue
        if m is None or n is None or batch is None:
            time = tile_cost(config) / (config.bm * config.bn)
        else:
            tiles = math.ceil(m / config.bm) * math.ceil(n / config.bn) * max(batch, 1)
            time = math.ceil(tiles / target.sm_count) * tile_cost(config)
        if best is None or time < best[0]:
            best = (time, config)
    if best is None:
        raise CompileError(f"no tensor-core tile fits {target.name}")
    return best[1]


__all__ = ["TileConfig", "CANDIDATES", "choose_tiles", "blocks_per_sm", "tile_cost", "PAD_HALVES",
           "PAD_F32"]
