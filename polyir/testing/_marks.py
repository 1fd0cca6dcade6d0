"""Correct ``parallel`` marks for generated programs.

A loop ``v`` carries no dependence when, for every buffer written inside it,
each pair (that write, any access to the same buffer inside the loop) has a
dimension where both subscripts are the *same* affine expression
``a*v + g`` with ``a != 0``, ``v`` outside any ``//``/``%``, and ``g`` using only
symbols and variables of enclosing loops. Two different iterations of ``v``
then touch different elements, so the accesses never conflict across
iterations. The test is sufficient, not necessary: a 0-d buffer (a scalar
temporary) written in the loop, or a gather on the only separating
dimension, keeps the loop sequential.
"""
from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import replace

from polyir.ir.affine import Aff
from polyir.ir.nodes import Assign, For, If, Index, Load, Node


def _loads(expr: object) -> Iterator[Load]:
    if isinstance(expr, Load):
        yield expr
        for index in expr.indices:
            if not isinstance(index, Aff):
                yield from _loads(index)
        return
    for name in ("lhs", "rhs", "cond", "if_true", "if_false", "value"):
        child = getattr(expr, name, None)
        if child is not None:
            yield from _loads(child)
    for arg in getattr(expr, "args", ()):
        yield from _loads(arg)


Access = tuple[str, tuple[Index, ...], bool, frozenset[str]]


def _accesses(nodes: tuple[Node, ...]) -> Iterator[Access]:
    """``(buffer, indices, is_write, loop variables around it)`` inside ``nodes``."""
    def walk(body: tuple[Node, ...], inner: frozenset[str]) -> Iterator[Access]:
        for node in body:
            if isinstance(node, For):
                yield from walk(node.body, inner | {node.var})
            elif isinstance(node, If):
                yield from walk(node.then_body + node.else_body, inner)
            elif isinstance(node, Assign):
                for load in _loads(node.value):
                    yield load.buffer, load.indices, False, inner
                for index in node.indices:
                    if not isinstance(index, Aff):
                        for load in _loads(index):
                            yield load.buffer, load.indices, False, inner
                yield node.buffer, node.indices, True, inner
            else:  # fragments, barriers, launches: not generated; stay safe
                yield "", (), True, inner
    yield from walk(nodes, frozenset())


def _separates(index: Index, var: str, inner: frozenset[str]) -> bool:
    if not isinstance(index, Aff) or index.coefficient(var) == 0:
        return False
    for atom, _ in index.terms:
        if not isinstance(atom, str) and var in atom.expr.variables():
            return False
    return not (index.variables() & inner)


def carries_no_dependence(loop: For) -> bool:
    """True when no two iterations of ``loop`` access one element with a write
    (see the module docstring)."""
    accesses = list(_accesses(loop.body))
    for buffer, w_indices, is_write, w_inner in accesses:
        if not is_write:
            continue
        for other, indices, _, inner in accesses:
            if other != buffer:
                continue
            if not any(a == b and _separates(a, loop.var, w_inner | inner)
                       for a, b in zip(w_indices, indices, strict=True)):
                return False
    return True


def mark_parallel(nodes: tuple[Node, ...], decide: Callable[[], bool]) -> tuple[Node, ...]:
    """``nodes`` with ``parallel=True`` on loops that carry no dependence and
    for which ``decide()`` says yes."""
    result: list[Node] = []
    for node in nodes:
        if isinstance(node, For):
            node = replace(node, body=mark_parallel(node.body, decide))
            if carries_no_dependence(node) and decide():
                node = replace(node, parallel=True)
        elif isinstance(node, If):
            node = replace(node, then_body=mark_parallel(node.then_body, decide),
                           else_body=mark_parallel(node.else_body, decide))
        result.append(node)
    return tuple(result)
