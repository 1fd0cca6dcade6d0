"""Shape operators: view/reshape, permute/transpose, expand, (un)squeeze,
slice, select, split, unbind, flip, repeat, diagonal, alias, as index maps
(no code at all); ``cat`` and ``constant_pad_nd`` as copies.

The views are built by :mod:`polyir.frontends.lowering.views` and the copies
by :mod:`polyir.frontends.lowering.copies` (shared with the jaxpr table).
With dynamic shapes the sizes may be ``SymInt`` values: the views take the
context's symbol table, a reshape merging or splitting symbolic sizes makes
non-affine subscripts, and one applied to a view whose map computes with its
indices (a slice, a flip) copies that view first
(:func:`polyir.frontends.lowering.views.reshape`).
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from polyir.frontends.aten.context import (
    LoweringContext,
    TensorValue,
    node_meta,
    normalize_dim,
)
from polyir.frontends.aten.registry import register
from polyir.frontends.lowering.copies import concatenate_into, pad_into
from polyir.frontends.lowering.sizes import Size, index_mod
from polyir.frontends.lowering.views import (
    broadcast_view,
    flip_view,
    insert_view,
    permute_view,
    reshape,
    reshape_map,
    split_views,
    strided_view,
)
from polyir.ir.affine import Aff
from polyir.ir.nodes import Index

aten = torch.ops.aten

__all__ = ["reshape_map"]


def _meta_shape(ctx: LoweringContext, node: torch.fx.Node,
                index: int | None = None) -> tuple[Size, ...]:
    return ctx.dims(node_meta(node, index).shape)


@register(aten.view, aten._unsafe_view, aten.reshape, aten.view_copy)
def lower_view(ctx: LoweringContext, node: torch.fx.Node, x: TensorValue, *args: Any) -> TensorValue:
    return reshape(ctx, x, _meta_shape(ctx, node))


@register(aten.alias, aten.detach, aten.lift_fresh_copy, aten.contiguous)
def lower_alias(ctx: LoweringContext, node: torch.fx.Node, x: TensorValue, *args: Any,
                **kwargs: Any) -> TensorValue:
    return x


@register(aten.permute, aten.permute_copy)
def lower_permute(ctx: LoweringContext, node: torch.fx.Node, x: TensorValue,
                  dims: Sequence[int]) -> TensorValue:
    return permute_view(x, [normalize_dim(d, x.rank) for d in dims])


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
    return broadcast_view(x, new, [offset + d for d in range(x.rank)])


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
    starts: list[int | Aff] = [0] * x.rank
    steps = [1] * x.rank
    starts[dim], steps[dim] = ctx.size_aff(first), step
    return strided_view(x, new, starts, steps)


@register(aten.narrow)
def lower_narrow(ctx: LoweringContext, node: torch.fx.Node, x: TensorValue, dim: int, start: int,
                 length: int) -> TensorValue:
    return lower_slice(ctx, node, x, dim, start, start + length if start >= 0 else None, 1)


@register(aten.select, aten.select_copy)
def lower_select(ctx: LoweringContext, node: torch.fx.Node, x: TensorValue, dim: int,
                 index: int) -> TensorValue:
    dim = normalize_dim(dim, x.rank)
    position = ctx.size_aff(index + x.shape[dim] if index < 0 else index)
    return insert_view(x, dim, position)


@register(aten.split_with_sizes, aten.split_with_sizes_copy)
def lower_split_with_sizes(ctx: LoweringContext, node: torch.fx.Node, x: TensorValue,
                           sizes: Sequence[int], dim: int = 0) -> tuple[TensorValue, ...]:
    return split_views(x, ctx.dims(sizes), normalize_dim(dim, x.rank), ctx.symbols)


@register(aten.split)
def lower_split(ctx: LoweringContext, node: torch.fx.Node, x: TensorValue, split_size: Any,
                dim: int = 0) -> tuple[TensorValue, ...]:
    sizes = ctx.dims([m.shape[normalize_dim(dim, x.rank)] for m in node_meta(node)])
    return split_views(x, sizes, normalize_dim(dim, x.rank), ctx.symbols)


@register(aten.unbind)
def lower_unbind(ctx: LoweringContext, node: torch.fx.Node, x: TensorValue,
                 dim: int = 0) -> tuple[TensorValue, ...]:
    dim = normalize_dim(dim, x.rank)
    return tuple(insert_view(x, dim, position) for position in range(x.shape[dim]))


@register(aten.flip)
def lower_flip(ctx: LoweringContext, node: torch.fx.Node, x: TensorValue,
               dims: Sequence[int]) -> TensorValue:
    return flip_view(x, sorted({normalize_dim(d, x.rank) for d in dims}), ctx.symbols)


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
    # torch skips legacy empty [0] tensors
    parts = [p for p in tensors if not (p.rank == 1 and p.shape[0] == 0 and out.rank != 1)]
    concatenate_into(ctx, out, parts, dim)
    return out


@register(aten.constant_pad_nd)
def lower_constant_pad(ctx: LoweringContext, node: torch.fx.Node, x: TensorValue,
                       pad: Sequence[int], value: float = 0) -> TensorValue:
    """Pads as a guarded copy: inside the source box the element, else ``value``
    (negative padding crops)."""
    out = ctx.result(node)
    low = [0] * out.rank
    for k in range(len(pad) // 2):
        low[out.rank - 1 - k] = pad[2 * k]
    pad_into(ctx, out, x, low, value)
    return out
