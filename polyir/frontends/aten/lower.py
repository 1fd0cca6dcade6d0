"""Lower a run of ATen graph nodes (a segment) to one polyir function.

The function's parameters are the segment's inputs (in the order given: graph
inputs, then module parameters and buffers, then values computed in eager),
then its outputs, then (with dynamic shapes) the size symbols the caller
passes: those no parameter's shape defines, and derived ones such as the
product of two sizes (``LoweredSegment.symbol_params``). Intermediate results
are local buffers in ``global`` space (heap memory on the CPU). Each node
becomes the loop nests its rule emits.
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
from polyir.frontends.aten.symbolic import SymbolTable
from polyir.frontends.lowering.registry import LoweredSegment
from polyir.ir.affine import Aff
from polyir.ir.nodes import Buffer, For, Function, Module, Param, Symbol, Var
from polyir.ir.walk import walk_expr, walk_nodes


def is_size_node(node: torch.fx.Node) -> bool:
    """A node computing sizes, not tensors (``sym_size``, ``size``, ``s0 * s1``)
    in a graph captured with symbolic shapes."""
    meta = node.meta.get("val")
    values = meta if isinstance(meta, (tuple, list)) else [meta]
    return node.op == "call_function" and bool(values) and all(
        isinstance(v, (torch.SymInt, torch.SymFloat, torch.SymBool, int)) for v in values) \
        and any(isinstance(v, (torch.SymInt, torch.SymFloat, torch.SymBool)) for v in values)


def unsupported_reason(node: torch.fx.Node, symbolic: bool = False) -> str | None:
    """Why ``node`` cannot be lowered (``None`` when it can). With ``symbolic``
    (a graph captured with dynamic shapes) symbolic sizes are accepted."""
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
        if not symbolic and any(not isinstance(s, int) for s in value.shape):
            return "symbolic shape"
    for arg in node.all_input_nodes:
        arg_meta = arg.meta.get("val")
        if isinstance(arg_meta, torch.Tensor) and not is_supported_dtype(arg_meta.dtype):
            return f"operand dtype {arg_meta.dtype}"
        if symbolic and is_size_node(arg):
            continue
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
                  outputs: Sequence[torch.fx.Node], name: str = "forward",
                  symbols: SymbolTable | None = None) -> LoweredSegment:
    """Lower ``nodes`` (in graph order) to a module whose entry function takes
    ``inputs`` then ``outputs`` as buffer parameters (then, with ``symbols``
    for a graph captured with dynamic shapes, the size symbols the caller
    passes).

    Raises ``UnsupportedOp`` for a node that has no rule or that its rule
    refuses."""
    ctx = LoweringContext(symbols)
    symbolic = symbols is not None
    env: dict[torch.fx.Node, Any] = {}
    for node in inputs:
        meta = node_meta(node)
        env[node] = ctx.add_param(node.name, ctx.dims(meta.shape), dtype_of(meta.dtype))
    for position, node in enumerate(outputs):
        meta = node_meta(node)
        ctx.add_output(_output_key(node), f"out{position}", ctx.dims(meta.shape),
                       dtype_of(meta.dtype))

    def value_of(n: torch.fx.Node) -> Any:
        if symbolic and n not in env and is_size_node(n):
            return n.meta["val"]  # a size: its SymInt
        return env[n]
    ops: dict[str, int] = {}
    for node in nodes:
        reason = unsupported_reason(node, symbolic)
        if reason is not None:
            raise UnsupportedOp(op_name(node.target), node.name, reason)
        if node.target is operator.getitem:
            parent: Any = node.args[0]
            env[node] = env[parent][node.args[1]]
            continue
        rule = find_rule(node.target)
        assert rule is not None
        args = torch.fx.node.map_arg(node.args, value_of)
        kwargs = torch.fx.node.map_arg(node.kwargs, value_of)
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
        shape = ctx.dims(node_meta(node).shape)
        ctx.copy(value, TensorValue(target.name, shape, target.dtype))
    params: list[Param] = list(ctx.params)
    passed = _passed_symbols(ctx.params, ctx.locals, ctx.body) if symbolic else []
    params += [Symbol(s) for s in passed]
    function = Function(name, tuple(params), tuple(ctx.body), tuple(ctx.locals))
    return LoweredSegment(Module((function,)), list(inputs), list(outputs), ops, passed, symbols)


def _passed_symbols(params: Sequence[Buffer], locals_: Sequence[Buffer],
                    body: Sequence[Any]) -> list[str]:
    """The size symbols a function uses that no parameter dimension defines (a
    dimension that is exactly one symbol is read from the argument's shape)."""
    used: set[str] = set()

    def affs(values: Any) -> None:
        for a in values:
            used.update(a.variables())
    for buffer in list(params) + list(locals_):
        affs(buffer.shape)
    for node in walk_nodes(body):
        if isinstance(node, For):
            affs(node.lower + node.upper)
        elif hasattr(node, "conditions"):
            for c in node.conditions:
                affs((c.lhs, c.rhs))
        else:
            for index in getattr(node, "indices", ()):
                if isinstance(index, Aff):
                    affs((index,))
            for expr in [getattr(node, "value", None), *getattr(node, "indices", ())]:
                if expr is None or isinstance(expr, Aff):
                    continue
                for sub in walk_expr(expr):
                    if isinstance(sub, Aff):
                        affs((sub,))
                    elif isinstance(sub, Var):
                        used.add(sub.name)
                    elif hasattr(sub, "indices"):
                        affs([i for i in sub.indices if isinstance(i, Aff)])
    symbols = {name for name in used if SymbolTable.reserved(name)}
    defined = {dim.terms[0][0] for buffer in params for dim in buffer.shape
               if len(dim.terms) == 1 and dim.constant == 0 and dim.terms[0][1] == 1
               and isinstance(dim.terms[0][0], str)}
    return sorted(symbols - defined)
