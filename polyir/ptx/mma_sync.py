"""Tensor-core fragments lowered to ``ldmatrix`` + ``mma.sync.m16n8k16`` (sm_80+).

The IR's fragment operations work on whole 16x16 tiles (``m16n16k16.f16.f32``
and ``m16n16k16.bf16.f32``). WMMA (``polyir.ptx.wmma``) lowers them with an
unspecified register layout; this module lowers the same operations with the
layout the PTX ISA fixes for ``mma.m16n8k16`` (g = lane >> 2, t = lane % 4):

* **a** (16x16, 4 b32 registers): a0 = rows g, k 2t..2t+1; a1 = row g+8;
  a2 = row g, k + 8; a3 = row g+8, k + 8. Loaded by one ``ldmatrix.x4``
  (``.trans`` when the tile is stored column-major, i.e. ``At[k, m]``).
* **b** (16x16 = two n8 halves, 4 b32 registers): per half j, b0 = k rows
  2t..2t+1 at column g, b1 = k + 8. One ``ldmatrix.x4`` (``.trans`` when the
  tile is stored row-major ``B[k, n]``, plain when stored as ``Bt[n, k]``).
* **acc** (16x16 f32 = two m16n8 tiles, 8 registers): per half j,
  c0, c1 = row g, columns 8j + 2t, 8j + 2t + 1; c2, c3 = row g + 8.
  ``fragment_store`` writes each register to its element (per lane, any
  memory space), which is what lets a later pass read accumulators in place.
* **mma**: two ``mma.sync.aligned.m16n8k16.row.col.f32.{f16.f16|bf16.bf16}.f32``,
  one per n8 half.

``ldmatrix`` reads shared memory only, 16-byte rows: a kernel uses this
lowering (:func:`uses_mma_sync`) when it is compiled for sm_80 or later and
every ``a``/``b`` fragment load reads a ``@shared`` buffer whose rows are a
multiple of 8 elements, at a column origin that is a multiple of 8, and no
fragment is loaded as an accumulator (``acc`` loads keep WMMA). Otherwise the
whole kernel keeps WMMA: the two layouts must not mix in one kernel.

LLVM names (checked against LLVM 22): ``llvm.nvvm.ldmatrix.sync.aligned.m8n8.x4
[.trans].b16.p3`` returns ``{i32 x 4}``; ``llvm.nvvm.mma.m16n8k16.row.col.f32.f32``
(f16 inputs: the suffix is D-type.C-type) takes 4 x ``<2 x half>``,
2 x ``<2 x half>`` and 4 x float; ``llvm.nvvm.mma.m16n8k16.row.col.bf16`` takes
4 x i32, 2 x i32 and 4 x float; both return ``{float x 4}``.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from llvmlite import ir

from polyir.errors import CompileError
from polyir.ir.affine import Aff
from polyir.ir.fragments import MMA_SHAPES
from polyir.ir.nodes import FragmentFill, FragmentLoad, FragmentMMA, FragmentStore, Function
from polyir.ir.types import DType, MemorySpace
from polyir.ir.walk import walk_nodes
from polyir.llvm.hooks import F32, I32, I64

if TYPE_CHECKING:
    from polyir.llvm.lower import FunctionLowerer

MMA_SYNC_SHAPES = ("m16n16k16.f16.f32", "m16n16k16.bf16.f32")
"""Fragment shapes this lowering handles."""

_CACHE: dict[int, tuple[Function, bool]] = {}


def _aligned(index: object, multiple: int) -> bool:
    if not isinstance(index, Aff):
        return False
    parts = [index.constant, *index._coeffs().values()]
    return all(p % multiple == 0 for p in parts)


def uses_mma_sync(function: Function, sm: int) -> bool:
    """Whether the fragment operations of ``function`` are lowered with
    ``ldmatrix`` + ``mma.sync`` (see the module docstring for the conditions)."""
    if sm < 80:
        return False
    cached = _CACHE.get(id(function))   # the layout conditions, whatever the sm
    if cached is not None and cached[0] is function:
        return cached[1]
    result = _eligible(function)
    _CACHE[id(function)] = (function, result)
    return result


def _eligible(function: Function) -> bool:
    buffers = function.buffers
    found = False
    for node in walk_nodes(function.body):
        if isinstance(node, (FragmentLoad, FragmentMMA, FragmentStore)):
            if node.shape not in MMA_SYNC_SHAPES:
                return False
        if isinstance(node, FragmentLoad):
            if node.role == "acc":
                return False
            source = buffers.get(node.buffer)
            if source is None or source.space is not MemorySpace.SHARED or source.rank < 2:
                return False
            last = source.shape[-1]
            if not last.is_constant or last.constant % 8:
                return False
            if not _aligned(node.indices[-1], 8):
                return False
            found = True
    return found


# ----------------------------------------------------------------- layouts
# Written once over an arithmetic ``ops`` (ints in the layout tests, LLVM
# values here), so that the tests check the very formulas the lowering emits.
class _IntOps:
    """Plain integer arithmetic (for tests and documentation)."""

    def const(self, value: int) -> Any:
        return value

    def add(self, x: Any, y: Any) -> Any:
        return x + y

    def mul(self, x: Any, y: Any) -> Any:
        return x * y

    def div(self, x: Any, y: Any) -> Any:
        return x // y

    def rem(self, x: Any, y: Any) -> Any:
        return x % y


INT_OPS = _IntOps()


class _LlvmOps(_IntOps):
    """The same operations on i32 LLVM values."""

    def __init__(self, builder: ir.IRBuilder):
        self.b = builder

    def const(self, value: int) -> Any:
        return ir.Constant(I32, value)

    def add(self, x: Any, y: Any) -> Any:
        return self.b.add(x, y)

    def mul(self, x: Any, y: Any) -> Any:
        return self.b.mul(x, y)

    def div(self, x: Any, y: Any) -> Any:
        return self.b.udiv(x, y)

    def rem(self, x: Any, y: Any) -> Any:
        return self.b.urem(x, y)


def ldmatrix_trans(role: str, layout: str) -> bool:
    """Whether the ``ldmatrix`` of a ``role`` tile stored in ``layout`` transposes."""
    return (role == "a") == (layout == "col")


def ldmatrix_row_address(role: str, layout: str, lane: Any, ops: _IntOps = INT_OPS
                         ) -> tuple[Any, Any]:
    """(row, column) offset, in the stored tile, of the 8-element row that
    ``lane`` supplies to ``ldmatrix.x4``: lanes 8i..8i+7 address the rows of
    matrix i. For ``a`` matrix i is (m-block i % 2, k-block i // 2), giving
    registers a0..a3; for ``b`` it is (k-block i % 2, n-block i // 2), giving
    b0, b1 of the first n8 half, then of the second."""
    eight = ops.const(8)
    matrix = ops.div(lane, eight)
    r = ops.rem(lane, eight)
    first = ops.rem(matrix, ops.const(2))
    second = ops.div(matrix, ops.const(2))
    if role == "a":   # (m-block, k-block) = (first, second)
        if layout == "row":   # stored [m, k]
            return ops.add(ops.mul(first, eight), r), ops.mul(second, eight)
        return ops.add(ops.mul(second, eight), r), ops.mul(first, eight)   # stored [k, m]
    if layout == "row":       # (k-block, n-block) = (first, second), stored [k, n]
        return ops.add(ops.mul(first, eight), r), ops.mul(second, eight)
    return ops.add(ops.mul(second, eight), r), ops.mul(first, eight)       # stored [n, k]


def acc_element(half: int, q: int, lane: Any, ops: _IntOps = INT_OPS) -> tuple[Any, Any]:
    """(row, column) in the 16x16 accumulator tile of register ``4*half + q``
    of ``lane`` (the m16n8 C layout of n8 half ``half``)."""
    g = ops.div(lane, ops.const(4))
    t2 = ops.mul(ops.rem(lane, ops.const(4)), ops.const(2))
    row = g if q < 2 else ops.add(g, ops.const(8))
    return row, ops.add(t2, ops.const(8 * half + q % 2))


def _lane(lowerer: FunctionLowerer) -> ir.Value:
    fn = lowerer.intrinsic("llvm.nvvm.read.ptx.sreg.laneid", I32, [])
    return lowerer.builder.call(fn, [])


def _slots(lowerer: FunctionLowerer, name: str, typ: ir.Type, count: int) -> list[ir.Value]:
    """Pointers to the first ``count`` registers of fragment ``name`` viewed as ``typ``."""
    b = lowerer.builder
    pointer = lowerer.buffers[name].pointer
    base = b.bitcast(pointer, typ.as_pointer()) if pointer.type != typ.as_pointer() else pointer
    return [b.gep(base, [ir.Constant(I32, i)], source_etype=typ) for i in range(count)]


def _offset_pointer(lowerer: FunctionLowerer, base: ir.Value, row: ir.Value, col: ir.Value,
                    stride: ir.Value, dtype: DType) -> ir.Value:
    b = lowerer.builder
    offset = b.add(b.mul(b.zext(row, I64), stride), b.zext(col, I64))
    return b.gep(base, [offset], source_etype=lowerer.hooks.storage_type(dtype))


def lower_mma_sync(lowerer: FunctionLowerer,
                   node: FragmentFill | FragmentLoad | FragmentMMA | FragmentStore) -> None:
    """Emit ``ldmatrix``/``mma.sync``/per-lane code for one fragment node."""
    b = lowerer.builder
    if isinstance(node, FragmentFill):
        from polyir.ptx.wmma import lower_fragment
        lower_fragment(lowerer, node)  # a splat is the same in every layout
        return
    if isinstance(node, FragmentLoad):
        binding = lowerer.buffers[node.buffer]
        dtype = binding.buffer.dtype
        base = lowerer.element_pointer(node.buffer, node.indices)
        stride = binding.strides[-2]
        ops = _LlvmOps(b)
        row, col = ldmatrix_row_address(node.role, node.layout, _lane(lowerer), ops)
        trans = ldmatrix_trans(node.role, node.layout)
        address = _offset_pointer(lowerer, base, row, col, stride, dtype)
        if getattr(address.type, "addrspace", 0) != 3:
            raise CompileError(f"function '{lowerer.function.name}': ldmatrix needs a shared "
                               f"buffer, '{node.buffer}' is not")
        name = f"llvm.nvvm.ldmatrix.sync.aligned.m8n8.x4{'.trans' if trans else ''}.b16.p3"
        struct = ir.LiteralStructType([I32] * 4)
        loaded = b.call(lowerer.intrinsic(name, struct, [address.type]), [address])
        for i, slot in enumerate(_slots(lowerer, node.fragment, I32, 4)):
            b.store(b.extract_value(loaded, i), slot)
        return
    if isinstance(node, FragmentMMA):
        shape = MMA_SHAPES[node.shape]
        if shape.a_dtype is DType.F16:
            reg: ir.Type = ir.VectorType(ir.HalfType(), 2)
            name = "llvm.nvvm.mma.m16n8k16.row.col.f32.f32"
        else:
            reg = I32
            name = "llvm.nvvm.mma.m16n8k16.row.col.bf16"
        a = [b.load(p, typ=reg) for p in _slots(lowerer, node.a, reg, 4)]
        bs = [b.load(p, typ=reg) for p in _slots(lowerer, node.b, reg, 4)]
        acc = [b.load(p, typ=F32) for p in _slots(lowerer, node.acc, F32, 8)]
        fn = lowerer.intrinsic(name, ir.LiteralStructType([F32] * 4), [reg] * 6 + [F32] * 4)
        out: list[ir.Value] = []
        for half in range(2):
            result = b.call(fn, [*a, bs[2 * half], bs[2 * half + 1], *acc[4 * half:4 * half + 4]])
            out += [b.extract_value(result, q) for q in range(4)]
        for value, slot in zip(out, _slots(lowerer, node.result, F32, 8), strict=True):
            b.store(value, slot)
        return
    if isinstance(node, FragmentStore):
        binding = lowerer.buffers[node.buffer]
        if binding.buffer.dtype is not DType.F32:
            raise CompileError(f"function '{lowerer.function.name}': fragment_store needs an "
                               f"f32 buffer, '{node.buffer}' is {binding.buffer.dtype}")
        base = lowerer.element_pointer(node.buffer, node.indices)
        stride = binding.strides[-2]
        lane = _lane(lowerer)
        ops = _LlvmOps(b)
        values = [b.load(p, typ=F32) for p in _slots(lowerer, node.fragment, F32, 8)]
        for half in range(2):
            for q in range(4):
                row, col = acc_element(half, q, lane, ops)
                if node.layout == "col":
                    row, col = col, row
                pointer = _offset_pointer(lowerer, base, row, col, stride, DType.F32)
                b.store(values[4 * half + q], pointer)
        return
    raise CompileError(f"function '{lowerer.function.name}': not a fragment node: {node!r}")


__all__ = ["MMA_SYNC_SHAPES", "uses_mma_sync", "lower_mma_sync", "ldmatrix_row_address",
           "ldmatrix_trans", "acc_element", "INT_OPS"]
