"""Small IR utilities of the GPU mapping: variable and loop queries, fresh
names, guards. The generic walkers and substitution live in ``polyir.ir.walk``.

Everything here is a pure function of frozen IR nodes.
"""
from __future__ import annotations

from collections.abc import Iterable

from polyir.ir.affine import Aff
from polyir.ir.builder import guard
from polyir.ir.names import claim_name as fresh_name
from polyir.ir.nodes import (
    Assign,
    For,
    FragmentLoad,
    FragmentStore,
    If,
    Launch,
    Load,
    Node,
    Var,
)
from polyir.ir.walk import FRAGMENT_NODES, node_exprs, walk_expr, walk_nodes


# ------------------------------------------------------------------ queries
def node_affs(node: Node) -> list[Aff]:
    """The affine expressions held directly by ``node`` (not by its body)."""
    if isinstance(node, Assign):
        return [i for i in node.indices if isinstance(i, Aff)]
    if isinstance(node, For):
        return [*node.lower, *node.upper]
    if isinstance(node, If):
        return [a for c in node.conditions for a in (c.lhs, c.rhs)]
    if isinstance(node, (FragmentLoad, FragmentStore)):
        return list(node.indices)
    if isinstance(node, Launch):
        return list(node.grid)
    return []


def used_variables(nodes: Iterable[Node]) -> set[str]:
    """Every variable name read anywhere in ``nodes`` (bound or free)."""
    names: set[str] = set()
    for node in walk_nodes(nodes):
        for a in node_affs(node):
            names |= a.variables()
        for e in node_exprs(node):
            for sub in walk_expr(e):
                if isinstance(sub, Var):
                    names.add(sub.name)
                elif isinstance(sub, Load):
                    for i in sub.indices:
                        if isinstance(i, Aff):
                            names |= i.variables()
    return names


def bound_variables(nodes: Iterable[Node]) -> set[str]:
    """Names of every loop variable bound in ``nodes``."""
    return {n.var for n in walk_nodes(nodes) if isinstance(n, For)}


def contains(nodes: Iterable[Node], kinds: tuple[type, ...]) -> bool:
    """True when some node in ``nodes`` (at any depth) is an instance of ``kinds``."""
    return any(isinstance(n, kinds) for n in walk_nodes(nodes))


def contains_parallel_loop(nodes: Iterable[Node]) -> bool:
    return any(isinstance(n, For) and (n.parallel or n.mapping is not None)
               for n in walk_nodes(nodes))


__all__ = ["node_affs", "used_variables", "bound_variables", "contains",
           "contains_parallel_loop", "fresh_name", "guard", "FRAGMENT_NODES"]
