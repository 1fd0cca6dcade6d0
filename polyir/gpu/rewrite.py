"""Small IR utilities of the GPU mapping: name collection, variable substitution,
access summaries.

Everything here is a pure function of frozen IR nodes.
"""
from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import replace

from polyir.ir.affine import Aff, Constraint, FloorDiv, Mod
from polyir.ir.nodes import (
    Assign,
    BinOp,
    Call,
    Cast,
    Compare,
    Const,
    Expr,
    For,
    FragmentFill,
    FragmentLoad,
    FragmentMMA,
    FragmentStore,
    If,
    Index,
    Launch,
    Load,
    Node,
    Select,
    Var,
)
from polyir.ir.types import DType

FRAGMENT_NODES = (FragmentFill, FragmentLoad, FragmentMMA, FragmentStore)


# ------------------------------------------------------------------ walking
def walk_nodes(nodes: Iterable[Node]) -> Iterator[Node]:
    """Every node of ``nodes`` and of their bodies, outer first."""
    for node in nodes:
        yield node
        if isinstance(node, For):
            yield from walk_nodes(node.body)
        elif isinstance(node, If):
            yield from walk_nodes(node.then_body)
            yield from walk_nodes(node.else_body)


def walk_expr(e: object) -> Iterator[object]:
    """``e`` and every sub-expression, including gather subscripts."""
    stack = [e]
    while stack:
        item = stack.pop()
        yield item
        if isinstance(item, Load):
            stack.extend(i for i in item.indices if not isinstance(i, Aff))
        elif isinstance(item, (BinOp, Compare)):
            stack.extend((item.lhs, item.rhs))
        elif isinstance(item, Call):
            stack.extend(item.args)
        elif isinstance(item, Select):
            stack.extend((item.cond, item.if_true, item.if_false))
        elif isinstance(item, Cast):
            stack.append(item.value)


def _index_exprs(indices: Iterable[Index]) -> Iterator[Expr]:
    for index in indices:
        if not isinstance(index, Aff):
            yield index


def node_exprs(node: Node) -> list[Expr]:
    """The value expressions held directly by ``node`` (not by its body)."""
    if isinstance(node, Assign):
        return [node.value, *_index_exprs(node.indices)]
    if isinstance(node, FragmentFill):
        return [node.value]
    return []


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


def buffers_used(nodes: Iterable[Node]) -> set[str]:
    """Names of every buffer read or written anywhere in ``nodes``."""
    reads, writes = buffer_accesses(nodes)
    return reads | writes


def buffer_accesses(nodes: Iterable[Node]) -> tuple[set[str], set[str]]:
    """``(read, written)`` buffer names of ``nodes``."""
    reads: set[str] = set()
    writes: set[str] = set()
    for node in walk_nodes(nodes):
        for e in node_exprs(node):
            reads |= {s.buffer for s in walk_expr(e) if isinstance(s, Load)}
        if isinstance(node, Assign):
            writes.add(node.buffer)
        elif isinstance(node, FragmentFill):
            writes.add(node.fragment)
        elif isinstance(node, FragmentLoad):
            reads.add(node.buffer)
            writes.add(node.fragment)
        elif isinstance(node, FragmentMMA):
            reads |= {node.a, node.b, node.acc}
            writes.add(node.result)
        elif isinstance(node, FragmentStore):
            reads.add(node.fragment)
            writes.add(node.buffer)
        elif isinstance(node, Launch):
            reads |= set(node.args)
            writes |= set(node.args)
    return reads, writes


def contains(nodes: Iterable[Node], kinds: tuple[type, ...]) -> bool:
    """True when some node in ``nodes`` (at any depth) is an instance of ``kinds``."""
    return any(isinstance(n, kinds) for n in walk_nodes(nodes))


def contains_parallel_loop(nodes: Iterable[Node]) -> bool:
    return any(isinstance(n, For) and (n.parallel or n.mapping is not None)
               for n in walk_nodes(nodes))


# -------------------------------------------------------------- substitution
def aff_to_expr(a: Aff) -> Expr:
    """An ``i64`` value expression equal to affine ``a`` (floor semantics kept)."""
    total: Expr | None = None
    for atom, coeff in a.terms:
        if isinstance(atom, str):
            term: Expr = Var(atom)
        elif isinstance(atom, FloorDiv):
            term = _floor_div(aff_to_expr(atom.expr), atom.divisor)
        else:
            assert isinstance(atom, Mod)
            term = _floor_mod(aff_to_expr(atom.expr), atom.divisor)
        if coeff != 1:
            term = BinOp("*", Const(coeff, DType.I64), term)
        total = term if total is None else BinOp("+", total, term)
    if total is None:
        return Const(a.constant, DType.I64)
    if a.constant:
        total = BinOp("+", total, Const(a.constant, DType.I64))
    return total


def _floor_div(e: Expr, d: int) -> Expr:
    d_const = Const(d, DType.I64)
    quotient = BinOp("/", e, d_const)
    negative_rest = Compare("<", BinOp("%", e, d_const), Const(0, DType.I64))
    return Select(negative_rest, BinOp("-", quotient, Const(1, DType.I64)), quotient)


def _floor_mod(e: Expr, d: int) -> Expr:
    d_const = Const(d, DType.I64)
    rest = BinOp("%", e, d_const)
    return Select(Compare("<", rest, Const(0, DType.I64)), BinOp("+", rest, d_const), rest)


def substitute_expr(e: Expr, mapping: dict[str, Aff]) -> Expr:
    """``e`` with every ``Var`` named in ``mapping`` replaced by its value."""
    if isinstance(e, Var):
        return aff_to_expr(mapping[e.name]) if e.name in mapping else e
    if isinstance(e, Load):
        return Load(e.buffer, substitute_indices(e.indices, mapping))
    if isinstance(e, BinOp):
        return BinOp(e.op, substitute_expr(e.lhs, mapping), substitute_expr(e.rhs, mapping))
    if isinstance(e, Compare):
        return Compare(e.op, substitute_expr(e.lhs, mapping), substitute_expr(e.rhs, mapping))
    if isinstance(e, Call):
        return Call(e.fn, tuple(substitute_expr(a, mapping) for a in e.args))
    if isinstance(e, Select):
        return Select(substitute_expr(e.cond, mapping), substitute_expr(e.if_true, mapping),
                      substitute_expr(e.if_false, mapping))
    if isinstance(e, Cast):
        return Cast(e.dtype, substitute_expr(e.value, mapping))
    return e


def substitute_indices(indices: tuple[Index, ...], mapping: dict[str, Aff]) -> tuple[Index, ...]:
    return tuple(i.substitute(mapping) if isinstance(i, Aff) else substitute_expr(i, mapping)
                 for i in indices)


def substitute(nodes: Iterable[Node], mapping: dict[str, Aff]) -> tuple[Node, ...]:
    """``nodes`` with the free variables named in ``mapping`` replaced by affine
    expressions (in subscripts, bounds, conditions and value expressions).
    Loops that rebind a name shadow it in their body."""
    return tuple(_substitute_node(n, mapping) for n in nodes)


def _substitute_node(node: Node, mapping: dict[str, Aff]) -> Node:
    if not mapping:
        return node
    if isinstance(node, Assign):
        return replace(node, indices=substitute_indices(node.indices, mapping),
                       value=substitute_expr(node.value, mapping))
    if isinstance(node, For):
        inner = {k: v for k, v in mapping.items() if k != node.var}
        return replace(node, lower=tuple(a.substitute(mapping) for a in node.lower),
                       upper=tuple(a.substitute(mapping) for a in node.upper),
                       body=substitute(node.body, inner))
    if isinstance(node, If):
        return replace(node, conditions=tuple(c.substitute(mapping) for c in node.conditions),
                       then_body=substitute(node.then_body, mapping),
                       else_body=substitute(node.else_body, mapping))
    if isinstance(node, FragmentFill):
        return replace(node, value=substitute_expr(node.value, mapping))
    if isinstance(node, (FragmentLoad, FragmentStore)):
        return replace(node, indices=tuple(a.substitute(mapping) for a in node.indices))
    if isinstance(node, Launch):
        gx, gy, gz = node.grid
        return replace(node, grid=(gx.substitute(mapping), gy.substitute(mapping), gz.substitute(mapping)))
    return node


def fresh_name(base: str, taken: set[str]) -> str:
    """``base`` or ``base1``, ``base2``, ... whichever is not in ``taken``; adds it."""
    name, n = base, 0
    while name in taken:
        n += 1
        name = f"{base}{n}"
    taken.add(name)
    return name


def guard(constraints: list[Constraint], body: tuple[Node, ...]) -> tuple[Node, ...]:
    """``body`` under ``if (constraints)`` (no ``If`` when there are none)."""
    if not constraints:
        return body
    return (If(tuple(constraints), body),)


__all__ = ["walk_nodes", "walk_expr", "node_exprs", "node_affs", "used_variables",
           "bound_variables", "buffers_used", "buffer_accesses", "contains",
           "contains_parallel_loop", "aff_to_expr", "substitute", "substitute_expr",
           "fresh_name", "guard", "FRAGMENT_NODES"]
