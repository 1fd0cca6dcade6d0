"""Matrix products: ``mm``, ``bmm``, ``addmm``, ``baddbmm``, ``dot``.

``C[..., i, j] = init + sum_k A[..., i, k] * B[..., k, j]`` as one nest per
product (the reduction loop innermost); f16/bf16 products accumulate in f32.
(``linear`` and ``matmul`` reach here through their core ATen decompositions:
``permute`` + ``addmm``/``mm``, with ``view``/``expand`` for batches.)
"""
from __future__ import annotations

from typing import Any

import torch

from polyir.frontends.aten.context import LoweringContext, TensorValue, accumulator_dtype, const
from polyir.frontends.aten.reduction import accumulate
from polyir.frontends.aten.registry import register
from polyir.ir.affine import Aff
from polyir.ir.nodes import BinOp, Expr

aten = torch.ops.aten


def matmul_into(ctx: LoweringContext, out: TensorValue, a: TensorValue, b: TensorValue, *,
                bias: TensorValue | None = None, alpha: Any = 1, beta: Any = 1) -> None:
    """``out = beta * bias + alpha * (a @ b)`` with batch dimensions in front.

    ``a`` is ``[..., M, K]``, ``b`` is ``[..., K, N]`` (same batch dims as
    ``out``); ``bias`` broadcasts to ``out``.
    """
    acc = accumulator_dtype(out.dtype)
    k_extent = a.shape[-1]

    def element(o: list[Aff], r: list[Aff]) -> Expr:
        batch = o[:-2]
        return BinOp("*", ctx.cast(a.load(batch + [o[-2], r[0]]), acc),
                     ctx.cast(b.load(batch + [r[0], o[-1]]), acc))

    def init(o: list[Aff]) -> Expr:
        if bias is None or beta == 0 or alpha != 1:
            return const(0, acc)
        value = ctx.operand(bias, o, out.shape, acc)
        return value if beta == 1 else BinOp("*", const(beta, acc), value)

    if alpha != 1:
        def finish(total: Expr) -> Expr:
            return BinOp("*", const(alpha, acc), total)
        accumulate(ctx, out, [k_extent], acc_dtype=acc, init=init, element=element, finish=finish)
        if bias is not None and beta != 0:
            ctx.map_elements(out, lambda o: BinOp(
                "+", ctx.cast(out.load(o), acc),
                BinOp("*", const(beta, acc), ctx.operand(bias, o, out.shape, acc))))
        return
    accumulate(ctx, out, [k_extent], acc_dtype=acc, init=init, element=element)


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
    acc = accumulator_dtype(out.dtype)
    accumulate(ctx, out, [a.shape[0]], acc_dtype=acc, init=lambda o: const(0, acc),
               element=lambda o, r: BinOp("*", ctx.cast(a.load(r), acc), ctx.cast(b.load(r), acc)))
    return out
