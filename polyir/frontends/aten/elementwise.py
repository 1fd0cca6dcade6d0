"""Elementwise operators: unary math, binary arithmetic with broadcasting,
comparisons, ``where``, ``clamp``, activations (GELU both forms, SiLU, ...),
casts and tensor factories (``full``, ``arange``, ``scalar_tensor``).

Each becomes one loop nest over the result's shape. Types follow torch's
promotion rules: operands are cast to the computation type (float32 for
f16/bf16 operands, as eager does on the CPU) and the result is cast to the
stored type, so the IR never relies on implicit promotion.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch._prims_common import ELEMENTWISE_TYPE_PROMOTION_KIND as Kind
from torch._prims_common import elementwise_dtypes

from polyir.frontends.aten.context import (
    LoweringContext,
    Operand,
    TensorValue,
    aff_value,
    const,
    dtype_of,
    node_meta,
    packet,
)
from polyir.frontends.aten.registry import register
from polyir.frontends.lowering import scalar
from polyir.ir.nodes import BinOp, Call, Compare, Expr, Select
from polyir.ir.types import DType

aten = torch.ops.aten
prims = torch.ops.prims


def compute_dtype(node: torch.fx.Node, count: int, kind: Kind = Kind.DEFAULT) -> DType:
    """The type torch computes ``node`` in, from its first ``count`` arguments."""
    metas = []
    for arg in node.args[:count]:
        if isinstance(arg, torch.fx.Node):
            metas.append(node_meta(arg))
        elif isinstance(arg, (bool, int, float)):
            metas.append(arg)
    computation, _ = elementwise_dtypes(*metas, type_promotion_kind=kind)
    return dtype_of(computation)


def pointwise(ctx: LoweringContext, node: torch.fx.Node, operands: Sequence[Operand],
              compute: DType, fn: Callable[..., Expr]) -> TensorValue:
    """One nest: ``out[idx] = fn(*operands at idx, cast to compute)``, broadcasting."""
    out = ctx.result(node)
    ctx.map_operands(out, operands, compute, fn)
    return out


def _c(value: float, like: DType) -> Expr:
    return const(value, like)


# ----------------------------------------------------------------- unary math
_MATH_CALLS = {
    aten.exp: "exp", aten.exp2: "exp2", aten.log: "log", aten.log2: "log2", aten.sqrt: "sqrt",
    aten.rsqrt: "rsqrt", aten.tanh: "tanh", aten.erf: "erf", aten.sigmoid: "sigmoid",
    aten.sin: "sin", aten.cos: "cos",
}


def _lower_math(ctx: LoweringContext, node: torch.fx.Node, x: Operand) -> TensorValue:
    fn = _MATH_CALLS[packet(node)]
    return pointwise(ctx, node, [x], compute_dtype(node, 1, Kind.INT_TO_FLOAT),
                     lambda a: Call(fn, (a,)))


for _op in _MATH_CALLS:
    register(_op)(_lower_math)


@register(aten.abs, aten.neg)
def lower_sign_ops(ctx: LoweringContext, node: torch.fx.Node, x: Operand) -> TensorValue:
    fn = "abs" if packet(node) is aten.abs else "neg"
    return pointwise(ctx, node, [x], compute_dtype(node, 1), lambda a: Call(fn, (a,)))


@register(aten.floor, aten.ceil)
def lower_rounding(ctx: LoweringContext, node: torch.fx.Node, x: Operand) -> TensorValue:
    fn = "floor" if packet(node) is aten.floor else "ceil"
    dtype = compute_dtype(node, 1)
    if not dtype.is_float:
        return pointwise(ctx, node, [x], dtype, lambda a: a)
    return pointwise(ctx, node, [x], dtype, lambda a: Call(fn, (a,)))


@register(aten.reciprocal)
def lower_reciprocal(ctx: LoweringContext, node: torch.fx.Node, x: Operand) -> TensorValue:
    dtype = compute_dtype(node, 1, Kind.INT_TO_FLOAT)
    return pointwise(ctx, node, [x], dtype, lambda a: BinOp("/", _c(1, dtype), a))


@register(aten.log1p, aten.expm1)
def lower_log1p_expm1(ctx: LoweringContext, node: torch.fx.Node, x: Operand) -> TensorValue:
    dtype = compute_dtype(node, 1, Kind.INT_TO_FLOAT)
    one = _c(1, dtype)
    if packet(node) is aten.log1p:
        return pointwise(ctx, node, [x], dtype, lambda a: Call("log", (BinOp("+", one, a),)))
    return pointwise(ctx, node, [x], dtype, lambda a: BinOp("-", Call("exp", (a,)), one))


@register(aten.relu)
def lower_relu(ctx: LoweringContext, node: torch.fx.Node, x: Operand) -> TensorValue:
    dtype = compute_dtype(node, 1)
    zero = _c(0, dtype)
    # select(x < 0, 0, x) keeps NaN, as torch.relu does.
    return pointwise(ctx, node, [x], dtype, lambda a: Select(Compare("<", a, zero), zero, a))


@register(aten.sign)
def lower_sign(ctx: LoweringContext, node: torch.fx.Node, x: Operand) -> TensorValue:
    dtype = compute_dtype(node, 1)
    return pointwise(ctx, node, [x], dtype, lambda a: scalar.sign(a, dtype))


@register(aten.isnan)
def lower_isnan(ctx: LoweringContext, node: torch.fx.Node, x: Operand) -> TensorValue:
    return pointwise(ctx, node, [x], compute_dtype(node, 1), lambda a: Compare("!=", a, a))


@register(aten.logical_not, aten.bitwise_not,
          accepts=lambda n: None if packet(n) is aten.logical_not
          or node_meta(n).dtype == torch.bool else "bitwise_not on integers")
def lower_not(ctx: LoweringContext, node: torch.fx.Node, x: Operand) -> TensorValue:
    return pointwise(ctx, node, [x], DType.BOOL, lambda a: Call("not", (a,)))


# ---------------------------------------------------------------- activations
@register(aten.gelu)
def lower_gelu(ctx: LoweringContext, node: torch.fx.Node, x: Operand,
               approximate: str = "none") -> TensorValue:
    dtype = compute_dtype(node, 1, Kind.INT_TO_FLOAT)
    half, one = _c(0.5, dtype), _c(1.0, dtype)
    if approximate == "tanh":
        k, c = _c(math.sqrt(2.0 / math.pi), dtype), _c(0.044715, dtype)

        def gelu_tanh(a: Expr) -> Expr:
            cube = BinOp("*", BinOp("*", a, a), a)
            inner = BinOp("*", k, BinOp("+", a, BinOp("*", c, cube)))
            return BinOp("*", BinOp("*", half, a), BinOp("+", one, Call("tanh", (inner,))))
        return pointwise(ctx, node, [x], dtype, gelu_tanh)
    inv_sqrt2 = _c(1.0 / math.sqrt(2.0), dtype)
    return pointwise(ctx, node, [x], dtype, lambda a: BinOp(
        "*", BinOp("*", half, a), BinOp("+", one, Call("erf", (BinOp("*", a, inv_sqrt2),)))))


@register(aten.silu)
def lower_silu(ctx: LoweringContext, node: torch.fx.Node, x: Operand) -> TensorValue:
    dtype = compute_dtype(node, 1, Kind.INT_TO_FLOAT)
    return pointwise(ctx, node, [x], dtype, lambda a: BinOp("*", a, Call("sigmoid", (a,))))


@register(aten.leaky_relu)
def lower_leaky_relu(ctx: LoweringContext, node: torch.fx.Node, x: Operand,
                     negative_slope: float = 0.01) -> TensorValue:
    dtype = compute_dtype(node, 1)
    zero, slope = _c(0, dtype), _c(negative_slope, dtype)
    return pointwise(ctx, node, [x], dtype,
                     lambda a: Select(Compare(">", a, zero), a, BinOp("*", a, slope)))


@register(aten.elu)
def lower_elu(ctx: LoweringContext, node: torch.fx.Node, x: Operand, alpha: float = 1.0,
              scale: float = 1.0, input_scale: float = 1.0) -> TensorValue:
    dtype = compute_dtype(node, 1)
    zero, one = _c(0, dtype), _c(1, dtype)

    def elu(a: Expr) -> Expr:
        negative = BinOp("*", _c(alpha * scale, dtype),
                         BinOp("-", Call("exp", (BinOp("*", a, _c(input_scale, dtype)),)), one))
        return Select(Compare(">", a, zero), BinOp("*", a, _c(scale, dtype)), negative)
    return pointwise(ctx, node, [x], dtype, elu)


@register(aten.clamp, aten.clamp_min, aten.clamp_max, aten.hardtanh)
def lower_clamp(ctx: LoweringContext, node: torch.fx.Node, x: Operand, low: Any = None,
                high: Any = None, **kwargs: Any) -> TensorValue:
    kind = packet(node)
    low, high = kwargs.get("min", low), kwargs.get("max", high)
    if kind is aten.clamp_max:
        low, high = None, low
    if kind is aten.hardtanh:
        low = -1.0 if low is None else low
        high = 1.0 if high is None else high
    dtype = dtype_of(node_meta(node).dtype)  # clamp compares in the result type
    out = ctx.result(node)

    def element(idx: list) -> Expr:
        lo = None if low is None else ctx.operand(low, idx, out.shape, dtype)
        hi = None if high is None else ctx.operand(high, idx, out.shape, dtype)
        return scalar.clamp(ctx.operand(x, idx, out.shape, dtype), lo, hi)
    ctx.map_elements(out, element)
    return out


# --------------------------------------------------------------------- binary
_REDUCED = (torch.bfloat16, torch.float16)


def _scalar_as_eager(node: torch.fx.Node, value: Any) -> Any:
    """A Python number operand of ``node`` as eager's CPU kernels use it: for
    ``add``/``sub``/``rsub`` (and ``alpha``), ``fmod``, ``remainder`` and
    ``pow`` on a bf16/f16 tensor, eager first rounds the scalar to the
    tensor's dtype and then computes in f32 (``mul`` and ``div`` keep it in
    f32, as the lowering does anyway); other values pass through."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return value
    dtype = node_meta(node).dtype
    if dtype not in _REDUCED:
        return value
    rounded = float(torch.tensor(float(value), dtype=torch.float64).to(dtype).item())
    return int(rounded) if isinstance(value, int) and rounded.is_integer() else rounded


def _scaled(b: Expr, alpha: Any, dtype: DType) -> Expr:
    return b if alpha == 1 else BinOp("*", b, const(alpha, dtype))


@register(aten.add, aten.sub, aten.rsub)
def lower_add_sub(ctx: LoweringContext, node: torch.fx.Node, a: Operand, b: Operand,
                  alpha: Any = 1) -> TensorValue:
    kind = packet(node)
    dtype = compute_dtype(node, 2)
    if dtype is DType.BOOL:
        return pointwise(ctx, node, [a, b], dtype, lambda x, y: BinOp("or", x, y))
    a, b, alpha = (_scalar_as_eager(node, v) for v in (a, b, alpha))
    if kind is aten.add:
        return pointwise(ctx, node, [a, b], dtype, lambda x, y: BinOp("+", x, _scaled(y, alpha, dtype)))
    if kind is aten.sub:
        return pointwise(ctx, node, [a, b], dtype, lambda x, y: BinOp("-", x, _scaled(y, alpha, dtype)))
    return pointwise(ctx, node, [a, b], dtype, lambda x, y: BinOp("-", y, _scaled(x, alpha, dtype)))


@register(aten.mul)
def lower_mul(ctx: LoweringContext, node: torch.fx.Node, a: Operand, b: Operand) -> TensorValue:
    dtype = compute_dtype(node, 2)
    op = "and" if dtype is DType.BOOL else "*"
    return pointwise(ctx, node, [a, b], dtype, lambda x, y: BinOp(op, x, y))


@register(aten.div)
def lower_div(ctx: LoweringContext, node: torch.fx.Node, a: Operand, b: Operand,
              rounding_mode: str | None = None) -> TensorValue:
    if rounding_mode is None:
        dtype = compute_dtype(node, 2, Kind.INT_TO_FLOAT)
        return pointwise(ctx, node, [a, b], dtype, lambda x, y: BinOp("/", x, y))
    dtype = compute_dtype(node, 2)
    if dtype.is_float:
        def rounded(x: Expr, y: Expr) -> Expr:
            q = BinOp("/", x, y)
            if rounding_mode == "floor":
                return scalar.floor_div_float(x, y, dtype)
            return Select(Compare("<", q, const(0, dtype)), Call("ceil", (q,)), Call("floor", (q,)))
        return pointwise(ctx, node, [a, b], dtype, rounded)
    if rounding_mode == "trunc":
        return pointwise(ctx, node, [a, b], dtype, lambda x, y: BinOp("/", x, y))
    return pointwise(ctx, node, [a, b], dtype, lambda x, y: scalar.floor_div_int(x, y, dtype))


@register(aten.trunc, aten.fix)
def lower_trunc(ctx: LoweringContext, node: torch.fx.Node, x: Operand) -> TensorValue:
    dtype = compute_dtype(node, 1)
    if not dtype.is_float:
        return pointwise(ctx, node, [x], dtype, lambda a: a)
    return pointwise(ctx, node, [x], dtype, lambda a: scalar.trunc(a, dtype))


@register(aten.round.default)
def lower_round(ctx: LoweringContext, node: torch.fx.Node, x: Operand) -> TensorValue:
    """Round half to even, as ``torch.round``: from ``f = floor(x)`` and the
    exact fraction ``x - f`` (no ``x + 0.5``, which can round up wrongly)."""
    dtype = compute_dtype(node, 1)
    if not dtype.is_float:
        return pointwise(ctx, node, [x], dtype, lambda a: a)
    return pointwise(ctx, node, [x], dtype, lambda a: scalar.round_half_even(a, dtype))


@register(aten.fmod)
def lower_fmod(ctx: LoweringContext, node: torch.fx.Node, a: Operand, b: Operand) -> TensorValue:
    """C's ``fmod``: the result has the sign of the dividend."""
    dtype = compute_dtype(node, 2)
    a, b = _scalar_as_eager(node, a), _scalar_as_eager(node, b)
    return pointwise(ctx, node, [a, b], dtype, lambda x, y: scalar.fmod(x, y, dtype))


@register(aten.remainder)
def lower_remainder(ctx: LoweringContext, node: torch.fx.Node, a: Operand, b: Operand) -> TensorValue:
    """Python's ``%``: the result has the sign of the divisor."""
    dtype = compute_dtype(node, 2)
    a, b = _scalar_as_eager(node, a), _scalar_as_eager(node, b)
    return pointwise(ctx, node, [a, b], dtype, lambda x, y: scalar.remainder(x, y, dtype))


@register(aten.maximum, aten.minimum)
def lower_max_min(ctx: LoweringContext, node: torch.fx.Node, a: Operand, b: Operand) -> TensorValue:
    fn = "max" if packet(node) is aten.maximum else "min"
    return pointwise(ctx, node, [a, b], compute_dtype(node, 2), lambda x, y: Call(fn, (x, y)))


def _pow_accepts(node: torch.fx.Node) -> str | None:
    exponent = node.args[1]
    if node_meta(node).dtype.is_floating_point:
        return None
    if isinstance(exponent, int) and 0 <= exponent <= 4:
        return None
    return "integer pow with an exponent other than 0..4"


@register(aten.pow, accepts=_pow_accepts)
def lower_pow(ctx: LoweringContext, node: torch.fx.Node, a: Operand, b: Operand) -> TensorValue:
    dtype = compute_dtype(node, 2)
    a, b = _scalar_as_eager(node, a), _scalar_as_eager(node, b)
    if isinstance(b, (int, float)) and not isinstance(b, bool):
        if b == 0:
            return pointwise(ctx, node, [a], dtype, lambda x: const(1, dtype))
        stored = dtype_of(node_meta(node).dtype)
        if float(b).is_integer() and stored in scalar.EAGER_POWERS.get(int(b), ()):
            exponent = int(b)   # eager's own arithmetic for this exponent (bit for bit)
            return pointwise(ctx, node, [a], dtype,
                             lambda x: scalar.eager_power(x, exponent, dtype, stored))
        if float(b).is_integer() and 1 <= b <= 4:
            exponent = int(b)
            return pointwise(ctx, node, [a], dtype, lambda x: scalar.small_power(x, exponent, dtype))
        if b == 0.5:
            return pointwise(ctx, node, [a], dtype, lambda x: Call("sqrt", (x,)))
        if b == -1:
            return pointwise(ctx, node, [a], dtype, lambda x: BinOp("/", const(1, dtype), x))
    return pointwise(ctx, node, [a, b], dtype, lambda x, y: Call("pow", (x, y)))


_COMPARE_OPS = {aten.eq: "==", aten.ne: "!=", aten.lt: "<", aten.le: "<=", aten.gt: ">", aten.ge: ">="}


@register(*_COMPARE_OPS)
def lower_compare(ctx: LoweringContext, node: torch.fx.Node, a: Operand, b: Operand) -> TensorValue:
    op = _COMPARE_OPS[packet(node)]
    return pointwise(ctx, node, [a, b], compute_dtype(node, 2), lambda x, y: Compare(op, x, y))


@register(aten.logical_and, aten.logical_or, aten.logical_xor,
          aten.bitwise_and, aten.bitwise_or, aten.bitwise_xor,
          accepts=lambda n: None if node_meta(n).dtype == torch.bool else "bitwise op on integers")
def lower_logical(ctx: LoweringContext, node: torch.fx.Node, a: Operand, b: Operand) -> TensorValue:
    kind = packet(node)
    if kind in (aten.logical_and, aten.bitwise_and):
        fn: Callable[[Expr, Expr], Expr] = lambda x, y: BinOp("and", x, y)  # noqa: E731
    elif kind in (aten.logical_or, aten.bitwise_or):
        fn = lambda x, y: BinOp("or", x, y)  # noqa: E731
    else:
        fn = lambda x, y: Compare("!=", x, y)  # noqa: E731
    return pointwise(ctx, node, [a, b], DType.BOOL, fn)


@register(aten.where, accepts=lambda n: None if len(n.args) == 3 else "where with one argument")
def lower_where(ctx: LoweringContext, node: torch.fx.Node, cond: Operand, a: Operand,
                b: Operand) -> TensorValue:
    metas = [node_meta(v) if isinstance(v, torch.fx.Node) else v for v in node.args[1:3]]
    dtype = dtype_of(elementwise_dtypes(*metas, type_promotion_kind=Kind.NO_OPMATH)[0])
    out = ctx.result(node)

    def element(idx: list) -> Expr:
        c = ctx.operand(cond, idx, out.shape, DType.BOOL)
        return Select(c, ctx.operand(a, idx, out.shape, dtype), ctx.operand(b, idx, out.shape, dtype))
    ctx.map_elements(out, element)
    return out


# ---------------------------------------------------------------------- casts
def _cast_accepts(node: torch.fx.Node) -> str | None:
    device: Any = node.kwargs.get("device")
    if device is not None and torch.device(device).type != "cpu":
        return f"copy to device {device}"
    return None


@register(aten._to_copy, prims.convert_element_type, aten.clone, aten.copy,
          accepts=_cast_accepts)
def lower_cast(ctx: LoweringContext, node: torch.fx.Node, x: Operand, *args: Any,
               **kwargs: Any) -> TensorValue:
    if packet(node) is aten.copy:
        x = args[0]  # copy(self, src): the values of src, in self's shape and type
    if isinstance(x, TensorValue) and x.dtype is dtype_of(node_meta(node).dtype) \
            and x.shape == tuple(node_meta(node).shape):
        return x  # values never change in a functional graph: no copy needed
    return pointwise(ctx, node, [x], dtype_of(node_meta(node).dtype), lambda a: a)


# ------------------------------------------------------------------ factories
@register(aten.full, aten.full_like, aten.scalar_tensor, aten.zeros, aten.ones,
          aten.zeros_like, aten.ones_like, aten.new_full, aten.new_zeros, aten.new_ones,
          aten.fill, accepts=_cast_accepts)
def lower_full(ctx: LoweringContext, node: torch.fx.Node, *args: Any, **kwargs: Any) -> TensorValue:
    kind = packet(node)
    if kind in (aten.zeros, aten.zeros_like, aten.new_zeros):
        value: Any = 0
    elif kind in (aten.ones, aten.ones_like, aten.new_ones):
        value = 1
    elif kind is aten.scalar_tensor:
        value = args[0]
    else:
        value = args[1] if kind is not aten.new_full else args[2]
    if isinstance(value, TensorValue):  # fill.Tensor: a 0-d tensor value
        return pointwise(ctx, node, [value], dtype_of(node_meta(node).dtype), lambda a: a)
    dtype = dtype_of(node_meta(node).dtype)
    return pointwise(ctx, node, [], dtype, lambda: const(value, dtype))


@register(aten.arange, accepts=_cast_accepts)
def lower_arange(ctx: LoweringContext, node: torch.fx.Node, *args: Any, **kwargs: Any) -> TensorValue:
    numbers = [a for a in args if isinstance(a, (int, float))]
    start: float = 0
    step: float = 1
    if len(numbers) == 1:
        pass
    else:
        start, step = numbers[0], (numbers[2] if len(numbers) > 2 else 1)
    dtype = dtype_of(node_meta(node).dtype)
    out = ctx.result(node)
    work = DType.F64 if dtype.is_float else DType.I64

    def element(idx: list) -> Expr:
        position = ctx.cast(aff_value(idx[0]), work)
        return BinOp("+", const(start, work), BinOp("*", position, const(step, work)))
    ctx.map_elements(out, element)
    return out


@register(aten.empty, aten.empty_like, aten.empty_strided, accepts=_cast_accepts)
def lower_empty(ctx: LoweringContext, node: torch.fx.Node, *args: Any, **kwargs: Any) -> TensorValue:
    # Uninitialised memory in torch too: zero it so results stay deterministic.
    dtype = dtype_of(node_meta(node).dtype)
    return pointwise(ctx, node, [], dtype, lambda: const(0, dtype))
