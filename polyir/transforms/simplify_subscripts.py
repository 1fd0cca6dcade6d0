"""``simplify-subscripts``: floor divisions and remainders that the enclosing
loops' ranges decide, written as plain affine expressions.

A reshape lowers to subscripts such as ``x[i // 32, i % 32, r]`` over a loop
``i = 0 to 256``. Once fusion has sliced that loop to one block,
``for i = 32*b to 32*b + 32``, the quotient is ``b`` and the remainder
``i - 32*b`` at every iteration, but the subscripts still say ``//`` and
``%``: isl models each with an existential variable, which makes dependence
analyses of the fused nest far costlier (past the analysis budget, where
``distribute`` and ``auto-tile`` keep the nest whole), and the native code
divides where it could add.

The rule, for ``e // d`` (and ``e % d = e - d*(e // d)``): while ``e`` has a
term ``c*v`` with ``c`` not a multiple of ``d``, ``v`` must be a loop
variable whose loop has a lower bound term ``L`` and an upper bound term
``U`` with ``U - L`` a constant ``n``: then ``v = L + t`` with ``0 <= t <
n``, and ``v`` is replaced by ``L`` (whose variables are outer loops' or
symbols) while ``c*t`` widens the range of the remainder part. When no term
is left with such a coefficient, ``e = d*q + k + T`` with ``q`` affine,
``k`` a constant and ``T`` in a known interval; if ``floor((k + T) / d)`` is
the same constant ``m`` over the whole interval, ``e // d`` is ``q + m``.
Anything else is kept as it is. The rewrite is exact at every iteration the
loops run (steps and guards only make the ranges smaller), with no isl call
and no assumption on the symbols.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from polyir.ir.affine import Aff, Constraint, FloorDiv, Mod
from polyir.ir.nodes import (
    Assign,
    Expr,
    For,
    FragmentLoad,
    FragmentStore,
    If,
    Index,
    Module,
    Node,
)
from polyir.ir.walk import loads, map_loads, walk_nodes
from polyir.passes import register_pass

if TYPE_CHECKING:
    from polyir.context import PassContext

_Ranges = Mapping[str, tuple[Aff, int]]
"""Loop variable -> (a lower bound term ``L``, the constant extent ``n``): ``L <= v < L + n``."""


def loop_range(loop: For) -> tuple[Aff, int] | None:
    """``(L, n)`` with ``L <= loop.var < L + n`` at every iteration, ``n`` the
    smallest constant difference between an upper and a lower bound term;
    ``None`` when no pair of terms differs by a constant."""
    best: tuple[Aff, int] | None = None
    for lower in loop.lower:
        for upper in loop.upper:
            difference = upper - lower
            if difference.is_constant and (best is None or difference.constant < best[1]):
                best = (lower, difference.constant)
    return best


def _split(expr: Aff, divisor: int, ranges: _Ranges) -> tuple[Aff, int, int] | None:
    """``(q, lo, hi)`` with ``expr == divisor*q + T`` and ``lo <= T <= hi`` at
    every iteration, or ``None``."""
    low = high = 0
    for _ in range(64):                                  # at most one step per enclosing loop
        offending = [(atom, c) for atom, c in expr.terms if c % divisor]
        if not offending:
            quotient = Aff._from_dict({a: c // divisor for a, c in expr.terms}, 0)
            return quotient, low + expr.constant, high + expr.constant
        atom, c = offending[-1]
        if not isinstance(atom, str) or atom not in ranges:
            return None
        lower, extent = ranges[atom]
        if extent <= 0:
            return None                                   # the loop never runs: leave it alone
        expr = expr - Aff.var(atom) * c + lower * c
        if c > 0:
            high += c * (extent - 1)
        else:
            low += c * (extent - 1)
    return None


def simplify_aff(aff: Aff, ranges: _Ranges) -> Aff:
    """``aff`` with every floor division and remainder (nested ones first) that
    ``ranges`` decide replaced by an affine expression."""
    if aff.is_linear:
        return aff
    result = Aff.const(aff.constant)
    for atom, c in aff.terms:
        if isinstance(atom, str):
            result = result + Aff.var(atom) * c
            continue
        inner = simplify_aff(atom.expr, ranges)
        split = _split(inner, atom.divisor, ranges)
        quotient: Aff | None = None
        if split is not None:
            q, low, high = split
            if low // atom.divisor == high // atom.divisor:
                quotient = q + low // atom.divisor
        if quotient is None:
            value = inner // atom.divisor if isinstance(atom, FloorDiv) else inner % atom.divisor
        elif isinstance(atom, FloorDiv):
            value = quotient
        else:
            assert isinstance(atom, Mod)
            value = inner - quotient * atom.divisor
        result = result + value * c
    return result


def _index(index: Index, ranges: _Ranges) -> Index:
    if isinstance(index, Aff):
        return simplify_aff(index, ranges)
    return _expr(index, ranges)


def _expr(expr: Expr, ranges: _Ranges) -> Expr:
    return map_loads(expr, lambda load: replace(
        load, indices=tuple(_index(i, ranges) for i in load.indices)))


def _constraint(constraint: Constraint, ranges: _Ranges) -> Constraint:
    return replace(constraint, lhs=simplify_aff(constraint.lhs, ranges),
                   rhs=simplify_aff(constraint.rhs, ranges))


def _nodes(nodes: tuple[Node, ...], ranges: _Ranges) -> tuple[Node, ...]:
    result = tuple(_node(n, ranges) for n in nodes)
    return nodes if all(a is b for a, b in zip(result, nodes, strict=True)) else result


def _same(old: tuple[Aff, ...] | tuple[Index, ...], new: tuple[Aff, ...] | tuple[Index, ...]) -> bool:
    return all(a == b for a, b in zip(old, new, strict=True))


def _node(node: Node, ranges: _Ranges) -> Node:
    if isinstance(node, Assign):
        indices = tuple(_index(i, ranges) for i in node.indices)
        value = _expr(node.value, ranges)
        if _same(node.indices, indices) and value == node.value:
            return node
        return replace(node, indices=indices, value=value)
    if isinstance(node, For):
        lower = tuple(simplify_aff(a, ranges) for a in node.lower)
        upper = tuple(simplify_aff(a, ranges) for a in node.upper)
        inner = dict(ranges)
        inner.pop(node.var, None)
        span = loop_range(replace(node, lower=lower, upper=upper))
        if span is not None and node.var not in span[0].variables():
            inner[node.var] = span
        body = _nodes(node.body, inner)
        if _same(node.lower, lower) and _same(node.upper, upper) and body is node.body:
            return node
        return replace(node, lower=lower, upper=upper, body=body)
    if isinstance(node, If):
        conditions = tuple(_constraint(c, ranges) for c in node.conditions)
        then_body, else_body = _nodes(node.then_body, ranges), _nodes(node.else_body, ranges)
        if conditions == node.conditions and then_body is node.then_body \
                and else_body is node.else_body:
            return node
        return replace(node, conditions=conditions, then_body=then_body, else_body=else_body)
    if isinstance(node, (FragmentLoad, FragmentStore)):
        corner = tuple(simplify_aff(a, ranges) for a in node.indices)
        return node if _same(node.indices, corner) else replace(node, indices=corner)
    return node


def simplify_subscripts(module: Module) -> Module:
    """``module`` with the floor divisions and remainders that its loops'
    ranges decide written as affine expressions (the same module when none is)."""
    functions = tuple(replace(f, body=body) if (body := _nodes(f.body, {})) is not f.body else f
                      for f in module.functions)
    changed = any(new is not old for new, old in zip(functions, module.functions, strict=True))
    return Module(functions) if changed else module


def _quasi_affine_count(nodes: tuple[Node, ...]) -> int:
    """How many floor divisions and remainders the subscripts of ``nodes`` hold."""
    count = 0
    for node in walk_nodes(nodes):
        if isinstance(node, Assign):
            indices = [*node.indices, *(i for load in loads(node.value) for i in load.indices)]
            count += sum(i.atom_count() for i in indices if isinstance(i, Aff))
    return count


@register_pass("simplify-subscripts")
@dataclass(frozen=True)
class SimplifySubscripts:
    """Floor divisions and remainders decided by the enclosing loops' ranges
    written as affine expressions (``polyir.transforms.simplify_subscripts``)."""

    def run(self, module: Module, ctx: PassContext) -> Module:
        """``module`` simplified; a remark says how many were rewritten, or
        that none could be."""
        result = simplify_subscripts(module)
        for old, new in zip(module.functions, result.functions, strict=True):
            before = _quasi_affine_count(old.body)
            if not before:
                continue
            after = before if new is old else _quasi_affine_count(new.body)
            where = f"function '{old.name}'"
            if after < before:
                ctx.remark("simplify-subscripts", where,
                           f"{before - after} of {before} floor divisions or remainders in "
                           "subscripts decided by their loops' ranges", "applied")
            else:
                ctx.remark("simplify-subscripts", where,
                           f"none of {before} floor divisions or remainders in subscripts "
                           "is decided by its loops' ranges (no loop of constant extent "
                           "keeps the value within one multiple of the divisor)")
        return result


__all__ = ["simplify_subscripts", "simplify_aff", "loop_range", "SimplifySubscripts"]
