"""Contractions: :func:`contract_into` (any batch, free and contracted
dimensions, as ``dot_general`` has them) and :func:`matmul_into` (``[..., M, K]
@ [..., K, N]`` with an optional scaled bias, as ``addmm`` has it).

One reduction nest per product, the contracted loops innermost; f16/bf16
products accumulate in f32.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from polyir.frontends.lowering.context import (
    LoweringContext,
    TensorValue,
    accumulator_dtype,
    const,
)
from polyir.frontends.lowering.reduce import accumulate
from polyir.ir.affine import Aff
from polyir.ir.nodes import BinOp, Expr


def contract_into(ctx: LoweringContext, out: TensorValue, lhs: TensorValue, rhs: TensorValue, *,
                  lhs_contract: Sequence[int], rhs_contract: Sequence[int],
                  lhs_batch: Sequence[int] = (), rhs_batch: Sequence[int] = (),
                  init: Callable[[list[Aff]], Expr] | None = None,
                  finish: Callable[[Expr], Expr] | None = None) -> None:
    """``out[b..., l..., r...] = init + sum_k lhs[b, l, k] * rhs[b, k, r]``.

    ``out``'s dimensions are the batch dimensions (in ``lhs_batch`` order), then
    ``lhs``'s free dimensions, then ``rhs``'s, each in their own order (the
    ``dot_general`` convention). Operands are cast to the accumulator type of
    ``out``'s type; ``init`` (default 0) and ``finish`` are in that type.
    """
    acc = accumulator_dtype(out.dtype)
    lhs_free = [d for d in range(lhs.rank) if d not in lhs_contract and d not in lhs_batch]
    rhs_free = [d for d in range(rhs.rank) if d not in rhs_contract and d not in rhs_batch]
    batch = len(lhs_batch)

    def operand_index(rank: int, batch_dims: Sequence[int], free: Sequence[int], free_at: int,
                      contract: Sequence[int], o: list[Aff], r: list[Aff]) -> list[Aff]:
        index = [Aff.const(0)] * rank
        for k, d in enumerate(batch_dims):
            index[d] = o[k]
        for k, d in enumerate(free):
            index[d] = o[free_at + k]
        for k, d in enumerate(contract):
            index[d] = r[k]
        return index

    def element(o: list[Aff], r: list[Aff]) -> Expr:
        left = operand_index(lhs.rank, lhs_batch, lhs_free, batch, lhs_contract, o, r)
        right = operand_index(rhs.rank, rhs_batch, rhs_free, batch + len(lhs_free), rhs_contract, o, r)
        return BinOp("*", ctx.cast(lhs.load(left), acc), ctx.cast(rhs.load(right), acc))

    accumulate(ctx, out, [lhs.shape[d] for d in lhs_contract], acc_dtype=acc,
               init=init or (lambda o: const(0, acc)), element=element, finish=finish)


def matmul_into(ctx: LoweringContext, out: TensorValue, a: TensorValue, b: TensorValue, *,
                bias: TensorValue | None = None, alpha: Any = 1, beta: Any = 1) -> None:
    """``out = beta * bias + alpha * (a @ b)`` with batch dimensions in front.

    ``a`` is ``[..., M, K]``, ``b`` is ``[..., K, N]`` (same batch dims as
    ``out``); ``bias`` broadcasts to ``out``.
    """
    acc = accumulator_dtype(out.dtype)
    batch = list(range(a.rank - 2))
    dims: dict[str, Any] = {"lhs_contract": [a.rank - 1], "rhs_contract": [b.rank - 2],
                            "lhs_batch": batch, "rhs_batch": batch}

    def init(o: list[Aff]) -> Expr:
        if bias is None or beta == 0 or alpha != 1:
            return const(0, acc)
        value = ctx.operand(bias, o, out.shape, acc)
        return value if beta == 1 else BinOp("*", const(beta, acc), value)

    if alpha != 1:
        def finish(total: Expr) -> Expr:
            return BinOp("*", const(alpha, acc), total)
        contract_into(ctx, out, a, b, init=init, finish=finish, **dims)
        if bias is not None and beta != 0:
            ctx.map_elements(out, lambda o: BinOp(
                "+", ctx.cast(out.load(o), acc),
                BinOp("*", const(beta, acc), ctx.operand(bias, o, out.shape, acc))))
        return
    contract_into(ctx, out, a, b, init=init, **dims)
