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
  Nor do the copies of an unrolled and jammed or tiled row loop
  (``x[v]``, ``x[v + 1]``, ..., ``x[u]`` for ``u = v to v + 16`` under
  ``for v = 0 to n step 16``): a dimension in which every write's subscript
  lies in ``[A*v + lo, A*v + hi]`` (the body's loops bounded by ``v`` plus
  constants), with ``hi - lo`` less than ``|A|`` times the step, separates
  the iterations too. A copy there would only change the rounding of an
  exact build (the sums would start from the identity, not from ``X``).

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
    loops: tuple[For, ...] = ()   # the body's loops around the write, outermost first


def _walk(body: tuple[Node, ...], inner: frozenset[str],
          loops: tuple[For, ...] = ()) -> Iterator[tuple[Node, frozenset[str], tuple[For, ...]]]:
    for node in body:
        if isinstance(node, For):
            yield from _walk(node.body, inner | {node.var}, loops + (node,))
        elif isinstance(node, If):
            yield from _walk(node.then_body + node.else_body, inner, loops)
        else:
            yield node, inner, loops


def privatised_reductions(loop: For, candidates: set[str]) -> list[PrivateReduction]:
    """The reductions of ``loop``'s body to privatise (see the module
    docstring), among the buffers ``candidates`` (those shared with the
    caller), in order of first appearance."""
    from polyir.polyhedral.extract import reduction_of

    writes: list[_Write] = []
    reads: dict[str, int] = {}
    order: list[str] = []
    for node, inner, around in _walk(loop.body, frozenset()):
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
        writes.append(_Write(node.buffer, node.indices, op, inner, around))
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
        if _distinct_per_iteration(mine, loop.var) or _disjoint_windows(mine, loop):
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


def _disjoint_windows(writes: list[_Write], loop: For) -> bool:
    """Some dimension in which each iteration of ``loop`` writes within a window
    ``[A*v + lo, A*v + hi]`` (``A`` and the rest of the subscript the same for
    every write) narrower than ``|A| * step``: the windows of two iterations
    never meet (see the module docstring)."""
    rank = len(writes[0].indices)
    if loop.step < 1 or any(len(w.indices) != rank for w in writes):
        return False
    for dim in range(rank):
        windows = [_window(w.indices[dim], loop.var, w.loops) for w in writes]
        if any(window is None for window in windows):
            continue
        slopes = {window[0] for window in windows}   # type: ignore[index]
        rests = {window[3] for window in windows}    # type: ignore[index]
        if len(slopes) != 1 or len(rests) != 1 or 0 in slopes:
            continue
        low = min(window[1] for window in windows)   # type: ignore[index]
        high = max(window[2] for window in windows)  # type: ignore[index]
        if high - low < abs(next(iter(slopes))) * loop.step:
            return True
    return False


def _window(index: Index, var: str, loops: tuple[For, ...]) -> tuple[int, int, int, Aff] | None:
    """``(A, lo, hi, rest)``: ``index`` lies in ``[A*var + rest + lo, A*var + rest + hi]``
    for every value of the loops ``loops`` (outermost first), each bounded
    below and above by ``var`` times a constant plus a constant (or by
    enclosing such loops); ``None`` when it cannot be said."""
    if not isinstance(index, Aff):
        return None
    bounds: dict[str, tuple[int, int, int]] = {}   # loop var -> (slope of var, lo, hi)
    for inner in loops:
        lows = [w for w in (_through(b, var, bounds) for b in inner.lower)
                if w is not None and w[3].is_constant]
        highs = [w for w in (_through(b - 1, var, bounds) for b in inner.upper)
                 if w is not None and w[3].is_constant]
        for slope in {w[0] for w in lows} & {w[0] for w in highs}:
            low = max(w[1] for w in lows if w[0] == slope)     # var >= each lower bound
            high = min(w[2] for w in highs if w[0] == slope)   # var <= each upper bound - 1
            bounds[inner.var] = (slope, low, high)
            break
    return _through(index, var, bounds)


def _through(index: Aff, var: str, bounds: dict[str, tuple[int, int, int]]
             ) -> tuple[int, int, int, Aff] | None:
    """:func:`_window` of ``index`` given windows of the loop variables ``bounds``."""
    slope, low, high = 0, index.constant, index.constant
    rest = Aff.const(0)
    for atom, coefficient in index.terms:
        if not isinstance(atom, str):
            if var in atom.expr.variables() or atom.expr.variables() & set(bounds):
                return None
            rest = rest + Aff(((atom, coefficient),), 0)
        elif atom == var:
            slope += coefficient
        elif atom in bounds:
            a, lo, hi = bounds[atom]
            slope += coefficient * a
            low += coefficient * (lo if coefficient > 0 else hi)
            high += coefficient * (hi if coefficient > 0 else lo)
        else:
            rest = rest + Aff(((atom, coefficient),), 0)
    return slope, low, high, rest
