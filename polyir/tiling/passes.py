"""Registered passes of ``polyir.tiling``.

* ``distribute{loops=...}``: split imperfect loop nests so that bands become
  perfect (``polyir.tiling.distribute``); with ``loops`` only those loops, and
  a loop that cannot be split is an error; without, every imperfect loop is
  tried and the ones that cannot be split get a remark with the dependence.
"""
from __future__ import annotations

from dataclasses import dataclass

from polyir.context import PassContext
from polyir.ir.nodes import Function, Module
from polyir.passes import register_pass
from polyir.tiling.distribute import distribute_function


@register_pass("distribute")
@dataclass(frozen=True)
class Distribute:
    """Split imperfect loop nests (``for i { init; for k { update } }``) into
    perfect ones where the dependences allow (loop distribution)."""

    loops: tuple[str, ...] = ()

    def run(self, module: Module, ctx: PassContext) -> Module:
        functions: list[Function] = []
        for function in module.functions:
            if function.kind != "host":
                functions.append(function)
                continue
            refused: list = []
            functions.append(distribute_function(function, self.loops, refused))
            for name, error in refused:
                ctx.remark("distribute", f"function '{function.name}', loop '{name}'",
                           f"not distributed: {error}")
        if all(a is b for a, b in zip(functions, module.functions, strict=True)):
            return module
        return Module(tuple(functions))
