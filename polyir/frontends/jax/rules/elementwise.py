"""Element-wise primitives: unary math, arithmetic, comparisons, logic on
bools, ``select_n``, ``clamp``, ``convert_element_type``, ``integer_pow`` and
the identities (``copy``, ``stop_gradient``, ...).

In a jaxpr every operand already has the result's dtype (comparisons aside),
so there is no promotion to do: f16/bf16 values are computed in f32 and
rounded on store, as XLA does on the CPU. XLA's ``max``/``min`` propagate NaN,
so they are built from selects (IR ``max`` drops NaN).
"""
from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from polyir.frontends.jax.graph import Equation
from polyir.frontends.jax.lower import JaxLoweringContext, polyir_dtype, register
from polyir.frontends.lowering import scalar
from polyir.frontends.lowering.context import TensorValue, accumulator_dtype, const
from polyir.ir.nodes import BinOp, Call, Compare, Expr, Select
from polyir.ir.types import DType


def operand_dtype(eqn: Equation, position: int = 0) -> DType:
    return polyir_dtype(eqn.inputs[position])


def compute_dtype(eqn: Equation, position: int = 0) -> DType:
    """The type an element-wise primitive computes in: its operand's type,
    f32 for f16/bf16."""
    return accumulator_dtype(operand_dtype(eqn, position))


def pointwise(ctx: JaxLoweringContext, eqn: Equation, operands: list[Any], compute: DType,
              fn: Callable[..., Expr]) -> TensorValue:
    """One nest writing ``fn`` of the operands (cast to ``compute``) to the result."""
    out = ctx.result(eqn)
    ctx.map_operands(out, operands, compute, fn)
    return out


def _float_only(eqn: Equation) -> str | None:
    return None if operand_dtype(eqn).is_float else f"{eqn.name} on {eqn.inputs[0].dtype}"


def _bool_only(eqn: Equation) -> str | None:
    dtype = operand_dtype(eqn)
    return None if dtype is DType.BOOL else f"bitwise {eqn.name} on {dtype} (only bool is lowered)"


# ----------------------------------------------------------------- unary math
_CALLS = {"exp": "exp", "exp2": "exp2", "log": "log", "tanh": "tanh", "logistic": "sigmoid",
          "sin": "sin", "cos": "cos", "sqrt": "sqrt", "rsqrt": "rsqrt", "erf": "erf"}


@register(*_CALLS, accepts=_float_only)
def lower_math(ctx: JaxLoweringContext, eqn: Equation, x: Any) -> TensorValue:
    fn = _CALLS[eqn.name]
    return pointwise(ctx, eqn, [x], compute_dtype(eqn), lambda a: Call(fn, (a,)))


def _wide(dtype: DType) -> DType:
    """f64 for the functions IR has no accurate form of at lower precision."""
    return DType.F64 if dtype.is_float else dtype


@register("log1p", "expm1", "erfc", "tan", "cbrt", accepts=_float_only)
def lower_derived_math(ctx: JaxLoweringContext, eqn: Equation, x: Any) -> TensorValue:
    """Functions IR composes from others: computed in f64, so ``log(1 + x)``
    keeps f32's accuracy for small ``x`` (f64 inputs lose it there)."""
    dtype = _wide(compute_dtype(eqn))
    one = const(1, dtype)

    def derived(a: Expr) -> Expr:
        if eqn.name == "log1p":
            return Call("log", (BinOp("+", one, a),))
        if eqn.name == "expm1":
            return BinOp("-", Call("exp", (a,)), one)
        if eqn.name == "erfc":
            return BinOp("-", one, Call("erf", (a,)))
        if eqn.name == "tan":
            return BinOp("/", Call("sin", (a,)), Call("cos", (a,)))
        root = Call("pow", (Call("abs", (a,)), const(1.0 / 3.0, dtype)))
        return Select(Compare("<", a, const(0, dtype)), Call("neg", (root,)), root)
    return pointwise(ctx, eqn, [x], dtype, derived)


@register("abs", "neg")
def lower_sign_ops(ctx: JaxLoweringContext, eqn: Equation, x: Any) -> TensorValue:
    fn = eqn.name
    return pointwise(ctx, eqn, [x], compute_dtype(eqn), lambda a: Call(fn, (a,)))


@register("sign")
def lower_sign(ctx: JaxLoweringContext, eqn: Equation, x: Any) -> TensorValue:
    dtype = compute_dtype(eqn)
    return pointwise(ctx, eqn, [x], dtype, lambda a: scalar.sign(a, dtype))


@register("floor", "ceil", accepts=_float_only)
def lower_rounding(ctx: JaxLoweringContext, eqn: Equation, x: Any) -> TensorValue:
    fn = eqn.name
    return pointwise(ctx, eqn, [x], compute_dtype(eqn), lambda a: Call(fn, (a,)))


@register("round", accepts=_float_only)
def lower_round(ctx: JaxLoweringContext, eqn: Equation, x: Any) -> TensorValue:
    """``rounding_method`` 0: half away from zero (the default); 1: half to even."""
    dtype = compute_dtype(eqn)
    to_even = int(eqn.params.get("rounding_method", 0)) == 1
    builder = scalar.round_half_even if to_even else scalar.round_half_away
    return pointwise(ctx, eqn, [x], dtype, lambda a: builder(a, dtype))


@register("is_finite")
def lower_is_finite(ctx: JaxLoweringContext, eqn: Equation, x: Any) -> TensorValue:
    dtype = compute_dtype(eqn)
    return pointwise(ctx, eqn, [x], dtype,
                     lambda a: Compare("<", Call("abs", (a,)), const(math.inf, dtype)))


@register("square")
def lower_square(ctx: JaxLoweringContext, eqn: Equation, x: Any) -> TensorValue:
    return pointwise(ctx, eqn, [x], compute_dtype(eqn), lambda a: BinOp("*", a, a))


@register("integer_pow")
def lower_integer_pow(ctx: JaxLoweringContext, eqn: Equation, x: Any) -> TensorValue:
    """``x ** y`` for a static integer ``y``, by repeated squaring as XLA does."""
    dtype = compute_dtype(eqn)
    exponent = int(eqn.params["y"])
    return pointwise(ctx, eqn, [x], dtype, lambda a: scalar.small_power(a, exponent, dtype))


@register("not", accepts=_bool_only)
def lower_not(ctx: JaxLoweringContext, eqn: Equation, x: Any) -> TensorValue:
    return pointwise(ctx, eqn, [x], DType.BOOL, lambda a: Call("not", (a,)))


# --------------------------------------------------------------------- binary
def _arithmetic(op: str, dtype: DType) -> Callable[[Expr, Expr], Expr]:
    if dtype is DType.BOOL:
        bool_op = {"+": "or", "*": "and"}.get(op)
        if bool_op is not None:
            return lambda x, y: BinOp(bool_op, x, y)
    return lambda x, y: BinOp(op, x, y)


@register("add", "add_any", "sub", "mul", "div")
def lower_arithmetic(ctx: JaxLoweringContext, eqn: Equation, a: Any, b: Any) -> TensorValue:
    """On integers ``div`` truncates toward zero, as IR ``/`` does."""
    op = {"add": "+", "add_any": "+", "sub": "-", "mul": "*", "div": "/"}[eqn.name]
    dtype = compute_dtype(eqn)
    return pointwise(ctx, eqn, [a, b], dtype, _arithmetic(op, dtype))


@register("rem")
def lower_rem(ctx: JaxLoweringContext, eqn: Equation, a: Any, b: Any) -> TensorValue:
    """C's ``fmod`` (the sign of the dividend), also on integers."""
    dtype = compute_dtype(eqn)
    return pointwise(ctx, eqn, [a, b], dtype, lambda x, y: scalar.fmod(x, y, dtype))


@register("pow", accepts=_float_only)
def lower_pow(ctx: JaxLoweringContext, eqn: Equation, a: Any, b: Any) -> TensorValue:
    return pointwise(ctx, eqn, [a, b], compute_dtype(eqn), lambda x, y: Call("pow", (x, y)))


@register("max", "min")
def lower_max_min(ctx: JaxLoweringContext, eqn: Equation, a: Any, b: Any) -> TensorValue:
    dtype = compute_dtype(eqn)
    largest = eqn.name == "max"
    if dtype.is_float:
        fn = scalar.nan_max if largest else scalar.nan_min
        return pointwise(ctx, eqn, [a, b], dtype, fn)
    if dtype is DType.BOOL:
        return pointwise(ctx, eqn, [a, b], dtype, _arithmetic("+" if largest else "*", dtype))
    name = eqn.name
    return pointwise(ctx, eqn, [a, b], dtype, lambda x, y: Call(name, (x, y)))


@register("and", "or", "xor", accepts=_bool_only)
def lower_logical(ctx: JaxLoweringContext, eqn: Equation, a: Any, b: Any) -> TensorValue:
    if eqn.name == "xor":
        return pointwise(ctx, eqn, [a, b], DType.BOOL, lambda x, y: Compare("!=", x, y))
    op = eqn.name
    return pointwise(ctx, eqn, [a, b], DType.BOOL, lambda x, y: BinOp(op, x, y))


_COMPARE = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}


@register(*_COMPARE)
def lower_compare(ctx: JaxLoweringContext, eqn: Equation, a: Any, b: Any) -> TensorValue:
    op = _COMPARE[eqn.name]
    return pointwise(ctx, eqn, [a, b], compute_dtype(eqn), lambda x, y: Compare(op, x, y))


# ------------------------------------------------------------ select and clamp
@register("select_n")
def lower_select_n(ctx: JaxLoweringContext, eqn: Equation, which: Any, *cases: Any) -> TensorValue:
    """``cases[which]``: with a bool ``which``, ``which ? cases[1] : cases[0]``."""
    out = ctx.result(eqn)
    dtype = out.dtype
    which_dtype = operand_dtype(eqn)

    def element(idx: list) -> Expr:
        chooser = ctx.operand(which, idx, out.shape, which_dtype)
        values = [ctx.operand(case, idx, out.shape, dtype) for case in cases]
        if which_dtype is DType.BOOL:
            return Select(chooser, values[1], values[0]) if len(values) > 1 else values[0]
        result = values[-1]
        for position in range(len(values) - 2, -1, -1):
            result = Select(Compare("==", chooser, const(position, which_dtype)), values[position], result)
        return result
    ctx.map_elements(out, element)
    return out


@register("clamp")
def lower_clamp(ctx: JaxLoweringContext, eqn: Equation, low: Any, x: Any, high: Any) -> TensorValue:
    """``clamp(low, x, high)``: ``low`` and ``high`` are scalars or arrays."""
    dtype = compute_dtype(eqn, 1)
    return pointwise(ctx, eqn, [low, x, high], dtype, lambda lo, a, hi: scalar.clamp(a, lo, hi))


# ---------------------------------------------------------- casts, identities
@register("convert_element_type")
def lower_convert(ctx: JaxLoweringContext, eqn: Equation, x: Any) -> TensorValue:
    """A cast (float -> int truncates toward zero; to bool: ``!= 0``)."""
    source = operand_dtype(eqn)
    if isinstance(x, TensorValue) and source is polyir_dtype(eqn.outputs[0]):
        return x
    return pointwise(ctx, eqn, [x], source, lambda a: a)


def _same_precision(eqn: Equation) -> str | None:
    dtype = eqn.inputs[0].dtype
    info = {"float16": (5, 10), "bfloat16": (8, 7), "float32": (8, 23), "float64": (11, 52)}
    bits = (eqn.params.get("exponent_bits"), eqn.params.get("mantissa_bits"))
    if info.get(dtype.name) == bits:
        return None
    return f"reduce_precision to {bits} bits on {dtype}"


@register("copy", "copy_p", "stop_gradient", "optimization_barrier")
def lower_identity(ctx: JaxLoweringContext, eqn: Equation, *values: Any) -> list[Any]:
    """The values themselves (a functional graph never changes them)."""
    results: list[Any] = []
    for position, value in enumerate(values):
        if not isinstance(value, TensorValue):  # a literal: a filled buffer
            out = ctx.result(eqn, position)
            ctx.map_operands(out, [value], out.dtype, lambda a: a)
            value = out
        results.append(value)
    return results


@register("reduce_precision", accepts=_same_precision)
def lower_reduce_precision(ctx: JaxLoweringContext, eqn: Equation, x: Any) -> list[Any]:
    """Rounding to the operand's own precision: the identity."""
    return lower_identity(ctx, eqn, x)
