"""Reduction nests: :func:`accumulate`, the shape every reduction-like rule
(sums, matmul, convolution, pooling, norms) is built from::

    for <output indices> {
      S0: acc[o] = init
      for <reduction indices> {
        [if (<guard>)] S1: acc[o] = combine(acc[o], element)
      }
      [S2: out[o] = finish(acc[o])]        # cast from the accumulator type
    }

and on top of it reductions over dimensions (:func:`over_dims`), the mean
(:func:`variance_pieces`), index reductions (:func:`index_reduction`: argmax
and argmin) and running scans (:func:`scan_into`: cumsum and friends).
Sums of f16/bf16 values accumulate in an f32 local buffer.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence

from polyir.frontends.lowering.context import (
    LoweringContext,
    TensorValue,
    aff_value,
    const,
    extreme,
    normalize_dim,
)
from polyir.frontends.lowering.sizes import Size, size_product
from polyir.ir.affine import Aff, Constraint
from polyir.ir.nodes import BinOp, Compare, Expr, For, Node, Select
from polyir.ir.types import DType

Combine = Callable[[Expr, Expr], Expr]


def add(acc: Expr, value: Expr) -> Expr:
    return BinOp("+", acc, value)


def accumulate(ctx: LoweringContext, out: TensorValue, reduce_shape: Sequence[Size], *,
               acc_dtype: DType, init: Callable[[list[Aff]], Expr],
               element: Callable[[list[Aff], list[Aff]], Expr], combine: Combine = add,
               finish: Callable[[Expr], Expr] | None = None,
               guard: Callable[[list[Aff], list[Aff]], list[Constraint]] | None = None,
               accumulator: TensorValue | None = None) -> None:
    """Emit one reduction nest writing every element of ``out``.

    ``init(o)`` and ``element(o, r)`` build expressions from the output index
    ``o`` and the reduction index ``r`` (over ``reduce_shape``). The running
    value lives in ``out`` itself when ``acc_dtype`` is ``out``'s type, else
    in ``accumulator`` (or a new local of ``out``'s shape).
    """
    out_idx, out_loops = ctx.loops(out.shape, hint="i")
    red_idx, red_loops = ctx.loops(reduce_shape, hint="r")
    acc = out
    if acc_dtype is not out.dtype:
        acc = accumulator or ctx.temp(f"{out.buffer}_acc", out.shape, acc_dtype)
    body: list[Node] = [ctx.assign(acc, out_idx, init(out_idx))]
    update = ctx.assign(acc, out_idx, combine(acc.load(out_idx),
                                              ctx.cast(element(out_idx, red_idx), acc_dtype)))
    conditions = guard(out_idx, red_idx) if guard else []
    body += ctx.nest(red_loops, ctx.guard(conditions, [update]))
    if acc is not out or finish is not None:
        value = acc.load(out_idx)
        body.append(ctx.assign(out, out_idx, finish(value) if finish else value))
    ctx.emit(ctx.nest(out_loops, body))


# ------------------------------------------------------- reductions over dims
def reduced_dims(rank: int, dims: object) -> list[int]:
    """Normalised reduction dimensions (``None`` or ``[]``: all of them)."""
    if dims is None or (isinstance(dims, (list, tuple)) and len(dims) == 0):
        return list(range(rank))
    if isinstance(dims, int):
        dims = [dims]
    assert isinstance(dims, (list, tuple))
    return sorted({normalize_dim(d, rank) for d in dims})


def keepdim_view(out: TensorValue, rank: int, dims: Sequence[int]) -> TensorValue:
    """``out`` seen with the reduced dimensions kept as size 1."""
    if out.rank == rank:
        return out
    kept = [d for d in range(rank) if d not in dims]
    shape = [1 if d in dims else out.shape[kept.index(d)] for d in range(rank)]
    return out.view(shape, lambda idx: tuple(idx[d] for d in kept))


def over_dims(ctx: LoweringContext, out: TensorValue, x: TensorValue, dims: Sequence[int], *,
              acc_dtype: DType, init: Expr, combine: Combine,
              element: Callable[[Expr, list[Aff]], Expr] | None = None,
              finish: Callable[[Expr], Expr] | None = None) -> None:
    """Reduce ``x`` over ``dims`` into ``out`` (with or without kept dims).

    ``element(value, full_index)`` may transform each loaded element."""
    keep = keepdim_view(out, x.rank, dims)
    reduce_shape = [x.shape[d] for d in dims]

    def full_index(o: list[Aff], r: list[Aff]) -> list[Aff]:
        idx = list(o)
        for d, ri in zip(dims, r, strict=True):
            idx[d] = ri
        return idx

    def load(o: list[Aff], r: list[Aff]) -> Expr:
        idx = full_index(o, r)
        value = ctx.cast(x.load(idx), acc_dtype)
        return element(value, idx) if element else value
    accumulate(ctx, keep, reduce_shape, acc_dtype=acc_dtype, init=lambda o: init,
               element=load, combine=combine, finish=finish)


def count(x: TensorValue, dims: Sequence[int]) -> Size:
    """The number of elements of ``x`` each reduction over ``dims`` combines
    (an int, or a symbolic size with dynamic shapes)."""
    return size_product([x.shape[d] for d in dims])


def square(e: Expr) -> Expr:
    return BinOp("*", e, e)


def kept_index(idx: Sequence[Aff], dims: Sequence[int]) -> list[Aff]:
    """``idx`` with the reduced ``dims`` set to 0 (to read kept-dims statistics)."""
    return [Aff.const(0) if d in dims else i for d, i in enumerate(idx)]


def variance_pieces(ctx: LoweringContext, x: TensorValue, dims: Sequence[int],
                    acc: DType) -> TensorValue:
    """A local holding the mean of ``x`` over ``dims`` (kept dims), in ``acc``."""
    shape = [1 if d in dims else s for d, s in enumerate(x.shape)]
    mean = ctx.temp(f"{x.buffer}_mean", shape, acc)
    total = ctx.size_value(count(x, dims), acc)
    over_dims(ctx, mean, x, dims, acc_dtype=acc, init=const(0, acc), combine=add,
              finish=lambda a: BinOp("/", a, total))
    return mean


# ------------------------------------------------------------ index reductions
def index_reduction(ctx: LoweringContext, x: TensorValue, dim: int | None, largest: bool,
                    values: TensorValue | None, indices: TensorValue) -> None:
    """The first position of the largest (smallest) element of ``x`` along
    ``dim`` into ``indices`` (any integer type), and optionally the element
    itself into ``values``; ``indices``/``values`` have ``dim`` dropped or kept
    as size 1. ``dim=None``: over the flattened tensor (``indices`` of one
    element). NaN counts as the extreme, and its first position wins, as torch
    and XLA agree."""
    if dim is None:  # over the flattened tensor
        from polyir.frontends.lowering.views import reshape_map
        numel = count(x, range(x.rank))
        x = x.view((numel,), reshape_map(x.shape, (numel,), ctx.symbols))
        dims = [0]
    else:
        dims = [normalize_dim(dim, x.rank)]
    dtype = x.dtype if x.dtype is not DType.BOOL else DType.I64
    best = values if values is not None and values.dtype is dtype else None
    if best is None:
        shape = [1 if d in dims else s for d, s in enumerate(x.shape)]
        best = ctx.temp(f"{indices.buffer}_best", shape, dtype)
    best = keepdim_view(best, x.rank, dims)
    index_out = keepdim_view(indices, x.rank, dims)
    out_idx, out_loops = ctx.loops(best.shape, hint="i")
    red_idx, red_loops = ctx.loops([x.shape[dims[0]]], hint="r")
    full = list(out_idx)
    full[dims[0]] = red_idx[0]
    value = ctx.cast(x.load(full), dtype)
    better: Expr = Compare(">" if largest else "<", value, best.load(out_idx))
    better = BinOp("or", better, BinOp("and", Compare("!=", value, value),
                                       Compare("==", best.load(out_idx), best.load(out_idx))))
    body: list[Node] = [ctx.assign(best, out_idx, extreme(dtype, largest)),
                        ctx.assign(index_out, out_idx, const(0, indices.dtype))]
    position = ctx.cast(aff_value(red_idx[0]), indices.dtype)
    body += ctx.nest(red_loops, [
        ctx.assign(index_out, out_idx, Select(better, position, index_out.load(out_idx))),
        ctx.assign(best, out_idx, Select(better, value, best.load(out_idx)))])
    ctx.emit(ctx.nest(out_loops, body))
    if values is not None and values.buffer != best.buffer:
        ctx.copy(best, keepdim_view(values, x.rank, dims))


# ----------------------------------------------------------------------- scans
def scan_into(ctx: LoweringContext, out: TensorValue, x: TensorValue, dim: int, combine: Combine,
              acc_dtype: DType, reverse: bool = False) -> None:
    """A running reduction along ``dim``: the loop-carried recurrence
    ``acc[j] = combine(acc[j - 1], x[j])`` (``acc[j + 1]`` when ``reverse``),
    held in ``acc_dtype`` (a local when it is not ``out``'s type)."""
    if x.rank == 0:
        ctx.copy(x, out)
        return
    dim = normalize_dim(dim, x.rank)
    extent = out.shape[dim]
    if extent == 0:
        return
    acc = out if acc_dtype is out.dtype else ctx.temp(f"{out.buffer}_acc", out.shape, acc_dtype)
    outer_shape = [1 if d == dim else s for d, s in enumerate(out.shape)]
    idx, loops = ctx.loops(outer_shape, hint="i")
    var = ctx.fresh("j")

    def at(position: Aff) -> list[Aff]:
        index = list(idx)
        index[dim] = position
        return index
    size = ctx.size_aff(extent)
    # reverse: j runs 1..extent-1 over position extent-1-j, reading position extent-j.
    here = at(size - 1 - Aff.var(var)) if reverse else at(Aff.var(var))
    before = at(size - Aff.var(var)) if reverse else at(Aff.var(var) - 1)
    first = at(size - 1 if reverse else Aff.const(0))
    body: list[Node] = [ctx.assign(acc, first, ctx.cast(x.load(first), acc_dtype))]
    step = ctx.assign(acc, here, combine(acc.load(before), ctx.cast(x.load(here), acc_dtype)))
    body.append(For(var, (Aff.const(1),), (size,), (step,)))
    ctx.emit(ctx.nest(loops, body))
    if acc is not out:
        ctx.copy(acc, out)
