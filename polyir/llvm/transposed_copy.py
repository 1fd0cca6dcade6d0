"""Copies that transpose, lowered as blocks transposed in registers.

A register tile whose rows run along one loop of the output and whose
columns (the vectors) along another leaves its accumulator copies
transposed: the copy-out of a convolution's ``8 x 32`` tile (rows: 8 output
pixels, columns: 32 output channels, vectors along the channels) writes, for
each channel, 8 pixels that are consecutive in the output::

    for c = c0 to c0 + 32 {
      for w = w0 to w0 + 8 {
        out[0, c, h, w] = tile[0, 0, w - w0, c - c0]
      }
    }

LLVM vectorises the inner loop along ``w`` and writes it with a scatter of
the tile's column (``vscatterqps``, element by element in the memory
system), or gathers element by element. :func:`match_transposed_copy`
recognises such a nest: perfect, every loop with a constant trip count and
step 1, one statement ``dst[...] = src[...]`` of a 32- or 64-bit float
element, a loop ``p`` along which ``dst`` is unit-stride (its variable in
the last subscript of extent above 1 with coefficient 1, and in no other
subscript) and loops ``q`` along which ``src`` runs over consecutive
elements (one such loop, or, when the extents of ``src`` are constants, a
group of loops that flatten into one run: a weight pack reading
``W[co, ci, kh, kw]`` along ``ci, kh, kw``, one iteration of ``q`` being
one element of the run),
``src`` moving along ``p`` too (not a broadcast), both trip counts multiples of a block size ``V`` (a power of two, 4 to the
target's lanes), every iteration writing its own element of ``dst`` (each
loop's variable, with coefficient +-1, alone in one subscript of ``dst``)
and ``src`` another buffer. :func:`lower_transposed_copy` then runs the
other loops as they are and, for each ``V x V`` block of ``(p, q)``, loads
``V`` vectors of ``src`` along ``q`` (one per ``p``), transposes them in
registers (``row_block.transpose``) and stores ``V`` vectors of ``dst``
along ``p`` (one per ``q``). Each element is copied as it is (bits, no
arithmetic), so the result is the scalar loop's, in another order, which a
copy whose writes are all distinct and whose source it does not write
allows.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from llvmlite import ir

from polyir.ir.affine import Aff
from polyir.ir.nodes import Assign, For, Load
from polyir.ir.types import DType
from polyir.llvm.hooks import I32, I64
from polyir.llvm.row_block import transpose

if TYPE_CHECKING:
    from polyir.ir.nodes import Buffer
    from polyir.llvm.lower import FunctionLowerer

MIN_BLOCK = 4
"""The smallest block (``V``) worth transposing in registers."""


@dataclass(frozen=True)
class TransposedCopy:
    """A nest matched by :func:`match_transposed_copy`."""

    loops: tuple[For, ...]
    """The nest's loops, outermost first."""
    statement: Assign
    source: Load
    p: str
    """The loop along which ``dst`` is unit-stride (a stored vector's lanes)."""
    q: tuple[str, ...]
    """The loops along which ``src`` runs over consecutive elements,
    innermost first (a loaded vector's lanes; usually one loop)."""
    q_trips: tuple[int, ...]
    block: int
    dtype: DType


def _chain(loop: For) -> tuple[list[For], object]:
    loops = [loop]
    node: object = loop
    while isinstance(node, For) and len(node.body) == 1 and not node.locals:
        node = node.body[0]
        if isinstance(node, For):
            loops.append(node)
    return loops, node


def _unit_stride_var(indices: Sequence[object], shape: Sequence[Aff], names: set[str]) -> str | None:
    """The loop variable among ``names`` along which ``indices`` move by one
    element: coefficient 1 in the last subscript whose extent is not 1, and
    in no other subscript; ``None`` when there is none (or several)."""
    affs = [i if isinstance(i, Aff) and i.is_linear else None for i in indices]
    if any(a is None for a in affs):
        return None
    last = len(affs) - 1
    while last > 0 and shape[last].is_constant and shape[last].constant == 1:
        last -= 1
    candidates = [v for v in names if affs[last].coefficient(v) == 1]  # type: ignore[union-attr]
    if len(candidates) != 1:
        return None
    var = candidates[0]
    if any(a.coefficient(var) for k, a in enumerate(affs) if k != last):  # type: ignore[union-attr]
        return None
    return var


def _distinct_writes(indices: Sequence[object], names: Sequence[str]) -> bool:
    """Each variable of ``names`` alone (coefficient +-1) in a subscript of its
    own: different iterations write different elements."""
    seen: set[str] = set()
    for index in indices:
        if not isinstance(index, Aff) or not index.is_linear:
            return False
        present = [v for v in names if index.coefficient(v)]
        if len(present) > 1:
            return False
        if present:
            if abs(index.coefficient(present[0])) != 1:
                return False
            seen.add(present[0])
    return seen == set(names)


def _contiguous_group(indices: Sequence[object], shape: Sequence[Aff], names: set[str],
                      trips: dict[str, int]) -> tuple[str, ...] | None:
    """The loops of ``names`` along which ``indices`` run over consecutive
    elements, innermost first: the one with a flat coefficient of 1 (every
    extent of the buffer a constant: the row-major address, all subscripts
    together), then each loop whose coefficient is the previous one's times
    that loop's trip count (a weight pack reading ``W[co, ci, kh, kw]`` along
    ``ci, kh, kw``: 1152 consecutive floats for 128 input channels of a 3x3
    kernel). With a symbolic extent, the one loop of :func:`_unit_stride_var`."""
    if not all(e.is_constant for e in shape):
        var = _unit_stride_var(indices, shape, names)
        return None if var is None else (var,)
    affs = [i for i in indices if isinstance(i, Aff) and i.is_linear]
    if len(affs) != len(indices):
        return None
    strides = [1] * len(shape)
    for d in range(len(shape) - 2, -1, -1):
        strides[d] = strides[d + 1] * shape[d + 1].constant
    flat = {v: sum(i.coefficient(v) * s for i, s in zip(affs, strides, strict=True)) for v in names}
    group: list[str] = []
    want = 1
    while True:
        found = [v for v in names if v not in group and flat[v] == want]
        if len(found) != 1:
            break
        group.append(found[0])
        want *= trips[found[0]]
    return tuple(group) or None


def match_transposed_copy(loop: For, buffers: Callable[[str], Buffer | None],
                          lanes_of: Callable[[DType], int]) -> TransposedCopy | None:
    """``loop`` as a transposing copy (module docstring), or ``None``.
    ``buffers(name)`` gives a buffer's declaration; ``lanes_of(dtype)``: the
    target's vector lanes (0: off)."""
    from polyir.llvm.lower import constant_trip_count

    loops, statement = _chain(loop)
    if not isinstance(statement, Assign) or not isinstance(statement.value, Load):
        return None
    if any(lp.step != 1 or lp.parallel or lp.mapping is not None or lp.locals
           or constant_trip_count(lp) is None for lp in loops):
        return None
    source = statement.value
    dst, src = buffers(statement.buffer), buffers(source.buffer)
    if dst is None or src is None or dst.name == src.name or dst.dtype is not src.dtype \
            or dst.dtype not in (DType.F32, DType.F64):
        return None
    lanes = lanes_of(dst.dtype)
    names = [lp.var for lp in loops]
    trips = {lp.var: constant_trip_count(lp) or 0 for lp in loops}
    moving = {v for v in names if trips[v] != 1}
    if lanes < MIN_BLOCK or not _distinct_writes(statement.indices, names):
        return None
    p = _unit_stride_var(statement.indices, dst.shape, moving)
    if p is None or not any(isinstance(i, Aff) and i.coefficient(p) for i in source.indices):
        return None   # not a transpose (``src`` the same along ``p``: a broadcast)
    group = _contiguous_group(source.indices, src.shape, moving - {p}, trips)
    if group is None:
        return None
    extent = math.prod(trips[v] for v in group)
    block = lanes
    while block >= MIN_BLOCK and (trips[p] % block or extent % block):
        block //= 2
    if block < MIN_BLOCK:
        return None
    return TransposedCopy(tuple(loops), statement, source, p, group,
                          tuple(trips[v] for v in group), block, dst.dtype)


def lower_transposed_copy(lowerer: FunctionLowerer, copy: TransposedCopy) -> None:
    """Emit ``copy``: the loops other than ``p`` and ``q`` as they are, then
    ``V x V`` blocks loaded along ``q`` (its loops' iterations in a row),
    transposed and stored along ``p``."""
    from polyir.llvm.hooks import compute_type
    from polyir.llvm.lower import constant_trip_count

    b = lowerer.builder
    block = copy.block
    vector = ir.VectorType(compute_type(copy.dtype), block)
    align = 4 if copy.dtype is DType.F32 else 8
    per_lane = 16 // align
    by_var = {lp.var: lp for lp in copy.loops}
    p_loop = by_var[copy.p]
    others = [lp for lp in copy.loops if lp.var != copy.p and lp.var not in copy.q]
    extent = math.prod(copy.q_trips)

    def shuffle(x: ir.Value, y: ir.Value, mask: list[int]) -> ir.Value:
        return b.shuffle_vector(x, y, ir.Constant(ir.VectorType(I32, len(mask)), mask))

    def at(value: ir.Value, offset: int) -> ir.Value:
        return lowerer._add_nsw(value, ir.Constant(I64, offset)) if offset else value

    def bind_q(flat: ir.Value) -> None:
        """The loops of ``q`` at flat position ``flat`` (innermost fastest)."""
        inner = 1
        for var, trip in zip(copy.q, copy.q_trips, strict=True):
            value = flat if inner == 1 else b.udiv(flat, ir.Constant(I64, inner))
            if inner * trip < extent:
                value = b.urem(value, ir.Constant(I64, trip))
            lowerer.bind(var, lowerer._add_nsw(lowerer.aff(by_var[var].lower[0]), value))
            inner *= trip

    def blocks() -> None:
        p_first = lowerer.aff(p_loop.lower[0])
        saved = {var: lowerer.bind(var, ir.Constant(I64, 0)) for var in (copy.p, *copy.q)}

        def p_block(p_start: ir.Value) -> None:
            p0 = lowerer._add_nsw(p_first, p_start)

            def q_block(q0: ir.Value) -> None:
                bind_q(q0)
                rows = []
                for r in range(block):
                    lowerer.bind(copy.p, at(p0, r))
                    pointer = lowerer.element_pointer(copy.source.buffer, copy.source.indices)
                    rows.append(b.load(pointer, typ=vector, align=align))
                columns = transpose(rows, shuffle, per_lane)
                lowerer.bind(copy.p, p0)
                for c, column in enumerate(columns):
                    bind_q(at(q0, c))
                    pointer = lowerer.element_pointer(copy.statement.buffer, copy.statement.indices)
                    b.store(column, pointer, align=align)

            lowerer.emit_range_loop(ir.Constant(I64, 0), ir.Constant(I64, extent), block, q_block,
                                    f"{copy.q[0]}.tblock")

        lowerer.emit_range_loop(ir.Constant(I64, 0), ir.Constant(I64, constant_trip_count(p_loop) or 0),
                                block, p_block, f"{copy.p}.tblock")
        for var, previous in saved.items():
            lowerer.unbind(var, previous)

    def nest(index: int) -> None:
        if index == len(others):
            blocks()
            return
        loop = others[index]
        first = lowerer.aff(loop.lower[0])

        def body(counter: ir.Value) -> None:
            previous = lowerer.bind(loop.var, lowerer._add_nsw(first, counter))
            nest(index + 1)
            lowerer.unbind(loop.var, previous)

        lowerer.emit_range_loop(ir.Constant(I64, 0), ir.Constant(I64, constant_trip_count(loop) or 0),
                                1, body, f"{loop.var}.t")

    nest(0)


__all__ = ["TransposedCopy", "match_transposed_copy", "lower_transposed_copy", "MIN_BLOCK"]
