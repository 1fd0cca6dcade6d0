"""Capture for the PyTorch frontend (:mod:`polyir.frontends.fx`, step 1).

The model (an ``nn.Module`` or ``fx.GraphModule``) is traced with ``make_fx``
(functionalised, core ATen decompositions, no autograd) on the example inputs;
parameters and buffers become graph inputs, so they are bound at call time,
never copied into the compiled code. ``F.scaled_dot_product_attention`` stays
one operator, and nodes no output depends on are dropped.
"""
from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.utils._pytree as pytree

from polyir.frontends.dynamic import DynamicShapes

aten = torch.ops.aten


@dataclass
class Captured:
    """A model traced to core ATen: the graph, what its placeholders are, and
    how to rebuild the model's output structure from the flat results."""

    gm: torch.fx.GraphModule
    input_count: int                 # leading placeholders: the tensor inputs
    state_names: list[str]           # then: parameters and buffers, by name
    out_spec: Any = None
    constant_outputs: dict[int, Any] = field(default_factory=dict)
    output_count: int = 0
    dynamic: DynamicShapes | None = None   # sizes and guards of a symbolic capture


@functools.lru_cache(maxsize=1)
def _decompositions() -> dict[Any, Callable[..., Any]]:
    from torch._decomp import core_aten_decompositions
    table = dict(core_aten_decompositions())
    # Attention is lowered as a whole (the causal mask becomes a loop guard).
    table.pop(aten._scaled_dot_product_flash_attention_for_cpu.default, None)
    return table


class _AttentionAsOneOp(torch.overrides.TorchFunctionMode):
    """While tracing, ``F.scaled_dot_product_attention`` becomes the opaque
    ``polyir.attention`` operator (make_fx would otherwise decompose it before
    any decomposition table is consulted)."""

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        if func is torch.nn.functional.scaled_dot_product_attention:
            from polyir.frontends.aten.attention import sdpa_as_attention
            result = sdpa_as_attention(*args, **kwargs)
            if result is not NotImplemented:
                return result
        return func(*args, **kwargs)


def model_state(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """Parameters then buffers of ``model``, by qualified name."""
    state: dict[str, torch.Tensor] = dict(model.named_parameters())
    state.update(dict(model.named_buffers()))
    return state


def capture(model: torch.nn.Module, args: Sequence[Any], dynamic: bool = False,
            dynamic_dims: Sequence[Sequence[bool]] | None = None, on_cpu: bool = False) -> Captured:
    """Trace ``model(*args)`` to a functional core-ATen graph whose
    placeholders are the tensor leaves of ``args`` then the model's state;
    with ``dynamic`` the inputs' sizes are symbolic (see
    ``polyir.frontends.dynamic``; ``dynamic_dims`` overrides which dimensions of
    each tensor input are). With ``on_cpu`` the trace runs on CPU copies of
    inputs and state that are elsewhere (the CUDA frontend: one graph serves
    host and device calls, and a CPU model can be traced for CUDA inputs)."""
    from torch.fx.experimental.proxy_tensor import make_fx

    flat, in_spec = pytree.tree_flatten(tuple(args))
    tensor_positions = [i for i, leaf in enumerate(flat) if isinstance(leaf, torch.Tensor)]
    state = model_state(model)
    names = list(state)
    captured = Captured(torch.fx.GraphModule({}, torch.fx.Graph()), len(tensor_positions), names)

    def traced(*tensors: torch.Tensor) -> list[torch.Tensor]:
        leaves = list(flat)
        for position, tensor in zip(tensor_positions, tensors[:len(tensor_positions)], strict=True):
            leaves[position] = tensor
        call_args = pytree.tree_unflatten(leaves, in_spec)
        bound = dict(zip(names, tensors[len(tensor_positions):], strict=True))
        with _AttentionAsOneOp():
            result = torch.func.functional_call(model, bound, tuple(call_args))
        out_leaves, captured.out_spec = pytree.tree_flatten(result)
        captured.constant_outputs = {i: leaf for i, leaf in enumerate(out_leaves)
                                     if not isinstance(leaf, torch.Tensor)}
        captured.output_count = len(out_leaves)
        return [leaf for leaf in out_leaves if isinstance(leaf, torch.Tensor)]

    inputs = [flat[i] for i in tensor_positions] + list(state.values())
    if on_cpu:
        inputs = [t if t.device.type == "cpu" else t.detach().cpu() for t in inputs]
    if dynamic:
        from polyir.frontends.dynamic import trace_symbolic
        with torch.no_grad():
            gm, captured.dynamic = trace_symbolic(traced, inputs, len(tensor_positions),
                                                  _decompositions(), dynamic_dims)
        _drop_dead_code(gm)
        captured.gm = gm
        return captured
    with torch.no_grad(), _one_fake_mode():
        gm = make_fx(torch.func.functionalize(traced, remove="mutations"),
                     decomposition_table=_decompositions(), tracing_mode="real")(*inputs)
        if any(mutates(n) and not _writes_placeholder(n) for n in gm.graph.nodes):
            # Decompositions run below functionalisation and may emit in-place
            # ops (rms_norm's add_): functionalise the decomposed graph again.
            gm = make_fx(torch.func.functionalize(gm, remove="mutations"),
                         decomposition_table=_decompositions(), tracing_mode="real")(*inputs)
    _drop_dead_code(gm)
    captured.gm = gm
    return captured


def _one_fake_mode() -> Any:
    """A tracing context whose fake mode make_fx's real-mode tracing uses for the
    metadata of every node (``node.meta["val"]``); without it, it makes a new
    ``FakeTensorMode`` per node, and each records a stack trace: half the time of
    a capture."""
    from torch._guards import TracingContext, tracing
    from torch._subclasses.fake_tensor import FakeTensorMode

    if TracingContext.try_get() is not None:  # under dynamo: its context stays
        return contextlib.nullcontext()
    return tracing(TracingContext(FakeTensorMode(allow_fallback_kernels=True)))


def _writes_placeholder(node: torch.fx.Node) -> bool:
    """An in-place op on a graph input (an input or buffer update: kept)."""
    return bool(node.args) and isinstance(node.args[0], torch.fx.Node) \
        and node.args[0].op == "placeholder"


def _drop_dead_code(gm: torch.fx.GraphModule) -> None:
    """Remove nodes no output depends on (mutations are kept: they are live)."""
    live: set[torch.fx.Node] = set()
    for node in reversed(gm.graph.nodes):
        if node.op in ("output", "placeholder") or mutates(node) or any(u in live for u in node.users):
            live.add(node)
    for node in reversed(list(gm.graph.nodes)):
        if node not in live:
            gm.graph.erase_node(node)
    gm.recompile()


def mutates(node: torch.fx.Node) -> bool:
    """Whether ``node`` calls an operator whose schema mutates an argument."""
    schema = getattr(node.target, "_schema", None)
    return schema is not None and schema.is_mutable


__all__ = ["Captured", "capture", "model_state", "mutates"]
