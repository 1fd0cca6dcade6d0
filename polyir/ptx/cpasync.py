"""Global-to-shared copies of 16 bytes as ``cp.async`` (sm_80+).

A loop ``for v = 0 to V parallel vectorize=V { S[.., c + v] = G[.., g + v] }``
(``S`` a ``@shared`` buffer, ``G`` a global one, one dtype, ``V`` elements =
16 bytes; ``polyir.gpu.tensorcore`` emits these for its tile copies) is
lowered to one ``cp.async.cg.shared.global`` of 16 bytes when both addresses
are 16-byte aligned at run time, else to the plain loop (kept a loop, so that
it stays out of the copy's straight-line code).

A copy is asynchronous only when every read of its shared buffer that can
follow it comes after a barrier (:func:`async_plan` follows the enclosing
bodies outwards, and around each enclosing loop once more). Each barrier of
such a kernel first commits the copies issued since the previous barrier as
one group (``cp.async.commit_group``); a copy whose buffer is next read ``s``
barriers later must have landed at the ``s``-th, which therefore waits until
at most ``s - 1`` groups are in flight (``cp.async.wait_group``). A
double-buffered loop waits for all (``s = 1``); an ``S``-stage pipeline
(``polyir.gpu.tensorcore``) keeps ``S - 2`` groups in flight.

LLVM names: ``llvm.nvvm.cp.async.cg.shared.global.16(ptr addrspace(3),
ptr addrspace(1))``, ``llvm.nvvm.cp.async.commit.group()``,
``llvm.nvvm.cp.async.wait.group(i32)`` and ``llvm.nvvm.cp.async.wait.all()``.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from llvmlite import ir

from polyir.ir.affine import Aff
from polyir.ir.nodes import Assign, Barrier, Buffer, For, FragmentLoad, Function, If, Load, Node
from polyir.ir.types import MemorySpace
from polyir.ir.walk import node_exprs, walk_expr, walk_nodes
from polyir.llvm.hooks import I32, I64

if TYPE_CHECKING:
    from polyir.llvm.lower import FunctionLowerer

COPY_BYTES = 16
_CACHE: dict[int, tuple[Function, AsyncPlan]] = {}
_ELEMENT_BYTES = {"f16": 2, "bf16": 2, "f32": 4, "i32": 4, "f64": 8, "i64": 8}


def _pattern(function: Function, loop: For) -> Assign | None:
    """The copy statement when ``loop`` has the 16-byte copy shape."""
    if not (loop.parallel and loop.vectorize > 1 and loop.mapping is None and not loop.locals
            and loop.step == 1 and loop.lower == (Aff.const(0),)
            and loop.upper == (Aff.const(loop.vectorize),) and len(loop.body) == 1
            and isinstance(loop.body[0], Assign) and isinstance(loop.body[0].value, Load)):
        return None
    node = loop.body[0]
    assert isinstance(node, Assign) and isinstance(node.value, Load)
    buffers = function.buffers
    dst, src = buffers.get(node.buffer), buffers.get(node.value.buffer)
    if dst is None or src is None or dst.space is not MemorySpace.SHARED \
            or src.space is not MemorySpace.GLOBAL or dst.dtype is not src.dtype:
        return None
    if _ELEMENT_BYTES.get(str(dst.dtype), 0) * loop.vectorize != COPY_BYTES:
        return None
    for indices, buffer in ((node.indices, dst), (node.value.indices, src)):
        affs = tuple(i for i in indices if isinstance(i, Aff))
        if not affs or len(affs) != len(indices) or not _contiguous(affs, buffer, loop.var):
            return None
    return node


def _linear_in(expr: Aff, var: str) -> bool:
    """``expr`` is ``var`` plus terms free of it (coefficient 1, never under // or %)."""
    return expr.coefficient(var) == 1 and all(
        isinstance(atom, str) or var not in atom.expr.variables() for atom, _ in expr.terms)


def _contiguous(indices: tuple[Aff, ...], buffer: Buffer, var: str) -> bool:
    """Whether consecutive values of ``var`` address consecutive elements of
    ``buffer`` (row-major): ``var`` only in the last subscript, or, for a
    buffer of constant shape, in the folded element offset (a gather such as
    ``w[n, (k+v) // 9, ((k+v) // 3) % 3, (k+v) % 3]``, :meth:`Aff.expanded`)."""
    *lead, last = indices
    if not any(var in i.variables() for i in lead) and _linear_in(last, var):
        return True
    if not all(d.is_constant for d in buffer.shape):
        return False
    flat, stride = Aff.const(0), 1
    for index, dim in zip(reversed(indices), reversed(buffer.shape), strict=True):
        flat = flat + index * stride
        stride *= dim.constant
    return _linear_in(flat.expanded(), var)


def _reads(nodes: Sequence[Node], name: str) -> bool:
    for node in walk_nodes(nodes):
        if isinstance(node, FragmentLoad) and node.buffer == name:
            return True
        for expr in node_exprs(node):
            if any(isinstance(e, Load) and e.buffer == name for e in walk_expr(expr)):
                return True
    return False


def _children(node: Node) -> list[tuple[Node, ...]]:
    if isinstance(node, For):
        return [node.body]
    if isinstance(node, If):
        return [node.then_body, node.else_body]
    return []


Path = list[tuple[tuple[Node, ...], int, Node | None]]
"""From a copy outwards: (body, position of the copy's ancestor in it, owner of body)."""


def _scan(nodes: Sequence[Node], name: str, count: int, last: int | None
          ) -> tuple[bool, int, int | None]:
    """Walk ``nodes`` in order: (whether one reads ``name``, barriers passed
    before it, ``id`` of the last of them). Only barriers at this level count;
    a nested one is not counted, which can only make a copy wait earlier."""
    for node in nodes:
        if isinstance(node, Barrier):
            count, last = count + 1, id(node)
        elif _reads((node,), name):
            return True, count, last
    return False, count, last


def _reads_after(path: Path, name: str) -> list[tuple[int, int | None]]:
    """For every way execution can go on after the copy: (barriers passed
    before the first read of ``name``, ``id`` of the barrier just before
    it). A sequential loop around the copy may run again (its whole body,
    once more) or end; a mapped loop's other iterations are other threads."""
    found: list[tuple[int, int | None]] = []

    def go(level: int, count: int, last: int | None) -> None:
        if level == len(path):
            return                                   # the kernel ends: no read on this way
        body, position, owner = path[level]
        read, count, last = _scan(body[position + 1:], name, count, last)
        if read:
            found.append((count, last))
            return
        if isinstance(owner, For) and owner.mapping is None:  # the next iteration
            again, count_again, last_again = _scan(body[:position + 1], name, count, last)
            if again:
                found.append((count_again, last_again))
        go(level + 1, count, last)                   # the loop ends (or an If's body does)

    go(0, 0, None)
    return found


@dataclass(frozen=True)
class AsyncPlan:
    """Which copy loops of a kernel are lowered to ``cp.async`` and how many
    commit groups each barrier may leave in flight."""

    loops: frozenset[int]
    """``id()`` of the copy loops lowered to ``cp.async``."""
    pending: dict[int, int]
    """``id()`` of a barrier -> the groups that may still be in flight when
    threads pass it (``cp.async.wait_group N``); a barrier missing here needs
    no wait."""


def async_plan(function: Function) -> AsyncPlan:
    """The ``cp.async`` plan of ``function`` (empty outside kernels).

    A copy loop (:func:`_pattern`) is admitted when every read of its shared
    buffer that can follow it comes after at least one barrier. Each barrier
    of a kernel with async copies commits the group of copies issued since
    the previous one, so a copy whose next read comes ``s`` barriers later is
    in the ``s``-th most recent group at the last of them: that barrier waits
    until at most ``s - 1`` groups are in flight (``wait_group(s - 1)``; a
    pipeline of ``S`` stages waits for ``S - 2``)."""
    cached = _CACHE.get(id(function))
    if cached is not None and cached[0] is function:
        return cached[1]
    loops: set[int] = set()
    pending: dict[int, int] = {}

    def visit(body: tuple[Node, ...], owner: Node | None, path: Path) -> None:
        for position, node in enumerate(body):
            here = [(body, position, owner), *path]
            if isinstance(node, For):
                copy = _pattern(function, node)
                if copy is not None:
                    reads = _reads_after(here, copy.buffer)
                    if reads and all(count >= 1 for count, _ in reads):
                        loops.add(id(node))
                        for count, barrier in reads:
                            assert barrier is not None
                            pending[barrier] = min(pending.get(barrier, count - 1), count - 1)
                        continue
            for child in _children(node):
                visit(child, node, here)

    if function.kind == "kernel":
        visit(function.body, None, [])
    plan = AsyncPlan(frozenset(loops), pending)
    _CACHE[id(function)] = (function, plan)
    return plan


def async_copy_loops(function: Function) -> frozenset[int]:
    """``id()`` of the loops of ``function`` lowered to ``cp.async``."""
    return async_plan(function).loops


def lower_async_copy(lowerer: FunctionLowerer, loop: For) -> None:
    """One ``cp.async`` of 16 bytes when both addresses are aligned, else the
    loop, kept a loop (not unrolled): a branch skips it, where ``ptxas``
    would issue an unrolled copy's predicated-off loads for every chunk."""
    b = lowerer.builder
    node = loop.body[0]
    assert isinstance(node, Assign) and isinstance(node.value, Load)
    previous = lowerer.bind(loop.var, ir.Constant(I64, 0))
    dst = lowerer.element_pointer(node.buffer, node.indices)
    src = lowerer.element_pointer(node.value.buffer, node.value.indices)
    lowerer.unbind(loop.var, previous)
    bits = b.or_(b.ptrtoint(dst, I64), b.ptrtoint(src, I64))
    aligned = b.icmp_unsigned("==", b.and_(bits, ir.Constant(I64, COPY_BYTES - 1)),
                              ir.Constant(I64, 0))
    fn = lowerer.intrinsic("llvm.nvvm.cp.async.cg.shared.global.16", ir.VoidType(),
                           [dst.type, src.type])
    with b.if_else(aligned, likely=True) as (then, otherwise):
        with then:
            b.call(fn, [dst, src])
        with otherwise:
            lowerer.lower_serial_loop(replace(loop, parallel=False, vectorize=1, unroll=1))


def wait_all(lowerer: FunctionLowerer) -> None:
    """``cp.async.wait_all``: this thread's async copies have landed."""
    fn = lowerer.intrinsic("llvm.nvvm.cp.async.wait.all", ir.VoidType(), [])
    lowerer.builder.call(fn, [])


def before_barrier(lowerer: FunctionLowerer, barrier: Barrier) -> None:
    """At a barrier of a kernel with async copies: commit the copies issued
    since the last barrier as one group, then wait until at most the plan's
    number of groups is in flight (``wait_all`` for none; nothing when no
    read depends on this barrier)."""
    plan = async_plan(lowerer.function)
    if not plan.loops:
        return
    commit = lowerer.intrinsic("llvm.nvvm.cp.async.commit.group", ir.VoidType(), [])
    lowerer.builder.call(commit, [])
    in_flight = plan.pending.get(id(barrier))
    if in_flight is None:
        return
    if in_flight == 0:
        wait_all(lowerer)
        return
    wait = lowerer.intrinsic("llvm.nvvm.cp.async.wait.group", ir.VoidType(), [I32])
    lowerer.builder.call(wait, [ir.Constant(I32, in_flight)])


__all__ = ["async_copy_loops", "async_plan", "AsyncPlan", "before_barrier", "lower_async_copy",
           "wait_all", "COPY_BYTES"]
