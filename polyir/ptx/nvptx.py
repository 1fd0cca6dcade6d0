"""NVPTX target hooks for the shared lowering (``polyir.llvm.lower``).

``NvptxHooks`` subclasses ``LoweringHooks`` and decides only what differs on
the GPU:

* address spaces: global 1, shared 3, local/fragment 0 (``alloca``);
* storage: bf16 is 16-bit (``i16`` bfloat bits, so tensor cores can read it),
  converted to and from ``float`` on load/store;
* kernels return ``void`` and use the ``ptx_kernel`` calling convention;
* ``gpu=block.*``/``gpu=thread.*`` loops bind their variable to
  ``lower + step * ctaid``/``tid`` (no loop: the launch's grid and block sizes
  equal the loops' extents, see docs/ir.md);
* ``barrier`` -> ``llvm.nvvm.barrier.cta.sync.aligned.all(0)`` (LLVM >= 20;
  ``llvm.nvvm.barrier0`` before), i.e. ``bar.sync 0``;
* ``@shared`` locals -> static ``addrspace(3)`` globals, or slices of one
  ``extern`` dynamic shared array when the kernel is launched with
  ``shared_bytes > 0``; ``@local`` locals -> zero-filled ``alloca``;
* fragments -> ``polyir.ptx.mma_sync`` (ldmatrix + mma.sync, sm_80+, tiles in shared memory) or ``polyir.ptx.wmma``; math -> ``polyir.ptx.mathlib``;
* an f32 shared tile that only stages accumulators for the lanes that hold
  them -> no memory at all, its loads read the fragment registers
  (``polyir.ptx.staging``).
* ``check_subscripts``: a kernel with data-dependent subscripts takes a
  status buffer parameter; each such subscript is checked and a failing
  access is redirected to a safe location (``polyir.ptx.subscripts``).

Host functions are not lowered for NVPTX: the runtime walks their launches.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import llvmlite.binding as llvm
from llvmlite import ir

from polyir.errors import CompileError
from polyir.ir.nodes import (
    Barrier,
    Buffer,
    For,
    FragmentFill,
    FragmentLoad,
    FragmentMMA,
    FragmentStore,
    Function,
    Launch,
)
from polyir.ir.types import DType, MemorySpace
from polyir.llvm.hooks import F32, I8, I16, I32, I64, LoweringHooks, where
from polyir.llvm.lower import byte_size
from polyir.ptx import cpasync, mathlib, mma_sync, staging, subscripts, wmma

if TYPE_CHECKING:
    from polyir.llvm.lower import FunctionLowerer

ADDRESS_SPACES = {MemorySpace.GLOBAL: 1, MemorySpace.SHARED: 3, MemorySpace.LOCAL: 0,
                  MemorySpace.FRAGMENT: 0}
SPECIAL_REGISTERS = {"thread": "tid", "block": "ctaid"}
DYNAMIC_SHARED = "__polyir_dynamic_shared"


class NvptxHooks(LoweringHooks):
    """Lowering decisions for ``nvptx64-nvidia-cuda`` kernels.

    ``launches`` maps a kernel name to its launch (for the dynamic shared
    memory decision); kernels without one use static shared memory.
    ``check_subscripts``: check data-dependent subscripts in the kernels
    (``polyir.ptx.subscripts``).
    """

    returns_status = False

    def __init__(self, launches: dict[str, Launch] | None = None, sm: int = 90,
                 check_subscripts: bool = False):
        self.launches = dict(launches or {})
        self.sm = sm
        self.check_subscripts = check_subscripts
        self._shared_offset = 0

    # ---------------------------------------------------------------- types
    def address_space(self, space: MemorySpace) -> int:
        return ADDRESS_SPACES[space]

    def storage_type(self, dtype: DType) -> ir.Type:
        return I16 if dtype is DType.BF16 else super().storage_type(dtype)

    def load_convert(self, lowerer: FunctionLowerer, dtype: DType, raw: ir.Value) -> ir.Value:
        if dtype is DType.BF16:
            b = lowerer.builder
            return b.bitcast(b.shl(b.zext(raw, I32), ir.Constant(I32, 16)), F32)
        return super().load_convert(lowerer, dtype, raw)

    def store_convert(self, lowerer: FunctionLowerer, dtype: DType, value: ir.Value) -> ir.Value:
        if dtype is DType.BF16:
            b = lowerer.builder
            bits = b.bitcast(lowerer.round_bf16(value), I32)
            return b.trunc(b.lshr(bits, ir.Constant(I32, 16)), I16)
        return super().store_convert(lowerer, dtype, value)

    # ------------------------------------------------------------ functions
    def function_params(self, function: Function) -> list[tuple[str, ir.Type]]:
        """The status buffer of a kernel whose data-dependent subscripts are
        checked (``polyir.ptx.subscripts.STATUS_PARAM``), else nothing."""
        return subscripts.status_params(function) if self.check_subscripts else []

    def check_subscript(self, lowerer: FunctionLowerer, value: ir.Value,
                        extent: ir.Value) -> ir.Value:
        """The i1 "outside" of a data-dependent subscript (the access is guarded
        by :meth:`guard_subscripts`; a kernel cannot return a status)."""
        return lowerer.builder.icmp_unsigned(">=", value, extent)

    def guard_subscripts(self, lowerer: FunctionLowerer, buffer: Buffer, pointer: ir.Value,
                         outside: Sequence[ir.Value]) -> ir.Value:
        """Record a failure in the status buffer and redirect the access
        (``polyir.ptx.subscripts.guard_access``)."""
        return subscripts.guard_access(lowerer, buffer, pointer, outside)

    def prepare_function(self, lowerer: FunctionLowerer) -> None:
        function = lowerer.function
        if function.kind != "kernel":
            raise CompileError(f"function '{function.name}': only kernels are lowered for "
                               f"NVPTX (host functions run their launches from Python)")
        lowerer.llfunc.calling_convention = "ptx_kernel"
        lowerer.llfunc.attributes.add("nounwind")
        self._shared_offset = 0

    def math_call(self, lowerer: FunctionLowerer, fn: str, args: Sequence[ir.Value],
                  dtype: DType) -> ir.Value | None:
        return mathlib.emit_math(lowerer, fn, args)

    def allocate_local(self, lowerer: FunctionLowerer, buffer: Buffer) -> ir.Value | None:
        where_ = where(lowerer.function, buffer)
        if buffer.space is MemorySpace.FRAGMENT:
            storage = wmma.fragment_storage(buffer)
            return lowerer.entry_alloca(storage, name=buffer.name)
        count = 1
        for dim in buffer.shape:
            if not dim.is_constant:
                raise CompileError(f"{where_}: local buffer '{buffer.name}' has symbolic shape "
                                   f"{[str(d) for d in buffer.shape]}; GPU locals need constant "
                                   f"shapes")
            count *= max(0, dim.constant)
        storage = self.storage_type(buffer.dtype)
        array = ir.ArrayType(storage, max(1, count))
        if buffer.space is MemorySpace.SHARED and \
                buffer.name in staging.register_staged(lowerer.function, self.sm):
            return staging.null_tile()   # held in the accumulator registers
        if buffer.space is MemorySpace.SHARED:
            return self._shared(lowerer, buffer, array)
        slot = lowerer.entry_alloca(array, name=buffer.name)
        lowerer.builder.store(ir.Constant(array, None), slot)
        return slot

    def _shared(self, lowerer: FunctionLowerer, buffer: Buffer, array: ir.ArrayType) -> ir.Value:
        module = lowerer.llvm_module
        launch = self.launches.get(lowerer.function.name)
        if launch is not None and launch.shared_bytes > 0:
            extern = module.globals.get(DYNAMIC_SHARED)
            if extern is None:
                extern = ir.GlobalVariable(module, ir.ArrayType(I8, 0), DYNAMIC_SHARED, addrspace=3)
                extern.linkage = "external"
                extern.align = 16
            offset = self._shared_offset
            size = array.count * byte_size(array.element)
            self._shared_offset = (offset + size + 15) // 16 * 16
            if self._shared_offset > launch.shared_bytes:
                raise CompileError(f"{where(lowerer.function, buffer)}: shared buffers need "
                                   f"{self._shared_offset} bytes, the launch gives "
                                   f"{launch.shared_bytes}")
            return extern.gep([ir.Constant(I64, 0), ir.Constant(I64, offset)]).bitcast(
                ir.PointerType(array.element, addrspace=3))
        name = f"{lowerer.function.name}.{buffer.name}"
        shared = ir.GlobalVariable(module, array, name, addrspace=3)
        shared.linkage = "internal"
        shared.initializer = ir.Constant(array, None)  # NVPTX ignores it: shared memory is undefined
        shared.align = 16
        # a pointer to the first element (llvmlite checks pointee types on store)
        return shared.gep([ir.Constant(I32, 0), ir.Constant(I32, 0)])

    # --------------------------------------------------------------- nodes
    def lower_mapped_loop(self, lowerer: FunctionLowerer, loop: For) -> None:
        kind, axis = (loop.mapping or "").split(".")
        if kind not in SPECIAL_REGISTERS or axis not in "xyz":
            raise CompileError(f"{where(lowerer.function, loop)}: unknown mapping gpu={loop.mapping}")
        if lowerer.function.kind != "kernel":
            raise CompileError(f"{where(lowerer.function, loop)}: gpu={loop.mapping} outside a kernel")
        b = lowerer.builder
        reg = f"llvm.nvvm.read.ptx.sreg.{SPECIAL_REGISTERS[kind]}.{axis}"
        index = b.zext(b.call(lowerer.intrinsic(reg, I32, []), []), I64)
        lo, _ = lowerer.loop_bounds(loop)
        value = b.add(lo, b.mul(index, ir.Constant(I64, loop.step)) if loop.step != 1 else index)
        previous = lowerer.bind(loop.var, value)
        lowerer.lower_body(loop.body)
        lowerer.unbind(loop.var, previous)

    def lower_parallel_loop(self, lowerer: FunctionLowerer, loop: For) -> None:
        if self.sm >= 80 and id(loop) in cpasync.async_copy_loops(lowerer.function):
            cpasync.lower_async_copy(lowerer, loop)
        else:
            lowerer.lower_serial_loop(loop)

    def lower_barrier(self, lowerer: FunctionLowerer, node: Barrier) -> None:
        b = lowerer.builder
        if self.sm >= 80:
            cpasync.before_barrier(lowerer, node)  # async tile copies land before anyone reads them
        if llvm.llvm_version_info >= (20, 0, 0):
            fn = lowerer.intrinsic("llvm.nvvm.barrier.cta.sync.aligned.all", ir.VoidType(), [I32])
            b.call(fn, [ir.Constant(I32, 0)])
        else:
            b.call(lowerer.intrinsic("llvm.nvvm.barrier0", ir.VoidType(), []), [])

    def load_value(self, lowerer: FunctionLowerer, name: str,
                   indices: Sequence[object]) -> ir.Value | None:
        tile = staging.register_staged(lowerer.function, self.sm).get(name)
        return None if tile is None else staging.load_staged(lowerer, tile, tuple(indices))

    def lower_fragment(self, lowerer: FunctionLowerer,
                       node: FragmentFill | FragmentLoad | FragmentMMA | FragmentStore) -> None:
        if isinstance(node, FragmentStore) and \
                node.buffer in staging.register_staged(lowerer.function, self.sm):
            return   # its loads read the registers (polyir.ptx.staging)
        if mma_sync.uses_mma_sync(lowerer.function, self.sm):
            mma_sync.lower_mma_sync(lowerer, node)
        else:
            wmma.lower_fragment(lowerer, node)

    def lower_launch(self, lowerer: FunctionLowerer, node: Launch) -> None:
        raise CompileError(f"{where(lowerer.function, node)}: launch of '{node.kernel}' inside "
                           f"a kernel (dynamic parallelism is not supported)")


def kernel_functions(functions: Sequence[Function]) -> list[Function]:
    """The kernels among ``functions``."""
    return [f for f in functions if f.kind == "kernel"]


__all__ = ["NvptxHooks", "ADDRESS_SPACES", "kernel_functions"]
