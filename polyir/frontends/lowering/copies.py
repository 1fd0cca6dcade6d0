"""Copies: concatenation, padding (low, high, interior; negative crops) and
gathers with a value-expression subscript.

A gathered index is a value-expression subscript (``W[cast<i64>(ids[i]), j]``),
which the IR allows when a subscript is not affine; analyses treat such an
access conservatively.
"""
from __future__ import annotations

from collections.abc import Sequence

from polyir.frontends.lowering.context import LoweringContext, Scalar, TensorValue, const
from polyir.frontends.lowering.sizes import Size
from polyir.ir.affine import Aff, Constraint
from polyir.ir.nodes import BinOp, Compare, Const, Expr, If, Load, Node, Select
from polyir.ir.types import DType


def concatenate_into(ctx: LoweringContext, out: TensorValue, parts: Sequence[TensorValue],
                     dim: int) -> None:
    """One copy nest per part, each at its offset along ``dim`` of ``out``."""
    offset: Size = 0
    for part in parts:
        idx, loops = ctx.loops(part.shape, hint="i")
        target = list(idx)
        target[dim] = idx[dim] + ctx.size_aff(offset)
        ctx.emit(ctx.nest(loops, [ctx.assign(out, target, part.load(idx))]))
        offset = offset + part.shape[dim]


def pad_into(ctx: LoweringContext, out: TensorValue, x: TensorValue, low: Sequence[int],
             value: Scalar | TensorValue, interior: Sequence[int] | None = None) -> None:
    """``out`` is ``x`` with ``low[d]`` elements before it along each dimension
    (negative: cropped) and ``interior[d]`` between neighbours, the rest
    ``value`` (a number or a 0-d tensor): a guarded copy, never a fill and then
    a copy."""
    idx, loops = ctx.loops(out.shape, hint="i")
    source = list(idx)
    conditions: list[Constraint] = []
    for d in range(out.rank):
        before = low[d]
        gap = 1 + (interior[d] if interior else 0)
        shifted = idx[d] - before
        source[d] = shifted if gap == 1 else shifted // gap
        if gap > 1:
            conditions.append(Constraint(shifted % gap, "==", Aff.const(0)))
        if before > 0:
            conditions.append(Constraint(shifted, ">=", Aff.const(0)))
        last = (x.shape[d] - 1) * gap  # the last source element's offset from ``before``
        if out.shape[d] - 1 - before > last:
            conditions.append(Constraint(shifted, "<=", ctx.size_aff(last)))
    fill_value = value.load([]) if isinstance(value, TensorValue) else const(value, out.dtype)
    fill = ctx.assign(out, idx, fill_value)
    copy = ctx.assign(out, idx, x.load(source))
    if conditions:
        body: list[Node] = [If(tuple(conditions), (copy,), (fill,))]
    else:
        body = [copy]
    ctx.emit(ctx.nest(loops, body))


def plain(ctx: LoweringContext, value: TensorValue) -> TensorValue:
    """``value`` as a whole buffer (a copy when it is a view), so a gathered
    subscript can index the buffer directly."""
    if value.is_identity:
        return value
    copy = ctx.temp(f"{value.buffer}_copy", value.shape, value.dtype)
    ctx.copy(value, copy)
    return copy


def gather(ctx: LoweringContext, out: TensorValue, table: TensorValue, dim: int,
           index: TensorValue, index_dims: int) -> None:
    """``out[a, i..., b] = table[a, index[i...], b]`` where ``a`` has ``dim``
    dimensions and ``i`` has ``index_dims``."""
    table = plain(ctx, table)

    def element(idx: list) -> Expr:
        position = ctx.cast(index.load(idx[dim:dim + index_dims]), DType.I64)
        return Load(table.buffer, tuple(idx[:dim]) + (position,) + tuple(idx[dim + index_dims:]))
    ctx.map_elements(out, element)


def wrapped(position: Expr, size: int | Expr) -> Expr:
    """A possibly negative ``i64`` index made non-negative (``i < 0 ? i + size : i``);
    ``size`` is an int or an ``i64`` value (a symbolic size: ``ctx.size_value``)."""
    zero = Const(0, DType.I64)
    extent = Const(size, DType.I64) if isinstance(size, int) else size
    return Select(Compare("<", position, zero), BinOp("+", position, extent), position)


def clamped(position: Expr, low: int, high: int) -> Expr:
    """An ``i64`` index clamped into ``[low, high]``."""
    low_c, high_c = Const(low, DType.I64), Const(high, DType.I64)
    above = Select(Compare("<", position, low_c), low_c, position)
    return Select(Compare(">", above, high_c), high_c, above)
