"""Tile sizes from the Target: the analytical model (policy; no search).

Register tile (``Mr x Nr``, the micro-kernel of a matrix product): ``Mr`` rows
whose left operand is broadcast, ``Nr`` columns (a multiple of the vector
width) held in vector registers. After Low et al. (TOMS 2016, "Analytical
modeling is enough for high-performance BLIS") and Polly's
``MatmulOptimizer``:

* enough independent accumulators to hide the FMA latency:
  ``Mr * Nr / Nvec >= latency * throughput`` (Polly's AVX-512 defaults, 4 x 2);
* registers: ``Mr * Nr / Nvec`` accumulators + ``Nr / Nvec`` loaded vectors of
  the right operand + one broadcast ``<= vector_registers``;
* among those, the most FMAs per loaded vector (``Mr*Nr/Nvec / (Mr + Nr/Nvec)``),
  then the fewest partial tiles for the problem's extents when they are known.

Cache tiles (``Kc``, ``Mc``, ``Nc``), BLIS's loop order ``jc, kc, ic, jr, ir``:

* ``Kc``: the ``Kc x Nr`` micro-panel of the right operand, reused by every
  row tile of a block, about 4/3 of L1 (``Kc = 4/3 * S1 / (Nr * elem)``, a
  multiple of 32 in [64, 512]). BLIS and Polly keep it within L1 minus one way
  for the accumulators (``(W1 - 1)/W1 * S1 / ((Mr + Nr) * elem)``: 160 for a
  6 x 64 f32 tile on a 48 KiB L1); measured on the Sapphire Rapids host of
  this project that is slower than 256 (each ``Kc`` step reloads the ``C``
  tiles, and the panel streams well from L2), hence the larger panel;
* ``Mc``: the packed ``Mc x Kc`` block of the left operand in a quarter of L2
  (``Mc = S2 / 4 / (Kc * elem)``, a multiple of ``Mr``), the rest of L2 for the
  panels streaming through it;
* ``Nc``: Polly's ``256 * Nr`` (the packed panel lives in L3) up to 4096;
* when the row blocks are shared among several cores (``auto-tile{parallel=true}``
  runs the ``ic`` loop in parallel; each core packs its own block into its own
  L2, and a smaller block only reloads the right operand's micro-panels more
  often): with the extent known, the fewest blocks of at most ``Mc`` rows
  whose count is a multiple of the cores (1024 rows on two cores: 4 of 258,
  not 3 of 408, which left one core idle a third of the time); unknown, a
  quarter of ``Mc`` (:data:`SHARED_ROW_SPLIT`), so the cores end close together;

every size clipped to the problem's extent (rounded up to the register
tile) when the extent is a known constant.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from polyir.target import Target

FMA_LATENCY = 4
SHARED_ROW_SPLIT = 4
"""With the rows unknown, a shared row block is this fraction of ``Mc`` (about
ten blocks at 1024 rows on two cores: the team's two halves end within a
tenth of each other; measured 2-thread / 1-thread time 0.54 at 1024^3 against
0.63 with whole blocks)."""
"""Cycles of a vector FMA (Polly's ``polly-target-latency-vector-fma`` for AVX-512)."""
FMA_PER_CYCLE = 2
"""Vector FMAs issued per cycle (Polly's ``polly-target-throughput-vector-fma``)."""
NC_QUOTIENT = 256
"""``Nc = NC_QUOTIENT * Nr`` (Polly's ``polly-patterns-nc-quotient`` default)."""
NC_MAX = 4096
"""At most this many columns in a packed panel (its buffer is sized by ``Nc``
when the extent is symbolic)."""


@dataclass(frozen=True)
class RegisterTile:
    """The micro-kernel: ``mr`` broadcast rows by ``nr`` vector columns."""

    mr: int
    nr: int
    lanes: int

    @property
    def accumulators(self) -> int:
        return self.mr * (self.nr // self.lanes)

    def __str__(self) -> str:
        return f"{self.mr}x{self.nr}"


@dataclass(frozen=True)
class GemmSizes:
    """A matrix product's tiles: the register tile and ``kc``, ``mc``, ``nc``."""

    register: RegisterTile
    kc: int
    mc: int
    nc: int

    def __str__(self) -> str:
        return f"Mr x Nr = {self.register}, Kc = {self.kc}, Mc = {self.mc}, Nc = {self.nc}"


def lanes(target: Target, elem_bytes: int) -> int:
    """Elements of ``elem_bytes`` bytes in one vector register of ``target``."""
    return max(1, target.vector_bits // (8 * elem_bytes))


def _round_up(value: int, multiple: int) -> int:
    return -(-value // multiple) * multiple


def register_tile(target: Target, elem_bytes: int, rows: int | None = None,
                  cols: int | None = None, registers: int | None = None) -> RegisterTile:
    """The register tile for ``target`` and elements of ``elem_bytes`` bytes;
    ``rows``/``cols``: the problem's extents when known (partial tiles are
    avoided, and a tile never exceeds them); ``registers``: at most that many
    vector registers (default: the target's)."""
    nvec = lanes(target, elem_bytes)
    registers = max(8, min(target.vector_registers, registers or target.vector_registers))
    best: tuple[float, int, int] | None = None
    for vectors in range(1, 5):
        nr = vectors * nvec
        if cols is not None and nr > _round_up(cols, nvec):
            break
        for mr in range(1, 17):
            if rows is not None and mr > rows:
                break
            accumulators = mr * vectors
            if accumulators + vectors + 1 > registers:
                break
            hides_latency = accumulators >= min(FMA_LATENCY * FMA_PER_CYCLE,
                                                (rows or 16) * vectors)
            if not hides_latency:
                continue
            score = accumulators / (mr + vectors)
            for extent, size in ((rows, mr), (cols, nr)):
                if extent is not None and extent % size:
                    # the share of work in full tiles
                    score *= (extent - extent % size) / extent * 0.9 + 0.1 * (extent % size) / extent
            key = (score, nr, mr)
            if best is None or key > best:
                best = key
    if best is None:
        return RegisterTile(1, nvec, nvec)
    return RegisterTile(best[2], best[1], nvec)


def reduction_jam(target: Target, statements: int) -> int:
    """How many rows of an innermost reduction (a matrix-vector product) to
    unroll and jam: enough independent sums to hide the add latency
    (``FMA_LATENCY * FMA_PER_CYCLE``), each statement's sums and loaded
    values within half of the registers; a power of two (vectorisers pack
    the copies)."""
    wanted = FMA_LATENCY * FMA_PER_CYCLE
    fits = max(8, target.vector_registers) // (2 * max(1, statements))
    factor = max(1, min(wanted, fits))
    return 1 << (factor.bit_length() - 1)


def gemm_sizes(target: Target, elem_bytes: int, m: int | None = None, n: int | None = None,
               k: int | None = None, cores: int = 1) -> GemmSizes:
    """The tiles of a matrix product ``C[m, n] += A[m, k] * B[k, n]`` on
    ``target`` (``m``, ``n``, ``k``: the extents when known; ``cores``: how
    many cores share the row blocks)."""
    tile = register_tile(target, elem_bytes, m, n)
    l1, l2 = target.cache(1), target.cache(2)
    kc = int(4 * l1.size / (3 * tile.nr * elem_bytes)) // 32 * 32
    kc = min(512, max(64, kc))
    mc = int(l2.size / (4 * kc * elem_bytes))
    mc = max(tile.mr, mc // tile.mr * tile.mr)
    nc = min(NC_QUOTIENT * tile.nr, NC_MAX)
    if cores > 1:
        mc = _shared_rows(mc, tile.mr, m, cores)
    if k is not None:
        kc = min(kc, k)
    if m is not None:
        mc = min(mc, _round_up(m, tile.mr))
    if n is not None:
        nc = min(nc, _round_up(n, tile.nr))
    return GemmSizes(tile, max(1, kc), max(tile.mr, mc), max(tile.nr, nc))


def _shared_rows(mc: int, mr: int, m: int | None, cores: int) -> int:
    """``Mc`` when ``cores`` share the row blocks: as many blocks as a
    multiple of ``cores`` (a known extent ``m``: the fewest such blocks of at
    most ``mc`` rows, all but the last the same), or, with ``m`` unknown,
    blocks of ``mc / SHARED_ROW_SPLIT`` rows, so that a team finishing
    within one block of each other loses little."""
    if m is None:
        return max(mr, mc // SHARED_ROW_SPLIT // mr * mr)
    blocks = _round_up(math.ceil(m / mc), cores)
    return min(mc, _round_up(math.ceil(m / blocks), mr))


def hoist_budget(target: Target) -> int:
    """The most bytes a copy made once, before the loops that do not move it
    (``polyir.tiling.hoist``), may take: half of the last cache level. Inside
    those loops the hoisted copy is read instead of the elements of the source
    it copies (the same ones), so their working set does not grow; what grows
    is the memory held (one block per iteration of the loops that do move it)
    and the first pass that fills it, which should stay in a cache. Below the
    bound, hoisting out of loops that repeat the copy at least twice only
    removes work: each element is copied once instead of once per repetition
    (fused attention's transposed key panels: once per key tile instead of
    once per block of query rows)."""
    return target.cache(len(target.caches or target.cache_bytes)).size // 2


__all__ = ["RegisterTile", "GemmSizes", "register_tile", "gemm_sizes", "lanes", "reduction_jam",
           "hoist_budget", "FMA_LATENCY", "FMA_PER_CYCLE", "NC_QUOTIENT"]
