"""``torch.compile(model, backend="polyir")``.

Dynamo hands the backend an fx graph of torch-level calls and example inputs
(parameters are usually inputs too). The backend compiles it with
``polyir.compile`` (capture to core ATen, lowering, fallback to eager for
unsupported operators with one warning) and returns the compiled callable.

The backend is found through the ``torch_dynamo_backends`` entry point in
``pyproject.toml``; :func:`register` also registers it by name, for an
environment where polyir is imported without being installed.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch


def polyir_backend(gm: torch.fx.GraphModule, example_inputs: Sequence[Any], *,
                   options: dict[str, Any] | None = None, mode: str | None = None) -> Any:
    """A dynamo backend: compile ``gm`` for ``example_inputs``.

    ``options`` (from ``torch.compile(..., options={...})``) are
    ``polyir.compile``'s: ``target``, ``pipeline``, ``fast_math`` (``fallback`` is always on
    under torch.compile: unsupported operators run in eager). ``mode`` is
    ignored.
    """
    from polyir.frontends.fx import CompiledModel, compile_model

    settings = dict(options or {})
    settings.pop("fallback", None)
    if any(_is_symbolic(value) for value in example_inputs):
        # Dynamic shapes: compile at the first call, for its concrete shapes
        # (and again for every new combination of shapes).
        return CompiledModel(gm, fallback=True, **settings)
    return compile_model(gm, list(example_inputs), fallback=True, **settings)


def _is_symbolic(value: Any) -> bool:
    """A SymInt/SymFloat, or a tensor with a symbolic size or a fake one."""
    if isinstance(value, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        return True
    if isinstance(value, torch.Tensor):
        from torch._subclasses.fake_tensor import FakeTensor
        return isinstance(value, FakeTensor) or any(
            not isinstance(size, int) for size in value.shape)
    return False


def register() -> None:
    """Register ``polyir`` with dynamo by name (idempotent)."""
    from torch._dynamo import list_backends, register_backend

    if "polyir" not in list_backends(exclude_tags=()):
        register_backend(polyir_backend, name="polyir")
