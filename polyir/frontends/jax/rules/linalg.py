"""``dot_general`` (batch and contracting dimensions anywhere) and
``conv_general_dilated`` (any layout, padding, strides, kernel and input
dilation, feature groups), built by :mod:`polyir.frontends.lowering.contract`
and :mod:`polyir.frontends.lowering.conv` as the ATen products are.

A convolution's layouts are views: the operands and the result are seen
channels-first (``permute_view`` by the dimension numbers), so one nest
builder serves NHWC and NCHW alike.
"""
from __future__ import annotations

from polyir.frontends.jax.graph import Equation
from polyir.frontends.jax.lower import JaxLoweringContext, polyir_dtype, register
from polyir.frontends.lowering.context import TensorValue
from polyir.frontends.lowering.contract import contract_into
from polyir.frontends.lowering.conv import convolution_into
from polyir.frontends.lowering.views import permute_view
from polyir.ir.types import DType


def _no_bool(eqn: Equation) -> str | None:
    if any(polyir_dtype(v) is DType.BOOL for v in [*eqn.inputs, *eqn.outputs]):
        return f"{eqn.name} on bool"
    return None


@register("dot_general", accepts=_no_bool)
def lower_dot_general(ctx: JaxLoweringContext, eqn: Equation, lhs: TensorValue,
                      rhs: TensorValue) -> TensorValue:
    """``out[batch..., lhs free..., rhs free...]``; products accumulate in the
    accumulator type of the result (``preferred_element_type`` included)."""
    out = ctx.result(eqn)
    (lhs_contract, rhs_contract), (lhs_batch, rhs_batch) = eqn.params["dimension_numbers"]
    contract_into(ctx, out, lhs, rhs, lhs_contract=[int(d) for d in lhs_contract],
                  rhs_contract=[int(d) for d in rhs_contract],
                  lhs_batch=[int(d) for d in lhs_batch], rhs_batch=[int(d) for d in rhs_batch])
    return out


def _conv_accepts(eqn: Equation) -> str | None:
    if int(eqn.params.get("batch_group_count", 1)) != 1:
        return "batch_group_count other than 1"
    return _no_bool(eqn)


@register("conv_general_dilated", accepts=_conv_accepts)
def lower_conv(ctx: JaxLoweringContext, eqn: Equation, x: TensorValue, w: TensorValue) -> TensorValue:
    out = ctx.result(eqn)
    numbers = eqn.params["dimension_numbers"]
    lhs_spec, rhs_spec, out_spec = numbers.lhs_spec, numbers.rhs_spec, numbers.out_spec
    convolution_into(ctx, permute_view(out, list(out_spec)), permute_view(x, list(lhs_spec)),
                     permute_view(w, list(rhs_spec)), None,
                     stride=[int(s) for s in eqn.params["window_strides"]],
                     padding=[int(p[0]) for p in eqn.params["padding"]],
                     dilation=[int(d) for d in eqn.params["rhs_dilation"]],
                     groups=int(eqn.params["feature_group_count"]),
                     input_dilation=[int(d) for d in eqn.params["lhs_dilation"]])
    return out
