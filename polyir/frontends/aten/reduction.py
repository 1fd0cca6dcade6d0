"""Reductions: sum, mean, prod, amax, amin, max/min with indices, argmax,
argmin, var, any, all; and :func:`accumulate`, the nest shape every
reduction-like rule (matmul, convolution, pooling, norms) is built from::

    for <output indices> {
      S0: acc[o] = init
      for <reduction indices> {
        [if (<guard>)] S1: acc[o] = combine(acc[o], element)
      }
      [S2: out[o] = finish(acc[o])]        # cast from the accumulator type
    }

Sums of f16/bf16 values accumulate in an f32 local buffer, as eager does.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import torch

from polyir.frontends.aten.context import (
    LoweringContext,
    TensorValue,
    accumulator_dtype,
    aff_value,
    const,
    dtype_of,
    node_meta,
    normalize_dim,
    packet,
)
from polyir.frontends.aten.registry import register
from polyir.frontends.aten.symbolic import Size
from polyir.ir.affine import Aff, Constraint
from polyir.ir.nodes import BinOp, Call, Compare, Expr, For, Node, Select
from polyir.ir.types import DType

aten = torch.ops.aten

Combine = Callable[[Expr, Expr], Expr]


def add(acc: Expr, value: Expr) -> Expr:
    return BinOp("+", acc, value)


def accumulate(ctx: LoweringContext, out: TensorValue, reduce_shape: Sequence[Size], *,
               acc_dtype: DType, init: Callable[[list[Aff]], Expr],
               element: Callable[[list[Aff], list[Aff]], Expr], combine: Combine = add,
               finish: Callable[[Expr], Expr] | None = None,
               guard: Callable[[list[Aff], list[Aff]], list[Constraint]] | None = None,
               accumulator: TensorValue | None = None) -> None:
    """Emit one reduction nest writing every element of ``out``.

    ``init(o)`` and ``element(o, r)`` build expressions from the output index
    ``o`` and the reduction index ``r`` (over ``reduce_shape``). The running
    value lives in ``out`` itself when ``acc_dtype`` is ``out``'s type, else
    in ``accumulator`` (or a new local of ``out``'s shape).
    """
    out_idx, out_loops = ctx.loops(out.shape, hint="i")
    red_idx, red_loops = ctx.loops(reduce_shape, hint="r")
    acc = out
    if acc_dtype is not out.dtype:
        acc = accumulator or ctx.temp(f"{out.buffer}_acc", out.shape, acc_dtype)
    body: list[Node] = [ctx.assign(acc, out_idx, init(out_idx))]
    update = ctx.assign(acc, out_idx, combine(acc.load(out_idx),
                                              ctx.cast(element(out_idx, red_idx), acc_dtype)))
    conditions = guard(out_idx, red_idx) if guard else []
    body += ctx.nest(red_loops, ctx.guard(conditions, [update]))
    if acc is not out or finish is not None:
        value = acc.load(out_idx)
        body.append(ctx.assign(out, out_idx, finish(value) if finish else value))
    ctx.emit(ctx.nest(out_loops, body))


# ------------------------------------------------------- reductions over dims
def reduced_dims(rank: int, dims: Any) -> list[int]:
    """Normalised reduction dimensions (``None`` or ``[]``: all of them)."""
    if dims is None or (isinstance(dims, (list, tuple)) and len(dims) == 0):
        return list(range(rank))
    if isinstance(dims, int):
        dims = [dims]
    return sorted({normalize_dim(d, rank) for d in dims})


def keepdim_view(out: TensorValue, rank: int, dims: Sequence[int]) -> TensorValue:
    """``out`` seen with the reduced dimensions kept as size 1."""
    if out.rank == rank:
        return out
    kept = [d for d in range(rank) if d not in dims]
    shape = [1 if d in dims else out.shape[kept.index(d)] for d in range(rank)]
    return out.view(shape, lambda idx: tuple(idx[d] for d in kept))


def over_dims(ctx: LoweringContext, out: TensorValue, x: TensorValue, dims: Sequence[int], *,
              acc_dtype: DType, init: Expr, combine: Combine,
              element: Callable[[Expr, list[Aff]], Expr] | None = None,
              finish: Callable[[Expr], Expr] | None = None) -> None:
    """Reduce ``x`` over ``dims`` into ``out`` (with or without kept dims).

    ``element(value, full_index)`` may transform each loaded element."""
    keep = keepdim_view(out, x.rank, dims)
    reduce_shape = [x.shape[d] for d in dims]

    def full_index(o: list[Aff], r: list[Aff]) -> list[Aff]:
        idx = list(o)
        for d, ri in zip(dims, r, strict=True):
            idx[d] = ri
        return idx

    def load(o: list[Aff], r: list[Aff]) -> Expr:
        idx = full_index(o, r)
        value = ctx.cast(x.load(idx), acc_dtype)
        return element(value, idx) if element else value
    accumulate(ctx, keep, reduce_shape, acc_dtype=acc_dtype, init=lambda o: init,
               element=load, combine=combine, finish=finish)


def _count(x: TensorValue, dims: Sequence[int]) -> Any:
    """The number of elements reduced (an int, or a SymInt with dynamic shapes)."""
    count: Any = 1
    for d in dims:
        count = count * x.shape[d]
    return count


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
        count = ctx.size_value(_count(x, dims), acc)
        finish = lambda a: BinOp("/", a, count)  # noqa: E731
    over_dims(ctx, out, x, dims, acc_dtype=acc, init=const(0, acc), combine=add, finish=finish)
    return out


def _extreme(dtype: DType, largest: bool) -> Expr:
    if dtype.is_float:
        return const(-math.inf if largest else math.inf, dtype)
    if dtype is DType.BOOL:
        return const(not largest, dtype)
    info = torch.iinfo({DType.I8: torch.int8, DType.I32: torch.int32, DType.I64: torch.int64}[dtype])
    return const(info.min if largest else info.max, dtype)


@register(aten.amax, aten.amin)
def lower_amax(ctx: LoweringContext, node: torch.fx.Node, x: TensorValue, dims: Any = (),
               keepdim: bool = False) -> TensorValue:
    largest = packet(node) is aten.amax
    out = ctx.result(node)
    dims = reduced_dims(x.rank, dims)
    dtype = DType.I64 if out.dtype is DType.BOOL else out.dtype
    fn = "max" if largest else "min"
    over_dims(ctx, out, x, dims, acc_dtype=dtype, init=_extreme(dtype, largest),
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
    n = _count(x, dims)
    divisor = ctx.size_value(max(n - correction, 0), acc)
    over_dims(ctx, out, x, dims, acc_dtype=acc, init=const(0, acc), combine=add,
              element=lambda v, idx: _square(BinOp("-", v, mean.load(_kept(idx, dims)))),
              finish=lambda a: BinOp("/", a, divisor))
    return out


def _square(e: Expr) -> Expr:
    return BinOp("*", e, e)


def _kept(idx: Sequence[Aff], dims: Sequence[int]) -> list[Aff]:
    return [Aff.const(0) if d in dims else i for d, i in enumerate(idx)]


def variance_pieces(ctx: LoweringContext, x: TensorValue, dims: Sequence[int],
                    acc: DType) -> TensorValue:
    """A local holding the mean of ``x`` over ``dims`` (kept dims), in ``acc``."""
    shape = [1 if d in dims else s for d, s in enumerate(x.shape)]
    mean = ctx.temp(f"{x.buffer}_mean", shape, acc)
    count = ctx.size_value(_count(x, dims), acc)
    over_dims(ctx, mean, x, dims, acc_dtype=acc, init=const(0, acc), combine=add,
              finish=lambda a: BinOp("/", a, count))
    return mean


def _index_reduction(ctx: LoweringContext, node: torch.fx.Node, x: TensorValue, dim: Any,
                     keepdim: bool, largest: bool, values: TensorValue | None,
                     indices: TensorValue) -> None:
    if dim is None:  # over the flattened tensor
        from polyir.frontends.aten.shape import reshape_map
        numel = _count(x, range(x.rank))
        x = x.view((numel,), reshape_map(x.shape, (numel,), ctx.symbols))
        dims = [0]
    else:
        dims = [normalize_dim(dim, x.rank)]
    dtype = x.dtype if x.dtype is not DType.BOOL else DType.I64
    best = values if values is not None and values.dtype is dtype else None
    if best is None:
        shape = [1 if d in dims else s for d, s in enumerate(x.shape)]
        best = ctx.temp(f"{indices.buffer}_best", shape, dtype)
    best = keepdim_view(best, x.rank, dims)
    index_out = keepdim_view(indices, x.rank, dims)
    out_idx, out_loops = ctx.loops(best.shape, hint="i")
    red_idx, red_loops = ctx.loops([x.shape[dims[0]]], hint="r")
    full = list(out_idx)
    full[dims[0]] = red_idx[0]
    value = ctx.cast(x.load(full), dtype)
    better: Expr = Compare(">" if largest else "<", value, best.load(out_idx))
    # torch returns the first extreme element, and NaN wins over numbers.
    better = BinOp("or", better, BinOp("and", Compare("!=", value, value),
                                       Compare("==", best.load(out_idx), best.load(out_idx))))
    body: list[Node] = [ctx.assign(best, out_idx, _extreme(dtype, largest)),
            ctx.assign(index_out, out_idx, const(0, DType.I64))]
    body += ctx.nest(red_loops, [
        ctx.assign(index_out, out_idx, Select(better, aff_value(red_idx[0]), index_out.load(out_idx))),
        ctx.assign(best, out_idx, Select(better, value, best.load(out_idx)))])
    ctx.emit(ctx.nest(out_loops, body))
    if values is not None and values.buffer != best.buffer:
        ctx.copy(best, keepdim_view(values, x.rank, dims))


@register(aten.argmax, aten.argmin)
def lower_argmax(ctx: LoweringContext, node: torch.fx.Node, x: TensorValue, dim: Any = None,
                 keepdim: bool = False) -> TensorValue:
    indices = ctx.result(node)
    target = indices
    if dim is None:  # one index into the flattened tensor, 0-d or [1, 1, ...]
        target = indices.view((1,), lambda idx: (Aff.const(0),) * indices.rank)
    _index_reduction(ctx, node, x, dim, keepdim, packet(node) is aten.argmax, None, target)
    return indices


@register(aten.max.dim, aten.min.dim)
def lower_max_dim(ctx: LoweringContext, node: torch.fx.Node, x: TensorValue, dim: int,
                  keepdim: bool = False) -> tuple[TensorValue, TensorValue]:
    values, indices = ctx.result(node, 0), ctx.result(node, 1)
    _index_reduction(ctx, node, x, dim, keepdim, node.target is aten.max.dim, values, indices)
    return values, indices


@register(aten.max.default, aten.min.default)
def lower_max_all(ctx: LoweringContext, node: torch.fx.Node, x: TensorValue) -> TensorValue:
    out = ctx.result(node)
    largest = node.target is aten.max.default
    dtype = DType.I64 if out.dtype is DType.BOOL else out.dtype
    fn = "max" if largest else "min"
    over_dims(ctx, out, x, list(range(x.rank)), acc_dtype=dtype, init=_extreme(dtype, largest),
              combine=lambda a, v: Call(fn, (a, v)))
    return out


__all__ = ["accumulate", "over_dims", "reduced_dims", "keepdim_view", "variance_pieces",
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
    dim = normalize_dim(dim, max(x.rank, 1))
    if x.rank == 0:
        ctx.copy(x, out)
        return out
    if out.shape[dim] == 0:
        return out
    acc_dtype = accumulator_dtype(out.dtype)
    if acc_dtype is DType.BOOL:
        acc_dtype = DType.I64
    acc = out if acc_dtype is out.dtype else ctx.temp(f"{node.name}_acc", out.shape, acc_dtype)
    op = "+" if packet(node) is aten.cumsum else "*"
    outer_shape = [1 if d == dim else s for d, s in enumerate(out.shape)]
    idx, loops = ctx.loops(outer_shape, hint="i")
    var = ctx.fresh("j")
    here = list(idx)
    here[dim] = Aff.var(var)
    before = list(idx)
    before[dim] = Aff.var(var) - 1
    first = list(idx)
    first[dim] = Aff.const(0)
    body: list[Node] = [ctx.assign(acc, first, ctx.cast(x.load(first), acc_dtype))]
    step = ctx.assign(acc, here, BinOp(op, acc.load(before), ctx.cast(x.load(here), acc_dtype)))
    body.append(For(var, (Aff.const(1),), (ctx.size_aff(out.shape[dim]),), (step,)))
    ctx.emit(ctx.nest(loops, body))
    if acc is not out:
        ctx.copy(acc, out)
    return out
