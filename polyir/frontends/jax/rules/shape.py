"""Shape primitives: ``broadcast_in_dim``, ``reshape``, ``squeeze``,
``transpose``, ``rev``, ``slice``, ``split`` as index maps (no code);
``concatenate``, ``pad`` and ``iota`` as nests.

The views are :mod:`polyir.frontends.lowering.views`, the copies
:mod:`polyir.frontends.lowering.copies`, as in the ATen table.
"""
from __future__ import annotations

from typing import Any

from polyir.frontends.jax.graph import Equation
from polyir.frontends.jax.lower import JaxLoweringContext, register
from polyir.frontends.lowering.context import TensorValue, aff_value
from polyir.frontends.lowering.copies import concatenate_into, pad_into
from polyir.frontends.lowering.views import (
    broadcast_view,
    flip_view,
    permute_view,
    reshape_view,
    split_views,
    strided_view,
)
from polyir.ir.nodes import Expr


def _out_shape(eqn: Equation, index: int = 0) -> tuple[int, ...]:
    return eqn.outputs[index].shape


def _filled(ctx: JaxLoweringContext, eqn: Equation, value: Any) -> TensorValue:
    out = ctx.result(eqn)
    ctx.map_operands(out, [value], out.dtype, lambda a: a)
    return out


def _static_shape(eqn: Equation) -> str | None:
    if len(eqn.inputs) > 1:
        return "dynamic shape operands"
    return None


@register("broadcast_in_dim", accepts=_static_shape)
def lower_broadcast_in_dim(ctx: JaxLoweringContext, eqn: Equation, x: Any, *dynamic: Any) -> TensorValue:
    if not isinstance(x, TensorValue):  # a broadcast literal: one fill nest
        return _filled(ctx, eqn, x)
    return broadcast_view(x, _out_shape(eqn), eqn.params["broadcast_dimensions"])


def _plain_reshape(eqn: Equation) -> str | None:
    if eqn.params.get("dimensions") is not None:
        return "reshape with a dimension order"
    return _static_shape(eqn)


@register("reshape", accepts=_plain_reshape)
def lower_reshape(ctx: JaxLoweringContext, eqn: Equation, x: Any, *dynamic: Any) -> TensorValue:
    if not isinstance(x, TensorValue):
        return _filled(ctx, eqn, x)
    return reshape_view(x, _out_shape(eqn))


@register("squeeze")
def lower_squeeze(ctx: JaxLoweringContext, eqn: Equation, x: TensorValue) -> TensorValue:
    return reshape_view(x, _out_shape(eqn))


@register("transpose")
def lower_transpose(ctx: JaxLoweringContext, eqn: Equation, x: TensorValue) -> TensorValue:
    return permute_view(x, [int(d) for d in eqn.params["permutation"]])


@register("rev")
def lower_rev(ctx: JaxLoweringContext, eqn: Equation, x: TensorValue) -> TensorValue:
    return flip_view(x, [int(d) for d in eqn.params["dimensions"]])


@register("slice")
def lower_slice(ctx: JaxLoweringContext, eqn: Equation, x: TensorValue) -> TensorValue:
    strides = eqn.params.get("strides") or [1] * x.rank
    return strided_view(x, _out_shape(eqn), [int(s) for s in eqn.params["start_indices"]],
                        [int(s) for s in strides])


@register("split")
def lower_split(ctx: JaxLoweringContext, eqn: Equation, x: TensorValue) -> tuple[TensorValue, ...]:
    return split_views(x, [int(s) for s in eqn.params["sizes"]], int(eqn.params["axis"]))


@register("concatenate")
def lower_concatenate(ctx: JaxLoweringContext, eqn: Equation, *parts: Any) -> TensorValue:
    out = ctx.result(eqn)
    concatenate_into(ctx, out, list(parts), int(eqn.params["dimension"]))
    return out


@register("pad")
def lower_pad(ctx: JaxLoweringContext, eqn: Equation, x: TensorValue, value: Any) -> TensorValue:
    """``padding_config``: ``(low, high, interior)`` per dimension; negative
    low/high crop."""
    out = ctx.result(eqn)
    config = eqn.params["padding_config"]
    pad_into(ctx, out, x, [int(c[0]) for c in config], value, [int(c[2]) for c in config])
    return out


def _static_iota(eqn: Equation) -> str | None:
    return "dynamic shape operands" if eqn.inputs else None


@register("iota", accepts=_static_iota)
def lower_iota(ctx: JaxLoweringContext, eqn: Equation) -> TensorValue:
    out = ctx.result(eqn)
    dimension = int(eqn.params["dimension"])

    def element(idx: list) -> Expr:
        return ctx.cast(aff_value(idx[dimension]), out.dtype)
    ctx.map_elements(out, element)
    return out
