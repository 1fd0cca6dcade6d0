"""Traversals of the IR shared by the passes and backends.

Every helper is a pure function of frozen nodes: walkers yield nodes or
expressions in program order, rewriters build new nodes with
``dataclasses.replace`` and leave their input untouched.

* :func:`walk_nodes`, :func:`leaf_nodes`, :func:`statements`: the nodes of a body.
* :func:`walk_expr`, :func:`loads`, :func:`node_exprs`: the value expressions.
* :func:`node_accesses`, :func:`buffer_accesses`, :func:`buffers_used`: buffer names.
* :func:`aff_to_expr`, :func:`substitute_expr`, :func:`substitute_indices`,
  :func:`substitute_node`, :func:`substitute`: replacing variables by affine values.
* :func:`map_loops`: rebuilding a body loop by loop.
"""
from __future__ import annotations

import weakref
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, replace
from typing import Any

from polyir.ir.affine import Aff, FloorDiv, Mod
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
    Statement,
    Var,
)
from polyir.ir.types import DType

FRAGMENT_NODES = (FragmentFill, FragmentLoad, FragmentMMA, FragmentStore)
"""The warp-level tensor-core (fragment) operations."""
STATEMENT_NODES = (Assign, *FRAGMENT_NODES)
"""The node classes of ``Statement``: the named, polyhedral statements."""


# ------------------------------------------------------------------ nodes
def walk_nodes(nodes: Iterable[Node]) -> Iterator[Node]:
    """Every node of ``nodes`` and of the bodies under them, in pre-order:
    a ``For`` before its body, an ``If`` before its then-branch, then its else-branch."""
    for node in nodes:
        yield node
        if isinstance(node, For):
            yield from walk_nodes(node.body)
        elif isinstance(node, If):
            yield from walk_nodes(node.then_body)
            yield from walk_nodes(node.else_body)


def leaf_nodes(nodes: Iterable[Node]) -> Iterator[Node]:
    """Every node under ``nodes`` that is neither a ``For`` nor an ``If``
    (statements, barriers, launches), in program order."""
    return (node for node in walk_nodes(nodes) if not isinstance(node, (For, If)))


def statements(nodes: Iterable[Node]) -> Iterator[Statement]:
    """Every named statement (``Assign`` or fragment operation) under ``nodes``,
    in program order."""
    for node in walk_nodes(nodes):
        if isinstance(node, STATEMENT_NODES):
            yield node


# ------------------------------------------------------------ expressions
def _children(expr: Index) -> tuple[Index, ...]:
    """The direct sub-expressions of ``expr``; of a ``Load``, its gather subscripts."""
    if isinstance(expr, Load):
        return tuple(i for i in expr.indices if not isinstance(i, Aff))
    if isinstance(expr, (BinOp, Compare)):
        return (expr.lhs, expr.rhs)
    if isinstance(expr, Call):
        return expr.args
    if isinstance(expr, Select):
        return (expr.cond, expr.if_true, expr.if_false)
    if isinstance(expr, Cast):
        return (expr.value,)
    return ()


def walk_expr(expr: Index) -> Iterator[Index]:
    """``expr`` and every sub-expression, gather subscripts included, in
    pre-order (operands left to right). An ``Aff`` (an affine subscript) is
    yielded as it is, without looking inside."""
    stack: list[Index] = [expr]
    while stack:
        item = stack.pop()
        yield item
        stack.extend(reversed(_children(item)))


def loads(expr: Index) -> Iterator[Load]:
    """Every ``Load`` in ``expr``, those in gather subscripts included, in pre-order."""
    for sub in walk_expr(expr):
        if isinstance(sub, Load):
            yield sub


def node_exprs(node: Node) -> list[Expr]:
    """The value expressions held directly by ``node`` (not by its body):
    an ``Assign``'s value and gather subscripts, a ``FragmentFill``'s value."""
    if isinstance(node, Assign):
        return [node.value, *(i for i in node.indices if not isinstance(i, Aff))]
    if isinstance(node, FragmentFill):
        return [node.value]
    return []


# ------------------------------------------------------------ buffer accesses
def node_accesses(node: Node) -> tuple[set[str], set[str]]:
    """``(read, written)`` buffer names of ``node`` itself (not of its body).

    Fragments count as buffers; a ``Launch`` reads and writes all its arguments."""
    reads = {load.buffer for e in node_exprs(node) for load in loads(e)}
    if isinstance(node, Assign):
        return reads, {node.buffer}
    if isinstance(node, FragmentFill):
        return reads, {node.fragment}
    if isinstance(node, FragmentLoad):
        return {node.buffer}, {node.fragment}
    if isinstance(node, FragmentMMA):
        return {node.a, node.b, node.acc}, {node.result}
    if isinstance(node, FragmentStore):
        return {node.fragment}, {node.buffer}
    if isinstance(node, Launch):
        return set(node.args), set(node.args)
    return set(), set()


def buffer_accesses(nodes: Iterable[Node], launches: bool = True) -> tuple[set[str], set[str]]:
    """``(read, written)`` buffer names anywhere under ``nodes`` (a ``Launch``'s
    arguments count unless ``launches`` is False)."""
    reads: set[str] = set()
    writes: set[str] = set()
    for node in nodes:
        node_reads, node_writes = subtree_accesses(node) if launches else _accesses_without_launches(node)
        reads |= node_reads
        writes |= node_writes
    return reads, writes


_SUBTREE: dict[int, tuple[weakref.ref[Node], Any]] = {}


def remembered(node: Node, table: dict[int, tuple[weakref.ref[Node], Any]],
               compute: Callable[[Node], Any]) -> Any:
    """``compute(node)``, remembered in ``table`` per node object for as long as the
    node lives (nodes are immutable, so the answer cannot change)."""
    entry = table.get(id(node))
    if entry is not None and entry[0]() is node:
        return entry[1]
    value = compute(node)
    key = id(node)

    def forget(_: weakref.ref[Node]) -> None:
        table.pop(key, None)

    try:
        ref = weakref.ref(node, forget)
    except TypeError:  # not weakly referable: not remembered
        return value
    table[key] = (ref, value)
    return value


def subtree_accesses(node: Node) -> tuple[frozenset[str], frozenset[str]]:
    """``(read, written)`` buffer names of ``node`` and everything under it.

    Remembered per node object (:func:`remembered`): passes that ask about
    every nest of a function after each rewrite pay for the nodes the rewrite
    made, not for the whole function."""
    result: tuple[frozenset[str], frozenset[str]] = remembered(node, _SUBTREE, _subtree_accesses)
    return result


def _subtree_accesses(node: Node) -> tuple[frozenset[str], frozenset[str]]:
    if isinstance(node, (For, If)):
        children = node.body if isinstance(node, For) else node.then_body + node.else_body
        reads: set[str] = set()
        writes: set[str] = set()
        for child in children:
            child_reads, child_writes = subtree_accesses(child)
            reads |= child_reads
            writes |= child_writes
        return frozenset(reads), frozenset(writes)
    own_reads, own_writes = node_accesses(node)
    return frozenset(own_reads), frozenset(own_writes)


@dataclass(frozen=True)
class SubtreeNames:
    """What :func:`subtree_names` records of a node and everything under it."""

    loop_vars: tuple[str, ...]        # every loop's variable, in pre-order (repeats kept)
    loop_ids: frozenset[int]          # ``id`` of every ``For`` (alive while the node is)
    locals: frozenset[str]            # the loop-scoped buffers the loops declare
    statements: frozenset[str]        # the statements' names


def subtree_names(node: Node) -> SubtreeNames:
    """The loops, loop-scoped buffers and statement names of ``node`` and
    everything under it, remembered per node object (:func:`remembered`): a
    search of a whole function (a fresh name, the loop named ``i``, the nest
    that holds a loop) then walks only the nests made since the last search.
    The ids are those of live nodes: the node holds every ``For`` under it."""
    result: SubtreeNames = remembered(node, _NAMES, _subtree_names)
    return result


def _subtree_names(node: Node) -> SubtreeNames:
    loop_vars: list[str] = []
    loop_ids: set[int] = set()
    declared: set[str] = set()
    names: set[str] = set()
    if isinstance(node, STATEMENT_NODES):
        names.add(node.name)
    if isinstance(node, For):
        loop_vars.append(node.var)
        loop_ids.add(id(node))
        declared.update(b.name for b in node.locals)
    children = node.body if isinstance(node, For) else \
        node.then_body + node.else_body if isinstance(node, If) else ()
    for child in children:
        inner = subtree_names(child)
        loop_vars.extend(inner.loop_vars)
        loop_ids |= inner.loop_ids
        declared |= inner.locals
        names |= inner.statements
    return SubtreeNames(tuple(loop_vars), frozenset(loop_ids), frozenset(declared), frozenset(names))


_NAMES: dict[int, tuple[weakref.ref[Node], SubtreeNames]] = {}


def _accesses_without_launches(node: Node) -> tuple[set[str], set[str]]:
    reads: set[str] = set()
    writes: set[str] = set()
    for inner in walk_nodes((node,)):
        if not isinstance(inner, Launch):
            inner_reads, inner_writes = node_accesses(inner)
            reads |= inner_reads
            writes |= inner_writes
    return reads, writes


def buffers_used(nodes: Iterable[Node], launches: bool = True) -> set[str]:
    """Names of every buffer read or written anywhere under ``nodes`` (a
    ``Launch``'s arguments count unless ``launches`` is False)."""
    reads, writes = buffer_accesses(nodes, launches)
    return reads | writes


# ------------------------------------------------------------ substitution
def aff_to_expr(aff: Aff) -> Expr:
    """An ``i64`` value expression equal to ``aff``, with floor semantics for
    ``//`` and ``%`` (the IR's ``/`` and ``%`` truncate, so they are corrected
    by a ``Select`` on the remainder's sign)."""
    total: Expr | None = None
    for atom, coeff in aff.terms:
        if isinstance(atom, str):
            term: Expr = Var(atom)
        elif isinstance(atom, FloorDiv):
            term = _floor_div(aff_to_expr(atom.expr), atom.divisor)
        else:
            assert isinstance(atom, Mod)
            term = _floor_mod(aff_to_expr(atom.expr), atom.divisor)
        if abs(coeff) != 1:
            term = BinOp("*", Const(abs(coeff), DType.I64), term)
        if total is None:
            total = term if coeff > 0 else Call("neg", (term,))
        else:
            total = BinOp("+" if coeff > 0 else "-", total, term)
    if total is None:
        return Const(aff.constant, DType.I64)
    if aff.constant:
        op = "+" if aff.constant > 0 else "-"
        total = BinOp(op, total, Const(abs(aff.constant), DType.I64))
    return total


def _floor_div(e: Expr, divisor: int) -> Expr:
    d = Const(divisor, DType.I64)
    quotient = BinOp("/", e, d)
    negative_rest = Compare("<", BinOp("%", e, d), Const(0, DType.I64))
    return Select(negative_rest, BinOp("-", quotient, Const(1, DType.I64)), quotient)


def _floor_mod(e: Expr, divisor: int) -> Expr:
    d = Const(divisor, DType.I64)
    rest = BinOp("%", e, d)
    return Select(Compare("<", rest, Const(0, DType.I64)), BinOp("+", rest, d), rest)


def substitute_expr(expr: Expr, mapping: Mapping[str, Aff]) -> Expr:
    """``expr`` with every ``Var`` named in ``mapping`` replaced (simultaneously)
    by :func:`aff_to_expr` of its value, in gather subscripts too."""
    if isinstance(expr, Var):
        return aff_to_expr(mapping[expr.name]) if expr.name in mapping else expr
    if isinstance(expr, Load):
        return Load(expr.buffer, substitute_indices(expr.indices, mapping))
    if isinstance(expr, BinOp):
        return BinOp(expr.op, substitute_expr(expr.lhs, mapping), substitute_expr(expr.rhs, mapping))
    if isinstance(expr, Compare):
        return Compare(expr.op, substitute_expr(expr.lhs, mapping), substitute_expr(expr.rhs, mapping))
    if isinstance(expr, Call):
        return Call(expr.fn, tuple(substitute_expr(a, mapping) for a in expr.args))
    if isinstance(expr, Select):
        return Select(substitute_expr(expr.cond, mapping), substitute_expr(expr.if_true, mapping),
                      substitute_expr(expr.if_false, mapping))
    if isinstance(expr, Cast):
        return Cast(expr.dtype, substitute_expr(expr.value, mapping))
    return expr


def map_loads(expr: Expr, change: Callable[[Load], Expr]) -> Expr:
    """``expr`` with every ``Load`` (those in gather subscripts too, innermost
    first) replaced by ``change(load)``."""
    if isinstance(expr, Load):
        indices = tuple(i if isinstance(i, Aff) else map_loads(i, change) for i in expr.indices)
        return change(Load(expr.buffer, indices))
    if isinstance(expr, BinOp):
        return BinOp(expr.op, map_loads(expr.lhs, change), map_loads(expr.rhs, change))
    if isinstance(expr, Compare):
        return Compare(expr.op, map_loads(expr.lhs, change), map_loads(expr.rhs, change))
    if isinstance(expr, Call):
        return Call(expr.fn, tuple(map_loads(a, change) for a in expr.args))
    if isinstance(expr, Select):
        return Select(map_loads(expr.cond, change), map_loads(expr.if_true, change),
                      map_loads(expr.if_false, change))
    if isinstance(expr, Cast):
        return Cast(expr.dtype, map_loads(expr.value, change))
    return expr


def substitute_indices(indices: tuple[Index, ...], mapping: Mapping[str, Aff]) -> tuple[Index, ...]:
    """Subscripts with the variables in ``mapping`` replaced: affine ones by
    ``Aff.substitute``, gathers by :func:`substitute_expr`."""
    return tuple(i.substitute(mapping) if isinstance(i, Aff) else substitute_expr(i, mapping)
                 for i in indices)


def substitute_node(node: Node, mapping: Mapping[str, Aff]) -> Node:
    """``node`` with the free variables named in ``mapping`` replaced by affine
    values in its subscripts, bounds, conditions, values and launch grid, and in
    its bodies. A loop that rebinds a name shadows it in its body."""
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


def substitute(nodes: Iterable[Node], mapping: Mapping[str, Aff]) -> tuple[Node, ...]:
    """:func:`substitute_node` applied to each of ``nodes``."""
    return tuple(substitute_node(n, mapping) for n in nodes)


# ------------------------------------------------------------ rewriting
def map_loops(nodes: Iterable[Node], rewrite: Callable[[For], Node]) -> tuple[Node, ...]:
    """``nodes`` with every ``For`` replaced by ``rewrite(loop)``, innermost
    first: ``rewrite`` sees the loop with its body already rewritten, so the
    calls come in post-order. ``If`` branches are rebuilt; other nodes are kept."""
    result: list[Node] = []
    for node in nodes:
        if isinstance(node, For):
            node = rewrite(replace(node, body=map_loops(node.body, rewrite)))
        elif isinstance(node, If):
            node = replace(node, then_body=map_loops(node.then_body, rewrite),
                           else_body=map_loops(node.else_body, rewrite))
        result.append(node)
    return tuple(result)


__all__ = ["STATEMENT_NODES", "FRAGMENT_NODES", "SubtreeNames", "subtree_names", "walk_nodes", "leaf_nodes", "statements", "walk_expr", "loads",
           "node_exprs", "node_accesses", "buffer_accesses", "buffers_used", "aff_to_expr",
           "substitute_expr", "map_loads", "substitute_indices", "substitute_node", "substitute", "map_loops"]
