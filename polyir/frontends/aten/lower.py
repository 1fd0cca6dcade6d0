"""Lower a run of ATen graph nodes (a segment) to one polyir function.

The function's parameters are the segment's inputs (in the order given: graph
inputs, then module parameters and buffers, then values computed in eager),
then its outputs. Intermediate results are local buffers in ``global`` space
(heap memory on the CPU). Each node becomes the loop nests its rule emits.
"""
from __future__ import annotations

import operator
from collections.abc import Sequence
from typing import Any

import torch

from polyir.errors import UnsupportedOp
from polyir.frontends.aten.context import (
    LoweringContext,
    TensorValue,
    dtype_of,
    is_supported_dtype,
    node_meta,
)
from polyir.frontends.aten.registry import find_rule, op_name
from polyir.frontends.lowering.registry import LoweredSegment
from polyir.ir.nodes import Function, Module


def unsupported_reason(node: torch.fx.Node) -> str | None:
    """Why ``node`` cannot be lowered (``None`` when it can)."""
    if node.op != "call_function":
        return f"graph node kind {node.op}"
    if node.target is operator.getitem:
        return None
    rule = find_rule(node.target)
    if rule is None:
        return "no lowering rule"
    meta = node.meta.get("val")
    if meta is None:
        return "no example value"
    values = meta if isinstance(meta, (tuple, list)) else [meta]
    for value in values:
        if not isinstance(value, torch.Tensor):
            return f"non-tensor result {type(value).__name__}"
        if not is_supported_dtype(value.dtype):
            return f"dtype {value.dtype}"
        if any(not isinstance(s, int) for s in value.shape):
            return "symbolic shape"
    for arg in node.all_input_nodes:
        arg_meta = arg.meta.get("val")
        if isinstance(arg_meta, torch.Tensor) and not is_supported_dtype(arg_meta.dtype):
            return f"operand dtype {arg_meta.dtype}"
        if arg_meta is not None and not isinstance(arg_meta, (torch.Tensor, tuple, list)):
            return f"non-tensor operand {arg.name}"
    if rule.accepts is not None:
        return rule.accepts(node)
    return None


def _output_key(node: torch.fx.Node) -> tuple[str, int]:
    if node.target is operator.getitem and isinstance(node.args[0], torch.fx.Node):
        return node.args[0].name, int(node.args[1])  # type: ignore[arg-type]
    return node.name, 0


def lower_segment(nodes: Sequence[torch.fx.Node], inputs: Sequence[torch.fx.Node],
                  outputs: Sequence[torch.fx.Node], name: str = "forward") -> LoweredSegment:
    """Lower ``nodes`` (in graph order) to a module whose entry function takes
    ``inputs`` then ``outputs`` as buffer parameters.

    Raises ``UnsupportedOp`` for a node that has no rule or that its rule
    refuses."""
    ctx = LoweringContext()
    env: dict[torch.fx.Node, Any] = {}
    for node in inputs:
        meta = node_meta(node)
        env[node] = ctx.add_param(node.name, tuple(int(s) for s in meta.shape), dtype_of(meta.dtype))
    for position, node in enumerate(outputs):
        meta = node_meta(node)
        ctx.add_output(_output_key(node), f"out{position}", tuple(int(s) for s in meta.shape),
                       dtype_of(meta.dtype))
    ops: dict[str, int] = {}
    for node in nodes:
        reason = unsupported_reason(node)
        if reason is not None:
            raise UnsupportedOp(op_name(node.target), node.name, reason)
        if node.target is operator.getitem:
            parent: Any = node.args[0]
            env[node] = env[parent][node.args[1]]
            continue
        rule = find_rule(node.target)
        assert rule is not None
        args = torch.fx.node.map_arg(node.args, lambda n: env[n])
        kwargs = torch.fx.node.map_arg(node.kwargs, lambda n: env[n])
        env[node] = rule.lower(ctx, node, *args, **kwargs)
        key = op_name(node.target)
        ops[key] = ops.get(key, 0) + 1

    # Outputs not written in place (views, inputs, repeats) are copied.
    for node in outputs:
        target = ctx.outputs[_output_key(node)]
        value: TensorValue = env[node]
        written = value.buffer == target.name and value.is_identity
        if written and ctx.is_claimed(target.name):
            continue
        ctx.claim(target.name)
        shape = tuple(int(s) for s in node_meta(node).shape)
        ctx.copy(value, TensorValue(target.name, shape, target.dtype))
    params = tuple(ctx.params)
    function = Function(name, params, tuple(ctx.body), tuple(ctx.locals))
    return LoweredSegment(Module((function,)), list(inputs), list(outputs), ops)
