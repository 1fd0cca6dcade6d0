"""Shared helpers of the torch frontend tests: compile a function, compare
with eager, and check that the expected lowering rules ran (no fallback)."""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

import polyir

TARGET = "cpu"
"""Target of the frontend tests: the native CPU backend (the interpreter is
used where a test says so, with small shapes)."""


class Fn(torch.nn.Module):
    """A module whose forward is ``fn`` (so any function can be compiled)."""

    def __init__(self, fn: Callable[..., Any]) -> None:
        super().__init__()
        self.fn = fn

    def forward(self, *args: Any) -> Any:
        return self.fn(*args)


def check(fn: Callable[..., Any] | torch.nn.Module, *inputs: Any, ops: Sequence[str] = (),
          target: str = TARGET, rtol: float | None = None, atol: float | None = None,
          pipeline: str | None = None) -> Any:
    """Compile ``fn`` for ``inputs``, run it, compare with eager, and check that
    every operator in ``ops`` was lowered and none fell back to eager."""
    module = fn if isinstance(fn, torch.nn.Module) else Fn(fn)
    compiled = polyir.compile(module, inputs, target=target, fallback=False, pipeline=pipeline)
    got = compiled(*inputs)
    with torch.no_grad():
        want = module(*inputs)
    if (rtol is None) != (atol is None):
        rtol, atol = rtol or 1.3e-6, atol or 1e-5
    torch.testing.assert_close(got, want, rtol=rtol, atol=atol, equal_nan=True)
    summary = compiled.summary()
    assert summary["fallbacks"] == []
    for op in ops:
        assert op in summary["ops"], f"{op} not lowered; lowered: {sorted(summary['ops'])}"
    return compiled
