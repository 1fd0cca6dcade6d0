"""Gathers: ``embedding``, ``index_select``, ``index.Tensor``, ``gather``.

The gathers are built by :mod:`polyir.frontends.lowering.copies` (a
value-expression subscript ``W[cast<i64>(ids[i]), j]``). Indices out of range
are not checked (eager raises).
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from polyir.frontends.aten.context import (
    LoweringContext,
    TensorValue,
    broadcast_index,
    node_meta,
    normalize_dim,
)
from polyir.frontends.aten.registry import register
from polyir.frontends.lowering.copies import gather, plain, wrapped
from polyir.ir.nodes import Expr, Load
from polyir.ir.types import DType

aten = torch.ops.aten


@register(aten.embedding)
def lower_embedding(ctx: LoweringContext, node: torch.fx.Node, weight: TensorValue,
                    indices: TensorValue, *args: Any) -> TensorValue:
    out = ctx.result(node)
    gather(ctx, out, weight, 0, indices, indices.rank)
    return out


@register(aten.index_select)
def lower_index_select(ctx: LoweringContext, node: torch.fx.Node, x: TensorValue, dim: int,
                       index: TensorValue) -> TensorValue:
    out = ctx.result(node)
    dim = normalize_dim(dim, x.rank)
    if index.rank == 0:
        index = index.view((1,), lambda idx: ())
    gather(ctx, out, x, dim, index, 1)
    return out


def _index_accepts(node: torch.fx.Node) -> str | None:
    for index in node.args[1]:  # type: ignore[union-attr]
        if isinstance(index, torch.fx.Node) and node_meta(index).dtype == torch.bool:
            return "boolean mask index (data-dependent shape)"
    return None


@register(aten.index.Tensor, accepts=_index_accepts)
def lower_index(ctx: LoweringContext, node: torch.fx.Node, x: TensorValue,
                indices: Sequence[TensorValue | None]) -> TensorValue:
    """Advanced indexing ``x[..., i, j, ...]`` with index tensors (broadcast
    together) at some dimensions and ``None`` (a full slice) at the others."""
    out = ctx.result(node)
    x = plain(ctx, x)
    indexed = [d for d, index in enumerate(indices) if index is not None]
    adjacent = indexed == list(range(indexed[0], indexed[-1] + 1))
    rank_b = out.rank - (x.rank - len(indexed))
    start = indexed[0] if adjacent else 0  # where the broadcast index dims sit in out
    b_shape = out.shape[start:start + rank_b]

    def element(idx: list) -> Expr:
        b_idx = idx[start:start + rank_b]
        rest = iter(idx[:start] + idx[start + rank_b:])
        subscripts: list[Any] = []
        for d in range(x.rank):
            index = indices[d] if d < len(indices) else None
            if index is None:
                subscripts.append(next(rest))
            else:
                position = ctx.cast(index.load(broadcast_index(index, b_idx, b_shape)), DType.I64)
                subscripts.append(wrapped(position, ctx.size_value(x.shape[d], DType.I64)))
        return Load(x.buffer, tuple(subscripts))
    ctx.map_elements(out, element)
    return out


@register(aten.gather)
def lower_gather(ctx: LoweringContext, node: torch.fx.Node, x: TensorValue, dim: int,
                 index: TensorValue, *args: Any, **kwargs: Any) -> TensorValue:
    """``out[i, j] = x[index[i, j], j]`` (for ``dim == 0``)."""
    out = ctx.result(node)
    x = plain(ctx, x)
    dim = normalize_dim(dim, x.rank)

    def element(idx: list) -> Expr:
        position = wrapped(ctx.cast(index.load(idx), DType.I64),
                           ctx.size_value(x.shape[dim], DType.I64))
        return Load(x.buffer, tuple(idx[:dim]) + (position,) + tuple(idx[dim + 1:]))
    ctx.map_elements(out, element)
    return out


__all__ = ["plain"]
