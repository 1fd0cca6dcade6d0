"""Helpers shared by the simple passes."""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

from polyir.ir.affine import Constraint
from polyir.ir.nodes import Buffer, For, If, Node

NEGATION = {"<": ">=", "<=": ">", ">": "<=", ">=": "<"}


def rebuild_if(node: If, then_body: tuple[Node, ...], else_body: tuple[Node, ...]) -> If:
    """``node`` with new branches (not both empty). An empty then-branch is
    avoided by negating a single inequality (``if (c) {} else {X}`` becomes
    ``if (not c) {X}``); a conjunction or an equality keeps the empty branch."""
    if not then_body and len(node.conditions) == 1 and node.conditions[0].op in NEGATION:
        c = node.conditions[0]
        return replace(node, conditions=(Constraint(c.lhs, NEGATION[c.op], c.rhs),),
                       then_body=else_body, else_body=())
    return replace(node, then_body=then_body, else_body=else_body)


def prune_leaves(nodes: Sequence[Node], keep: Callable[[Node], bool],
                 scoped: Callable[[For], tuple[Buffer, ...]] | None = None) -> tuple[Node, ...]:
    """``nodes`` with only the leaves (statements, launches, barriers) that
    ``keep`` accepts; loops and ifs left empty are dropped. A kept loop's
    locals are ``scoped(loop)`` (default: as they were)."""
    kept: list[Node] = []
    for node in nodes:
        if isinstance(node, For):
            body = prune_leaves(node.body, keep, scoped)
            if body:
                kept.append(replace(node, body=body, locals=node.locals if scoped is None else scoped(node)))
        elif isinstance(node, If):
            then_body = prune_leaves(node.then_body, keep, scoped)
            else_body = prune_leaves(node.else_body, keep, scoped)
            if then_body or else_body:
                kept.append(rebuild_if(node, then_body, else_body))
        elif keep(node):
            kept.append(node)
    return tuple(kept)
