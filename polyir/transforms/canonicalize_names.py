"""``canonicalize-names``: renumber statements ``S0, S1, ...`` in program order."""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from polyir.ir.nodes import (
    For,
    Function,
    If,
    Module,
    Node,
)
from polyir.ir.walk import STATEMENT_NODES
from polyir.passes import register_pass

NAMED_STATEMENTS = STATEMENT_NODES


class _Renamer:
    def __init__(self, prefix: str):
        self.prefix, self.count = prefix, 0

    def nodes(self, nodes: Sequence[Node]) -> tuple[Node, ...]:
        return tuple(self.node(node) for node in nodes)

    def node(self, node: Node) -> Node:
        if isinstance(node, NAMED_STATEMENTS):
            name = f"{self.prefix}{self.count}"
            self.count += 1
            return replace(node, name=name)
        if isinstance(node, For):
            return replace(node, body=self.nodes(node.body))
        if isinstance(node, If):
            then_body = self.nodes(node.then_body)
            return replace(node, then_body=then_body, else_body=self.nodes(node.else_body))
        return node


def canonicalize_function(function: Function, prefix: str = "S") -> Function:
    """``function`` with its statements named ``prefix0, prefix1, ...`` in text order."""
    return replace(function, body=_Renamer(prefix).nodes(function.body))


def canonicalize_names(module: Module, prefix: str = "S") -> Module:
    """Every function of ``module`` renumbered (each function counts from 0)."""
    return Module(tuple(canonicalize_function(f, prefix) for f in module.functions))


@register_pass("canonicalize-names")
@dataclass(frozen=True)
class CanonicalizeNames:
    """Renumber statements S0, S1, ... in program order (per function)."""

    prefix: str = "S"

    def __post_init__(self) -> None:
        if not (self.prefix.isascii() and self.prefix.isidentifier()):
            raise ValueError(f"prefix must be an ASCII identifier (statement names are "
                             f"'{{prefix}}0', ...), not {self.prefix!r}")

    def run(self, module: Module) -> Module:
        return canonicalize_names(module, self.prefix)
