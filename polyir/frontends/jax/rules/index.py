"""Indexing primitives: ``dynamic_slice``, ``dynamic_update_slice`` and
``gather`` (embedding look-ups, ``jnp.take``, ``x[ids]``, any gather without
operand batching dimensions).

A start index known only at run time is a value-expression subscript
(``x[clamp(cast<i64>(s[]), 0, 3) + i]``), which the IR allows where a
subscript is not affine. Starts are clamped into the operand as XLA clamps
them; ``gather`` with ``mode=FILL_OR_DROP`` yields ``fill_value`` (NaN,
the smallest integer, or True by default) for windows out of bounds.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from polyir.frontends.jax.graph import Equation
from polyir.frontends.jax.lower import JaxLoweringContext, register
from polyir.frontends.lowering.context import TensorValue, aff_value, const
from polyir.frontends.lowering.copies import clamped, plain
from polyir.frontends.lowering.views import strided_view
from polyir.ir.affine import Aff
from polyir.ir.nodes import BinOp, Compare, Const, Expr, Index, Load, Select
from polyir.ir.types import DType


def _start(ctx: JaxLoweringContext, start: Any, size: int, window: int) -> Expr | int:
    """A start index clamped into ``[0, size - window]``: a number when static."""
    if not isinstance(start, TensorValue):
        return min(max(int(start), 0), size - window)
    return clamped(ctx.cast(start.load([]), DType.I64), 0, size - window)


def _subscripts(starts: Sequence[Expr | int], idx: Sequence[Aff]) -> tuple[Index, ...]:
    return tuple(i + s if isinstance(s, int) else BinOp("+", s, aff_value(i))
                 for s, i in zip(starts, idx, strict=True))


@register("dynamic_slice")
def lower_dynamic_slice(ctx: JaxLoweringContext, eqn: Equation, x: TensorValue,
                        *starts: Any) -> TensorValue:
    sizes = [int(s) for s in eqn.params["slice_sizes"]]
    clamped_starts = [_start(ctx, s, x.shape[d], sizes[d]) for d, s in enumerate(starts)]
    static = [s for s in clamped_starts if isinstance(s, int)]
    if len(static) == len(clamped_starts):
        return strided_view(x, sizes, static, [1] * x.rank)
    out = ctx.result(eqn)
    table = plain(ctx, x)
    ctx.map_elements(out, lambda idx: Load(table.buffer, _subscripts(clamped_starts, idx)))
    return out


@register("dynamic_update_slice")
def lower_dynamic_update_slice(ctx: JaxLoweringContext, eqn: Equation, x: TensorValue,
                               update: TensorValue, *starts: Any) -> TensorValue:
    """A copy of ``x``, then ``update`` stored at the clamped starts."""
    out = ctx.result(eqn)
    ctx.copy(x, out)
    clamped_starts = [_start(ctx, s, x.shape[d], update.shape[d]) for d, s in enumerate(starts)]
    idx, loops = ctx.loops(update.shape, hint="i")
    ctx.emit(ctx.nest(loops, [ctx.store(out, _subscripts(clamped_starts, idx), update.load(idx))]))
    return out


def _gather_accepts(eqn: Equation) -> str | None:
    numbers = eqn.params["dimension_numbers"]
    if tuple(getattr(numbers, "operand_batching_dims", ())):
        return "gather with operand batching dimensions"
    if eqn.params["mode"].name not in ("CLIP", "PROMISE_IN_BOUNDS", "FILL_OR_DROP"):
        return f"gather mode {eqn.params['mode']}"
    return None


def _fill(value: Any, dtype: DType, numpy_dtype: np.dtype) -> Const:
    if value is not None:
        return const(value, dtype)
    if dtype.is_float:
        return const(float("nan"), dtype)
    if dtype is DType.BOOL:
        return const(True, dtype)
    return const(int(np.iinfo(numpy_dtype).min), dtype)


@register("gather", accepts=_gather_accepts)
def lower_gather(ctx: JaxLoweringContext, eqn: Equation, x: TensorValue,
                 indices: TensorValue) -> TensorValue:
    """XLA's gather (the index vector is the last dimension of ``indices``):
    output dimensions ``offset_dims`` walk the window, the others the batch of
    start vectors; operand dimension ``start_index_map[k]`` starts at
    ``indices[batch..., k]``."""
    out = ctx.result(eqn)
    numbers = eqn.params["dimension_numbers"]
    sizes = [int(s) for s in eqn.params["slice_sizes"]]
    offset_dims = [int(d) for d in numbers.offset_dims]
    collapsed = {int(d) for d in numbers.collapsed_slice_dims}
    start_map = [int(d) for d in numbers.start_index_map]
    fill = eqn.params["mode"].name == "FILL_OR_DROP"
    batch_dims = [p for p in range(out.rank) if p not in offset_dims]
    window_dims = [d for d in range(x.rank) if d not in collapsed]
    table = plain(ctx, x)

    def element(o: list[Aff]) -> Expr:
        batch = [o[p] for p in batch_dims]
        subscripts: list[Index] = []
        in_bounds: Expr | None = None
        for d in range(x.rank):
            offset = o[offset_dims[window_dims.index(d)]] if d in window_dims else Aff.const(0)
            if d not in start_map:
                subscripts.append(offset)
                continue
            start = ctx.cast(indices.load(batch + [Aff.const(start_map.index(d))]), DType.I64)
            high = x.shape[d] - sizes[d]
            if fill:
                ok = BinOp("and", Compare(">=", start, Const(0, DType.I64)),
                           Compare("<=", start, Const(high, DType.I64)))
                in_bounds = ok if in_bounds is None else BinOp("and", in_bounds, ok)
            subscripts.append(BinOp("+", clamped(start, 0, high), aff_value(offset)))
        value: Expr = Load(table.buffer, tuple(subscripts))
        if in_bounds is not None:
            value = Select(in_bounds, value, _fill(eqn.params.get("fill_value"), out.dtype,
                                                   eqn.outputs[0].dtype))
        return value
    ctx.map_elements(out, element)
    return out
