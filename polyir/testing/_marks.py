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
from polyir.ir.nodes import Assign, For, If, Index, Node
from polyir.ir.walk import loads, map_loops, node_exprs

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
                for value in node_exprs(node):  # the value and gather subscripts
                    for load in loads(value):
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
    for which ``decide()`` says yes (asked innermost loop first)."""
    def mark(loop: For) -> For:
        if carries_no_dependence(loop) and decide():
            return replace(loop, parallel=True)
        return loop

    return map_loops(nodes, mark)
