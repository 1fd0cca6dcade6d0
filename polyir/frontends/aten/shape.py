"""Shape operators: view/reshape, permute/transpose, expand, (un)squeeze,
slice, select, split, unbind, flip, repeat, diagonal, alias, as index maps
(no code at all);
``cat`` and ``constant_pad_nd`` as copies.

A view is a :class:`TensorValue` over the same buffer with an index map that
sends the view's indices to the base's subscripts. A reshape maps through the
row-major linear index, which stays affine (with ``//`` and ``%`` by
constants) while the sizes it multiplies or divides by are static. With
dynamic shapes, merging or splitting two symbolic sizes (``[B, S, D] -> [B*S,
D]``) makes non-affine subscripts (``r / S``, ``b * S + s``); when the value
reshaped is itself a view whose map computes with its indices (a slice, a
flip), the reshape is applied to a copy of it (a permute just moves the
non-affine indices along).
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from polyir.frontends.aten.context import (
    LoweringContext,
    TensorValue,
    const,
    node_meta,
    normalize_dim,
)
from polyir.frontends.aten.registry import register
from polyir.frontends.aten.symbolic import (
    Size,
    SymbolTable,
    index_add,
    index_floordiv,
    index_mod,
    index_mul,
)
from polyir.ir.affine import Aff, Constraint
from polyir.ir.nodes import If, Index, Node

aten = torch.ops.aten


def _meta_shape(ctx: LoweringContext, node: torch.fx.Node,
                index: int | None = None) -> tuple[Size, ...]:
    return ctx.dims(node_meta(node, index).shape)


def reshape_map(old: Sequence[Size], new: Sequence[Size], table: SymbolTable | None = None) -> Any:
    """Index map of a row-major reshape from ``old`` to ``new`` (same size);
    ``table`` converts symbolic sizes (dynamic shapes)."""
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


def reshape(ctx: LoweringContext, x: TensorValue, new: Sequence[Size]) -> TensorValue:
    """``x`` seen with shape ``new`` (a row-major reshape, no copy unless the
    reshape is non-affine and ``x``'s own view cannot take that: see the module
    docstring)."""
    new = ctx.dims(new)
    mapping = reshape_map(x.shape, new, ctx.symbols)
    if not x.composes(new, mapping):
        copy = ctx.temp(f"{x.buffer}_contiguous", x.shape, x.dtype)
        ctx.copy(x, copy)
        x = copy
    return x.view(new, mapping)


def _grouped_reshape(old: tuple[Size, ...], new: tuple[Size, ...],
                     table: SymbolTable | None = None) -> Any:
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


@register(aten.view, aten._unsafe_view, aten.reshape, aten.view_copy)
def lower_view(ctx: LoweringContext, node: torch.fx.Node, x: TensorValue, *args: Any) -> TensorValue:
    new = _meta_shape(ctx, node)
    if new == x.shape:
        return x
    return reshape(ctx, x, new)


@register(aten.alias, aten.detach, aten.lift_fresh_copy, aten.contiguous)
def lower_alias(ctx: LoweringContext, node: torch.fx.Node, x: TensorValue, *args: Any,
                **kwargs: Any) -> TensorValue:
    return x


@register(aten.permute, aten.permute_copy)
def lower_permute(ctx: LoweringContext, node: torch.fx.Node, x: TensorValue,
                  dims: Sequence[int]) -> TensorValue:
    dims = [normalize_dim(d, x.rank) for d in dims]

    def index_map(idx: Sequence[Aff]) -> tuple[Index, ...]:
        result: list[Aff] = [Aff.const(0)] * len(dims)
        for position, d in enumerate(dims):
            result[d] = idx[position]
        return tuple(result)
    return x.view([x.shape[d] for d in dims], index_map)


@register(aten.t, aten.transpose)
def lower_transpose(ctx: LoweringContext, node: torch.fx.Node, x: TensorValue, dim0: int = 0,
                    dim1: int = 1) -> TensorValue:
    if x.rank < 2:
        return x
    dims = list(range(x.rank))
    a, b = normalize_dim(dim0, x.rank), normalize_dim(dim1, x.rank)
    dims[a], dims[b] = dims[b], dims[a]
    return lower_permute(ctx, node, x, dims)


@register(aten.expand, aten.expand_copy)
def lower_expand(ctx: LoweringContext, node: torch.fx.Node, x: TensorValue, *args: Any,
                 **kwargs: Any) -> TensorValue:
    new = _meta_shape(ctx, node)
    offset = len(new) - x.rank

    def index_map(idx: Sequence[Aff]) -> tuple[Index, ...]:
        return tuple(Aff.const(0) if size == 1 else idx[offset + d] for d, size in enumerate(x.shape))
    return x.view(new, index_map)


@register(aten.unsqueeze, aten.squeeze, aten.unsqueeze_copy, aten.squeeze_copy, aten.flatten,
          aten.unflatten)
def lower_squeeze(ctx: LoweringContext, node: torch.fx.Node, x: TensorValue, *args: Any) -> TensorValue:
    # Adding or dropping size-1 dimensions (or a flatten) is a reshape.
    return lower_view(ctx, node, x)


@register(aten.slice, aten.slice_copy)
def lower_slice(ctx: LoweringContext, node: torch.fx.Node, x: TensorValue, dim: int = 0,
                start: int | None = None, end: int | None = None, step: int = 1) -> TensorValue:
    dim = normalize_dim(dim, x.rank)
    size = x.shape[dim]
    first = 0 if start is None else (start + size if start < 0 else start)
    first = min(max(first, 0), size)
    new = _meta_shape(ctx, node)
    start_at = ctx.size_aff(first)

    def index_map(idx: Sequence[Aff]) -> tuple[Index, ...]:
        result = list(idx)
        result[dim] = start_at if new[dim] == 1 else idx[dim] * step + start_at
        return tuple(result)
    return x.view(new, index_map)


@register(aten.narrow)
def lower_narrow(ctx: LoweringContext, node: torch.fx.Node, x: TensorValue, dim: int, start: int,
                 length: int) -> TensorValue:
    return lower_slice(ctx, node, x, dim, start, start + length if start >= 0 else None, 1)


@register(aten.select, aten.select_copy)
def lower_select(ctx: LoweringContext, node: torch.fx.Node, x: TensorValue, dim: int,
                 index: int) -> TensorValue:
    dim = normalize_dim(dim, x.rank)
    position = ctx.size_aff(index + x.shape[dim] if index < 0 else index)

    def index_map(idx: Sequence[Aff]) -> tuple[Index, ...]:
        return tuple(idx[:dim]) + (position,) + tuple(idx[dim:])
    return x.view(_meta_shape(ctx, node), index_map)


def _shifted(dim: int, offset: Aff) -> Any:
    """The index map adding ``offset`` to dimension ``dim``."""
    def index_map(idx: Sequence[Aff]) -> tuple[Index, ...]:
        result = list(idx)
        result[dim] = idx[dim] + offset
        return tuple(result)
    return index_map


def _slices(ctx: LoweringContext, x: TensorValue, sizes: Sequence[Size],
            dim: int) -> tuple[TensorValue, ...]:
    dim = normalize_dim(dim, x.rank)
    parts = []
    offset: Size = 0
    for size in sizes:
        shape = list(x.shape)
        shape[dim] = size

        parts.append(x.view(shape, _shifted(dim, ctx.size_aff(offset))))
        offset = offset + size
    return tuple(parts)


@register(aten.split_with_sizes, aten.split_with_sizes_copy)
def lower_split_with_sizes(ctx: LoweringContext, node: torch.fx.Node, x: TensorValue,
                           sizes: Sequence[int], dim: int = 0) -> tuple[TensorValue, ...]:
    return _slices(ctx, x, ctx.dims(sizes), dim)


@register(aten.split)
def lower_split(ctx: LoweringContext, node: torch.fx.Node, x: TensorValue, split_size: Any,
                dim: int = 0) -> tuple[TensorValue, ...]:
    sizes = ctx.dims([m.shape[normalize_dim(dim, x.rank)] for m in node_meta(node)])
    return _slices(ctx, x, sizes, dim)


@register(aten.unbind)
def lower_unbind(ctx: LoweringContext, node: torch.fx.Node, x: TensorValue,
                 dim: int = 0) -> tuple[TensorValue, ...]:
    dim = normalize_dim(dim, x.rank)
    parts = []
    for position in range(x.shape[dim]):
        def index_map(idx: Sequence[Aff], _p: int = position) -> tuple[Index, ...]:
            return tuple(idx[:dim]) + (Aff.const(_p),) + tuple(idx[dim:])
        parts.append(x.view(x.shape[:dim] + x.shape[dim + 1:], index_map))
    return tuple(parts)


@register(aten.flip)
def lower_flip(ctx: LoweringContext, node: torch.fx.Node, x: TensorValue,
               dims: Sequence[int]) -> TensorValue:
    flipped = {normalize_dim(d, x.rank) for d in dims}
    last = [ctx.size_aff(size) - 1 for size in x.shape]

    def index_map(idx: Sequence[Aff]) -> tuple[Index, ...]:
        return tuple(last[d] - i if d in flipped else i for d, i in enumerate(idx))
    return x.view(x.shape, index_map)


@register(aten.repeat)
def lower_repeat(ctx: LoweringContext, node: torch.fx.Node, x: TensorValue,
                 repeats: Sequence[int]) -> TensorValue:
    """Tiling as an index map: ``out[i] = x[i % size]``."""
    offset = len(repeats) - x.rank

    def index_map(idx: Sequence[Aff]) -> tuple[Index, ...]:
        result: list[Index] = []
        for d, size in enumerate(x.shape):
            position = idx[offset + d]
            if size == 1:
                result.append(Aff.const(0))
            else:
                result.append(index_mod(position, size, ctx.symbols)
                              if repeats[offset + d] > 1 else position)
        return tuple(result)
    return x.view(_meta_shape(ctx, node), index_map)


@register(aten.diagonal)
def lower_diagonal(ctx: LoweringContext, node: torch.fx.Node, x: TensorValue, offset: int = 0,
                   dim1: int = 0, dim2: int = 1) -> TensorValue:
    first, second = normalize_dim(dim1, x.rank), normalize_dim(dim2, x.rank)
    kept = [d for d in range(x.rank) if d not in (first, second)]

    def index_map(idx: Sequence[Aff]) -> tuple[Index, ...]:
        result: list[Aff] = [Aff.const(0)] * x.rank
        for position, d in enumerate(kept):
            result[d] = idx[position]
        result[first] = idx[-1] + max(-offset, 0)
        result[second] = idx[-1] + max(offset, 0)
        return tuple(result)
    return x.view(_meta_shape(ctx, node), index_map)


# --------------------------------------------------------------------- copies
@register(aten.cat)
def lower_cat(ctx: LoweringContext, node: torch.fx.Node, tensors: Sequence[TensorValue],
              dim: int = 0) -> TensorValue:
    out = ctx.result(node)
    dim = normalize_dim(dim, out.rank)
    offset: Size = 0
    for part in tensors:
        if part.rank == 1 and part.shape[0] == 0 and out.rank != 1:
            continue  # torch skips legacy empty [0] tensors
        idx, loops = ctx.loops(part.shape, hint="i")
        target = list(idx)
        target[dim] = idx[dim] + ctx.size_aff(offset)
        ctx.emit(ctx.nest(loops, [ctx.assign(out, target, part.load(idx))]))
        offset = offset + part.shape[dim]
    return out


@register(aten.constant_pad_nd)
def lower_constant_pad(ctx: LoweringContext, node: torch.fx.Node, x: TensorValue,
                       pad: Sequence[int], value: float = 0) -> TensorValue:
    """Pads as a guarded copy: inside the source box the element, else ``value``
    (negative padding crops)."""
    out = ctx.result(node)
    idx, loops = ctx.loops(out.shape, hint="i")
    source = list(idx)
    conditions: list[Constraint] = []
    for k in range(len(pad) // 2):
        d = out.rank - 1 - k
        before = pad[2 * k]
        source[d] = idx[d] - before
        if before > 0:
            conditions.append(Constraint(source[d], ">=", Aff.const(0)))
        if out.shape[d] - before > x.shape[d]:
            conditions.append(Constraint(source[d], "<", ctx.size_aff(x.shape[d])))
    fill = ctx.assign(out, idx, const(value, out.dtype))
    copy = ctx.assign(out, idx, x.load(source))
    if conditions:
        body: list[Node] = [If(tuple(conditions), (copy,), (fill,))]
    else:
        body = [copy]
    ctx.emit(ctx.nest(loops, body))
    return out
