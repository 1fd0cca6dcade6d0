"""The fusion cost model: plain data in, plain data out.

For one candidate (a producer fused into a consumer at a depth) it estimates

* ``bytes_saved``: memory traffic no longer spent on the intermediate buffers
  (each written once and read once at full size before; after fusion a
  buffer the producer no longer keeps shrinks to its footprint per consumer
  iteration, which stays in cache);
* ``recompute``: the extra fraction of producer work the slice repeats
  (``Slice.recompute``);
* ``working_set``: the bytes one consumer iteration at the fusion depth
  touches (every buffer's footprint box at that depth), compared with the
  target's cache (CPU: the L2 cache) or shared memory (GPU);
* ``reuse_lost``: on the CPU, the extra operand loads of a matrix product the
  fused loops cut into matrix-vector products (one per row) or into blocks
  whose shared operand no longer stays in cache (``polyir.fusion.reuse``).

:func:`decide` accepts a candidate when it saves traffic, repeats at most
``tolerance`` of the producer's work, loses less reuse than the traffic it
saves, and its working set fits; among the
accepted depths of one pair the policy takes the one whose intermediate
shrinks most (then the deepest). Sizes that are symbols are evaluated at
``symbol_size`` (64) for the estimates only.
"""
from __future__ import annotations

from dataclasses import dataclass
from math import prod

from polyir.ir.affine import Aff
from polyir.ir.nodes import Buffer, Function
from polyir.target import Target

DEFAULT_TOLERANCE = 0.3
"""Extra producer work accepted, as MLIR's ``fusion-compute-tolerance`` default."""


@dataclass(frozen=True)
class Estimate:
    """What one fusion candidate costs and saves (see the module docstring)."""

    depth: int
    bytes_saved: int
    recompute: float
    working_set: int
    shrunk_elements: int      # elements of the intermediate(s) per consumer iteration
    full_elements: int        # elements of the intermediate(s) before
    reuse_lost: int = 0       # extra operand bytes loaded by contractions the fusion cuts
    reuse_note: str = ""      # which contraction, what operand (polyir.fusion.reuse)

    @property
    def storage_reduction(self) -> float:
        return self.full_elements / max(1, self.shrunk_elements)


@dataclass(frozen=True)
class Decision:
    accepted: bool
    reason: str


def evaluate_size(aff: Aff, sizes: dict[str, int], symbol_size: int = 64) -> int:
    """``aff`` with its symbols at ``sizes`` (missing ones at ``symbol_size``)."""
    env = {v: sizes.get(v, symbol_size) for v in aff.variables()}
    return aff.evaluate(env)


def buffer_elements(buffer: Buffer, sizes: dict[str, int]) -> int:
    return prod(max(0, evaluate_size(d, sizes)) for d in buffer.shape) if buffer.shape else 1


def estimate(function: Function, fused: Function, consumer: int, depth: int, buffers: tuple[str, ...],
             removed: bool, recompute: float, working_set: int, shrunk_elements: int,
             sizes: dict[str, int] | None = None, device: str = "cpu") -> Estimate:
    """An :class:`Estimate` for one candidate (``fused`` is the fused function,
    ``consumer`` the fused nest's index in it)."""
    del fused, consumer
    sizes = sizes or {}
    known = function.buffers
    full = sum(buffer_elements(known[b], sizes) for b in buffers if b in known)
    element_bytes = max((known[b].dtype.storage_bytes(device) for b in buffers if b in known), default=4)
    saved = 2 * full * element_bytes if removed else 0
    return Estimate(depth, saved, recompute, working_set, shrunk_elements, full)


def cache_budget(target: Target) -> int:
    """Bytes a fused iteration's working set may take on ``target``."""
    if target.kind == "cuda":
        return target.shared_memory_bytes or 48 * 1024
    return target.cache(2).size


def decide(candidate: Estimate, target: Target, tolerance: float = DEFAULT_TOLERANCE) -> Decision:
    """Accept or refuse one candidate, with the reason."""
    if candidate.bytes_saved <= 0:
        return Decision(False, "the producer's results are still needed elsewhere, so fusing "
                               "only repeats its work (no traffic saved)")
    if candidate.recompute > tolerance:
        return Decision(False, f"the slice repeats {candidate.recompute:.0%} of the producer's work "
                               f"(tolerance {tolerance:.0%})")
    if candidate.reuse_lost > candidate.bytes_saved:
        return Decision(False, f"{candidate.reuse_note}: {candidate.reuse_lost} bytes more loaded, "
                               f"{candidate.bytes_saved} bytes of traffic saved")
    budget = cache_budget(target)
    if candidate.working_set > budget:
        return Decision(False, f"one consumer iteration at depth {candidate.depth} would touch "
                               f"{candidate.working_set} bytes, more than the {budget} bytes of "
                               f"{'shared memory' if target.kind == 'cuda' else 'L2 cache'}")
    return Decision(True, f"saves {candidate.bytes_saved} bytes of traffic; the intermediate shrinks "
                          f"{candidate.storage_reduction:.0f}x; recomputes {candidate.recompute:.0%}")


__all__ = ["Estimate", "Decision", "DEFAULT_TOLERANCE", "estimate", "decide", "cache_budget",
           "buffer_elements", "evaluate_size"]
