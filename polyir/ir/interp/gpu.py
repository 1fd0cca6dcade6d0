"""GPU execution model of the interpreter: grids, blocks, barriers, warp fragments.

For each block of the grid (in ``parallel_order``), every thread runs the
kernel body as a Python function (a generator when the body has barriers or
fragment operations). Threads run phase by phase: each runs until it yields
at a barrier or a fragment operation, or finishes.

* A fragment operation is warp-collective: when every lane of a warp waits at
  the same one it runs once, on the operands of the warp's first lane, and the
  lanes resume. Lanes of one warp at different places is an error.
* A barrier releases when every thread of the block waits at the same barrier.
  Some threads finished while others wait, or threads at different barriers,
  is a divergent-barrier error.

Warps are groups of 32 consecutive linear thread ids, ``x + y*bx + z*bx*by``.
Shared buffers are per block, fragments per warp, local buffers per thread.
"""
from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import numpy as np

from polyir.ir.fragments import MMA_SHAPES
from polyir.ir.interp.races import RaceChecker, tile_entries
from polyir.ir.types import DType, MemorySpace, round_to_bf16

WARP_SIZE = 32
_DONE = object()


def round_to_tf32(values: np.ndarray) -> np.ndarray:
    """Round float32 values to tf32 (10 explicit significand bits), nearest even."""
    as_f32 = np.asarray(values, dtype=np.float32)
    bits = as_f32.view(np.uint32).astype(np.uint64)
    rounded = ((bits + ((bits >> 13) & 1) + 0xFFF) >> 13) << 13
    out = rounded.astype(np.uint32).view(np.float32)
    return np.where(np.isnan(as_f32), as_f32, out)


def round_array(values: np.ndarray, dtype: DType) -> np.ndarray:
    """``values`` as stored in a buffer of ``dtype``, in that buffer's storage type
    (f16 and bf16 are held in float32)."""
    if dtype is DType.F16:
        with np.errstate(over="ignore"):
            return np.asarray(values).astype(np.float16).astype(np.float32)
    if dtype is DType.BF16:
        return round_to_bf16(np.asarray(values, dtype=np.float32))
    with np.errstate(invalid="ignore", over="ignore"):
        return np.asarray(values).astype(dtype.numpy)


def run_grid(rt: Any, node: int, thread: Callable[..., Any], grid: tuple[int, int, int],
             block: tuple[int, int, int] | Callable[[int, int, int], Any],
             shared_specs: tuple[tuple[str, int, tuple[int, ...]], ...],
             frag_specs: tuple[tuple[str, int, tuple[int, ...]], ...]) -> None:
    """Run ``thread`` for every thread of every block of ``grid``."""
    grid = (int(grid[0]), int(grid[1]), int(grid[2]))
    if any(g < 0 for g in grid):
        raise rt.error(node, f"negative grid size {grid}")
    blocks = [(x, y, z) for z in range(grid[2]) for y in range(grid[1]) for x in range(grid[0])]
    is_generator = bool(thread.__code__.co_flags & inspect.CO_GENERATOR)
    races = RaceChecker(rt, node) if rt.detect_races else None
    for bid in rt.ordered(blocks):
        dims = tuple(int(d) for d in (block(*bid) if callable(block) else block))
        if len(dims) != 3 or any(d < 1 for d in dims):
            raise rt.error(node, f"invalid block size {dims}")
        bx, by, bz = dims
        tids = [(x, y, z) for z in range(bz) for y in range(by) for x in range(bx)]
        shared = tuple(rt.alloc(fmt, size) for fmt, size, _ in shared_specs)
        warps = (len(tids) + WARP_SIZE - 1) // WARP_SIZE
        frags = [tuple(rt.alloc(fmt, size) for fmt, size, _ in frag_specs) for _ in range(warps)]
        logs: list[list[Any]] = [[] for _ in tids] if races else []
        loggers = [log.append for log in logs] if races else [None] * len(tids)
        if not is_generator:
            for lin in rt.ordered(range(len(tids))):
                thread(bid, tids[lin], grid, dims, shared, frags[lin // WARP_SIZE], loggers[lin])
            if races:
                races.check_phase(bid, tids, logs)
        else:
            gens = [thread(bid, tids[lin], grid, dims, shared, frags[lin // WARP_SIZE], loggers[lin])
                    for lin in range(len(tids))]
            _schedule(rt, node, gens, bid, tids, logs, races)


def _schedule(rt: Any, node: int, gens: list[Any], bid: tuple[int, int, int], tids: list[Any],
              logs: list[list[Any]], races: RaceChecker | None) -> None:
    """Run the threads of one block phase by phase (see the module docstring)."""
    n = len(gens)
    state: list[Any] = [None] * n
    runnable: list[int] = rt.ordered(range(n))
    barriers = 0
    while True:
        for lin in runnable:
            try:
                state[lin] = next(gens[lin])
            except StopIteration:
                state[lin] = _DONE
        runnable = []
        for first in range(0, n, WARP_SIZE):
            lanes = range(first, min(n, first + WARP_SIZE))
            if not any(type(state[lane]) is tuple for lane in lanes):
                continue
            ops = {state[lane][0] if type(state[lane]) is tuple else None for lane in lanes}
            if len(ops) != 1 or None in ops:
                where = [rt.describe(op) for op in sorted(o for o in ops if o is not None)]
                raise rt.error(node, f"divergent fragment operation in block {bid}, warp "
                                     f"{first // WARP_SIZE}: lanes wait at {where}, others at a barrier "
                                     f"or finished")
            fragment_op(rt, state[lanes[0]], logs[lanes[0]] if races else None)
            runnable.extend(lanes)
        if runnable:
            runnable = rt.ordered(runnable)
            continue
        waiting = [s for s in state if s is not _DONE]
        if races:
            races.check_phase(bid, tids, logs)
        if not waiting:
            return
        if len(waiting) == n and len(set(waiting)) == 1:
            barriers += 1
            runnable = rt.ordered(range(n))
            continue
        at = sorted({rt.describe(s) for s in waiting})
        raise rt.error(node, f"divergent barrier in block {bid}: {len(waiting)} of {n} threads wait at "
                             f"{', '.join(at)} while {n - len(waiting)} finished (after {barriers} "
                             f"completed barriers)")


def _tile_bounds(rt: Any, k: int, dims: tuple[int, ...], idx: tuple[int, ...], extent: tuple[int, int],
                 buffer: str) -> None:
    if len(dims) < 2 or len(idx) != len(dims):
        raise rt.error(k, f"fragment access to '{buffer}' needs a buffer of rank >= 2 and one index "
                          f"per dimension (shape {dims}, index {idx})")
    lead_ok = all(0 <= i < d for i, d in zip(idx[:-2], dims[:-2], strict=True))
    tail_ok = all(0 <= i and i + e <= d for i, e, d in zip(idx[-2:], extent, dims[-2:], strict=True))
    if not (lead_ok and tail_ok):
        raise rt.error(k, f"fragment tile {extent[0]}x{extent[1]} at {list(idx)} is out of bounds "
                          f"for buffer '{buffer}' of shape {list(dims)}")


def _log_tile(log: list[Any] | None, k: int, buffer: Any, dims: tuple[int, ...], region: tuple[Any, ...],
              write: bool) -> None:
    if log is None:
        return
    strides = [int(np.prod(dims[axis + 1:])) for axis in range(len(dims))]
    base = sum(i * s for i, s in zip(region[:-2], strides[:-2], strict=True))
    rows, cols = region[-2], region[-1]
    offsets = (base + np.arange(rows.start, rows.stop)[:, None] * strides[-2]
               + np.arange(cols.start, cols.stop)[None, :])
    log.extend(tile_entries(k, buffer.name, offsets, write, buffer.space is not MemorySpace.SHARED))


def fragment_op(rt: Any, payload: tuple[Any, ...], log: list[Any] | None = None) -> None:
    """Execute one warp-level fragment operation (``payload`` from generated code);
    with race detection, its memory accesses are appended to ``log``."""
    from polyir.ir.nodes import FragmentFill, FragmentLoad, FragmentMMA
    k = payload[0]
    fn, node = rt.node(k)
    buffers = fn.buffers

    def frag(mv: memoryview, name: str, rows: int, cols: int) -> np.ndarray:
        arr = np.asarray(mv)
        if arr.size != rows * cols:
            raise rt.error(k, f"fragment '{name}' has {arr.size} elements, {rows}x{cols} expected")
        return arr.reshape(rows, cols)

    if isinstance(node, FragmentFill):
        _, mv, value = payload
        arr = np.asarray(mv)
        arr[:] = round_array(np.array([value]), buffers[node.fragment].dtype)[0]
        return
    shape = MMA_SHAPES.get(node.shape)
    if shape is None:
        raise rt.error(k, f"unknown MMA shape '{node.shape}'")
    if isinstance(node, FragmentMMA):
        _, res, a, b, acc = payload
        m, n, kk = shape.m, shape.n, shape.k
        inputs = []
        for mv, name, role, (rows, cols) in ((a, node.a, "a", (m, kk)), (b, node.b, "b", (kk, n))):
            values = frag(mv, name, rows, cols)
            dtype = shape.role_dtype(role)
            values = round_to_tf32(values) if "tf32" in shape.key else round_array(values, dtype)
            inputs.append(values.astype(np.float64))
        total = inputs[0] @ inputs[1] + frag(acc, node.acc, m, n).astype(np.float64)
        frag(res, node.result, m, n)[:] = round_array(total, buffers[node.result].dtype)
        return
    if isinstance(node, FragmentLoad):
        _, mv, src, dims, idx = payload
        rows, cols = shape.role_shape(node.role)
        extent = (rows, cols) if node.layout == "row" else (cols, rows)
        _tile_bounds(rt, k, dims, idx, extent, node.buffer)
        array = np.asarray(src).reshape(dims)
        region = idx[:-2] + (slice(idx[-2], idx[-2] + extent[0]), slice(idx[-1], idx[-1] + extent[1]))
        _log_tile(log, k, buffers[node.buffer], dims, region, False)
        tile = array[region]
        tile = tile if node.layout == "row" else tile.T
        frag(mv, node.fragment, rows, cols)[:] = round_array(tile, buffers[node.fragment].dtype)
        return
    _, mv, dst, dims, idx = payload  # FragmentStore
    rows, cols = shape.role_shape("acc")
    extent = (rows, cols) if node.layout == "row" else (cols, rows)
    _tile_bounds(rt, k, dims, idx, extent, node.buffer)
    values = frag(mv, node.fragment, rows, cols)
    values = values if node.layout == "row" else values.T
    array = np.asarray(dst).reshape(dims)
    region = idx[:-2] + (slice(idx[-2], idx[-2] + extent[0]), slice(idx[-1], idx[-1] + extent[1]))
    _log_tile(log, k, buffers[node.buffer], dims, region, True)
    array[region] = round_array(values, buffers[node.buffer].dtype)
