"""Pooling over the trailing spatial dimensions: max pooling (values only),
average pooling (padding, ``ceil_mode``, ``count_include_pad``,
``divisor_override``) and adaptive average pooling.

Windows that reach into padding are cut by affine guards. Where the number of
elements averaged differs between windows, the nest counts them in a second
local buffer; adaptive pooling's windows are loops with ``//`` bounds::

    for kh = (oh*H) // OH to ((oh + 1)*H + OH - 1) // OH
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch

from polyir.frontends.aten.context import LoweringContext, TensorValue, accumulator_dtype, const, packet
from polyir.frontends.aten.norm import used_outputs
from polyir.frontends.aten.registry import register
from polyir.frontends.lowering.reduce import accumulate
from polyir.frontends.lowering.scalar import nan_max
from polyir.frontends.lowering.sizes import Size
from polyir.ir.affine import Aff, Constraint
from polyir.ir.nodes import BinOp, Expr, For, Node

aten = torch.ops.aten


def _per_dim(values: Any, spatial: int, default: Sequence[int]) -> list[int]:
    """A per-dimension list from an int, a one-element list, a full list, or
    nothing (``default``)."""
    if values is None or (isinstance(values, (list, tuple)) and len(values) == 0):
        return list(default)
    if isinstance(values, int):
        return [values] * spatial
    return list(values) * spatial if len(values) == 1 else list(values)


def _window(spatial: int, kernel_size: Any, stride: Any, padding: Any,
            dilation: Any = 1) -> tuple[list[int], list[int], list[int], list[int]]:
    """Kernel, stride (default: the kernel), padding and dilation per dimension."""
    kernel = _per_dim(kernel_size, spatial, [])
    return (kernel, _per_dim(stride, spatial, kernel), _per_dim(padding, spatial, [0] * spatial),
            _per_dim(dilation, spatial, [1] * spatial))


def _spatial(node: torch.fx.Node) -> int:
    return 3 if "3d" in packet(node).__name__ else 2


def _positions(o: list[Aff], r: list[Aff], lead: int, stride: list[int], padding: list[int],
               dilation: list[int]) -> list[Aff]:
    return [o[lead + d] * stride[d] - padding[d] + r[d] * dilation[d] for d in range(len(stride))]


def _bounds(ctx: LoweringContext, positions: list[Aff], sizes: Sequence[Size], low: Sequence[int],
            high: Sequence[int], reach: Sequence[tuple[Size, Size]]) -> list[Constraint]:
    """``low[d] <= position < sizes[d] + high[d]``, only where a window can cross it."""
    conditions = []
    for d, position in enumerate(positions):
        first, last = reach[d]
        if first < low[d]:
            conditions.append(Constraint(position, ">=", Aff.const(low[d])))
        if last >= sizes[d] + high[d]:
            conditions.append(Constraint(position, "<", ctx.size_aff(sizes[d] + high[d])))
    return conditions


def _reach(out_sizes: Sequence[Size], kernel: list[int], stride: list[int], padding: list[int],
           dilation: list[int]) -> list[tuple[Size, Size]]:
    return [(-padding[d], (out_sizes[d] - 1) * stride[d] - padding[d] + (kernel[d] - 1) * dilation[d])
            for d in range(len(kernel))]


@register(aten.max_pool2d_with_indices, aten.max_pool3d_with_indices,
          accepts=lambda n: "max pooling indices are used" if 1 in used_outputs(n) else None)
def lower_max_pool(ctx: LoweringContext, node: torch.fx.Node, x: TensorValue, kernel_size: Any,
                   stride: Any = (), padding: Any = 0, dilation: Any = 1,
                   ceil_mode: bool = False) -> tuple[TensorValue, TensorValue]:
    out = ctx.result(node, 0)
    kernel, stride, padding, dilation = _window(_spatial(node), kernel_size, stride, padding, dilation)
    lead = x.rank - len(kernel)
    sizes = x.shape[lead:]
    reach = _reach(out.shape[lead:], kernel, stride, padding, dilation)

    def element(o: list[Aff], r: list[Aff]) -> Expr:
        return x.load(list(o[:lead]) + _positions(o, r, lead, stride, padding, dilation))

    def guard(o: list[Aff], r: list[Aff]) -> list[Constraint]:
        positions = _positions(o, r, lead, stride, padding, dilation)
        return _bounds(ctx, positions, sizes, [0] * len(kernel), [0] * len(kernel), reach)
    accumulate(ctx, out, kernel, acc_dtype=out.dtype, init=lambda o: const(float("-inf"), out.dtype),
               element=element, combine=nan_max, guard=guard)
    return out, out  # the indices output is refused by ``accepts`` when used


@register(aten.avg_pool2d, aten.avg_pool3d)
def lower_avg_pool(ctx: LoweringContext, node: torch.fx.Node, x: TensorValue, kernel_size: Any,
                   stride: Any = (), padding: Any = 0, ceil_mode: bool = False,
                   count_include_pad: bool = True, divisor_override: int | None = None) -> TensorValue:
    out = ctx.result(node)
    kernel, stride, padding, dilation = _window(_spatial(node), kernel_size, stride, padding)
    lead = x.rank - len(kernel)
    sizes = x.shape[lead:]
    acc = accumulator_dtype(out.dtype)
    reach = _reach(out.shape[lead:], kernel, stride, padding, dilation)
    zeros = [0] * len(kernel)

    out_idx, out_loops = ctx.loops(out.shape, hint="i")
    red_idx, red_loops = ctx.loops(kernel, hint="r")
    positions = _positions(out_idx, red_idx, lead, stride, padding, dilation)
    in_bounds = _bounds(ctx, positions, sizes, zeros, zeros, reach)
    counted = in_bounds if not count_include_pad else _bounds(
        ctx, positions, sizes, [-p for p in padding], padding, reach)
    total = ctx.temp(f"{node.name}_sum", out.shape, acc)
    body: list[Node] = [ctx.assign(total, out_idx, const(0, acc))]
    update = ctx.assign(total, out_idx, BinOp("+", total.load(out_idx),
                                              ctx.cast(x.load(list(out_idx[:lead]) + positions), acc)))
    if divisor_override or not counted:
        divisor: Expr = const(divisor_override or math.prod(kernel), acc)
        inner = ctx.guard(in_bounds, [update])
    else:
        count = ctx.temp(f"{node.name}_count", out.shape, acc)
        body.append(ctx.assign(count, out_idx, const(0, acc)))
        increment = ctx.assign(count, out_idx, BinOp("+", count.load(out_idx), const(1, acc)))
        if counted == in_bounds:
            inner = ctx.guard(in_bounds, [update, increment])
        else:
            inner = ctx.guard(in_bounds, [update]) + ctx.guard(counted, [increment])
        divisor = count.load(out_idx)
    body += ctx.nest(red_loops, inner)
    body.append(ctx.assign(out, out_idx, BinOp("/", total.load(out_idx), divisor)))
    ctx.emit(ctx.nest(out_loops, body))
    return out


@register(aten._adaptive_avg_pool2d, aten._adaptive_avg_pool3d, aten.adaptive_avg_pool2d)
def lower_adaptive_avg_pool(ctx: LoweringContext, node: torch.fx.Node, x: TensorValue,
                            output_size: Sequence[int]) -> TensorValue:
    out = ctx.result(node)
    spatial = len(output_size)
    lead = x.rank - spatial
    acc = accumulator_dtype(out.dtype)
    out_idx, out_loops = ctx.loops(out.shape, hint="i")
    total = ctx.temp(f"{node.name}_sum", out.shape, acc)
    count = ctx.temp(f"{node.name}_count", out.shape, acc)
    window: list[Aff] = []
    loops: list[tuple[str, Aff, Aff]] = []
    for d in range(spatial):
        size, target = x.shape[lead + d], out.shape[lead + d]
        o = out_idx[lead + d]
        start, end = (o * size) // target, ((o + 1) * size + target - 1) // target
        var = ctx.fresh("r")
        window.append(Aff.var(var))
        loops.append((var, start, end))
    update = [
        ctx.assign(total, out_idx, BinOp("+", total.load(out_idx),
                                         ctx.cast(x.load(list(out_idx[:lead]) + window), acc))),
        ctx.assign(count, out_idx, BinOp("+", count.load(out_idx), const(1, acc))),
    ]
    inner: list = update
    for var, start, end in reversed(loops):
        inner = [For(var, (start,), (end,), tuple(inner))]
    body: list[Node] = [ctx.assign(total, out_idx, const(0, acc)),
                        ctx.assign(count, out_idx, const(0, acc))]
    body += inner
    body.append(ctx.assign(out, out_idx, BinOp("/", total.load(out_idx), count.load(out_idx))))
    ctx.emit(ctx.nest(out_loops, body))
    return out
