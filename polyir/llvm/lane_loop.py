"""Lane loops lowered as vector statements: the rows of a register tile.

A register tile's innermost loops (``unroll-jam`` leaves one per row, each
holding one copy of the statement) run along the tile's columns, a few
vectors wide::

    for r_9 ... for r_11 ... {
      for i_6 = c0 to c0 + 32 {
        S1: acc[0, 0, 0, i_6 - c0] = acc[0, 0, 0, i_6 - c0] + x[..., w + r_11] * Wp[r_9, r_10, r_11, i_6 - c0]
      }
      for i_3 = c0 to c0 + 32 { S1_1: ... row 1 ... }
      ...
    }

:func:`match_lane_loop` recognises such a loop: step 1, a constant trip count
of ``k * V`` (``V`` the target's lanes for the element type, ``1 <= k <=``
:data:`MAX_VECTORS`), no loop-scoped locals, a body of assignments to f32
or f64 buffers whose subscripts are affine, the loop's variable in the
last one with coefficient 1 (outside ``//`` and ``%``) and in no other: every
iteration writes its own elements, consecutive along the loop. Each value
is made of constants of that type, ``+ - * /``, ``neg``, ``abs``, ``max`` and
``min`` of loads of the same type whose affine subscripts either do not use
the loop's variable (one element for all lanes) or use it as the written
subscripts do (consecutive elements). A buffer the body writes is accessed
with one and the same subscripts everywhere in the body, so iteration ``j``
touches no element another iteration touches: running the iterations ``V``
at a time (each statement on ``V`` consecutive iterations before the next
statement) computes what the loop computes.

:func:`lower_lane_loop` emits the loop as ``k`` groups of vector statements
(no loop): loads of ``V`` consecutive elements or one element broadcast, one
vector operation per scalar operation with the same fast-math flags, one
vector store. Each lane does exactly the scalar operations of its iteration,
so the result is bit-equal to the scalar loop's.

This is what LLVM's loop vectoriser made of these loops (the hints that
``polyir.llvm.hints.jammed_copies`` gave it: one vector iteration, no full
unroll), at a fraction of the compile time: the vectoriser's legality and
cost analysis of every row loop, and the runtime checks and remainder loops
it emits for the later passes to prove dead, were a quarter of LLVM's time
on a ResNet's convolution kernels.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from llvmlite import ir

from polyir.ir.affine import Aff
from polyir.ir.nodes import Assign, BinOp, Call, Const, For, Load, Node
from polyir.ir.types import DType
from polyir.llvm.exprs import constant
from polyir.llvm.hooks import compute_type
from polyir.llvm.row_block import linear_in, splat

if TYPE_CHECKING:
    from polyir.ir.nodes import Buffer
    from polyir.llvm.lower import FunctionLowerer

MAX_VECTORS = 4
"""The most vectors a lane loop is lowered as (longer loops stay loops)."""

SPLAT, LANES = "splat", "lanes"
"""How a load feeds the lanes: one element for all (``x[..., w + r_11]``), or
consecutive elements along the loop (``Wp[..., i_6 - c0]``)."""

_FLOAT_OPS = ("+", "-", "*", "/")
_CALLS = {"neg": 1, "abs": 1, "max": 2, "min": 2}


@dataclass(frozen=True)
class LaneLoop:
    """A loop matched by :func:`match_lane_loop`: ``vectors`` vectors of
    ``lanes`` iterations each; ``reads`` says how each load feeds the lanes."""

    loop: For
    lanes: int
    vectors: int
    dtype: DType
    reads: tuple[tuple[Load, str], ...]


def match_lane_loop(loop: For, buffers: Callable[[str], Buffer | None],
                    lanes_of: Callable[[DType], int]) -> LaneLoop | None:
    """``loop`` as a lane loop (see the module docstring), or ``None``.
    ``buffers(name)``: a buffer's declaration; ``lanes_of(dtype)``: the
    target's vector lanes (0: off)."""
    from polyir.llvm.lower import constant_trip_count

    if loop.step != 1 or loop.locals or loop.parallel or loop.mapping is not None or not loop.body \
            or not all(isinstance(node, Assign) for node in loop.body):
        return None
    trips = constant_trip_count(loop)
    first = loop.body[0]
    assert isinstance(first, Assign)
    declared = buffers(first.buffer)
    if trips is None or declared is None or declared.dtype not in (DType.F32, DType.F64):
        return None
    dtype = declared.dtype
    lanes = lanes_of(dtype)
    if lanes < 2 or trips % lanes or not 1 <= trips // lanes <= MAX_VECTORS:
        return None
    written: dict[str, tuple[object, ...]] = {}
    for node in loop.body:
        assert isinstance(node, Assign)
        target = buffers(node.buffer)
        if target is None or target.dtype is not dtype or _kind(node.indices, loop.var) != LANES:
            return None
        if written.setdefault(node.buffer, node.indices) != node.indices:
            return None
    reads: dict[Load, str] = {}
    for node in loop.body:
        assert isinstance(node, Assign)
        if not _classify(node.value, dtype, loop.var, buffers, reads):
            return None
    if any(load.buffer in written and load.indices != written[load.buffer] for load in reads):
        return None
    return LaneLoop(loop, lanes, trips // lanes, dtype, tuple(reads.items()))


def _kind(indices: tuple[object, ...], var: str) -> str | None:
    """:data:`SPLAT` when no subscript uses ``var``, :data:`LANES` when only
    the last does, with coefficient 1 outside ``//`` and ``%``; else ``None``."""
    if not indices or not all(isinstance(i, Aff) for i in indices):
        return None
    *outer, last = indices
    assert isinstance(last, Aff)
    if any(isinstance(i, Aff) and var in i.variables() for i in outer):
        return None
    if var not in last.variables():
        return SPLAT
    return LANES if linear_in(last, (var,)) and last.coefficient(var) == 1 else None


def _classify(e: object, dtype: DType, var: str, buffers: Callable[[str], Buffer | None],
              reads: dict[Load, str]) -> bool:
    """Record each load of ``e`` in ``reads``; ``False`` when ``e`` is not of the
    accepted form (module docstring)."""
    if isinstance(e, Const):
        return e.dtype is dtype
    if isinstance(e, BinOp):
        return e.op in _FLOAT_OPS and _classify(e.lhs, dtype, var, buffers, reads) \
            and _classify(e.rhs, dtype, var, buffers, reads)
    if isinstance(e, Call):
        return _CALLS.get(e.fn) == len(e.args) \
            and all(_classify(a, dtype, var, buffers, reads) for a in e.args)
    if not isinstance(e, Load):
        return False
    source = buffers(e.buffer)
    kind = _kind(e.indices, var)
    if source is None or source.dtype is not dtype or kind is None:
        return False
    reads[e] = kind
    return True


def lane_loops(nodes: tuple[Node, ...], buffers: Callable[[str], Buffer | None],
               lanes_of: Callable[[DType], int]) -> list[LaneLoop]:
    """Each of ``nodes`` matched by :func:`match_lane_loop` when they are two or
    more loops that all match (the rows an unroll-and-jam leaves of a register
    tile); an empty list otherwise."""
    if len(nodes) < 2 or not all(isinstance(node, For) for node in nodes):
        return []
    found = []
    for node in nodes:
        assert isinstance(node, For)
        matched = match_lane_loop(node, buffers, lanes_of)
        if matched is None:
            return []
        found.append(matched)
    return found


class _Vectors:
    """Emits the vector form of a lane loop's statements at one group of lanes."""

    def __init__(self, lowerer: FunctionLowerer, lane_loop: LaneLoop):
        self.lowerer = lowerer
        self.builder = lowerer.builder
        self.reads = dict(lane_loop.reads)
        self.lanes = lane_loop.lanes
        self.dtype = lane_loop.dtype
        self.vector = ir.VectorType(compute_type(lane_loop.dtype), lane_loop.lanes)
        self.align = 4 if lane_loop.dtype is DType.F32 else 8
        self.flags = lowerer.hooks.float_flags

    def splat(self, value: ir.Value) -> ir.Value:
        return splat(self.builder, self.vector, value)

    def value(self, e: object) -> ir.Value:
        b = self.builder
        if isinstance(e, Const):
            return self.splat(constant(self.dtype, e.value))
        if isinstance(e, BinOp):
            lhs, rhs = self.value(e.lhs), self.value(e.rhs)
            return {"+": b.fadd, "-": b.fsub, "*": b.fmul, "/": b.fdiv}[e.op](lhs, rhs, flags=self.flags)
        if isinstance(e, Call):
            # lane by lane what the scalar lowering computes (its rule for max/min and NaN)
            return self.lowerer._float_call(e.fn, [self.value(a) for a in e.args])
        assert isinstance(e, Load)
        if self.reads[e] == SPLAT:
            return self.splat(self.lowerer.load(e.buffer, e.indices))
        pointer = self.lowerer.element_pointer(e.buffer, e.indices)
        return b.load(pointer, typ=self.vector, align=self.align)

def lower_lane_loop(lowerer: FunctionLowerer, lane_loop: LaneLoop) -> None:
    """Emit ``lane_loop`` as its vectors' statements, in order (module docstring)."""
    loop = lane_loop.loop
    vectors = _Vectors(lowerer, lane_loop)
    b = lowerer.builder
    first = lowerer.aff(loop.lower[0])
    for group in range(lane_loop.vectors):
        start = first if group == 0 else lowerer._add_nsw(first, ir.Constant(first.type, group * lane_loop.lanes))
        previous = lowerer.bind(loop.var, start)
        for node in loop.body:
            assert isinstance(node, Assign)
            value = vectors.value(node.value)
            b.store(value, lowerer.element_pointer(node.buffer, node.indices), align=vectors.align)
        lowerer.unbind(loop.var, previous)


__all__ = ["MAX_VECTORS", "LaneLoop", "lane_loops", "match_lane_loop", "lower_lane_loop"]
