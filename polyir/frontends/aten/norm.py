"""Normalisations: softmax, log-softmax, layer norm, batch norm (inference).

Each is a few nests over the same shape: row statistics into small local
buffers (kept dimensions of size 1), then one elementwise nest. Statistics of
f16/bf16 inputs are computed in f32.
"""
from __future__ import annotations

import operator
from collections.abc import Sequence
from typing import Any

import torch

from polyir.frontends.aten.context import (
    LoweringContext,
    TensorValue,
    accumulator_dtype,
    const,
    normalize_dim,
    packet,
)
from polyir.frontends.aten.reduction import add, over_dims, variance_pieces
from polyir.frontends.aten.registry import register
from polyir.ir.affine import Aff
from polyir.ir.nodes import BinOp, Call, Expr

aten = torch.ops.aten


def used_outputs(node: torch.fx.Node) -> set[int]:
    """The output positions of a multi-output node that some user reads."""
    return {int(user.args[1]) for user in node.users  # type: ignore[arg-type]
            if user.target is operator.getitem}


def _kept(idx: Sequence[Aff], dims: Sequence[int]) -> list[Aff]:
    return [Aff.const(0) if d in dims else i for d, i in enumerate(idx)]


def row_max_and_sum(ctx: LoweringContext, x: TensorValue, dim: int,
                    acc: Any) -> tuple[TensorValue, TensorValue]:
    """Locals ``m = max(x)`` and ``s = sum(exp(x - m))`` along ``dim`` (kept)."""
    shape = [1 if d == dim else s for d, s in enumerate(x.shape)]
    row_max = ctx.temp(f"{x.buffer}_max", shape, acc)
    over_dims(ctx, row_max, x, [dim], acc_dtype=acc, init=const(float("-inf"), acc),
              combine=lambda a, v: Call("max", (a, v)))
    row_sum = ctx.temp(f"{x.buffer}_sum", shape, acc)
    over_dims(ctx, row_sum, x, [dim], acc_dtype=acc, init=const(0, acc), combine=add,
              element=lambda v, idx: Call("exp", (BinOp("-", v, row_max.load(_kept(idx, [dim]))),)))
    return row_max, row_sum


@register(aten._softmax, aten._log_softmax, aten.softmax, aten.log_softmax)
def lower_softmax(ctx: LoweringContext, node: torch.fx.Node, x: TensorValue, dim: int,
                  *args: Any) -> TensorValue:
    out = ctx.result(node)
    dim = normalize_dim(dim, x.rank)
    acc = accumulator_dtype(out.dtype)
    row_max, row_sum = row_max_and_sum(ctx, x, dim, acc)
    log = packet(node) in (aten._log_softmax, aten.log_softmax)

    def element(idx: list) -> Expr:
        shifted = BinOp("-", ctx.cast(x.load(idx), acc), row_max.load(_kept(idx, [dim])))
        if log:
            return BinOp("-", shifted, Call("log", (row_sum.load(_kept(idx, [dim])),)))
        return BinOp("/", Call("exp", (shifted,)), row_sum.load(_kept(idx, [dim])))
    ctx.map_elements(out, element)
    return out


@register(aten.native_layer_norm)
def lower_layer_norm(ctx: LoweringContext, node: torch.fx.Node, x: TensorValue,
                     normalized_shape: Sequence[int], weight: TensorValue | None,
                     bias: TensorValue | None, eps: float) -> tuple[TensorValue, ...]:
    dims = list(range(x.rank - len(normalized_shape), x.rank))
    acc = accumulator_dtype(x.dtype)
    mean = variance_pieces(ctx, x, dims, acc)
    rstd = ctx.temp(f"{x.buffer}_rstd", mean.shape, acc)
    count = 1
    for d in dims:
        count *= x.shape[d]
    over_dims(ctx, rstd, x, dims, acc_dtype=acc, init=const(0, acc), combine=add,
              element=lambda v, idx: _square(BinOp("-", v, mean.load(_kept(idx, dims)))),
              finish=lambda a: Call("rsqrt", (BinOp("+", BinOp("/", a, const(count, acc)),
                                                     const(eps, acc)),)))
    out = ctx.result(node, 0)

    def element(idx: list) -> Expr:
        value = BinOp("*", BinOp("-", ctx.cast(x.load(idx), acc), mean.load(_kept(idx, dims))),
                      rstd.load(_kept(idx, dims)))
        if weight is not None:
            value = BinOp("*", value, ctx.operand(weight, idx, x.shape, acc))
        if bias is not None:
            value = BinOp("+", value, ctx.operand(bias, idx, x.shape, acc))
        return value
    ctx.map_elements(out, element)
    results = [out, mean, rstd]
    used = used_outputs(node)
    for position in (1, 2):
        if position in used:
            target = ctx.result(node, position)
            ctx.copy(results[position], target)
            results[position] = target
    return tuple(results)


def _square(e: Expr) -> Expr:
    return BinOp("*", e, e)


def _batch_norm_accepts(node: torch.fx.Node) -> str | None:
    if node.target is aten._native_batch_norm_legit_no_training.default:
        return None
    training = node.args[5] if len(node.args) > 5 else node.kwargs.get("training")
    return "batch norm in training mode" if training else None


@register(aten.native_batch_norm, aten._native_batch_norm_legit_no_training,
          aten._native_batch_norm_legit, accepts=_batch_norm_accepts)
def lower_batch_norm(ctx: LoweringContext, node: torch.fx.Node, x: TensorValue,
                     weight: TensorValue | None, bias: TensorValue | None,
                     running_mean: TensorValue, running_var: TensorValue,
                     *args: Any) -> tuple[TensorValue, ...]:
    """Inference batch norm: ``(x - mean[c]) * rsqrt(var[c] + eps) * w[c] + b[c]``."""
    eps = args[-1]
    out = ctx.result(node, 0)
    acc = accumulator_dtype(x.dtype)

    def channel(value: TensorValue, idx: list) -> Expr:
        return ctx.cast(value.load([idx[1]]), acc)

    def element(idx: list) -> Expr:
        scale = Call("rsqrt", (BinOp("+", channel(running_var, idx), const(eps, acc)),))
        value = BinOp("*", BinOp("-", ctx.cast(x.load(idx), acc), channel(running_mean, idx)), scale)
        if weight is not None:
            value = BinOp("*", value, channel(weight, idx))
        if bias is not None:
            value = BinOp("+", value, channel(bias, idx))
        return value
    ctx.map_elements(out, element)
    # The saved statistics are empty tensors in inference: views of nothing.
    empty = out.view((0,), lambda idx: (Aff.const(0),) * out.rank)
    return (out, empty, empty)
