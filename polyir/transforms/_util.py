"""Helpers shared by the simple passes."""
from __future__ import annotations

from dataclasses import replace

from polyir.ir.affine import Constraint
from polyir.ir.nodes import If, Node

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
