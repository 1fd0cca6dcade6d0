"""Global-to-shared copies of 16 bytes as ``cp.async`` (sm_80+).

A loop ``for v = 0 to V parallel vectorize=V { S[.., c + v] = G[.., g + v] }``
(``S`` a ``@shared`` buffer, ``G`` a global one, one dtype, ``V`` elements =
16 bytes; ``polyir.gpu.tensorcore`` emits these for its tile copies) is
lowered to one ``cp.async.cg.shared.global`` of 16 bytes when both addresses
are 16-byte aligned at run time, else to the plain loop. Every ``barrier`` of
a kernel that issues one is preceded by ``cp.async.wait.all``, so the copy has
landed when the barrier lets other threads read it; the copy overlaps with
whatever the thread does until then.

This is only the IR's meaning if the copying thread itself does not read the
element before that barrier. :func:`async_copy_loops` admits a loop only when
no node between it and the next barrier (following its enclosing bodies
outwards, the whole body of each enclosing loop when the barrier is not
reached inside it) reads ``S``; otherwise the loop stays synchronous.

LLVM names: ``llvm.nvvm.cp.async.cg.shared.global.16(ptr addrspace(3),
ptr addrspace(1))`` and ``llvm.nvvm.cp.async.wait.all()``.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from llvmlite import ir

from polyir.ir.affine import Aff
from polyir.ir.nodes import Assign, Barrier, For, FragmentLoad, Function, If, Load, Node
from polyir.ir.types import MemorySpace
from polyir.ir.walk import node_exprs, walk_expr, walk_nodes
from polyir.llvm.hooks import I64

if TYPE_CHECKING:
    from polyir.llvm.lower import FunctionLowerer

COPY_BYTES = 16
_CACHE: dict[int, tuple[Function, frozenset[int]]] = {}
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
    for indices in (node.indices, node.value.indices):
        if not indices or not all(isinstance(i, Aff) for i in indices):
            return None
        *lead, last = indices
        if any(loop.var in i.variables() for i in lead if isinstance(i, Aff)):
            return None
        if not isinstance(last, Aff) or last.coefficient(loop.var) != 1:
            return None
    return node


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


def _safe(path: list[tuple[tuple[Node, ...], int, Node | None]], name: str) -> bool:
    """``path``: from the copy outwards, (body, position, owner of body)."""
    for body, position, owner in path:
        rest = body[position + 1:]
        cut = next((i for i, n in enumerate(rest) if isinstance(n, Barrier)), None)
        if cut is not None:
            return not _reads(rest[:cut], name)
        if _reads(rest, name):
            return False
        if isinstance(owner, For) and _reads(body, name):  # the next iteration runs it all
            return False
    return False  # no barrier before the kernel ends: keep it synchronous


def async_copy_loops(function: Function) -> frozenset[int]:
    """``id()`` of the loops of ``function`` lowered to ``cp.async``."""
    cached = _CACHE.get(id(function))
    if cached is not None and cached[0] is function:
        return cached[1]
    found: set[int] = set()

    def visit(body: tuple[Node, ...], owner: Node | None,
              path: list[tuple[tuple[Node, ...], int, Node | None]]) -> None:
        for position, node in enumerate(body):
            here = [(body, position, owner), *path]
            if isinstance(node, For):
                copy = _pattern(function, node)
                if copy is not None and _safe(here, copy.buffer):
                    found.add(id(node))
                    continue
            for child in _children(node):
                visit(child, node, here)

    if function.kind == "kernel":
        visit(function.body, None, [])
    result = frozenset(found)
    _CACHE[id(function)] = (function, result)
    return result


def lower_async_copy(lowerer: FunctionLowerer, loop: For) -> None:
    """One ``cp.async`` of 16 bytes when both addresses are aligned, else the loop."""
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
    with b.if_else(aligned) as (then, otherwise):
        with then:
            b.call(fn, [dst, src])
        with otherwise:
            lowerer.lower_serial_loop(loop)


def wait_all(lowerer: FunctionLowerer) -> None:
    """``cp.async.wait_all``: this thread's async copies have landed."""
    fn = lowerer.intrinsic("llvm.nvvm.cp.async.wait.all", ir.VoidType(), [])
    lowerer.builder.call(fn, [])


__all__ = ["async_copy_loops", "lower_async_copy", "wait_all", "COPY_BYTES"]
