"""Lower a run of jaxpr equations (a segment) to one polyir function.

The function's parameters are the segment's inputs (in the order given), then
its outputs. Intermediate results are local buffers; each equation becomes
the loop nests its rule emits (:mod:`polyir.frontends.jax.rules`), built from
the framework-neutral :mod:`polyir.frontends.lowering` helpers.

A rule is ``rule(ctx, eqn, *operands) -> TensorValue | list[TensorValue]``:
each operand is a :class:`TensorValue` (a graph value) or a Python number (a
scalar literal); ``accepts(eqn)`` may refuse particular parameters by
returning the reason.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from polyir.errors import UnsupportedOp
from polyir.frontends.jax.graph import Atom, Equation, Literal, Value
from polyir.frontends.lowering.context import LoweringContext, TensorValue
from polyir.frontends.lowering.registry import LoweredSegment, Rule, registrar
from polyir.ir.nodes import Function, Module
from polyir.ir.types import DType

_DTYPES = {"float16": DType.F16, "bfloat16": DType.BF16, "float32": DType.F32,
           "float64": DType.F64, "int8": DType.I8, "int32": DType.I32, "int64": DType.I64,
           "bool": DType.BOOL}


def dtype_of(dtype: Any) -> DType | None:
    """The polyir type of a numpy/JAX dtype, ``None`` when polyir has none."""
    return _DTYPES.get(np.dtype(dtype).name)


def polyir_dtype(value: Value | Literal) -> DType:
    dtype = dtype_of(value.dtype)
    if dtype is None:
        raise UnsupportedOp("dtype", str(value), f"dtype {value.dtype}")
    return dtype


class JaxLoweringContext(LoweringContext):
    """The neutral context, with results sized and typed from jaxpr values."""

    def result(self, eqn: Equation, index: int = 0, dtype: DType | None = None) -> TensorValue:
        """The buffer output ``index`` of ``eqn`` is written to (its output
        parameter when it is a segment output, else a fresh local)."""
        value = eqn.outputs[index]
        return self.result_for(value, value.name, value.shape, dtype or polyir_dtype(value))


RULES: dict[str, Rule] = {}
"""Primitive name -> rule."""

register = registrar(RULES)
"""Decorator: make the function the rule of every primitive name given."""


def unsupported_reason(eqn: Equation) -> str | None:
    """Why ``eqn`` cannot be lowered (``None`` when it can)."""
    rule = RULES.get(eqn.name)
    if rule is None:
        return "no lowering rule"
    for atom in [*eqn.inputs, *eqn.outputs]:
        if dtype_of(atom.dtype) is None:
            return f"dtype {atom.dtype}"
    if rule.accepts is not None:
        return rule.accepts(eqn)
    return None


def _operand(env: dict[Value, TensorValue], atom: Atom) -> Any:
    return atom.value if isinstance(atom, Literal) else env[atom]


def lower_segment(equations: Sequence[Equation], inputs: Sequence[Value],
                  outputs: Sequence[Value], name: str = "forward") -> LoweredSegment:
    """Lower ``equations`` (in order) to a module whose entry function takes
    ``inputs`` then ``outputs`` as buffer parameters.

    Raises ``UnsupportedOp`` for an equation that has no rule or that its rule
    refuses."""
    ctx = JaxLoweringContext()
    env: dict[Value, TensorValue] = {}
    for value in inputs:
        env[value] = ctx.add_param(value.name, value.shape, polyir_dtype(value))
    for position, value in enumerate(outputs):
        ctx.add_output(value, f"out{position}", value.shape, polyir_dtype(value))
    ops: dict[str, int] = {}
    for eqn in equations:
        reason = unsupported_reason(eqn)
        if reason is not None:
            raise UnsupportedOp(eqn.name, eqn.describe(), reason)
        rule = RULES[eqn.name]
        produced = rule.lower(ctx, eqn, *[_operand(env, a) for a in eqn.inputs])
        results = list(produced) if isinstance(produced, (list, tuple)) else [produced]
        for value, result in zip(eqn.outputs, results, strict=True):
            env[value] = result
        ops[eqn.name] = ops.get(eqn.name, 0) + 1

    # Outputs not written in place (views, inputs, repeats) are copied.
    for value in outputs:
        target = ctx.outputs[value]
        result = env[value]
        if result.buffer == target.name and result.is_identity and ctx.is_claimed(target.name):
            continue
        ctx.claim(target.name)
        ctx.copy(result, TensorValue(target.name, value.shape, target.dtype))
    function = Function(name, tuple(ctx.params), tuple(ctx.body), tuple(ctx.locals))
    return LoweredSegment(Module((function,)), list(inputs), list(outputs), ops)
