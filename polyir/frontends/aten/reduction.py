"""Reductions: sum, mean, prod, amax, amin, max/min with indices, argmax,
argmin, var, any, all, vector norms, cumsum/cumprod.

The nests are built by :mod:`polyir.frontends.lowering.reduce` (shared with the
jaxpr table; its names are re-exported here): :func:`accumulate` for every
reduction-like rule, :func:`over_dims`, :func:`index_reduction`,
:func:`scan_into`. Sums of f16/bf16 values accumulate in f32, as eager does.
"""
from __future__ import annotations

import math
from typing import Any

import torch

from polyir.frontends.aten.context import (
    LoweringContext,
    TensorValue,
    accumulator_dtype,
    const,
    dtype_of,
    extreme,
    node_meta,
    packet,
)
from polyir.frontends.aten.registry import register
from polyir.frontends.lowering.reduce import (
    accumulate,
    add,
    count,
    index_reduction,
    keepdim_view,
    kept_index,
    over_dims,
    reduced_dims,
    scan_into,
    square,
    variance_pieces,
)
from polyir.ir.affine import Aff
from polyir.ir.nodes import BinOp, Call, Compare, Expr, Select
from polyir.ir.types import DType

aten = torch.ops.aten


@register(aten.sum, aten.mean, aten.prod)
def lower_sum(ctx: LoweringContext, node: torch.fx.Node, x: TensorValue, dims: Any = None,
              keepdim: bool = False, **kwargs: Any) -> TensorValue:
    if isinstance(dims, torch.dtype):  # sum.default(x, dtype)
        dims = None
    kind = packet(node)
    if kind is aten.prod and isinstance(dims, bool):  # prod.default(x, dtype) / prod.dim_int
        dims = None
    out = ctx.result(node)
    dims = reduced_dims(x.rank, dims)
    acc = accumulator_dtype(out.dtype)
    if acc is DType.BOOL:
        acc = DType.I64
    if kind is aten.prod:
        over_dims(ctx, out, x, dims, acc_dtype=acc, init=const(1, acc),
                  combine=lambda a, v: BinOp("*", a, v))
        return out
    finish = None
    if kind is aten.mean:
        total = ctx.size_value(count(x, dims), acc)
        finish = lambda a: BinOp("/", a, total)  # noqa: E731
    over_dims(ctx, out, x, dims, acc_dtype=acc, init=const(0, acc), combine=add, finish=finish)
    return out


@register(aten.amax, aten.amin)
def lower_amax(ctx: LoweringContext, node: torch.fx.Node, x: TensorValue, dims: Any = (),
               keepdim: bool = False) -> TensorValue:
    largest = packet(node) is aten.amax
    out = ctx.result(node)
    dims = reduced_dims(x.rank, dims)
    dtype = DType.I64 if out.dtype is DType.BOOL else out.dtype
    fn = "max" if largest else "min"
    over_dims(ctx, out, x, dims, acc_dtype=dtype, init=extreme(dtype, largest),
              combine=lambda a, v: Call(fn, (a, v)))
    return out


@register(aten.any, aten.all)
def lower_any_all(ctx: LoweringContext, node: torch.fx.Node, x: TensorValue, dims: Any = None,
                  keepdim: bool = False) -> TensorValue:
    is_any = packet(node) is aten.any
    out = ctx.result(node)
    op = "or" if is_any else "and"
    over_dims(ctx, out, x, reduced_dims(x.rank, dims), acc_dtype=DType.BOOL,
              init=const(not is_any, DType.BOOL), combine=lambda a, v: BinOp(op, a, v))
    return out


@register(aten.var)
def lower_var(ctx: LoweringContext, node: torch.fx.Node, x: TensorValue, dims: Any = None,
              *args: Any, correction: Any = None, keepdim: bool = False,
              unbiased: Any = None) -> TensorValue:
    """Two passes: the mean, then the sum of squared deviations."""
    if args:  # var.dim(x, dims, unbiased, keepdim)
        unbiased = args[0]
        keepdim = args[1] if len(args) > 1 else keepdim
    if correction is None:
        correction = 1 if unbiased is None or unbiased else 0
    out = ctx.result(node)
    dims = reduced_dims(x.rank, dims)
    acc = accumulator_dtype(out.dtype)
    mean = variance_pieces(ctx, x, dims, acc)
    n = count(x, dims)
    divisor = ctx.size_value(max(n - correction, 0), acc)
    over_dims(ctx, out, x, dims, acc_dtype=acc, init=const(0, acc), combine=add,
              element=lambda v, idx: square(BinOp("-", v, mean.load(kept_index(idx, dims)))),
              finish=lambda a: BinOp("/", a, divisor))
    return out


@register(aten.argmax, aten.argmin)
def lower_argmax(ctx: LoweringContext, node: torch.fx.Node, x: TensorValue, dim: Any = None,
                 keepdim: bool = False) -> TensorValue:
    indices = ctx.result(node)
    target = indices
    if dim is None:  # one index into the flattened tensor, 0-d or [1, 1, ...]
        target = indices.view((1,), lambda idx: (Aff.const(0),) * indices.rank)
    index_reduction(ctx, x, dim, packet(node) is aten.argmax, None, target)
    return indices


@register(aten.max.dim, aten.min.dim)
def lower_max_dim(ctx: LoweringContext, node: torch.fx.Node, x: TensorValue, dim: int,
                  keepdim: bool = False) -> tuple[TensorValue, TensorValue]:
    values, indices = ctx.result(node, 0), ctx.result(node, 1)
    index_reduction(ctx, x, dim, node.target is aten.max.dim, values, indices)
    return values, indices


@register(aten.max.default, aten.min.default)
def lower_max_all(ctx: LoweringContext, node: torch.fx.Node, x: TensorValue) -> TensorValue:
    out = ctx.result(node)
    largest = node.target is aten.max.default
    dtype = DType.I64 if out.dtype is DType.BOOL else out.dtype
    fn = "max" if largest else "min"
    over_dims(ctx, out, x, list(range(x.rank)), acc_dtype=dtype, init=extreme(dtype, largest),
              combine=lambda a, v: Call(fn, (a, v)))
    return out


__all__ = ["accumulate", "add", "over_dims", "reduced_dims", "keepdim_view", "variance_pieces",
           "dtype_of", "node_meta"]


@register(aten.linalg_vector_norm)
def lower_vector_norm(ctx: LoweringContext, node: torch.fx.Node, x: TensorValue, order: Any = 2,
                      dims: Any = None, keepdim: bool = False, **kwargs: Any) -> TensorValue:
    """``(sum |x|^p)^(1/p)``; ``p = inf/-inf``: the max/min of ``|x|``; ``p = 0``:
    the number of non-zeros."""
    out = ctx.result(node)
    dims = reduced_dims(x.rank, dims)
    acc = accumulator_dtype(out.dtype)

    def magnitude(value: Expr, idx: list[Aff]) -> Expr:
        return Call("abs", (value,))
    if order in (math.inf, -math.inf):
        fn = "max" if order > 0 else "min"
        over_dims(ctx, out, x, dims, acc_dtype=acc, init=const(-math.inf if order > 0 else math.inf, acc),
                  combine=lambda a, v: Call(fn, (a, v)), element=magnitude)
    elif order == 0:
        over_dims(ctx, out, x, dims, acc_dtype=acc, init=const(0, acc), combine=add,
                  element=lambda v, idx: Select(Compare("!=", v, const(0, acc)), const(1, acc),
                                                const(0, acc)))
    elif order == 1:
        over_dims(ctx, out, x, dims, acc_dtype=acc, init=const(0, acc), combine=add, element=magnitude)
    elif order == 2:
        over_dims(ctx, out, x, dims, acc_dtype=acc, init=const(0, acc), combine=add,
                  element=lambda v, idx: BinOp("*", v, v), finish=lambda a: Call("sqrt", (a,)))
    else:
        p = const(order, acc)
        over_dims(ctx, out, x, dims, acc_dtype=acc, init=const(0, acc), combine=add,
                  element=lambda v, idx: Call("pow", (Call("abs", (v,)), p)),
                  finish=lambda a: Call("pow", (a, const(1.0 / order, acc))))
    return out


@register(aten.cumsum, aten.cumprod)
def lower_scan(ctx: LoweringContext, node: torch.fx.Node, x: TensorValue, dim: int,
               **kwargs: Any) -> TensorValue:
    """A running sum (product) along ``dim``: a loop-carried recurrence
    ``out[j] = out[j - 1] + x[j]``, accumulated in f32 for f16/bf16."""
    out = ctx.result(node)
    acc_dtype = accumulator_dtype(out.dtype)
    if acc_dtype is DType.BOOL:
        acc_dtype = DType.I64
    op = "+" if packet(node) is aten.cumsum else "*"
    scan_into(ctx, out, x, dim, lambda a, v: BinOp(op, a, v), acc_dtype)
    return out
