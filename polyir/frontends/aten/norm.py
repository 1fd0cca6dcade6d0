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
from polyir.frontends.aten.registry import register
from polyir.frontends.lowering.reduce import add, kept_index, over_dims, square, variance_pieces
from polyir.ir.affine import Aff
from polyir.ir.nodes import BinOp, Call, Expr

aten = torch.ops.aten


def used_outputs(node: torch.fx.Node) -> set[int]:
    """The output positions of a multi-output node that some user reads."""
    return {int(user.args[1]) for user in node.users  # type: ignore[arg-type]
            if user.target is operator.getitem}


def row_max_and_sum(ctx: LoweringContext, x: TensorValue, dim: int,
                    acc: Any) -> tuple[TensorValue, TensorValue]:
    """Locals ``m = max(x)`` and ``s = sum(exp(x - m))`` along ``dim`` (kept)."""
    shape = [1 if d == dim else s for d, s in enumerate(x.shape)]
    row_max = ctx.temp(f"{x.buffer}_max", shape, acc)
    over_dims(ctx, row_max, x, [dim], acc_dtype=acc, init=const(float("-inf"), acc),
              combine=lambda a, v: Call("max", (a, v)))
    row_sum = ctx.temp(f"{x.buffer}_sum", shape, acc)
    over_dims(ctx, row_sum, x, [dim], acc_dtype=acc, init=const(0, acc), combine=add,
              element=lambda v, idx: Call("exp", (BinOp("-", v, row_max.load(kept_index(idx, [dim]))),)))
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
        shifted = BinOp("-", ctx.cast(x.load(idx), acc), row_max.load(kept_index(idx, [dim])))
        if log:
            return BinOp("-", shifted, Call("log", (row_sum.load(kept_index(idx, [dim])),)))
        return BinOp("/", Call("exp", (shifted,)), row_sum.load(kept_index(idx, [dim])))
    ctx.map_elements(out, element)
    return out


def mean_and_rstd(ctx: LoweringContext, x: TensorValue, dims: Sequence[int], acc: Any,
                  eps: float) -> tuple[TensorValue, TensorValue]:
    """Locals (dims kept as size 1): the mean of ``x`` over ``dims`` and
    ``rsqrt(biased variance + eps)``."""
    mean = variance_pieces(ctx, x, dims, acc)
    rstd = ctx.temp(f"{x.buffer}_rstd", mean.shape, acc)
    count: Any = 1
    for d in dims:
        count = count * x.shape[d]
    divisor = ctx.size_value(count, acc)
    over_dims(ctx, rstd, x, dims, acc_dtype=acc, init=const(0, acc), combine=add,
              element=lambda v, idx: square(BinOp("-", v, mean.load(kept_index(idx, dims)))),
              finish=lambda a: Call("rsqrt", (BinOp("+", BinOp("/", a, divisor),
                                                     const(eps, acc)),)))
    return mean, rstd


def _statistics_outputs(ctx: LoweringContext, node: torch.fx.Node,
                        stats: Sequence[TensorValue]) -> list[TensorValue]:
    """Outputs 1 and 2 of a norm node (mean, rstd) where a user reads them."""
    results = list(stats)
    used = used_outputs(node)
    for position in (1, 2):
        if position in used:
            target = ctx.result(node, position)
            source = results[position - 1]
            from polyir.frontends.lowering.views import reshape_map
            ctx.copy(source.view(target.shape, reshape_map(source.shape, target.shape, ctx.symbols)),
                     target)
            results[position - 1] = target
    return results


@register(aten.native_layer_norm)
def lower_layer_norm(ctx: LoweringContext, node: torch.fx.Node, x: TensorValue,
                     normalized_shape: Sequence[int], weight: TensorValue | None,
                     bias: TensorValue | None, eps: float) -> tuple[TensorValue, ...]:
    dims = list(range(x.rank - len(normalized_shape), x.rank))
    acc = accumulator_dtype(x.dtype)
    mean, rstd = mean_and_rstd(ctx, x, dims, acc, eps)
    out = ctx.result(node, 0)

    def element(idx: list) -> Expr:
        value = BinOp("*", BinOp("-", ctx.cast(x.load(idx), acc), mean.load(kept_index(idx, dims))),
                      rstd.load(kept_index(idx, dims)))
        if weight is not None:
            value = BinOp("*", value, ctx.operand(weight, idx, x.shape, acc))
        if bias is not None:
            value = BinOp("+", value, ctx.operand(bias, idx, x.shape, acc))
        return value
    ctx.map_elements(out, element)
    return (out, *_statistics_outputs(ctx, node, [mean, rstd]))


@register(aten.native_group_norm)
def lower_group_norm(ctx: LoweringContext, node: torch.fx.Node, x: TensorValue,
                     weight: TensorValue | None, bias: TensorValue | None, batch: int,
                     channels: int, spatial: int, groups: int, eps: float) -> tuple[TensorValue, ...]:
    """Statistics over ``x`` seen as ``[N, G, C/G * HxW]``; channel ``c`` reads
    group ``c // (C/G)``."""
    from polyir.frontends.lowering.views import reshape_map
    acc = accumulator_dtype(x.dtype)
    per_group = channels // groups
    grouped_shape = (batch, groups, per_group * spatial)
    grouped = x.view(grouped_shape, reshape_map(x.shape, grouped_shape, ctx.symbols))
    mean, rstd = mean_and_rstd(ctx, grouped, [2], acc, eps)
    out = ctx.result(node, 0)

    def element(idx: list) -> Expr:
        stat = [idx[0], idx[1] // per_group, Aff.const(0)]
        value = BinOp("*", BinOp("-", ctx.cast(x.load(idx), acc), mean.load(stat)), rstd.load(stat))
        if weight is not None:
            value = BinOp("*", value, ctx.cast(weight.load([idx[1]]), acc))
        if bias is not None:
            value = BinOp("+", value, ctx.cast(bias.load([idx[1]]), acc))
        return value
    ctx.map_elements(out, element)
    return (out, *_statistics_outputs(ctx, node, [mean, rstd]))


def _batch_norm_accepts(node: torch.fx.Node) -> str | None:
    if node.target is aten._native_batch_norm_legit_no_training.default:
        return None
    if node.target is aten._native_batch_norm_legit.no_stats:
        return None
    training = node.args[5] if len(node.args) > 5 else node.kwargs.get("training")
    if training and node.args[3] is not None:
        return "batch norm in training mode that updates running statistics"
    return None


@register(aten.native_batch_norm, aten._native_batch_norm_legit_no_training,
          aten._native_batch_norm_legit, accepts=_batch_norm_accepts)
def lower_batch_norm(ctx: LoweringContext, node: torch.fx.Node, x: TensorValue,
                     weight: TensorValue | None, bias: TensorValue | None,
                     *args: Any) -> tuple[TensorValue, ...]:
    """Inference: ``(x - mean[c]) * rsqrt(var[c] + eps) * w[c] + b[c]`` with the
    running statistics. Training without running statistics (instance norm):
    the batch's own statistics over every dimension but the channel."""
    eps = args[-1]
    out = ctx.result(node, 0)
    acc = accumulator_dtype(x.dtype)
    if node.target is aten._native_batch_norm_legit.no_stats:
        running: tuple[TensorValue, TensorValue] | None = None
    else:
        training = node.target is not aten._native_batch_norm_legit_no_training.default and args[2]
        running = None if training else (args[0], args[1])
    if running is None:
        dims = [d for d in range(x.rank) if d != 1]
        mean, rstd = mean_and_rstd(ctx, x, dims, acc, eps)

        def statistics(idx: list) -> tuple[Expr, Expr]:
            kept = kept_index(idx, dims)
            return mean.load(kept), rstd.load(kept)
    else:
        running_mean, running_var = running

        def statistics(idx: list) -> tuple[Expr, Expr]:
            variance = ctx.cast(running_var.load([idx[1]]), acc)
            return (ctx.cast(running_mean.load([idx[1]]), acc),
                    Call("rsqrt", (BinOp("+", variance, const(eps, acc)),)))

    def element(idx: list) -> Expr:
        center, scale = statistics(idx)
        value = BinOp("*", BinOp("-", ctx.cast(x.load(idx), acc), center), scale)
        if weight is not None:
            value = BinOp("*", value, ctx.cast(weight.load([idx[1]]), acc))
        if bias is not None:
            value = BinOp("+", value, ctx.cast(bias.load([idx[1]]), acc))
        return value
    ctx.map_elements(out, element)
    if running is None:
        return (out, *_statistics_outputs(ctx, node, [mean, rstd]))
    # The saved statistics are empty tensors in inference: views of nothing.
    empty = out.view((0,), lambda idx: (Aff.const(0),) * out.rank)
    return (out, empty, empty)
