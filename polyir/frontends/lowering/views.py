"""Views as index maps: reshape, permute, broadcast, slice, flip.

Each returns a :class:`TensorValue` over the same buffer whose index map sends
the view's indices to the base's subscripts; no code is emitted. A reshape
maps through the row-major linear index, which stays affine (with ``//`` and
``%`` by constants) because every size is static.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from polyir.frontends.lowering.context import TensorValue
from polyir.ir.affine import Aff
from polyir.ir.nodes import Index


def reshape_map(old: Sequence[int], new: Sequence[int]) -> Any:
    """Index map of a row-major reshape from ``old`` to ``new`` (same size)."""
    old, new = tuple(old), tuple(new)
    grouped = _grouped_reshape(old, new)
    if grouped is not None:
        return grouped

    def index_map(idx: Sequence[Aff]) -> tuple[Index, ...]:
        linear = Aff.const(0)
        for position, size in zip(idx, new, strict=True):
            linear = linear * size + position
        result: list[Aff] = []
        stride = 1
        for size in reversed(old):
            result.append(Aff.const(0) if size == 1 else (linear // stride) % size)
            stride *= size
        return tuple(reversed(result))
    return index_map


def _total(shape: Sequence[int]) -> int:
    total = 1
    for s in shape:
        total *= s
    return total


def _grouped_reshape(old: tuple[int, ...], new: tuple[int, ...]) -> Any:
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

    def index_map(idx: Sequence[Aff]) -> tuple[Index, ...]:
        result: list[Aff] = [Aff.const(0)] * len(old)
        for old_dims, new_dims in groups:
            linear = Aff.const(0)
            for d in new_dims:
                linear = linear * new[d] + idx[d]
            stride = 1
            for d in reversed(old_dims):
                size = old[d]
                if size == 1:
                    result[d] = Aff.const(0)
                else:
                    component = linear // stride
                    is_outermost = d == old_dims[0]
                    result[d] = component if is_outermost else component % size
                stride *= size
        return tuple(result)
    return index_map


def reshape_view(x: TensorValue, shape: Sequence[int]) -> TensorValue:
    """``x`` reshaped (row-major) to ``shape``; ``x`` itself when nothing changes."""
    shape = tuple(int(s) for s in shape)
    if shape == x.shape:
        return x
    return x.view(shape, reshape_map(x.shape, shape))


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


def strided_view(x: TensorValue, shape: Sequence[int], starts: Sequence[int],
                 steps: Sequence[int]) -> TensorValue:
    """Element ``i`` of the view along dimension ``d`` is ``starts[d] + i * steps[d]``
    of ``x`` (a slice; a negative step walks backwards)."""
    def index_map(idx: Sequence[Aff]) -> tuple[Index, ...]:
        return tuple(Aff.const(start) if size == 1 else i * step + start
                     for i, start, step, size in zip(idx, starts, steps, shape, strict=True))
    return x.view(shape, index_map)


def flip_view(x: TensorValue, dims: Sequence[int]) -> TensorValue:
    """``x`` reversed along ``dims``."""
    flipped = set(dims)

    def index_map(idx: Sequence[Aff]) -> tuple[Index, ...]:
        return tuple(x.shape[d] - 1 - i if d in flipped else i for d, i in enumerate(idx))
    return x.view(x.shape, index_map)


def insert_view(x: TensorValue, dim: int, position: int) -> TensorValue:
    """``x`` at ``position`` of a dimension ``dim`` that the view drops (select)."""
    def index_map(idx: Sequence[Aff]) -> tuple[Index, ...]:
        return tuple(idx[:dim]) + (Aff.const(position),) + tuple(idx[dim:])
    return x.view(x.shape[:dim] + x.shape[dim + 1:], index_map)


def split_views(x: TensorValue, sizes: Sequence[int], dim: int) -> tuple[TensorValue, ...]:
    """Consecutive pieces of ``x`` along ``dim`` with the given sizes."""
    parts = []
    offset = 0
    for size in sizes:
        shape = list(x.shape)
        shape[dim] = size
        starts = [0] * x.rank
        starts[dim] = offset
        parts.append(strided_view(x, shape, starts, [1] * x.rank))
        offset += size
    return tuple(parts)


__all__ = ["broadcast_view", "flip_view", "insert_view", "permute_view", "reshape_map",
           "reshape_view", "split_views", "strided_view"]
