"""Cooperative block code: phases over threads, thread-0 statements, barriers.

``schedule_block(nodes, context)`` turns the body of one block (the code under
the grid mapping, still written as if one processor ran it) into per-thread
code for the block's threads:

* a loop marked ``parallel`` starts a *phase*: it and up to ``rank - 1``
  perfectly nested parallel loops inside it are distributed cyclically over
  the thread dimensions (innermost loop on ``thread.x``); when the nest is
  shallower than the block, the outermost distributed loop takes the
  remaining dimensions too (linearised thread id);
* sequential loops and ``if``s that contain phases or fragment operations run
  in every thread (their bounds and conditions only use symbols, block ids
  and enclosing sequential loop variables, so they are uniform);
* fragment operations run in every thread (warp-collective);
* every other statement runs in thread 0 only (``if (tx == 0, ...)``).

Barriers: each piece of code carries a summary of the shared/global elements
it touches, as ``Access(buffer, write, owner)``. ``owner`` identifies which
thread touches an element when that is known: for a phase access whose
subscripts hold every distributed loop variable alone in some dimension
(``A[i + c, ...]`` with ``c`` uniform), the owner is that dimension layout
plus the distribution; thread-0 statements have owner ``single``; anything
else has no owner. Two accesses *conflict* when they touch the same buffer,
one writes, and they do not share a known owner. A barrier goes between two
pieces that conflict with no barrier in between, including around the back
edge of a sequential loop (end of one iteration vs start of the next).
Per-thread (``@local``) and fragment buffers never need barriers.
"""
from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass, replace

from polyir.gpu.rewrite import FRAGMENT_NODES, contains, contains_parallel_loop
from polyir.ir.affine import Aff, Constraint
from polyir.ir.nodes import (
    Assign,
    Barrier,
    Expr,
    For,
    FragmentFill,
    FragmentLoad,
    FragmentMMA,
    FragmentStore,
    If,
    Node,
)
from polyir.ir.walk import loads, walk_nodes


@dataclass(frozen=True)
class Access:
    """One kind of access to ``buffer`` (see the module docstring for ``owner``)."""

    buffer: str
    write: bool
    owner: Hashable | None


@dataclass(frozen=True)
class BlockContext:
    """Thread variables (x first), block sizes per dimension, uniform variables
    (symbols and block ids) and per-thread/fragment buffers."""

    thread_vars: tuple[str, ...]
    block: tuple[int, ...]
    uniform: frozenset[str]
    private: frozenset[str]


SINGLE = ("single",)


def conflicts(a: frozenset[Access] | set[Access], b: frozenset[Access] | set[Access]) -> bool:
    """True when some access of ``a`` and some access of ``b`` may race."""
    by_buffer: dict[str, list[Access]] = {}
    for x in a:
        by_buffer.setdefault(x.buffer, []).append(x)
    for y in b:
        for x in by_buffer.get(y.buffer, ()):
            if (x.write or y.write) and (x.owner is None or x.owner != y.owner):
                return True
    return False


@dataclass
class _Piece:
    """Scheduled code with its access summary: ``first`` = accesses before its
    first barrier, ``last`` = after its last one (both everything if none)."""

    nodes: tuple[Node, ...]
    first: set[Access]
    last: set[Access]
    has_barrier: bool


def schedule_block(nodes: tuple[Node, ...], context: BlockContext) -> tuple[Node, ...]:
    """Per-thread code for the block body ``nodes`` (see the module docstring)."""
    return _schedule(nodes, context).nodes


def _schedule(nodes: tuple[Node, ...], ctx: BlockContext) -> _Piece:
    out: list[Node] = []
    pending: set[Access] = set()
    first: set[Access] = set()
    seen_barrier = False
    singles: list[Node] = []

    def emit(piece: _Piece) -> None:
        nonlocal pending, seen_barrier
        if conflicts(pending, piece.first):
            out.append(Barrier())
            pending = set()
            seen_barrier = True
        if not seen_barrier:
            first.update(piece.first)
            if piece.has_barrier:
                seen_barrier = True
        out.extend(piece.nodes)
        pending = pending | piece.last if piece.has_barrier else pending | piece.first | piece.last

    def flush_singles() -> None:
        if singles:
            accesses = _accesses(tuple(singles), ctx, lambda idx: SINGLE)
            zero = tuple(Constraint(Aff.var(t), "==", Aff.const(0)) for t in ctx.thread_vars)
            emit(_Piece((If(zero, tuple(singles)),), accesses, set(accesses), False))
            singles.clear()

    for node in nodes:
        if isinstance(node, Barrier):
            flush_singles()
            out.append(node)
            if not seen_barrier:
                seen_barrier = True
            pending = set()
            continue
        if isinstance(node, For) and node.parallel and node.mapping is None:
            flush_singles()
            emit(_phase(node, ctx))
        elif isinstance(node, For) and _cooperative(node.body):
            flush_singles()
            emit(_uniform_loop(node, ctx))
        elif isinstance(node, If) and (_cooperative(node.then_body) or _cooperative(node.else_body)):
            flush_singles()
            emit(_uniform_if(node, ctx))
        elif isinstance(node, FRAGMENT_NODES):
            flush_singles()
            accesses = _accesses((node,), ctx, lambda idx: None)
            emit(_Piece((node,), accesses, set(accesses), False))
        else:
            singles.append(node)
    flush_singles()
    if not seen_barrier:
        first = set(pending)
    return _Piece(tuple(out), first, pending, seen_barrier)


def _cooperative(nodes: tuple[Node, ...]) -> bool:
    return contains_parallel_loop(nodes) or contains(nodes, FRAGMENT_NODES) \
        or contains(nodes, (Barrier,))


def _uniform_loop(loop: For, ctx: BlockContext) -> _Piece:
    body = _schedule(loop.body, ctx)
    nodes = body.nodes
    first, last, has_barrier = body.first, body.last, body.has_barrier
    if conflicts(last, first):  # end of one iteration vs start of the next
        nodes = (*nodes, Barrier())
        if not has_barrier:
            first = first | last
        last, has_barrier = set(), True
    return _Piece((replace(loop, body=nodes),), set(first), set(last), has_barrier)


def _uniform_if(node: If, ctx: BlockContext) -> _Piece:
    then, other = _schedule(node.then_body, ctx), _schedule(node.else_body, ctx)
    first = then.first | other.first
    last = (then.last if then.has_barrier else then.first | then.last) | \
        (other.last if other.has_barrier else other.first | other.last)
    has_barrier = then.has_barrier or other.has_barrier
    new = replace(node, then_body=then.nodes, else_body=other.nodes)
    return _Piece((new,), first, last, has_barrier)


# --------------------------------------------------------------------- phases
def _phase(loop: For, ctx: BlockContext) -> _Piece:
    """Distribute ``loop`` (and parallel loops perfectly nested in it) over threads."""
    rank = len(ctx.thread_vars)
    nest = [loop]
    while len(nest) < rank and len(nest[-1].body) == 1 and isinstance(nest[-1].body[0], For) \
            and nest[-1].body[0].parallel and nest[-1].body[0].mapping is None:
        nest.append(nest[-1].body[0])
    # thread expression and count per nest level; innermost level -> x
    assignments: list[tuple[Aff, int]] = []
    for level in range(len(nest)):
        dims = [len(nest) - 1 - level]
        if level == 0:
            dims += list(range(len(nest), rank))
        thread = Aff.const(0)
        count = 1
        for dim in dims:
            thread = thread + count * Aff.var(ctx.thread_vars[dim])
            count *= ctx.block[dim]
        assignments.append((thread, count))

    owners: list[tuple[str, Hashable]] = []
    rebuilt: tuple[Node, ...] = nest[-1].body
    for level in reversed(range(len(nest))):
        original = nest[level]
        thread, count = assignments[level]
        lower = tuple(lo + original.step * thread for lo in original.lower)
        rebuilt = (replace(original, lower=lower, step=original.step * count, parallel=False,
                           body=rebuilt),)
        key = (original.lower, original.step, thread, count)
        if all(lo.variables() <= ctx.uniform for lo in original.lower):
            owners.append((original.var, key))
        else:
            owners.append((original.var, None))
    owners.reverse()

    def owner_of(indices: tuple[object, ...]) -> Hashable | None:
        layout = []
        for var, key in owners:
            if key is None:
                return None
            found = None
            for dim, idx in enumerate(indices):
                if isinstance(idx, Aff) and idx.coefficient(var) == 1:
                    rest = idx - Aff.var(var)
                    if rest.variables() <= ctx.uniform:
                        found = (dim, rest, key)
                        break
            if found is None:
                return None
            layout.append(found)
        return tuple(layout)

    accesses = _accesses((loop,), ctx, owner_of)
    return _Piece(rebuilt, accesses, set(accesses), False)


def _accesses(nodes: tuple[Node, ...], ctx: BlockContext, owner_of) -> set[Access]:
    """Shared/global accesses of ``nodes``, with owners from ``owner_of(indices)``."""
    found: set[Access] = set()

    def add(buffer: str, write: bool, indices: tuple[object, ...] | None) -> None:
        if buffer in ctx.private:
            return
        owner = owner_of(indices) if indices is not None else None
        found.add(Access(buffer, write, owner))

    def reads(e: Expr) -> None:
        for load in loads(e):
            add(load.buffer, False, load.indices)

    for node in walk_nodes(nodes):
        if isinstance(node, Assign):
            reads(node.value)
            for idx in node.indices:
                if not isinstance(idx, Aff):
                    reads(idx)
            add(node.buffer, True, node.indices)
        elif isinstance(node, FragmentFill):
            reads(node.value)
            add(node.fragment, True, None)
        elif isinstance(node, FragmentLoad):
            add(node.buffer, False, None)
            add(node.fragment, True, None)
        elif isinstance(node, FragmentMMA):
            for name in (node.a, node.b, node.acc):
                add(name, False, None)
            add(node.result, True, None)
        elif isinstance(node, FragmentStore):
            add(node.fragment, False, None)
            add(node.buffer, True, None)
    return found


__all__ = ["Access", "BlockContext", "schedule_block", "conflicts"]
