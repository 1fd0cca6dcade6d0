"""Views as index maps: reshape, permute, broadcast, slice, flip.

Each returns a :class:`TensorValue` over the same buffer whose index map sends
the view's indices to the base's subscripts; no code is emitted. A reshape
maps through the row-major linear index, which stays affine (with ``//`` and
``%`` by constants) while the sizes it multiplies or divides by are static.
With symbolic sizes (``table``: the lowering context's
:class:`~polyir.frontends.lowering.sizes.SizeTable`), merging or splitting two
symbolic sizes (``[B, S, D] -> [B*S, D]``) makes non-affine subscripts
(``r / S``, ``b * S + s``); :func:`reshape` copies a view whose own map cannot
take those (a slice, a flip) first.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from polyir.frontends.lowering.context import LoweringContext, TensorValue
from polyir.frontends.lowering.sizes import (
    Size,
    SizeTable,
    index_add,
    index_floordiv,
    index_mod,
    index_mul,
    size_aff,
    static_dims,
)
from polyir.ir.affine import Aff
from polyir.ir.nodes import Index


def reshape_map(old: Sequence[Size], new: Sequence[Size], table: SizeTable | None = None) -> Any:
    """Index map of a row-major reshape from ``old`` to ``new`` (same size);
    ``table`` converts symbolic sizes."""
    old, new = tuple(old), tuple(new)
    grouped = _grouped_reshape(old, new, table)
    if grouped is not None:
        return grouped

    def index_map(idx: Sequence[Index]) -> tuple[Index, ...]:
        linear: Index = Aff.const(0)
        for position, size in zip(idx, new, strict=True):
            linear = index_add(index_mul(linear, size, table), position, table)
        result: list[Index] = []
        stride: Size = 1
        for size in reversed(old):
            result.append(Aff.const(0) if size == 1 else
                          index_mod(index_floordiv(linear, stride, table), size, table))
            stride = stride * size
        return tuple(reversed(result))
    return index_map


def _grouped_reshape(old: tuple[Size, ...], new: tuple[Size, ...],
                     table: SizeTable | None = None) -> Any:
    """A reshape map that keeps each group of dimensions with equal products
    apart (so ``[B, S, H*D] -> [B, S, H, D]`` maps to ``h*D + d`` with no
    ``//`` or ``%``); ``None`` when the shapes do not split into groups."""
    groups: list[tuple[range, range]] = []
    i = j = 0
    while i < len(old) or j < len(new):
        start_i, start_j = i, j
        p_old = old[i] if i < len(old) else 1
        p_new = new[j] if j < len(new) else 1
        i, j = i + 1, j + 1
        while p_old != p_new:
            if p_old < p_new:
                if i >= len(old):
                    return None
                p_old *= old[i]
                i += 1
            else:
                if j >= len(new):
                    return None
                p_new *= new[j]
                j += 1
        groups.append((range(start_i, min(i, len(old))), range(start_j, min(j, len(new)))))

    def index_map(idx: Sequence[Index]) -> tuple[Index, ...]:
        result: list[Index] = [Aff.const(0)] * len(old)
        for old_dims, new_dims in groups:
            linear: Index = Aff.const(0)
            for d in new_dims:
                linear = index_add(index_mul(linear, new[d], table), idx[d], table)
            stride: Size = 1
            for d in reversed(old_dims):
                size = old[d]
                if size == 1:
                    result[d] = Aff.const(0)
                else:
                    component = index_floordiv(linear, stride, table)
                    is_outermost = d == old_dims[0]
                    result[d] = component if is_outermost else index_mod(component, size, table)
                stride = stride * size
        return tuple(result)
    return index_map


def reshape_view(x: TensorValue, shape: Sequence[Size],
                 table: SizeTable | None = None) -> TensorValue:
    """``x`` reshaped (row-major) to ``shape``; ``x`` itself when nothing changes.
    A view whose map cannot take a non-affine reshape map raises ``UnsupportedOp``
    when its subscripts are built (:func:`reshape` copies instead)."""
    shape = static_dims(shape)
    if shape == x.shape:
        return x
    return x.view(shape, reshape_map(x.shape, shape, table))


def reshape(ctx: LoweringContext, x: TensorValue, shape: Sequence[Size]) -> TensorValue:
    """``x`` seen with ``shape`` (a row-major reshape). No copy, unless the
    reshape is non-affine (symbolic sizes) and ``x``'s own view map computes
    with its indices: then ``x`` is copied to a local first."""
    shape = ctx.dims(shape)
    if shape == x.shape:
        return x
    mapping = reshape_map(x.shape, shape, ctx.symbols)
    if not x.composes(shape, mapping):
        copy = ctx.temp(f"{x.buffer}_contiguous", x.shape, x.dtype)
        ctx.copy(x, copy)
        x = copy
    return x.view(shape, mapping)


def permute_view(x: TensorValue, dims: Sequence[int]) -> TensorValue:
    """``x`` with dimension ``dims[k]`` of ``x`` as dimension ``k`` of the view."""
    def index_map(idx: Sequence[Aff]) -> tuple[Index, ...]:
        result: list[Aff] = [Aff.const(0)] * len(dims)
        for position, d in enumerate(dims):
            result[d] = idx[position]
        return tuple(result)
    return x.view([x.shape[d] for d in dims], index_map)


def broadcast_view(x: TensorValue, shape: Sequence[int], dims: Sequence[int]) -> TensorValue:
    """``x`` broadcast to ``shape``: dimension ``d`` of ``x`` is dimension
    ``dims[d]`` of the view (size 1 there is stretched); the others are new."""
    def index_map(idx: Sequence[Aff]) -> tuple[Index, ...]:
        return tuple(Aff.const(0) if size == 1 else idx[dims[d]] for d, size in enumerate(x.shape))
    return x.view(shape, index_map)


def strided_view(x: TensorValue, shape: Sequence[Size], starts: Sequence[int | Aff],
                 steps: Sequence[int]) -> TensorValue:
    """Element ``i`` of the view along dimension ``d`` is ``starts[d] + i * steps[d]``
    of ``x`` (a slice; a negative step walks backwards). A start may be an
    affine expression over size symbols."""
    first = [start if isinstance(start, Aff) else Aff.const(int(start)) for start in starts]

    def index_map(idx: Sequence[Aff]) -> tuple[Index, ...]:
        return tuple(start if size == 1 else i * step + start
                     for i, start, step, size in zip(idx, first, steps, shape, strict=True))
    return x.view(shape, index_map)


def flip_view(x: TensorValue, dims: Sequence[int], table: SizeTable | None = None) -> TensorValue:
    """``x`` reversed along ``dims``."""
    flipped = set(dims)
    last = [size_aff(size, table) - 1 if d in flipped else Aff.const(0)
            for d, size in enumerate(x.shape)]

    def index_map(idx: Sequence[Aff]) -> tuple[Index, ...]:
        return tuple(last[d] - i if d in flipped else i for d, i in enumerate(idx))
    return x.view(x.shape, index_map)


def insert_view(x: TensorValue, dim: int, position: int | Aff) -> TensorValue:
    """``x`` at ``position`` of a dimension ``dim`` that the view drops (select)."""
    at = position if isinstance(position, Aff) else Aff.const(int(position))

    def index_map(idx: Sequence[Aff]) -> tuple[Index, ...]:
        return tuple(idx[:dim]) + (at,) + tuple(idx[dim:])
    return x.view(x.shape[:dim] + x.shape[dim + 1:], index_map)


def split_views(x: TensorValue, sizes: Sequence[Size], dim: int,
                table: SizeTable | None = None) -> tuple[TensorValue, ...]:
    """Consecutive pieces of ``x`` along ``dim`` with the given sizes."""
    parts = []
    offset: Size = 0
    for size in sizes:
        shape = list(x.shape)
        shape[dim] = size
        starts: list[int | Aff] = [0] * x.rank
        starts[dim] = size_aff(offset, table)
        parts.append(strided_view(x, shape, starts, [1] * x.rank))
        offset = offset + size
    return tuple(parts)


__all__ = ["broadcast_view", "flip_view", "insert_view", "permute_view", "reshape", "reshape_map",
           "reshape_view", "split_views", "strided_view"]
