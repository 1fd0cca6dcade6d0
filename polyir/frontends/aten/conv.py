"""Convolution (``aten.convolution``, any number of spatial dimensions):
stride, padding, dilation, groups; also transposed (output padding from the
result's shape). The nests are built by :mod:`polyir.frontends.lowering.conv`.
"""
from __future__ import annotations

from collections.abc import Sequence

import torch

from polyir.frontends.aten.context import LoweringContext, TensorValue
from polyir.frontends.aten.registry import register
from polyir.frontends.lowering.conv import convolution_into, transposed_convolution_into

aten = torch.ops.aten


def _per_dim(values: Sequence[int], count: int) -> list[int]:
    values = list(values)
    return values * count if len(values) == 1 else values


@register(aten.convolution)
def lower_convolution(ctx: LoweringContext, node: torch.fx.Node, x: TensorValue, w: TensorValue,
                      bias: TensorValue | None, stride: Sequence[int], padding: Sequence[int],
                      dilation: Sequence[int], transposed: bool, output_padding: Sequence[int],
                      groups: int) -> TensorValue:
    out = ctx.result(node)
    spatial = x.rank - 2
    stride, padding = _per_dim(stride, spatial), _per_dim(padding, spatial)
    dilation = _per_dim(dilation, spatial)
    if transposed:
        transposed_convolution_into(ctx, out, x, w, bias, stride, padding, dilation, groups)
    else:
        convolution_into(ctx, out, x, w, bias, stride, padding, dilation, groups)
    return out
