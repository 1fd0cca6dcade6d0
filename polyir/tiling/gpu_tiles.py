"""Block / warp / MMA tile sizes for tensor-core contractions (policy).

A small analytical model over a fixed candidate list (CUTLASS-like shapes,
``../shared/notes/tile-sizes.md``), read from the ``Target``'s per-SM facts,
its two weights calibrated on an H200 by ``bench/gpu_bench.py --sweep``
(f16, 2048^3 to 8192^3; docs/gpu.md has the table):

* **registers per thread**: ``WM*WN/32`` f32 accumulators + ``(WM/16)*4 +
  (WN/16)*4`` operand registers + about 80 for addresses and the epilogue
  (``ptxas -v``: 161-167 for 64x32 warp tiles, 240-248 for 64x64); at most
  ``max_registers_per_thread`` (255);
* **shared memory per block**: ``stages`` padded A and B tiles
  (:meth:`TileConfig.shared_bytes`; the epilogue runs in registers, no output
  staging tile); within ``shared_memory_bytes``;
* **blocks per SM**: limited by shared memory, registers and threads;
* **time**: ``ceil(tiles / SMs)`` tile times (wave quantisation), each ``BM*BN*(1 + W_s*(1/WM + 1/WN) +
  W_g*(1/BM + 1/BN))`` per unit of K: the MMAs, the shared-to-register
  operand traffic of a warp tile (``ldmatrix`` per MMA) and the global operand
  traffic of a block tile; with symbolic sizes the cost per output element.
  Every candidate keeps at least 64 of K in flight (``(stages-1)*BK``), which
  the sweep showed global-memory latency needs.

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
        return acc + operands + 80

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
    TileConfig(128, 128, 64, 2, 2, 3),
    TileConfig(128, 128, 32, 2, 2, 4),
    TileConfig(128, 64, 32, 2, 2, 4),
    TileConfig(64, 128, 32, 2, 2, 4),
    TileConfig(64, 64, 64, 2, 2, 3),
    TileConfig(64, 32, 32, 2, 1, 4),
    TileConfig(32, 32, 32, 1, 1, 4),
)
"""Measured on an H200 (f16, TFLOP/s at 4096^3 / 8192^3): 128x128x64 2x2 warps
3 stages 147 / 177, 128x128x32 2x2 4 stages 130 / 171, 128x64x32 123 / 146,
64x128x32 120 / 143, 64x64x64 103 / 119; the former 128x128x32 2x4 warps 2
stages 86 / 102. 256x128x32 (one 8-warp block per SM, 123 / 172) and
128x256x32 (142 / 161) were never faster than 128x128x64."""


def blocks_per_sm(config: TileConfig, target: Target) -> int:
    """How many blocks of ``config`` fit on one SM at once (0: none fits)."""
    shared = config.shared_bytes()
    if shared > target.shared_memory_bytes or config.registers() > \
            target.max_registers_per_thread:
        return 0
    by_shared = target.shared_memory_per_sm // shared
    by_regs = target.registers_per_sm // (config.registers() * config.threads)
    by_threads = target.max_threads_per_sm // config.threads
    return max(0, min(by_shared, by_regs, by_threads, 32))


SHARED_WEIGHT = 32
"""Cost of a warp tile's shared-to-register operand traffic: per output element
and unit of K, ``SHARED_WEIGHT * (1/WM + 1/WN)`` against 1 for its MMA work
(fitted to the sweep: 64x64, 64x32 and 32x32 warp tiles ran at 1 : 0.8 : 0.67)."""

TRAFFIC_WEIGHT = 32
"""Cost of a block tile's global operand traffic, ``TRAFFIC_WEIGHT * (1/BM + 1/BN)``
per output element and unit of K (the GPU's flop/byte balance, ~200 on an
H200, over the L2 reuse that neighbouring blocks get)."""


def tile_cost(config: TileConfig) -> float:
    """Relative time of one block tile per unit of K: MMA work, operand
    traffic from shared memory into registers and from global memory."""
    per_element = 1 + SHARED_WEIGHT * (1 / config.warp_m + 1 / config.warp_n) \
        + TRAFFIC_WEIGHT * (1 / config.bm + 1 / config.bn)
    return config.bm * config.bn * per_element


def choose_tiles(target: Target, m: int | None, n: int | None, batch: int | None = 1
                 ) -> TileConfig:
    """The candidate with the least estimated time for an ``m x n`` output
    (``None``: size unknown at compile time) on ``target``: the busiest SM
    runs ``ceil(tiles / SMs)`` tiles (wave quantisation; blocks that share an
    SM share its tensor cores), each costing :func:`tile_cost`; with unknown
    sizes, the least cost per output element. Candidates that do not fit an
    SM (:func:`blocks_per_sm`) are skipped."""
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
           "PAD_F32", "SHARED_WEIGHT", "TRAFFIC_WEIGHT"]
