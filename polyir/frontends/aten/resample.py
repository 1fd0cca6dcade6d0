"""Resampling: bilinear upsampling (``upsample_bilinear2d``, both overloads,
with and without ``align_corners``). Nearest upsampling arrives as
``index.Tensor`` with computed indices (see ``embedding.py``).

Each output element reads four input elements at computed positions: the
source coordinate is a float value expression and its integer part a gathered
subscript, as in torch's CPU kernel::

    src = max((o + 0.5) * scale - 0.5, 0)      (align_corners=False)
    i0 = int(src); i1 = i0 + (i0 < in - 1); w1 = src - i0; w0 = 1 - w1
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from polyir.frontends.aten.context import (
    LoweringContext,
    TensorValue,
    accumulator_dtype,
    aff_value,
    const,
)
from polyir.frontends.aten.registry import register
from polyir.frontends.lowering.copies import plain
from polyir.ir.affine import Aff
from polyir.ir.nodes import BinOp, Cast, Compare, Expr, Load, Select
from polyir.ir.types import DType

aten = torch.ops.aten


def _scale(size_in: int, size_out: int, align_corners: bool, given: float | None) -> float:
    """torch's ``area_pixel_compute_scale``."""
    if align_corners:
        return (size_in - 1) / (size_out - 1) if size_out > 1 else 0.0
    if given is not None and given > 0:
        return 1.0 / given
    return size_in / size_out


def _taps(position: Aff, size_in: int, scale: float, align_corners: bool,
          dtype: DType) -> tuple[Expr, Expr, Expr, Expr]:
    """``(i0, i1, w0, w1)`` for output ``position`` along one dimension."""
    where = Cast(dtype, aff_value(position))
    if align_corners:
        source: Expr = BinOp("*", where, const(scale, dtype))
    else:
        shifted = BinOp("-", BinOp("*", BinOp("+", where, const(0.5, dtype)), const(scale, dtype)),
                        const(0.5, dtype))
        source = Select(Compare("<", shifted, const(0, dtype)), const(0, dtype), shifted)
    first = Cast(DType.I64, source)  # source >= 0: truncation is floor
    second = Select(Compare("<", first, const(size_in - 1, DType.I64)),
                    BinOp("+", first, const(1, DType.I64)), first)
    weight1 = BinOp("-", source, Cast(dtype, first))
    return first, second, BinOp("-", const(1, dtype), weight1), weight1


@register(aten.upsample_bilinear2d)
def lower_upsample_bilinear(ctx: LoweringContext, node: torch.fx.Node, x: TensorValue,
                            output_size: Sequence[int] | None, align_corners: bool,
                            *scales: Any) -> TensorValue:
    out = ctx.result(node)
    x = plain(ctx, x)
    acc = accumulator_dtype(out.dtype)
    if len(scales) == 1:  # .vec(input, output_size, align_corners, scale_factors)
        given = list(scales[0]) if scales[0] is not None else [None, None]
    else:
        given = list(scales) + [None] * (2 - len(scales))
    # the interpolation weights depend on the sizes: they are pinned (a guard)
    sizes_in, sizes_out = [int(s) for s in x.shape[-2:]], [int(s) for s in out.shape[-2:]]
    factors = [_scale(sizes_in[d], sizes_out[d], align_corners, given[d]) for d in range(2)]

    def element(idx: list) -> Expr:
        lead = list(idx[:-2])
        h0, h1, a0, a1 = _taps(idx[-2], sizes_in[0], factors[0], align_corners, acc)
        w0, w1, b0, b1 = _taps(idx[-1], sizes_in[1], factors[1], align_corners, acc)

        def at(h: Expr, w: Expr) -> Expr:
            return ctx.cast(Load(x.buffer, tuple(lead) + (h, w)), acc)
        top = BinOp("+", BinOp("*", b0, at(h0, w0)), BinOp("*", b1, at(h0, w1)))
        bottom = BinOp("+", BinOp("*", b0, at(h1, w0)), BinOp("*", b1, at(h1, w1)))
        return BinOp("+", BinOp("*", a0, top), BinOp("*", a1, bottom))
    ctx.map_elements(out, element)
    return out

