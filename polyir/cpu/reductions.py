"""Which buffers a parallel loop must privatise: reductions shared by its iterations.

``mark-parallel{accept_reassociation=true}`` marks a loop parallel although
reduction statements ``X[f] = X[f] op e`` (``op`` in ``+ * max min``,
``polyir.polyhedral.extract.reduction_of``) in it update the same elements of
``X`` from different iterations. Run on several threads, those updates race.
The CPU backend gives each thread a private copy of such an ``X``, filled with
the identity of ``op``, and combines the copies into ``X`` at the end
(``polyir.cpu.parallel``). This module decides which buffers need it.

A buffer ``X`` written in the loop body is privatised when

* every statement that writes ``X`` is a reduction on ``X`` with one and the
  same ``op``, and nothing else in the body reads ``X`` (any other use would
  see a partial value; keeping such a loop serial is the marking pass's job);
* and the iterations are not known to touch distinct elements: the
  reductions do not all have the same subscript with a dimension
  ``a*v + g`` (``a != 0``, ``v`` the parallel loop's variable outside any
  ``//``/``%``, ``g`` free of the body's own loop variables). Such a
  dimension gives every iteration its own elements, which needs no copy.

Bool buffers are never privatised (no reduction operator applies to them).
"""
from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from polyir.ir.affine import Aff
from polyir.ir.nodes import Assign, For, If, Index, Node
from polyir.ir.walk import loads, node_exprs

IDENTITY_KIND = {"+": "zero", "*": "one", "max": "lowest", "min": "highest"}
"""What fills a private copy: the identity of each reduction operator (see
:func:`polyir.cpu.parallel.identity_constant` for the values per dtype)."""


@dataclass(frozen=True)
class PrivateReduction:
    """Buffer ``buffer`` is reduced with ``op`` across the parallel loop."""

    buffer: str
    op: str


@dataclass(frozen=True)
class _Write:
    buffer: str
    indices: tuple[Index, ...]
    reduction_op: str | None
    inner: frozenset[str]


def _walk(body: tuple[Node, ...], inner: frozenset[str]) -> Iterator[tuple[Node, frozenset[str]]]:
    for node in body:
        if isinstance(node, For):
            yield from _walk(node.body, inner | {node.var})
        elif isinstance(node, If):
            yield from _walk(node.then_body + node.else_body, inner)
        else:
            yield node, inner


def privatised_reductions(loop: For, candidates: set[str]) -> list[PrivateReduction]:
    """The reductions of ``loop``'s body to privatise (see the module
    docstring), among the buffers ``candidates`` (those shared with the
    caller), in order of first appearance."""
    from polyir.polyhedral.extract import reduction_of

    writes: list[_Write] = []
    reads: dict[str, int] = {}
    order: list[str] = []
    for node, inner in _walk(loop.body, frozenset()):
        if not isinstance(node, Assign):
            for name in _other_buffers(node):
                reads[name] = reads.get(name, 0) + 1
            continue
        for value in node_exprs(node):
            for load in loads(value):
                reads[load.buffer] = reads.get(load.buffer, 0) + 1
        found = reduction_of(node)
        op = found[1] if found is not None and found[0] == node.buffer else None
        if op is not None:
            reads[node.buffer] -= 1  # the statement's own X[f]
        writes.append(_Write(node.buffer, node.indices, op, inner))
        if node.buffer not in order:
            order.append(node.buffer)

    result: list[PrivateReduction] = []
    for name in order:
        if name not in candidates or reads.get(name, 0) > 0:
            continue
        mine = [w for w in writes if w.buffer == name]
        ops = {w.reduction_op for w in mine}
        if len(ops) != 1 or None in ops:
            continue
        if _distinct_per_iteration(mine, loop.var):
            continue
        result.append(PrivateReduction(name, next(iter(ops))))  # type: ignore[arg-type]
    return result


def _other_buffers(node: Node) -> set[str]:
    from polyir.ir.walk import node_accesses
    node_reads, node_writes = node_accesses(node)
    return node_reads | node_writes


def _distinct_per_iteration(writes: list[_Write], var: str) -> bool:
    first = writes[0].indices
    if any(w.indices != first for w in writes[1:]):
        return False
    inner = frozenset().union(*(w.inner for w in writes))
    return any(_separates(index, var, inner) for index in first)


def _separates(index: Index, var: str, inner: frozenset[str]) -> bool:
    """``index`` is ``a*var + g`` with ``a != 0``, ``var`` outside ``//``/``%``
    and ``g`` free of the variables ``inner``."""
    if not isinstance(index, Aff) or index.coefficient(var) == 0:
        return False
    for atom, _ in index.terms:
        if not isinstance(atom, str) and var in atom.expr.variables():
            return False
    return not (index.variables() & inner)
