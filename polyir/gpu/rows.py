"""Row reductions (softmax, layer norm, sums along rows) across a block's threads.

What the ATen lowering and fusion leave for a softmax over the last axis is

    for i parallel {                      # 1 or 2 loops: the rows
      local m: f32[]; local s: f32[]
      S0: m[] = -inf
      for r { S1: m[] = max(m[], x[i, r]) }             # reductions along the row
      S2: s[] = 0.0
      for r { S3: s[] = s[] + exp(x[i, r] - m[]) }
      for j parallel { S4: y[i, j] = exp(x[i, j] - m[]) / s[] }   # element-wise
    }

``gpu-map`` alone gives each row to one thread, which walks the row serially
(strided accesses across threads, one thread doing a whole row).
:func:`map_rows` gives each row to a block of ``T`` threads instead:

    for i gpu=block.x { for t = 0 to T gpu=thread.x {
      m[] = -inf                                        # row statements: every thread
      p[] = -inf                                        #   (its own copy of the scalars)
      for r = t to N step T { p[] = max(p[], x[i, r]) }  # coalesced: thread t, t+T, ...
      red[t] = p[]; barrier
      if (t < T/2) { red[t] = max(red[t], red[t + T/2]) }; barrier   # tree, log2 T steps
      ...
      m[] = max(m[], red[0]); barrier
      ...
      for j = t to N step T { y[i, j] = ... }            # element-wise, coalesced
    }}

Each reduction folds a thread's share from the operation's identity (``+``:
0, ``*``: 1, ``max``: -inf, ``min``: inf) and combines the shares in shared
memory, then into the row's value with the original initial value: max and
min are exact, sums and products reassociated (as in every parallel
reduction). Row statements that write a buffer every thread sees run on
thread 0 only.

Conditions (:func:`find_rows`, :class:`NotRows` says why not): the rows are
1 or 2 perfectly nested ``parallel`` loops from 0, step 1; the row's body is
statements, serial reduction loops whose body is one reduction of a 0-d
local of the row loops (``polyir.polyhedral.extract.reduction_of``), and
``parallel`` loops; at least one reduction; the loops write no row local
but their own accumulator (the row's locals become each thread's own, so
only values every thread computes alike may live there); nothing the row writes outside
its locals is read in the row (so the threads' different shares of the row
never meet); no barriers, launches or fragments inside.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from polyir.gpu.contraction import _simple_loop
from polyir.ir.affine import Aff, Constraint
from polyir.ir.names import claim_name, names_in
from polyir.ir.nodes import (
    Assign,
    Barrier,
    BinOp,
    Buffer,
    Call,
    Const,
    Expr,
    For,
    Function,
    If,
    Load,
    Node,
)
from polyir.ir.types import DType, MemorySpace
from polyir.ir.walk import FRAGMENT_NODES, buffer_accesses, walk_nodes

IDENTITY = {"+": 0.0, "*": 1.0, "max": float("-inf"), "min": float("inf")}


class NotRows(Exception):
    """The nest is no row-reduction nest :func:`map_rows` handles; ``str()`` says why."""


@dataclass(frozen=True)
class Rows:
    """A recognised row nest: the row loops, the row's body, the reductions
    (loop, accumulator, op) among it, and the row length's loops' bound."""

    band: tuple[For, ...]
    body: tuple[Node, ...]
    reductions: tuple[tuple[For, str, str], ...]
    locals: tuple[Buffer, ...]


def find_rows(function: Function, nest: Node) -> Rows:
    """The row nest ``nest`` is (module docstring), or :class:`NotRows`."""
    from polyir.polyhedral.extract import reduction_of

    if not isinstance(nest, For) or not nest.parallel:
        raise NotRows("not a parallel loop")
    symbols = set(function.symbols)
    band: list[For] = []
    loop: Node = nest
    while isinstance(loop, For) and loop.parallel and len(band) < 2:
        why = _simple_loop(loop, symbols)
        if why:
            raise NotRows(why)
        band.append(loop)
        inner = loop.body[0] if len(loop.body) == 1 else None
        if not (isinstance(inner, For) and inner.parallel and any(
                isinstance(n, For) and not n.parallel for n in inner.body)):
            break
        loop = inner
    body = band[-1].body
    local_names = {b.name for lp in band for b in lp.locals}
    reductions: list[tuple[For, str, str]] = []
    for node in body:
        if isinstance(node, For):
            why = _simple_loop(node, symbols)
            if why:
                raise NotRows(why)
            if not node.parallel:
                found = reduction_of(node.body[0]) if len(node.body) == 1 else None
                buffer = function.buffers.get(found[0]) if found else None
                if found is None or buffer is None or buffer.rank != 0 or \
                        found[0] not in local_names:
                    raise NotRows(f"serial loop '{node.var}' is not one reduction of a row scalar")
                reductions.append((node, found[0], found[1]))
        elif not isinstance(node, Assign):
            raise NotRows(f"the row holds a {type(node).__name__}")
    if not reductions:
        raise NotRows("no reduction along the row")
    accumulators = {id(loop): acc for loop, acc, _ in reductions}
    for node in body:   # each thread keeps its own copy of the row's locals
        if isinstance(node, For):
            _, inner_writes = buffer_accesses(node.body)
            stray = (inner_writes & local_names) - {accumulators.get(id(node))}
            if stray:
                raise NotRows(f"loop '{node.var}' writes row locals {sorted(stray)} (each "
                              f"thread would see only its own share)")
    inside = list(walk_nodes(body))
    if any(isinstance(n, (Barrier, *FRAGMENT_NODES)) for n in inside) or \
            any(isinstance(n, For) and n.mapping for n in inside):
        raise NotRows("the row holds barriers, fragments or mapped loops")
    reads, writes = buffer_accesses(body)
    shared = (writes - local_names - {b.name for n in inside if isinstance(n, For)
                                      for b in n.locals}) & reads
    if shared:
        raise NotRows(f"the row reads what it writes in {sorted(shared)} (threads would meet)")
    locals_ = tuple(b for lp in band for b in lp.locals)
    if not all(d.is_constant for b in locals_ for d in b.shape):
        raise NotRows("a row local has a symbolic shape")
    return Rows(tuple(band), body, tuple(reductions), locals_)


def threads_for(rows: Rows) -> int:
    """Threads per row: a power of two, about a quarter of a constant row
    length (32 to 256), 256 for a symbolic one."""
    uppers = [loop.upper[0] for loop, _, _ in rows.reductions]
    longest = max((u.constant for u in uppers if u.is_constant), default=None)
    if longest is None or any(not u.is_constant for u in uppers):
        return 256
    threads = 32
    while threads < 256 and threads * 4 < longest:
        threads *= 2
    return threads


def map_rows(function: Function, rows: Rows, threads: int | None = None
             ) -> tuple[Node, list[Buffer]]:
    """The block-per-row nest replacing ``rows`` and the shared buffers it needs."""
    threads = threads or threads_for(rows)
    if threads & (threads - 1) or not 32 <= threads <= 1024:
        raise NotRows(f"{threads} threads per row is not a power of two in 32..1024")
    names = names_in(function)
    t = claim_name("rw_t", names)
    tv = Aff.var(t)
    private = {b.name for b in rows.locals}
    added: list[Buffer] = []
    body: list[Node] = []
    for node in rows.body:
        if isinstance(node, Assign):
            if node.buffer in private:
                body.append(node)
            else:   # a write every thread would repeat: thread 0's
                body.append(If((Constraint(tv, "==", Aff.const(0)),), (node,)))
        elif not isinstance(node, For):
            raise NotRows(f"the row holds a {type(node).__name__}")
        elif node.parallel:
            body.append(replace(node, lower=(node.lower[0] + tv,), step=node.step * threads,
                                parallel=False))
        else:
            op = next(op for loop, _, op in rows.reductions if loop is node)
            acc = next(acc for loop, acc, _ in rows.reductions if loop is node)
            dtype = function.buffers[acc].dtype
            part, red = claim_name(f"{acc}_part", names), claim_name(f"{acc}_red", names)
            added.append(Buffer(red, dtype, (Aff.const(threads),), MemorySpace.SHARED))
            body.extend(_tree(function, node, acc, op, dtype, part, red, tv, threads, names))
            private.add(part)
            rows = replace(rows, locals=rows.locals + (Buffer(part, dtype, ()),))
    locals_ = tuple(replace(b, space=MemorySpace.LOCAL) if b.space is MemorySpace.GLOBAL else b
                    for b in rows.locals)
    scope = For(claim_name("rw_row", names), (Aff.const(0),), (Aff.const(1),), tuple(body),
                locals=locals_)
    nest: Node = For(t, (Aff.const(0),), (Aff.const(threads),), (scope,), mapping="thread.x")
    for loop, axis in zip(reversed(rows.band), ("x", "y")[:len(rows.band)], strict=True):
        nest = For(loop.var, loop.lower, loop.upper, (nest,), mapping=f"block.{axis}")
    return nest, added


def _combine(op: str, a: Load, b: Load, dtype: DType) -> BinOp | Call:
    return BinOp(op, a, b) if op in ("+", "*") else Call(op, (a, b))


def _tree(function: Function, loop: For, acc: str, op: str, dtype: DType, part: str, red: str,
          tv: Aff, threads: int, names: set[str]) -> list[Node]:
    """The thread's share of reduction ``loop`` into ``part``, the tree over
    ``red`` in shared memory, and the row's value folded into ``acc``."""
    update = loop.body[0]
    assert isinstance(update, Assign)
    here = Load(part, ())
    value = _renamed(update.value, acc, part)
    nodes: list[Node] = [
        Assign(claim_name(f"{update.name}_id", names), part, (), Const(IDENTITY[op], dtype)),
        replace(loop, lower=(tv,), step=threads,
                body=(replace(update, name=claim_name(f"{update.name}_pt", names), buffer=part,
                              indices=(), value=value),)),
        Assign(claim_name(f"{update.name}_sh", names), red, (tv,), here),
        Barrier(),
    ]
    stride = threads // 2
    while stride:
        step = Assign(claim_name(f"{update.name}_tr", names), red, (tv,),
                      _combine(op, Load(red, (tv,)), Load(red, (tv + stride,)), dtype))
        nodes += [If((Constraint(tv, "<", Aff.const(stride)),), (step,)), Barrier()]
        stride //= 2
    total = Assign(update.name, acc, (), _combine(op, Load(acc, ()), Load(red, (Aff.const(0),)),
                                                  dtype), update.loc)
    return nodes + [total, Barrier()]   # the last barrier: red is free for the next one


def _renamed(expr: Expr, old: str, new: str) -> Expr:
    from polyir.ir.walk import map_loads
    return map_loads(expr, lambda ld: Load(new, ld.indices) if ld.buffer == old else ld)


__all__ = ["Rows", "NotRows", "find_rows", "map_rows", "threads_for", "IDENTITY"]
