"""Gathers: ``embedding`` and ``index_select``.

The gathered index is a value-expression subscript (``W[cast<i64>(ids[i]), j]``),
which the IR allows when a subscript is not affine; analyses treat such an
access conservatively. Indices out of range are not checked (eager raises).
"""
from __future__ import annotations

from typing import Any

import torch

from polyir.frontends.aten.context import LoweringContext, TensorValue, normalize_dim
from polyir.frontends.aten.registry import register
from polyir.ir.nodes import Expr, Load
from polyir.ir.types import DType

aten = torch.ops.aten


def plain(ctx: LoweringContext, value: TensorValue) -> TensorValue:
    """``value`` as a whole buffer (a copy when it is a view), so a gathered
    subscript can index the buffer directly."""
    if value.is_identity:
        return value
    copy = ctx.temp(f"{value.buffer}_copy", value.shape, value.dtype)
    ctx.copy(value, copy)
    return copy


def gather(ctx: LoweringContext, out: TensorValue, table: TensorValue, dim: int,
           index: TensorValue, index_dims: int) -> None:
    """``out[a, i..., b] = table[a, index[i...], b]`` where ``a`` has ``dim``
    dimensions and ``i`` has ``index_dims``."""
    table = plain(ctx, table)

    def element(idx: list) -> Expr:
        position = ctx.cast(index.load(idx[dim:dim + index_dims]), DType.I64)
        return Load(table.buffer, tuple(idx[:dim]) + (position,) + tuple(idx[dim + index_dims:]))
    ctx.map_elements(out, element)


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
