"""Matrix products: ``mm``, ``bmm``, ``addmm``, ``baddbmm``, ``dot``.

``C[..., i, j] = init + sum_k A[..., i, k] * B[..., k, j]`` as one nest per
product (the reduction loop innermost; :mod:`polyir.frontends.lowering.contract`
builds it); f16/bf16 products accumulate in f32.
(``linear`` and ``matmul`` reach here through their core ATen decompositions:
``permute`` + ``addmm``/``mm``, with ``view``/``expand`` for batches.)
"""
from __future__ import annotations

from typing import Any

import torch

from polyir.frontends.aten.context import LoweringContext, TensorValue
from polyir.frontends.aten.registry import register
from polyir.frontends.lowering.contract import contract_into, matmul_into

aten = torch.ops.aten


@register(aten.mm, aten.bmm)
def lower_mm(ctx: LoweringContext, node: torch.fx.Node, a: TensorValue, b: TensorValue) -> TensorValue:
    out = ctx.result(node)
    matmul_into(ctx, out, a, b)
    return out


@register(aten.addmm, aten.baddbmm)
def lower_addmm(ctx: LoweringContext, node: torch.fx.Node, bias: TensorValue, a: TensorValue,
                b: TensorValue, beta: Any = 1, alpha: Any = 1) -> TensorValue:
    out = ctx.result(node)
    matmul_into(ctx, out, a, b, bias=bias, alpha=node.kwargs.get("alpha", alpha),
                beta=node.kwargs.get("beta", beta))
    return out


@register(aten.dot)
def lower_dot(ctx: LoweringContext, node: torch.fx.Node, a: TensorValue, b: TensorValue) -> TensorValue:
    out = ctx.result(node)
    contract_into(ctx, out, a, b, lhs_contract=[0], rhs_contract=[0])
    return out


__all__ = ["matmul_into"]
