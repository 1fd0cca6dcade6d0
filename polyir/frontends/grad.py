"""Gradients are not compiled: say so loudly instead of dropping autograd.

polyir generates forward code only; its outputs never carry an autograd graph.
* ``polyir.compile``: the first call that would need gradients (grad mode on
  and an input or a parameter requiring grad) warns once
  (:class:`PolyirGradientWarning`): the outputs do not require grad, so
  ``backward()`` would fail later with torch's generic error.
* ``torch.compile(backend="polyir")``: a call that needs gradients runs the
  graph in eager (autograd works) and warns once; calls under
  ``torch.no_grad()`` / ``torch.inference_mode()`` run the compiled code.
"""
from __future__ import annotations

import types
import warnings
from collections.abc import Callable, Iterable
from typing import Any

import torch
from torch.utils import _pytree as pytree


class PolyirGradientWarning(UserWarning):
    """polyir ran (or would run) where torch expected gradients."""


def needs_gradients(args: Iterable[Any], parameters: Iterable[torch.Tensor] = ()) -> bool:
    """Grad mode is on and a tensor among ``args`` (nested) or ``parameters`` requires grad."""
    if not torch.is_grad_enabled():
        return False
    flat, _ = pytree.tree_flatten(tuple(args))
    if any(isinstance(leaf, torch.Tensor) and leaf.requires_grad for leaf in flat):
        return True
    return any(p.requires_grad for p in parameters)


def warn_detached(model: torch.nn.Module, args: Iterable[Any]) -> bool:
    """Warn (once per caller: returns True when it did) that ``polyir.compile``'s
    outputs carry no gradients although this call would need them."""
    if not needs_gradients(args, model.parameters()):
        return False
    warnings.warn("polyir.compile: gradients are required here (grad mode is on and an input or "
                  "parameter requires grad) but polyir compiles the forward pass only: the "
                  "outputs do not require grad and backward() will fail. Run inference under "
                  "torch.no_grad(), or train in eager / torch.compile(backend='polyir'), which "
                  "falls back to eager when gradients are needed.",
                  PolyirGradientWarning, stacklevel=3)
    return True


def eager_when_training(compiled: Callable[..., Any], eager: Callable[..., Any],
                        parameters: Iterable[torch.Tensor] = ()) -> Callable[..., Any]:
    """A callable running ``compiled``, or ``eager`` (with one warning) for a
    call that needs gradients (of its arguments or of ``parameters``)."""
    warned = False
    params = list(parameters)

    def call(*args: Any) -> Any:
        nonlocal warned
        if needs_gradients(args, params):
            if not warned:
                warned = True
                warnings.warn("torch.compile(backend='polyir'): this graph needs gradients; "
                              "polyir compiles the forward pass only, so it runs in eager "
                              "(use torch.no_grad() for compiled inference)",
                              PolyirGradientWarning, stacklevel=2)
            return eager(*args)
        return compiled(*args)

    if isinstance(compiled, types.FunctionType):
        call.__dict__.update(compiled.__dict__)  # e.g. ``run.polyir`` of a dynamic graph
    call.compiled = compiled  # type: ignore[attr-defined]
    return call
