"""``simplify-bounds``: drop provably dominated ``max``/``min`` bound terms,
remove loops whose range is provably empty, and fold constant ``if``s.

A term is dominated when it differs from another term of the same bound by a
constant (``max(i, i + 1)`` is ``i + 1``; identical terms are kept once). A
loop is provably empty when some upper term minus some lower term is a
constant <= 0. Nothing here needs the values of the size symbols.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from polyir.ir.affine import Aff, Constraint
from polyir.ir.nodes import For, If, Module, Node
from polyir.passes import register_pass
from polyir.transforms._util import rebuild_if


def drop_dominated(terms: Sequence[Aff], largest: bool) -> tuple[Aff, ...]:
    """The terms of a ``max`` (``largest``) or ``min`` that can decide its value.

    A term is dropped when another term differs from it by a constant in the
    winning direction; of identical terms the first is kept. Order is kept.
    """
    kept: list[Aff] = []
    for term in terms:
        if any(_dominates(other, term, largest) for other in kept):
            continue
        kept = [other for other in kept if not _dominates(term, other, largest)]
        kept.append(term)
    return tuple(kept)


def _dominates(a: Aff, b: Aff, largest: bool) -> bool:
    """``a`` is always >= ``b`` (for max) or always <= ``b`` (for min)."""
    difference = a - b if largest else b - a
    return difference.is_constant and difference.constant >= 0


def provably_empty(loop: For) -> bool:
    """Some upper term is never above some lower term."""
    return any((upper - lower).is_constant and (upper - lower).constant <= 0
               for lower in loop.lower for upper in loop.upper)


def constant_truth(constraint: Constraint) -> bool | None:
    """The truth of a constraint whose two sides differ by a constant, else ``None``."""
    difference = constraint.lhs - constraint.rhs
    if not difference.is_constant:
        return None
    return constraint.holds({}) if not constraint.variables() else \
        Constraint(difference, constraint.op, Aff.const(0)).holds({})


def _simplify_nodes(nodes: Sequence[Node]) -> tuple[Node, ...]:
    result: list[Node] = []
    for node in nodes:
        result.extend(_simplify_node(node))
    return tuple(result)


def _simplify_node(node: Node) -> tuple[Node, ...]:
    if isinstance(node, For):
        loop = replace(node, lower=drop_dominated(node.lower, largest=True),
                       upper=drop_dominated(node.upper, largest=False))
        if provably_empty(loop):
            return ()
        body = _simplify_nodes(loop.body)
        return (replace(loop, body=body),) if body else ()
    if isinstance(node, If):
        return _simplify_if(node)
    return (node,)


def _simplify_if(node: If) -> tuple[Node, ...]:
    remaining: list[Constraint] = []
    for constraint in node.conditions:
        truth = constant_truth(constraint)
        if truth is False:
            return _simplify_nodes(node.else_body)
        if truth is None:
            remaining.append(constraint)
    if not remaining:
        return _simplify_nodes(node.then_body)
    then_body, else_body = _simplify_nodes(node.then_body), _simplify_nodes(node.else_body)
    if not then_body and not else_body:
        return ()
    return (rebuild_if(replace(node, conditions=tuple(remaining)), then_body, else_body),)


def simplify_bounds(module: Module) -> Module:
    """``module`` with dominated bound terms, empty loops and constant ifs removed."""
    return Module(tuple(replace(f, body=_simplify_nodes(f.body)) for f in module.functions))


@register_pass("simplify-bounds")
@dataclass(frozen=True)
class SimplifyBounds:
    """Drop dominated max/min bound terms, provably empty loops and constant ifs."""

    def run(self, module: Module) -> Module:
        return simplify_bounds(module)
