"""Build an executable from IR for a target: the one place backends are chosen.

``build(module, target)`` returns an object with ``ir`` (the final IR),
``llvm_ir`` (text, or ``None`` for the interpreter), ``ptx`` (text for CUDA,
else ``None``) and ``__call__(*args)`` following the entry function's calling
convention (see ``polyir.ir.nodes.Function``).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from polyir.ir.nodes import Module
from polyir.target import Target, resolve


@dataclass
class InterpretedExecutable:
    """Runs the IR in the reference interpreter (target ``"interpret"``)."""

    ir: Module
    target: Target
    llvm_ir: str | None = None
    ptx: str | None = None

    def __call__(self, *args: Any) -> None:
        from polyir.ir.interpreter import interpret
        interpret(self.ir, *args)


def build(module: Module, target: Target | str | None = None, *, fast_math: bool = False) -> Any:
    """Compile ``module`` for ``target`` (default: the native CPU).

    ``fast_math``: the CPU backend may contract float multiply-adds into FMAs
    and reassociate float operations (vectorised reductions); results then
    differ from exact IEEE evaluation by rounding. The interpreter is always
    exact; the CUDA backend ignores it (ptxas contracts multiply-adds anyway).
    """
    resolved = resolve(target)
    if resolved.kind == "interpret":
        return InterpretedExecutable(module, resolved)
    if resolved.kind == "cpu":
        from polyir.cpu.jit import build_cpu
        return build_cpu(module, resolved, fast_math=fast_math)
    if resolved.kind == "cuda":
        from polyir.ptx.build import build_cuda
        return build_cuda(module, resolved)
    raise ValueError(f"no backend for target {resolved.name}")
