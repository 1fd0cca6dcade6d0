"""``torch.compile(model, backend="polyir")``.

Dynamo hands the backend an fx graph of torch-level calls and example inputs
(parameters are usually inputs too). The backend compiles it with
``polyir.compile`` (capture to core ATen, lowering, fallback to eager for
unsupported operators with one warning) and returns the compiled callable.

With ``torch.compile(..., dynamic=True)`` (or once dynamo marks sizes dynamic
itself), the graph takes size symbols as ``SymInt`` inputs and its tensors
have symbolic sizes. The backend then compiles one plan with those sizes
symbolic (``polyir.compile(..., dynamic=True)``, the dynamic dimensions being
exactly those dynamo made symbolic), which serves every size its guards
accept; the ``SymInt`` inputs are read back from the tensors' shapes. The
0-d float64 tensors dynamo makes of Python floats (``eps``) are compiled in
as constants: a call with another value compiles a variant for it.

:func:`summary` says what the backend compiled: each graph dynamo handed it,
the ATen operators lowered and those left to eager with their reasons (also
logged on ``polyir.dynamo`` at ``INFO``); ``summary().calls == 0`` means dynamo
never called it (see :mod:`polyir.frontends.backend_summary`).

The backend is found through the ``torch_dynamo_backends`` entry point in
``pyproject.toml``; :func:`register` also registers it by name, for an
environment where polyir is imported without being installed.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from polyir.frontends.backend_summary import BackendSummary, reset_summary, summary

__all__ = ["polyir_backend", "register", "summary", "reset_summary", "BackendSummary"]


def polyir_backend(gm: torch.fx.GraphModule, example_inputs: Sequence[Any], *,
                   options: dict[str, Any] | None = None, mode: str | None = None) -> Any:
    """A dynamo backend: compile ``gm`` for ``example_inputs``.

    ``options`` (from ``torch.compile(..., options={...})``) are
    ``polyir.compile``'s: ``target``, ``pipeline``, ``fast_math`` (``fallback`` is always on
    under torch.compile: unsupported operators run in eager). ``mode`` is
    ignored. A call that needs gradients runs ``gm`` in eager with one warning
    (``polyir.frontends.grad``): polyir compiles the forward pass only.
    """
    from polyir.frontends.backend_summary import counting_eager, record_graph
    from polyir.frontends.fx import CompiledModel, compile_model
    from polyir.frontends.grad import eager_when_training

    settings = dict(options or {})
    settings.pop("fallback", None)
    settings.pop("dynamic", None)
    nodes = sum(1 for node in gm.graph.nodes if node.op.startswith("call_"))
    models: list[Any] = []
    compiled: Any
    if any(_is_symbolic(value) for value in example_inputs):
        symbolic = _symbolic_graph(gm)
        if symbolic is not None:
            compiled = symbolic.compile(example_inputs, settings)
            variants = symbolic.variants
            record = record_graph(nodes, lambda: list(variants.values()))
        else:
            # Dynamic shapes polyir cannot read back: compile at the first call, for
            # its concrete shapes (and again for every new combination of shapes).
            compiled = CompiledModel(gm, fallback=True, **settings)
            models.append(compiled)
            record = record_graph(nodes, lambda: models)
    else:
        with torch.no_grad():
            compiled = compile_model(gm, list(example_inputs), fallback=True, **settings)
        models.append(compiled)
        record = record_graph(nodes, lambda: models)
    return eager_when_training(compiled, counting_eager(record, gm.forward), gm.parameters())


class _TensorsOnly(torch.nn.Module):
    """``gm`` called with its tensor inputs only: each ``SymInt`` input is read
    from the dimension of a tensor input that dynamo gave the same symbol, and
    each scalar input is a constant."""

    def __init__(self, gm: torch.fx.GraphModule, tensor_positions: list[int],
                 sizes: dict[int, tuple[int, int]], scalars: dict[int, float]):
        super().__init__()
        self.gm = _bake_scalars(gm, scalars)
        self.tensor_positions = tensor_positions
        self.sizes = sizes  # input position -> (index among tensors, dimension)
        self.scalars = scalars  # input position -> its (constant) value

    def forward(self, *tensors: torch.Tensor) -> Any:
        args: list[Any] = [None] * (len(self.tensor_positions) + len(self.sizes) + len(self.scalars))
        for index, position in enumerate(self.tensor_positions):
            args[position] = tensors[index]
        for position, (index, dim) in self.sizes.items():
            args[position] = tensors[index].shape[dim]
        for position, value in self.scalars.items():
            args[position] = value  # unused: its .item() calls are constants now
        return self.gm(*args)


def _bake_scalars(gm: torch.fx.GraphModule, scalars: dict[int, float]) -> torch.fx.GraphModule:
    """A copy of ``gm`` where ``placeholder.item()`` of each scalar input is its value."""
    if not scalars:
        return gm
    import copy

    baked = copy.deepcopy(gm)
    placeholders = [n for n in baked.graph.nodes if n.op == "placeholder"]
    for position, value in scalars.items():
        for user in list(placeholders[position].users):
            if user.op == "call_method" and user.target == "item":
                for consumer in list(user.users):
                    consumer.args = _replace(consumer.args, user, value)
                    consumer.kwargs = _replace(consumer.kwargs, user, value)
                baked.graph.erase_node(user)
    baked.recompile()
    return baked


class _SymbolicGraph:
    """How a dynamic dynamo graph maps onto ``polyir.compile(..., dynamic=True)``."""

    def __init__(self, gm: torch.fx.GraphModule, tensor_positions: list[int],
                 sizes: dict[int, tuple[int, int]], scalar_positions: list[int],
                 dims: list[list[bool]]):
        self.gm = gm
        self.tensor_positions = tensor_positions
        self.sizes = sizes
        self.scalar_positions = scalar_positions
        self.dims = dims
        self.variants: dict[tuple[float, ...], Any] = {}

    def variant(self, args: Sequence[Any], settings: dict[str, Any]) -> Any:
        """The compiled model for the scalar inputs' values in ``args``."""
        from polyir.frontends.fx import CompiledModel

        values = tuple(float(args[p]) for p in self.scalar_positions)
        compiled = self.variants.get(values)
        if compiled is None:
            scalars = {p: float(args[p]) for p in self.scalar_positions}
            module = _TensorsOnly(self.gm, self.tensor_positions, self.sizes, scalars)
            compiled = CompiledModel(module, fallback=True, dynamic=True, dynamic_dims=self.dims,
                                     **settings)
            self.variants[values] = compiled
        return compiled

    def compile(self, example_inputs: Sequence[Any], settings: dict[str, Any]) -> Any:
        positions = self.tensor_positions
        examples = [example_inputs[p] for p in positions]
        if not any(_is_fake(t) for t in list(examples) +
                   [example_inputs[p] for p in self.scalar_positions]):
            self.variant(example_inputs, settings).plan_for(examples)  # errors surface now

        def run(*args: Any) -> Any:
            return self.variant(args, settings)(*[args[p] for p in positions])
        run.polyir = self  # type: ignore[attr-defined]
        return run


def _replace(args: Any, node: torch.fx.Node, value: float) -> Any:
    """``args`` (nested tuples, lists, dicts) with ``node`` replaced by ``value``."""
    if args is node:
        return value
    if isinstance(args, (tuple, list)):
        return type(args)(_replace(a, node, value) for a in args)
    if isinstance(args, dict):
        return {k: _replace(v, node, value) for k, v in args.items()}
    return args


def _symbolic_graph(gm: torch.fx.GraphModule) -> _SymbolicGraph | None:
    """The tensors-only form of a graph whose ``SymInt`` inputs are all sizes of
    its tensor inputs; ``None`` otherwise."""
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    tensor_positions: list[int] = []
    scalar_positions: list[int] = []
    symbols: dict[str, tuple[int, int]] = {}
    dims: list[list[bool]] = []
    sizes: dict[int, tuple[int, int]] = {}
    pending: dict[int, str] = {}
    for position, node in enumerate(placeholders):
        value = node.meta.get("example_value")
        if isinstance(value, torch.Tensor) and value.dim() == 0 and value.dtype == torch.float64:
            scalar_positions.append(position)  # a Python float dynamo made a tensor of
        elif isinstance(value, torch.Tensor):
            index = len(tensor_positions)
            tensor_positions.append(position)
            flags = []
            for dim, size in enumerate(value.shape):
                symbolic = isinstance(size, torch.SymInt) and not _is_constant(size)
                flags.append(symbolic)
                if isinstance(size, torch.SymInt) and symbolic:
                    symbols.setdefault(str(size.node.expr), (index, dim))
            dims.append(flags)
        elif isinstance(value, torch.SymInt):
            pending[position] = str(value.node.expr)
        else:
            return None
    for position, name in pending.items():
        if name not in symbols:
            return None
        sizes[position] = symbols[name]
    return _SymbolicGraph(gm, tensor_positions, sizes, scalar_positions, dims)


def _is_constant(size: Any) -> bool:
    return bool(getattr(size.node.expr, "is_Integer", False))


def _is_fake(value: Any) -> bool:
    from torch._subclasses.fake_tensor import FakeTensor
    return isinstance(value, FakeTensor)


def _is_symbolic(value: Any) -> bool:
    """A SymInt/SymFloat, or a tensor with a symbolic size or a fake one."""
    if isinstance(value, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        return True
    if isinstance(value, torch.Tensor):
        return _is_fake(value) or any(not isinstance(size, int) for size in value.shape)
    return False


def register() -> None:
    """Register ``polyir`` with dynamo by name (idempotent)."""
    from torch._dynamo import list_backends, register_backend

    if "polyir" not in list_backends(exclude_tags=()):
        register_backend(polyir_backend, name="polyir")
