"""Row sums vectorised across rows, each lane in its own order: the lowering
of a jammed row block.

``unroll-jam`` of a matrix-vector product's row loop by ``V`` (the plan
``orders.lanes_for``) leaves a loop whose body is ``V`` copies of one float
reduction, copy ``r`` the first with the row variable ``v`` shifted by ``r``::

    for j = lo to hi {
      S0:   x[v]     = x[v]     + A[v, j]     * y[j]
      S0_1: x[v + 1] = x[v + 1] + A[v + 1, j] * y[j]
      ...
    }

Each copy is a chain of dependent adds along ``j`` that no vectoriser may
reorder without fast math, and LLVM's SLP vectoriser would pack the copies
only with element-by-element gathers of ``A``'s column. :func:`lower_row_block`
runs the copies as the lanes of vectors instead: ``x[v .. v + V]`` in a vector
register across the loop; per block of ``V`` columns, the ``V x V`` block of
``A`` loaded row by row (unit stride) and transposed in registers
(:func:`transpose`: ``log2 V`` stages of interleaving shuffles), then for
each column of the block, in order, one vector operation per scalar
operation of the statement. Lane ``r`` computes exactly what copy ``r``
computed, in the same order (an ``fmul`` and an ``fadd``, never contracted
unless the hooks' fast-math flags allow it): the result is bit-equal to the
scalar code's. The columns left over (``(hi - lo) % V``) gather their column
element by element. A body of ``g * V`` copies is ``g`` such vectors, side
by side (independent chains of vector adds).

:func:`match_row_block` says when a loop has that form (else the ordinary
lowering runs); the hooks give the lanes per element type
(``LoweringHooks.row_block_lanes``, 0: off). A statement may read the buffer
of its sums (Cholesky's ``A[i, j] -= A[i, k] * A[j, k]`` across ``j``, planned
by ``polyir.tiling.lane_blocks``) with subscripts linear in the row and
column loops: the sums are held in registers and the reads hoisted, so the
lanes run only when, checked once per entry of the loop, no such read
touches a sum (:func:`aliased_reads`); else the ordinary loop runs.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, TypeVar

from llvmlite import ir

from polyir.ir.affine import Aff
from polyir.ir.nodes import Assign, BinOp, Const, For, Function, Load
from polyir.ir.types import DType
from polyir.ir.walk import substitute_node
from polyir.llvm.exprs import constant
from polyir.llvm.hooks import I32, I64, compute_type

if TYPE_CHECKING:
    from polyir.llvm.lower import FunctionLowerer

SPLAT, LANES, TRANSPOSED = "splat", "lanes", "transposed"
"""How a read of the statement feeds the lanes: one element for all lanes
(``y[j]``), one element per lane at consecutive addresses (``z[v]``), or one
element per lane down a column (``A[v, j]``: loaded by rows, transposed)."""

T = TypeVar("T")

MAX_GROUPS = 4
"""The most vectors of lanes a row block is lowered as."""


@dataclass(frozen=True)
class RowBlock:
    """A loop recognised by :func:`match_row_block`: ``groups * lanes`` copies
    of ``statement`` (copy 0) shifted along ``row``; ``reads`` classifies each
    load of the statement's value other than the accumulator's."""

    loop: str
    row: str
    lanes: int
    groups: int
    statement: Assign
    op: str
    accumulator_first: bool
    """``X = X op e`` (else ``X = e op X``)."""
    term: object
    """``e``, the value added (or multiplied...) into the accumulator."""
    reads: tuple[tuple[Load, str], ...]
    dtype: DType


def match_row_block(loop: For, function: Function, lanes_of: Callable[[DType], int]
                    ) -> RowBlock | None:
    """The row block ``loop`` is, or ``None``. Requires: step 1, no loop-scoped
    locals, a body of ``g * V`` assignments (``V = lanes_of(dtype) >= 2``,
    ``1 <= g <= MAX_GROUPS``), copy ``r`` equal to copy 0 with a variable
    ``v`` (not the loop's) replaced by ``v + r``; copy 0 ``X[.., v + c] = X[..,
    v + c] op e`` (``op`` in ``+ - *``, either operand order) on an f32/f64
    buffer, ``v`` in the last subscript with coefficient 1 and in no other,
    the loop's variable in none; ``e`` made of constants and ``+ - * /`` of
    loads of other buffers of the same type with affine subscripts, each
    :data:`SPLAT` (no ``v``), :data:`LANES` (``v`` in the last subscript with
    coefficient 1 only) or :data:`TRANSPOSED` (``v`` in other subscripts
    only, the loop's variable in the last with coefficient 1 only); reads of
    ``X`` itself with ``v`` and the loop's variable outside ``//`` and ``%``
    (:func:`aliased_reads`, checked at run time). Nothing else is written in
    the loop, so the reads may be hoisted and the accumulators held in
    registers."""
    body = loop.body
    if loop.step != 1 or loop.locals or len(body) < 2 or not all(isinstance(n, Assign) for n in body):
        return None
    first = body[0]
    assert isinstance(first, Assign)
    buffer = function.buffers.get(first.buffer)
    if buffer is None or buffer.dtype not in (DType.F32, DType.F64):
        return None
    lanes = lanes_of(buffer.dtype)
    if lanes < 2 or len(body) % lanes or len(body) // lanes > MAX_GROUPS:
        return None
    indices = first.indices
    if not indices or not all(isinstance(i, Aff) for i in indices):
        return None
    last = indices[-1]
    assert isinstance(last, Aff)
    rows = [v for v in sorted(last.variables()) if v != loop.var and last.coefficient(v) == 1
            and not any(isinstance(i, Aff) and v in i.variables() for i in indices[:-1])]
    if any(isinstance(i, Aff) and loop.var in i.variables() for i in indices):
        return None
    row = next((v for v in rows if _copies_shift(body, v)), None)
    if row is None:
        return None
    parts = _reduction(first)
    if parts is None:
        return None
    op, accumulator_first, term = parts
    reads: dict[Load, str] = {}
    if not _classify(term, first.buffer, buffer.dtype, row, loop.var, function, reads):
        return None
    return RowBlock(loop.var, row, lanes, len(body) // lanes, first, op, accumulator_first, term,
                    tuple(reads.items()), buffer.dtype)


def _copies_shift(body: Sequence[object], row: str) -> bool:
    """Is copy ``r`` of ``body`` copy 0 with ``row`` replaced by ``row + r``?"""
    first = body[0]
    assert isinstance(first, Assign)
    for r, copy in enumerate(body):
        assert isinstance(copy, Assign)
        shifted = substitute_node(first, {row: Aff.var(row) + r})
        if not isinstance(shifted, Assign) or replace(shifted, name=copy.name, loc=copy.loc) != copy:
            return False
    return True


def _reduction(stmt: Assign) -> tuple[str, bool, object] | None:
    """``(op, accumulator first, e)`` for ``X[f] = X[f] op e`` or ``e op X[f]``."""
    value = stmt.value
    if not isinstance(value, BinOp) or value.op not in ("+", "-", "*"):
        return None
    target = Load(stmt.buffer, stmt.indices)
    if value.lhs == target:
        return value.op, True, value.rhs
    if value.rhs == target:
        return value.op, False, value.lhs
    return None


def _classify(e: object, written: str, dtype: DType, row: str, loop: str, function: Function,
              reads: dict[Load, str]) -> bool:
    """Record how each load of ``e`` feeds the lanes (see :func:`match_row_block`);
    ``False`` when ``e`` is not of the accepted form."""
    if isinstance(e, Const):
        return e.dtype is dtype
    if isinstance(e, BinOp):
        return e.op in ("+", "-", "*", "/") and \
            _classify(e.lhs, written, dtype, row, loop, function, reads) and \
            _classify(e.rhs, written, dtype, row, loop, function, reads)
    if not isinstance(e, Load):
        return False
    buffer = function.buffers.get(e.buffer)
    if buffer is None or buffer.dtype is not dtype or not e.indices \
            or not all(isinstance(i, Aff) for i in e.indices):
        return False
    affs = [i for i in e.indices if isinstance(i, Aff)]
    if e.buffer == written and not all(linear_in(a, (row, loop)) for a in affs):
        return False
    *outer, last = affs
    row_outer = any(row in a.variables() for a in outer)
    if row not in last.variables() and not row_outer:
        reads[e] = SPLAT
    elif not row_outer and last.coefficient(row) == 1:
        reads[e] = LANES
    elif row not in last.variables() and last.coefficient(loop) == 1 \
            and not any(loop in a.variables() for a in outer):
        reads[e] = TRANSPOSED
    else:
        return False
    return True


def linear_in(aff: Aff, names: Sequence[str]) -> bool:
    """Do ``names`` occur in ``aff`` only as plain terms (not inside ``//``, ``%``)?"""
    return all(isinstance(atom, str) or not (atom.expr.variables() & set(names)) for atom, _ in aff.terms)


def aliased_reads(block: RowBlock) -> tuple[Load, ...]:
    """The reads of ``block`` from the buffer its sums are written to (allowed
    when, at run time, they touch none of the sums: :func:`lower_row_block`)."""
    return tuple(load for load, _ in block.reads if load.buffer == block.statement.buffer)


# ------------------------------------------------------------------ lowering
def transpose(rows: Sequence[T], shuffle: Callable[[T, T, list[int]], T], per_lane: int) -> list[T]:
    """The ``V x V`` block whose row ``r`` is vector ``rows[r]`` (``V`` a power of
    two), transposed: vector ``c`` of the result holds column ``c``.
    ``shuffle(a, b, mask)`` picks element ``mask[k]`` of ``a`` followed by ``b``
    (LLVM's ``shufflevector``); ``per_lane``: elements in a 128-bit lane of
    the machine's vectors (4 f32, 2 f64), the unit its cheap shuffles stay in.

    First each group of ``per_lane`` rows is transposed inside every 128-bit
    lane (``log2 per_lane`` stages interleaving vector ``i`` with vector
    ``i + per_lane/2``, low elements of each lane into ``2i``, high into
    ``2i + 1``: ``unpcklps``/``unpckhps``): vector ``c`` of group ``g`` then
    holds, in lane ``L``, column ``per_lane * L + c`` of the group's rows.
    Then, for each ``c``, the groups' lanes are transposed as a matrix of
    128-bit lanes (``log2(V / per_lane)`` stages taking the even lanes of two
    vectors into one and the odd lanes into another: ``vshuff32x4``)."""
    size = len(rows)
    per_lane = min(per_lane, size)
    groups = size // per_lane
    low, high = [], []
    for lane in range(size // per_lane):
        base = lane * per_lane
        for m in range(per_lane // 2):
            low += [base + m, size + base + m]
            high += [base + per_lane // 2 + m, size + base + per_lane // 2 + m]
    columns: list[list[T]] = []
    for group in range(groups):
        current = list(rows[group * per_lane:(group + 1) * per_lane])
        for _ in range(per_lane.bit_length() - 1):
            half = per_lane // 2
            following: list[T] = []
            for i in range(half):
                a, b = current[i], current[i + half]
                following += [shuffle(a, b, low), shuffle(a, b, high)]
            current = following
        columns.append(current)
    even = [size * which + lane * per_lane + k for which in (0, 1)
            for lane in range(0, groups, 2) for k in range(per_lane)]
    odd = [size * which + lane * per_lane + k for which in (0, 1)
           for lane in range(1, groups, 2) for k in range(per_lane)]
    result: list[T] = [rows[0]] * size
    for c in range(per_lane):
        current = [columns[group][c] for group in range(groups)]
        for _ in range(groups.bit_length() - 1):
            pairs = [(current[2 * i], current[2 * i + 1]) for i in range(groups // 2)]
            current = [shuffle(a, b, even) for a, b in pairs] + [shuffle(a, b, odd) for a, b in pairs]
        for lane, vector in enumerate(current):
            result[per_lane * lane + c] = vector
    return result


def splat(builder: ir.IRBuilder, vector: ir.VectorType, value: ir.Value) -> ir.Value:
    """``value`` in every lane of a ``vector``."""
    single = builder.insert_element(ir.Constant(vector, ir.Undefined), value, ir.Constant(I32, 0))
    zeros = ir.Constant(ir.VectorType(I32, vector.count), [0] * vector.count)
    return builder.shuffle_vector(single, ir.Constant(vector, ir.Undefined), zeros)


class _Lanes:
    """Emits the vector code of one row block (see the module docstring)."""

    def __init__(self, lowerer: FunctionLowerer, block: RowBlock):
        self.lowerer = lowerer
        self.block = block
        self.builder = lowerer.builder
        self.scalar = compute_type(block.dtype)
        self.vector = ir.VectorType(self.scalar, block.lanes)
        self.align = 4 if block.dtype is DType.F32 else 8
        self.flags = lowerer.hooks.float_flags

    def shifted(self, indices: Sequence[object], rows: int, columns: int = 0) -> tuple[object, ...]:
        mapping = {self.block.row: Aff.var(self.block.row) + rows,
                   self.block.loop: Aff.var(self.block.loop) + columns}
        return tuple(i.substitute(mapping) if isinstance(i, Aff) else i for i in indices)

    def load_vector(self, name: str, indices: Sequence[object]) -> ir.Value:
        pointer = self.lowerer.element_pointer(name, indices)
        return self.builder.load(pointer, typ=self.vector, align=self.align)

    def shuffle(self, a: ir.Value, b: ir.Value, mask: list[int]) -> ir.Value:
        return self.builder.shuffle_vector(a, b, ir.Constant(ir.VectorType(I32, len(mask)), mask))

    def splat(self, value: ir.Value) -> ir.Value:
        return splat(self.builder, self.vector, value)

    def gather(self, load: Load, group: int) -> ir.Value:
        """The lanes of a :data:`TRANSPOSED` read at the current column, element by element."""
        b = self.builder
        value: ir.Value = ir.Constant(self.vector, ir.Undefined)
        for r in range(self.block.lanes):
            element = self.lowerer.load(load.buffer, self.shifted(load.indices, group * self.block.lanes + r))
            value = b.insert_element(value, element, ir.Constant(I32, r))
        return value

    def columns(self, group: int) -> dict[Load, list[ir.Value]]:
        """Each :data:`TRANSPOSED` read's ``V x V`` block at the current column
        (rows of group ``group``), loaded by rows and transposed."""
        blocks: dict[Load, list[ir.Value]] = {}
        for load, kind in self.block.reads:
            if kind == TRANSPOSED:
                rows = [self.load_vector(load.buffer,
                                         self.shifted(load.indices, group * self.block.lanes + r))
                        for r in range(self.block.lanes)]
                blocks[load] = transpose(rows, self.shuffle, 16 // self.align)
        return blocks

    def value(self, e: object, group: int, column: int,
              blocks: dict[Load, list[ir.Value]] | None) -> ir.Value:
        """The lanes of ``e`` at column ``loop + column`` for rows of group
        ``group``; :data:`TRANSPOSED` reads from ``blocks`` (else gathered)."""
        b = self.builder
        if isinstance(e, Const):
            return self.splat(constant(self.block.dtype, e.value))
        if isinstance(e, BinOp):
            lhs = self.value(e.lhs, group, column, blocks)
            rhs = self.value(e.rhs, group, column, blocks)
            op = {"+": b.fadd, "-": b.fsub, "*": b.fmul, "/": b.fdiv}[e.op]
            return op(lhs, rhs, flags=self.flags)
        assert isinstance(e, Load)
        kind = dict(self.block.reads)[e]
        base = group * self.block.lanes
        if kind == SPLAT:
            return self.splat(self.lowerer.load(e.buffer, self.shifted(e.indices, base, column)))
        if kind == LANES:
            return self.load_vector(e.buffer, self.shifted(e.indices, base, column))
        if blocks is None:
            return self.gather(e, group)
        return blocks[e][column]

    def update(self, slot: ir.Value, group: int, column: int,
               blocks: dict[Load, list[ir.Value]] | None) -> None:
        b = self.builder
        term = self.value(self.block.term, group, column, blocks)
        acc = b.load(slot, typ=self.vector)
        op = {"+": b.fadd, "-": b.fsub, "*": b.fmul}[self.block.op]
        result = op(acc, term, flags=self.flags) if self.block.accumulator_first \
            else op(term, acc, flags=self.flags)
        b.store(result, slot)


def _interval(lowerer: FunctionLowerer, aff: Aff, extents: dict[str, tuple[ir.Value, ir.Value]]
              ) -> tuple[ir.Value, ir.Value]:
    """The least and greatest value of ``aff`` (linear in the keys of
    ``extents``: variable -> (low, high), i64 values) as i64 values, the other
    variables at their bound values."""
    ends = []
    for greatest in (False, True):
        saved = {}
        for name, (low, high) in extents.items():
            upward = (aff.coefficient(name) >= 0) == greatest
            saved[name] = lowerer.bind(name, high if upward else low)
        ends.append(lowerer.aff(aff))
        for name, previous in saved.items():
            lowerer.unbind(name, previous)
    return ends[0], ends[1]


def _disjoint(lowerer: FunctionLowerer, loop: For, block: RowBlock, lo: ir.Value, hi: ir.Value
              ) -> ir.Value:
    """An i1: the aliased reads (:func:`aliased_reads`) touch none of the sums
    over the whole loop: for each read, some subscript whose range over the
    loop's columns and the block's rows misses the sums' range."""
    b = lowerer.builder
    one = ir.Constant(I64, 1)
    row = lowerer.var(block.row)
    last_row = b.add(row, ir.Constant(I64, block.groups * block.lanes - 1))
    rows = {block.row: (row, last_row)}
    both = {**rows, loop.var: (lo, b.sub(hi, one))}
    result: ir.Value = ir.Constant(ir.IntType(1), 1)
    for load in aliased_reads(block):
        apart: ir.Value = ir.Constant(ir.IntType(1), 0)
        for read, written in zip(load.indices, block.statement.indices, strict=True):
            assert isinstance(read, Aff) and isinstance(written, Aff)
            read_low, read_high = _interval(lowerer, read, both)
            low, high = _interval(lowerer, written, rows)
            below = b.icmp_signed("<", read_high, low)
            above = b.icmp_signed(">", read_low, high)
            apart = b.or_(apart, b.or_(below, above))
        result = b.and_(result, apart)
    return result


def lower_row_block(lowerer: FunctionLowerer, loop: For, block: RowBlock,
                    scalar: Callable[[], None]) -> None:
    """Emit ``loop`` (matched as ``block``) with its copies as vector lanes (see
    the module docstring); bit-equal to the scalar lowering. When the block
    reads the buffer of its sums (:func:`aliased_reads`), the lanes run only
    when those reads provably miss the sums (checked once per entry); else
    ``scalar()`` emits the ordinary loop."""
    b = lowerer.builder
    if aliased_reads(block):
        lo, hi = lowerer.loop_bounds(loop)
        with b.if_else(_disjoint(lowerer, loop, block, lo, hi)) as (vector, ordinary):
            with vector:
                _lower_lanes(lowerer, loop, block)
            with ordinary:
                scalar()
        return
    _lower_lanes(lowerer, loop, block)


def _lower_lanes(lowerer: FunctionLowerer, loop: For, block: RowBlock) -> None:
    lanes = _Lanes(lowerer, block)
    b = lowerer.builder
    stmt = block.statement
    slots = []
    for group in range(block.groups):
        slot = lowerer.entry_alloca(lanes.vector, name=f"{stmt.buffer}.lanes")
        b.store(lanes.load_vector(stmt.buffer, lanes.shifted(stmt.indices, group * block.lanes)), slot)
        slots.append(slot)
    lo, hi = lowerer.loop_bounds(loop)
    count = b.call(lowerer.intrinsic("llvm.smax.i64", I64, [I64, I64]), [b.sub(hi, lo), ir.Constant(I64, 0)])
    full = b.and_(count, ir.Constant(I64, -block.lanes))
    middle = b.add(lo, full)

    def columns_block(start: ir.Value) -> None:
        previous = lowerer.bind(loop.var, start)
        blocks = [lanes.columns(group) for group in range(block.groups)]
        for column in range(block.lanes):
            for group, slot in enumerate(slots):
                lanes.update(slot, group, column, blocks[group])
        lowerer.unbind(loop.var, previous)

    def one_column(index: ir.Value) -> None:
        previous = lowerer.bind(loop.var, index)
        for group, slot in enumerate(slots):
            lanes.update(slot, group, 0, None)
        lowerer.unbind(loop.var, previous)

    lowerer.emit_range_loop(lo, middle, block.lanes, columns_block, f"{loop.var}.lanes")
    lowerer.emit_range_loop(middle, hi, 1, one_column, f"{loop.var}.rest")
    for group, slot in enumerate(slots):
        pointer = lowerer.element_pointer(stmt.buffer, lanes.shifted(stmt.indices, group * block.lanes))
        b.store(b.load(slot, typ=lanes.vector), pointer, align=lanes.align)


__all__ = ["RowBlock", "match_row_block", "lower_row_block", "aliased_reads", "transpose",
           "SPLAT", "LANES", "TRANSPOSED", "MAX_GROUPS"]
