"""Reductions: ``reduce_sum/prod/max/min/and/or``, ``argmax/argmin``,
``cumsum/cumprod/cummax/cummin`` (either direction) and the window
reductions ``reduce_window_sum/max/min`` (pooling), built by
:mod:`polyir.frontends.lowering.reduce` as the ATen reductions are.

Sums of f16/bf16 accumulate in f32. ``max``/``min`` let NaN through, as XLA's do.
"""
from __future__ import annotations

from polyir.frontends.jax.graph import Equation
from polyir.frontends.jax.lower import JaxLoweringContext, polyir_dtype, register
from polyir.frontends.lowering import scalar
from polyir.frontends.lowering.context import TensorValue, accumulator_dtype, const, extreme
from polyir.frontends.lowering.reduce import (
    Combine,
    accumulate,
    add,
    index_reduction,
    over_dims,
    scan_into,
)
from polyir.ir.affine import Aff, Constraint
from polyir.ir.nodes import BinOp, Call, Expr
from polyir.ir.types import DType


def _combine(kind: str, dtype: DType) -> tuple[Combine, Expr]:
    """The combining function of a reduction ``kind`` over ``dtype`` and its identity."""
    if kind == "sum":
        return (lambda a, v: BinOp("or", a, v), const(False, dtype)) if dtype is DType.BOOL \
            else (add, const(0, dtype))
    if kind == "prod":
        return (lambda a, v: BinOp("and", a, v), const(True, dtype)) if dtype is DType.BOOL \
            else (lambda a, v: BinOp("*", a, v), const(1, dtype))
    if kind in ("and", "or"):
        return (lambda a, v: BinOp(kind, a, v)), const(kind == "and", dtype)
    largest = kind == "max"
    if dtype.is_float:
        return (scalar.nan_max if largest else scalar.nan_min), extreme(dtype, largest)
    if dtype is DType.BOOL:
        op = "or" if largest else "and"
        return (lambda a, v: BinOp(op, a, v)), extreme(dtype, largest)
    fn = "max" if largest else "min"
    return (lambda a, v: Call(fn, (a, v))), extreme(dtype, largest)


_REDUCTIONS = {"reduce_sum": "sum", "reduce_prod": "prod", "reduce_max": "max",
               "reduce_min": "min", "reduce_and": "and", "reduce_or": "or"}


def _bool_logic(eqn: Equation) -> str | None:
    if eqn.name in ("reduce_and", "reduce_or") and polyir_dtype(eqn.inputs[0]) is not DType.BOOL:
        return f"bitwise {eqn.name} on {eqn.inputs[0].dtype}"
    return None


@register(*_REDUCTIONS, accepts=_bool_logic)
def lower_reduce(ctx: JaxLoweringContext, eqn: Equation, x: TensorValue) -> TensorValue:
    out = ctx.result(eqn)
    kind = _REDUCTIONS[eqn.name]
    acc = accumulator_dtype(out.dtype) if kind in ("sum", "prod") else out.dtype
    combine, init = _combine(kind, acc)
    over_dims(ctx, out, x, sorted(int(a) for a in eqn.params["axes"]), acc_dtype=acc, init=init,
              combine=combine)
    return out


@register("argmax", "argmin")
def lower_argmax(ctx: JaxLoweringContext, eqn: Equation, x: TensorValue) -> TensorValue:
    """The first position of the extreme along the one axis (NaN wins)."""
    out = ctx.result(eqn)
    (axis,) = eqn.params["axes"]
    index_reduction(ctx, x, int(axis), eqn.name == "argmax", None, out)
    return out


_SCANS = {"cumsum": "sum", "cumprod": "prod", "cummax": "max", "cummin": "min"}


@register(*_SCANS)
def lower_scan(ctx: JaxLoweringContext, eqn: Equation, x: TensorValue) -> TensorValue:
    out = ctx.result(eqn)
    kind = _SCANS[eqn.name]
    acc = accumulator_dtype(out.dtype) if kind in ("sum", "prod") else out.dtype
    combine, _ = _combine(kind, acc)
    scan_into(ctx, out, x, int(eqn.params["axis"]), combine, acc,
              reverse=bool(eqn.params.get("reverse", False)))
    return out


_WINDOWS = {"reduce_window_sum": "sum", "reduce_window_max": "max", "reduce_window_min": "min"}


def _window_accepts(eqn: Equation) -> str | None:
    if any(int(d) != 1 for d in eqn.params.get("base_dilation", ())):
        return "reduce_window with base dilation"
    return None


@register(*_WINDOWS, accepts=_window_accepts)
def lower_reduce_window(ctx: JaxLoweringContext, eqn: Equation, x: TensorValue) -> TensorValue:
    """``out[o] = reduce_k x[o * stride - low + k * dilation]`` over the window,
    skipping positions in the padding (padding holds the identity: 0 for sums,
    -inf/inf for max/min, which is the same)."""
    out = ctx.result(eqn)
    kind = _WINDOWS[eqn.name]
    acc = accumulator_dtype(out.dtype) if kind == "sum" else out.dtype
    combine, init = _combine(kind, acc)
    window = [int(w) for w in eqn.params["window_dimensions"]]
    strides = [int(s) for s in eqn.params["window_strides"]]
    dilation = [int(d) for d in eqn.params.get("window_dilation") or [1] * x.rank]
    low = [int(p[0]) for p in eqn.params["padding"]]

    def position(o: list[Aff], r: list[Aff], d: int) -> Aff:
        return o[d] * strides[d] - low[d] + r[d] * dilation[d]

    def element(o: list[Aff], r: list[Aff]) -> Expr:
        return x.load([position(o, r, d) for d in range(x.rank)])

    def guard(o: list[Aff], r: list[Aff]) -> list[Constraint]:
        conditions = []
        for d in range(x.rank):
            last = (out.shape[d] - 1) * strides[d] - low[d] + (window[d] - 1) * dilation[d]
            if low[d] > 0:
                conditions.append(Constraint(position(o, r, d), ">=", Aff.const(0)))
            if last >= x.shape[d]:
                conditions.append(Constraint(position(o, r, d), "<", Aff.const(x.shape[d])))
        return conditions

    accumulate(ctx, out, window, acc_dtype=acc, init=lambda o: init, element=element,
               combine=combine, guard=guard)
    return out


