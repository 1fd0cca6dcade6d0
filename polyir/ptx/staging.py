"""Accumulators staged in registers: an f32 shared tile the lowering never allocates.

A tensor-core epilogue (``polyir.gpu.tensorcore``) writes each warp's
accumulator fragments into a shared f32 tile with ``fragment_store`` and has
every lane read back only the elements it holds itself in the
``mma.m16n8k16`` C layout. In the IR that round trip is what keeps the
program's meaning plain (a warp-wide store, then ordinary loads); on the GPU
it is wasted: ``polyir.ptx.mma_sync`` lowers ``fragment_store`` per lane,
element by element, so each of those loads reads a value the same lane holds
in a register. :func:`register_staged` finds such tiles and the lowering
then emits no store, no shared allocation and, for each load, a read of the
fragment register (:func:`load_staged`).

A shared buffer ``S`` is staged in registers when, in a kernel lowered with
``mma.sync`` (``uses_mma_sync``) whose only thread loop is ``for t = 0 to
32*W gpu=thread.x`` (so lane = ``t % 32``):

* ``S`` is f32 and 2-d; every write of it is a row-layout ``fragment_store``
  directly in the thread loop's body (run once per thread, not in a loop);
  nothing else writes it and no ``fragment_load`` reads it;
* every load of ``S`` comes after the last of those stores, and its
  subscripts are exactly ``origin + acc_element(half, q, t % 32)`` for one
  store's origin and one register ``4*half + q`` (compared as canonical
  affine expressions, so the match is exact, never a guess);
* no fragment stored into ``S`` is written again after its store.

Otherwise ``S`` stays an ordinary shared buffer (the lowering is then the
plain one, and still correct).
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from llvmlite import ir

from polyir.ir.affine import Aff
from polyir.ir.nodes import (
    Assign,
    Buffer,
    For,
    FragmentFill,
    FragmentLoad,
    FragmentMMA,
    FragmentStore,
    Function,
    If,
    Launch,
    Load,
    Module,
    Node,
)
from polyir.ir.types import DType, MemorySpace
from polyir.ir.walk import loads, node_exprs, walk_nodes
from polyir.llvm.hooks import F32
from polyir.ptx.mma_sync import acc_element, uses_mma_sync

if TYPE_CHECKING:
    from polyir.llvm.lower import FunctionLowerer


@dataclass(frozen=True)
class StagedTile:
    """A shared tile held in registers: ``registers`` maps the subscripts of
    each of its loads to (fragment, register number)."""

    buffer: str
    registers: dict[tuple[object, ...], tuple[str, int]]


_CACHE: dict[tuple[int, int], tuple[Function, dict[str, StagedTile]]] = {}


def register_staged(function: Function, sm: int) -> dict[str, StagedTile]:
    """The shared tiles of ``function`` held in registers (module docstring)."""
    key = (id(function), sm)
    cached = _CACHE.get(key)
    if cached is not None and cached[0] is function:
        return cached[1]
    result = _find(function) if uses_mma_sync(function, sm) else {}
    _CACHE[key] = (function, result)
    return result


def _thread_loop(function: Function) -> For | None:
    loops = [n for n in walk_nodes(function.body)
             if isinstance(n, For) and (n.mapping or "").startswith("thread")]
    if len(loops) != 1:
        return None
    loop = loops[0]
    if loop.mapping != "thread.x" or loop.lower != (Aff.const(0),) or loop.step != 1 or \
            len(loop.upper) != 1 or not loop.upper[0].is_constant or loop.upper[0].constant % 32:
        return None
    return loop


def _find(function: Function) -> dict[str, StagedTile]:
    loop = _thread_loop(function)
    if loop is None:
        return {}
    buffers = function.buffers
    order = list(walk_nodes(loop.body))
    position = {id(node): p for p, node in enumerate(order)}
    everything = list(walk_nodes(function.body))
    found: dict[str, StagedTile] = {}
    names = {n.buffer for n in loop.body if isinstance(n, FragmentStore)}
    for name in sorted(names):
        buffer = buffers.get(name)
        if buffer is None or buffer.space is not MemorySpace.SHARED or \
                buffer.dtype is not DType.F32 or buffer.rank != 2:
            continue
        tile = _staged(name, loop, everything, order, position)
        if tile is not None:
            found[name] = tile
    return found


def _staged(name: str, loop: For, everything: list[Node], order: list[Node],
            position: dict[int, int]) -> StagedTile | None:
    stores = [n for n in loop.body if isinstance(n, FragmentStore) and n.buffer == name]
    all_stores = [n for n in everything if isinstance(n, FragmentStore) and n.buffer == name]
    if len(all_stores) != len(stores) or any(s.layout != "row" for s in stores):
        return None
    if any(isinstance(n, Assign) and n.buffer == name or
           isinstance(n, FragmentLoad) and n.buffer == name for n in everything):
        return None
    last = max(position[id(s)] for s in stores)
    stored = {s.fragment: position[id(s)] for s in stores}
    for p, node in enumerate(order):
        written = node.fragment if isinstance(node, (FragmentFill, FragmentLoad)) else \
            node.result if isinstance(node, FragmentMMA) else None
        if written in stored and p > stored[written]:
            return None
    lane = Aff.var(loop.var) % 32
    pattern = [(acc_element(half, q, lane), 4 * half + q) for half in range(2) for q in range(4)]
    registers: dict[tuple[object, ...], tuple[str, int]] = {}
    seen_loads = 0
    for node in everything:
        for load in (ld for e in node_exprs(node) for ld in loads(e) if ld.buffer == name):
            seen_loads += 1
            if id(node) not in position or position[id(node)] < last:
                return None
            match = _match(load, stores, pattern)
            if match is None:
                return None
            registers[tuple(load.indices)] = match
    if not seen_loads:
        return None
    return StagedTile(name, registers)


def _match(load: Load, stores: list[FragmentStore],
           pattern: list[tuple[tuple[Aff, Aff], int]]) -> tuple[str, int] | None:
    """The one (fragment, register) whose element ``load`` reads, or None."""
    if len(load.indices) != 2 or not all(isinstance(i, Aff) for i in load.indices):
        return None
    row, col = load.indices
    assert isinstance(row, Aff) and isinstance(col, Aff)
    hits = []
    for store in stores:
        dr, dc = row - store.indices[0], col - store.indices[1]
        hits += [(store.fragment, reg) for (er, ec), reg in pattern if dr == er and dc == ec]
    return hits[0] if len(hits) == 1 else None


def load_staged(lowerer: FunctionLowerer, tile: StagedTile, indices: tuple[object, ...]
                ) -> ir.Value:
    """The register that holds ``tile[indices]`` (its f32 value)."""
    fragment, register = tile.registers[tuple(indices)]
    b = lowerer.builder
    pointer = lowerer.buffers[fragment].pointer
    base = b.bitcast(pointer, F32.as_pointer()) if pointer.type != F32.as_pointer() else pointer
    return b.load(b.gep(base, [ir.Constant(ir.IntType(32), register)], source_etype=F32), typ=F32)


def null_tile() -> ir.Value:
    """The pointer a staged tile is bound to: never dereferenced (every access
    of the tile is a staged load or a skipped store)."""
    return ir.Constant(ir.PointerType(F32, addrspace=3), None)


def fit_launches(module: Module, sm: int, static_limit: int) -> Module:
    """``module`` with the dynamic shared bytes of each launch of a kernel that
    stages tiles in registers recomputed without those tiles (gpu-map sized
    them with every shared buffer): 0 when the rest fits ``static_limit``."""
    sizes: dict[str, int] = {}
    for kernel in module.functions:
        staged = register_staged(kernel, sm) if kernel.kind == "kernel" else {}
        if staged:
            total = sum((_bytes(b) + 15) // 16 * 16 for b in kernel.buffers.values()
                        if b.space is MemorySpace.SHARED and b.name not in staged)
            sizes[kernel.name] = total if total > static_limit else 0

    def fit(nodes: tuple[Node, ...]) -> tuple[Node, ...]:
        out: list[Node] = []
        for node in nodes:
            if isinstance(node, Launch) and node.kernel in sizes:
                node = replace(node, shared_bytes=sizes[node.kernel])
            elif isinstance(node, For):
                node = replace(node, body=fit(node.body))
            elif isinstance(node, If):
                node = replace(node, then_body=fit(node.then_body), else_body=fit(node.else_body))
            out.append(node)
        return tuple(out)

    if not sizes:
        return module
    return replace(module, functions=tuple(
        f if f.kind == "kernel" else replace(f, body=fit(f.body)) for f in module.functions))


def _bytes(buffer: Buffer) -> int:
    count = 1
    for dim in buffer.shape:
        count *= dim.constant
    return count * buffer.dtype.storage_bytes("cuda")


__all__ = ["StagedTile", "register_staged", "load_staged", "null_tile", "fit_launches"]
