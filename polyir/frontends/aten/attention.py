"""Scaled dot-product attention, decomposed into nests (no dropout)::

    scores[b, h, i, j] = scale * sum_e q[b, h, i, e] * k[b, h, j, e] (+ mask)
                         (causal: only where j <= i, else -inf; an affine if)
    probs = softmax over j (row max, row sum of exp, normalise; 0 on a row the
            mask empties, as eager)
    out[b, h, i, d] = sum_j probs[b, h, i, j] * v[b, h, j, d]

The CPU flash-attention operator that torch picks for
``F.scaled_dot_product_attention`` is lowered directly (the capture keeps it
out of the decomposition table), so the causal mask is a loop guard rather
than a materialised boolean tensor.
"""
from __future__ import annotations

import math
from typing import Any

import torch

from polyir.frontends.aten.context import LoweringContext, TensorValue, accumulator_dtype, const
from polyir.frontends.aten.norm import row_max_and_sum, used_outputs
from polyir.frontends.aten.registry import register
from polyir.frontends.lowering.contract import matmul_into
from polyir.ir.affine import Aff, Constraint
from polyir.ir.nodes import BinOp, Call, Compare, Expr, If, Node, Select
from polyir.ir.types import DType

aten = torch.ops.aten


def attention(ctx: LoweringContext, out: TensorValue, q: TensorValue, k: TensorValue,
              v: TensorValue, *, mask: TensorValue | None, causal: bool,
              scale: float | None) -> tuple[TensorValue, TensorValue, TensorValue]:
    """Write ``softmax(q k^T * scale + mask) v`` to ``out``; returns the
    probabilities and the row max and row sum (for ``logsumexp``)."""
    acc = accumulator_dtype(out.dtype)
    *batch, length, depth = q.shape
    source_length = k.shape[-2]
    scale = 1.0 / math.sqrt(depth) if scale is None else scale
    scores = ctx.temp("scores", list(batch) + [length, source_length], acc)

    o, o_loops = ctx.loops(scores.shape, hint="i")
    r, r_loops = ctx.loops([depth], hint="r")
    b, i, j = o[:-2], o[-2], o[-1]
    product = BinOp("*", ctx.cast(q.load(b + [i, r[0]]), acc), ctx.cast(k.load(b + [j, r[0]]), acc))
    scaled: Expr = BinOp("*", scores.load(o), const(scale, acc))
    if mask is not None:
        masked = ctx.operand(mask, o, scores.shape, acc if mask.dtype is not DType.BOOL else DType.BOOL)
        if mask.dtype is DType.BOOL:
            scaled = Select(masked, scaled, const(float("-inf"), acc))
        else:
            scaled = BinOp("+", scaled, masked)
    body: list[Node] = [ctx.assign(scores, o, const(0, acc))]
    body += ctx.nest(r_loops, [ctx.assign(scores, o, BinOp("+", scores.load(o), product))])
    body.append(ctx.assign(scores, o, scaled))
    if causal:
        body = [If((Constraint(j, "<=", i),), tuple(body),
                   (ctx.assign(scores, o, const(float("-inf"), acc)),))]
    ctx.emit(ctx.nest(o_loops, body))

    row_max, row_sum = row_max_and_sum(ctx, scores, scores.rank - 1, acc)
    probs = ctx.temp("probs", scores.shape, acc)

    def normalised(idx: list) -> Expr:
        # A row that the mask empties (max -inf) gets probabilities 0, as eager's
        # kernels give (not the NaN of softmax over -inf).
        row = idx[:-1] + [Aff.const(0)]
        return Select(Compare("==", row_max.load(row), const(float("-inf"), acc)), const(0, acc),
                      BinOp("/", Call("exp", (BinOp("-", scores.load(idx), row_max.load(row)),)),
                            row_sum.load(row)))
    ctx.map_elements(probs, normalised)
    matmul_into(ctx, out, probs, v)
    return probs, row_max, row_sum


def _accepts(node: torch.fx.Node) -> str | None:
    dropout = node.kwargs.get("dropout_p", node.args[3] if len(node.args) > 3 else 0.0)
    if dropout:
        return "attention dropout"
    return None


@register(aten._scaled_dot_product_flash_attention_for_cpu, accepts=_accepts)
def lower_flash_attention_cpu(ctx: LoweringContext, node: torch.fx.Node, q: TensorValue,
                              k: TensorValue, v: TensorValue, dropout_p: float = 0.0,
                              is_causal: bool = False, *, attn_mask: TensorValue | None = None,
                              scale: float | None = None) -> tuple[TensorValue, TensorValue]:
    out = ctx.result(node, 0)
    _, row_max, row_sum = attention(ctx, out, q, k, v, mask=attn_mask, causal=is_causal, scale=scale)
    if 1 not in used_outputs(node):
        return out, out
    logsumexp = ctx.result(node, 1)
    ctx.map_elements(logsumexp, lambda idx: BinOp(
        "+", row_max.load(list(idx) + [Aff.const(0)]),
        Call("log", (row_sum.load(list(idx) + [Aff.const(0)]),))))
    return out, logsumexp


# ``F.scaled_dot_product_attention`` is a composite operator that make_fx
# always decomposes; the capture's decomposition table maps it to this opaque
# operator instead (see :func:`sdpa_as_attention`), so that it reaches the
# lowering as one node. Its eager implementation is torch's own.
@torch.library.custom_op("polyir::attention", mutates_args=())
def attention_op(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                 attn_mask: torch.Tensor | None, is_causal: bool,
                 scale: float | None) -> torch.Tensor:
    """Scaled dot-product attention without dropout (eager reference)."""
    return torch.nn.functional.scaled_dot_product_attention(
        q, k, v, attn_mask=attn_mask, is_causal=is_causal, scale=scale).contiguous()


@attention_op.register_fake
def _attention_shape(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                     attn_mask: torch.Tensor | None, is_causal: bool,
                     scale: float | None) -> torch.Tensor:
    return q.new_empty(tuple(q.shape[:-1]) + (v.shape[-1],))


def sdpa_as_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                      attn_mask: torch.Tensor | None = None, dropout_p: float = 0.0,
                      is_causal: bool = False, scale: float | None = None,
                      enable_gqa: bool = False) -> Any:
    """Decomposition of ``aten.scaled_dot_product_attention`` into
    ``polyir.attention`` when it fits (no dropout, no GQA, equal batch dims);
    ``NotImplemented`` leaves torch's own decomposition to run."""
    if dropout_p or enable_gqa or q.dim() < 2 or not (q.shape[:-2] == k.shape[:-2] == v.shape[:-2]):
        return NotImplemented
    return torch.ops.polyir.attention.default(q, k, v, attn_mask, is_causal, scale)


@register(torch.ops.polyir.attention)
def lower_attention(ctx: LoweringContext, node: torch.fx.Node, q: TensorValue, k: TensorValue,
                    v: TensorValue, attn_mask: TensorValue | None, is_causal: bool,
                    scale: float | None) -> TensorValue:
    out = ctx.result(node)
    attention(ctx, out, q, k, v, mask=attn_mask, causal=is_causal, scale=scale)
    return out
