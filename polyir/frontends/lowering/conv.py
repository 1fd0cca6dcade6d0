"""Convolutions over any number of spatial dimensions, channels first
(``x: [N, C, S...]``, ``w: [C_out, C_in/G, K...]``, ``out: [N, C_out, O...]``):
stride, low padding, dilation of the kernel and of the input, groups; and the
transposed convolution (a scatter).

With groups ``G`` the output channel dimension is seen as ``[G, C_out/G]``
(a view, no ``//``)::

    out[n, g, oc, o...] = bias[g*Cog + oc]
        + sum_{ic, k...} x[n, g*Cig + ic, o*s - p + k*d] * w[g*Cog + oc, ic, k...]

Zero padding is an affine guard around the update, never a padded copy.
A transposed convolution scatters each input element instead (see
:func:`transposed_convolution_into`).
"""
from __future__ import annotations

from collections.abc import Sequence

from polyir.frontends.lowering.context import LoweringContext, TensorValue, accumulator_dtype, const
from polyir.frontends.lowering.reduce import accumulate
from polyir.ir.affine import Aff, Constraint
from polyir.ir.nodes import BinOp, Expr


def convolution_into(ctx: LoweringContext, out: TensorValue, x: TensorValue, w: TensorValue,
                     bias: TensorValue | None, stride: Sequence[int], padding: Sequence[int],
                     dilation: Sequence[int], groups: int,
                     input_dilation: Sequence[int] | None = None) -> None:
    """``out = conv(x, w) + bias`` (``padding``: the low padding of each spatial
    dimension; the high padding follows from ``out``'s shape). ``input_dilation``
    spreads the input's elements ``d`` apart (zeros between): a position in the
    dilated input reads ``x`` only where it is a multiple of ``d``."""
    spatial = x.rank - 2
    lhs_dilation = list(input_dilation) if input_dilation else [1] * spatial
    c_out, cig = int(w.shape[0]), int(w.shape[1])  # weights: static (a guard when symbolic)
    cog = c_out // groups
    kernel = [int(k) for k in w.shape[2:]]
    acc = accumulator_dtype(out.dtype)

    # out seen as [N, G, Cog, O...]
    grouped = out.view((out.shape[0], groups, cog) + out.shape[2:],
                       lambda idx: (idx[0], idx[1] * cog + idx[2]) + tuple(idx[3:]))

    def input_position(o: list[Aff], r: list[Aff], d: int) -> Aff:
        return o[3 + d] * stride[d] - padding[d] + r[1 + d] * dilation[d]

    def source(o: list[Aff], r: list[Aff], d: int) -> Aff:
        position = input_position(o, r, d)
        return position if lhs_dilation[d] == 1 else position // lhs_dilation[d]

    def element(o: list[Aff], r: list[Aff]) -> Expr:
        channel_in = o[1] * cig + r[0]
        channel_out = o[1] * cog + o[2]
        positions = [o[0], channel_in] + [source(o, r, d) for d in range(spatial)]
        return BinOp("*", ctx.cast(x.load(positions), acc),
                     ctx.cast(w.load([channel_out, r[0]] + r[1:]), acc))

    def init(o: list[Aff]) -> Expr:
        if bias is None:
            return const(0, acc)
        return ctx.cast(bias.load([o[1] * cog + o[2]]), acc)

    def guard(o: list[Aff], r: list[Aff]) -> list[Constraint]:
        conditions = []
        for d in range(spatial):
            position = input_position(o, r, d)
            size = (x.shape[2 + d] - 1) * lhs_dilation[d] + 1
            if lhs_dilation[d] > 1:
                conditions.append(Constraint(position % lhs_dilation[d], "==", Aff.const(0)))
            if padding[d] > 0:
                conditions.append(Constraint(position, ">=", Aff.const(0)))
            last = (out.shape[2 + d] - 1) * stride[d] - padding[d] + (kernel[d] - 1) * dilation[d]
            if last >= size:
                conditions.append(Constraint(position, "<", ctx.size_aff(size)))
        return conditions

    accumulate(ctx, grouped, [cig] + kernel, acc_dtype=acc, init=init, element=element, guard=guard)


def transposed_convolution_into(ctx: LoweringContext, out: TensorValue, x: TensorValue,
                                w: TensorValue, bias: TensorValue | None, stride: Sequence[int],
                                padding: Sequence[int], dilation: Sequence[int],
                                groups: int) -> None:
    """The adjoint of a convolution, written as a scatter of each input
    element (no ``//`` or ``%``): one nest sets the bias, a second adds
    ``x[n, g*Cig + ic, i...] * w[g*Cig + ic, oc, k...]`` to
    ``out[n, g*Cog + oc, i*s - p + k*d ...]`` under an affine guard."""
    spatial = x.rank - 2
    cig, cog = int(x.shape[1]) // groups, int(w.shape[1])  # channels: pinned by the weights
    kernel = [int(k) for k in w.shape[2:]]
    acc_dtype = accumulator_dtype(out.dtype)
    acc = out if acc_dtype is out.dtype else ctx.temp(f"{out.buffer}_acc", out.shape, acc_dtype)
    ctx.map_elements(acc, lambda o: const(0, acc_dtype) if bias is None
                     else ctx.cast(bias.load([o[1]]), acc_dtype))

    shape = [x.shape[0], groups, cog, cig] + list(x.shape[2:]) + kernel
    idx, loops = ctx.loops(shape, hint="i")
    n, g, oc, ic = idx[:4]
    inputs, taps = idx[4:4 + spatial], idx[4 + spatial:]
    positions = [inputs[d] * stride[d] - padding[d] + taps[d] * dilation[d] for d in range(spatial)]
    conditions = []
    for d, position in enumerate(positions):
        if padding[d] > 0:
            conditions.append(Constraint(position, ">=", Aff.const(0)))
        last = (x.shape[2 + d] - 1) * stride[d] - padding[d] + (kernel[d] - 1) * dilation[d]
        if last >= out.shape[2 + d]:
            conditions.append(Constraint(position, "<", ctx.size_aff(out.shape[2 + d])))
    target = [n, g * cog + oc] + positions
    product = BinOp("*", ctx.cast(x.load([n, g * cig + ic] + inputs), acc_dtype),
                    ctx.cast(w.load([g * cig + ic, oc] + taps), acc_dtype))
    update = ctx.assign(acc, target, BinOp("+", acc.load(target), product))
    ctx.emit(ctx.nest(loops, ctx.guard(conditions, [update])))
    if acc is not out:
        ctx.copy(acc, out)
