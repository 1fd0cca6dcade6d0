"""Target hooks for the shared IR -> LLVM IR lowering (see ``polyir.llvm.lower``).

``LoweringHooks`` holds every decision that differs between the native CPU
backend (``polyir.cpu.hooks.CpuHooks``) and the NVPTX backend. The base class
is a complete, target-neutral implementation for plain host code; constructs
that only a GPU target can lower (``Barrier``, fragment operations,
``gpu=``-mapped loops, ``Launch``, ``FRAGMENT`` buffers) raise
:class:`polyir.CompileError` naming the construct, so a GPU backend overrides
exactly those methods.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

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

if TYPE_CHECKING:
    from polyir.llvm.lower import FunctionLowerer

F32 = ir.FloatType()
F64 = ir.DoubleType()
F16 = ir.HalfType()
I1 = ir.IntType(1)
I8 = ir.IntType(8)
I16 = ir.IntType(16)
I32 = ir.IntType(32)
I64 = ir.IntType(64)

_COMPUTE_TYPES: dict[DType, ir.Type] = {
    DType.F16: F32, DType.BF16: F32, DType.F32: F32, DType.F64: F64,
    DType.I8: I8, DType.I32: I32, DType.I64: I64, DType.BOOL: I1,
}
_STORAGE_TYPES: dict[DType, ir.Type] = {
    DType.F16: F16, DType.BF16: F32, DType.F32: F32, DType.F64: F64,
    DType.I8: I8, DType.I32: I32, DType.I64: I64, DType.BOOL: I8,
}

# Bytes up to which a constant-size LOCAL buffer lives on the stack.
STACK_LIMIT_BYTES = 16 * 1024


def compute_type(dtype: DType) -> ir.Type:
    """The LLVM type values of ``dtype`` are computed in (f16/bf16: float, bool: i1)."""
    return _COMPUTE_TYPES[dtype]


def where(function: Function, node: object) -> str:
    """``function 'f', statement S0 at 3:4`` for error messages."""
    text = f"function '{function.name}'"
    name = getattr(node, "name", None)
    if isinstance(name, str) and not isinstance(node, Buffer):
        text += f", statement {name}"
    loc = getattr(node, "loc", None)
    return text + (f" at {loc}" if loc is not None else "")


STATUS_SUBSCRIPT = 2
"""The status a host function returns when a data-dependent subscript checked
in the loop (``LoweringHooks.check_subscripts``) is outside its buffer."""


class LoweringHooks:
    """Target decisions of the lowering; subclass and override per target.

    Every method receives the :class:`~polyir.llvm.lower.FunctionLowerer`
    (``lowerer``) when it needs to emit code; use its public helpers
    (``builder``, ``aff``, ``expr``, ``load``, ``store``, ``element_pointer``,
    ``bind``, ``lower_body``, ``emit_range_loop``, ``entry_alloca``).
    """

    #: Host functions return an ``i32`` status (0 ok, 1 out of memory) when true,
    #: ``void`` otherwise (GPU kernels).
    returns_status: bool = True

    #: Check data-dependent subscripts (gathers: ``A[idx[i]]``) in the loop when
    #: true (:meth:`check_subscript`, :meth:`guard_subscripts`): by default an
    #: index outside ``[0, extent)`` returns :data:`STATUS_SUBSCRIPT` before the
    #: access (needs ``returns_status``; the CPU backend's ``check_bounds``); the
    #: NVPTX hooks record it in a status buffer instead. Affine subscripts are
    #: checked before the call.
    check_subscripts: bool = False

    #: LLVM fast-math flags put on float arithmetic and float math intrinsics
    #: (``()``: exact IEEE semantics; the CPU backend's ``fast_math`` sets
    #: ``contract reassoc nsz``).
    float_flags: tuple[str, ...] = ()

    # ---------------------------------------------------------------- types
    def address_space(self, space: MemorySpace) -> int:
        """LLVM address space of pointers to buffers in ``space`` (CPU: all 0)."""
        return 0

    def pointer_type(self, space: MemorySpace) -> ir.PointerType:
        return ir.PointerType(addrspace=self.address_space(space))

    def storage_type(self, dtype: DType) -> ir.Type:
        """Element type of a buffer of ``dtype`` in memory (bf16: float, as on the host)."""
        return _STORAGE_TYPES[dtype]

    def load_convert(self, lowerer: FunctionLowerer, dtype: DType, raw: ir.Value) -> ir.Value:
        """Storage value -> compute value."""
        b = lowerer.builder
        if dtype is DType.F16:
            return b.fpext(raw, F32)
        if dtype is DType.BOOL:
            return b.icmp_unsigned("!=", raw, ir.Constant(I8, 0))
        return raw

    def store_convert(self, lowerer: FunctionLowerer, dtype: DType, value: ir.Value) -> ir.Value:
        """Compute value -> storage value (f16: fptrunc, bf16: rounded float)."""
        b = lowerer.builder
        if dtype is DType.F16:
            return b.fptrunc(value, F16)
        if dtype is DType.BF16:
            return lowerer.round_bf16(value)
        if dtype is DType.BOOL:
            return b.zext(value, I8)
        return value

    # ------------------------------------------------------------ functions
    def function_params(self, function: Function) -> list[tuple[str, ir.Type]]:
        """Extra trailing LLVM parameters of every lowered function (name, type)."""
        return []

    def prepare_function(self, lowerer: FunctionLowerer) -> None:
        """Called once the LLVM function and its entry block exist (attributes,
        kernel annotations, reading special registers...)."""

    def math_call(self, lowerer: FunctionLowerer, fn: str, args: Sequence[ir.Value],
                  dtype: DType) -> ir.Value | None:
        """Lower math function ``fn`` (a key of ``CALLS``) on float operands of
        ``dtype`` (already in compute type). Return ``None`` for the default
        (LLVM intrinsics such as ``llvm.exp.f32``, or ``erff``/``erf``)."""
        return None

    def allocate_local(self, lowerer: FunctionLowerer, buffer: Buffer) -> ir.Value | None:
        """Pointer to local ``buffer`` at function entry, or ``None`` for the default
        (stack for 0-d and small LOCAL/SHARED buffers, zero-filled heap otherwise)."""
        if buffer.space is MemorySpace.FRAGMENT:
            raise CompileError(f"{where(lowerer.function, buffer)}: fragment buffer "
                               f"'{buffer.name}' needs a GPU target")
        return None

    def row_block_lanes(self, dtype: DType) -> int:
        """Lanes of a vector of ``dtype`` for a jammed row block's sums run
        across rows (``polyir.llvm.row_block``), or 0 to lower such a block as
        scalar code (the default)."""
        return 0

    def load_value(self, lowerer: FunctionLowerer, name: str,
                   indices: Sequence[object]) -> ir.Value | None:
        """The compute value of ``name[indices]`` when the target holds it
        elsewhere than in memory (the NVPTX hooks: accumulators staged in
        registers), or ``None`` for an ordinary load."""
        return None

    def check_subscript(self, lowerer: FunctionLowerer, value: ir.Value,
                        extent: ir.Value) -> ir.Value:
        """Test data-dependent subscript ``value`` (i64) against ``extent`` when
        ``check_subscripts`` is set; return the i1 "outside" (unsigned
        ``value >= extent``: negative values too). Default: leave the function
        with :data:`STATUS_SUBSCRIPT` when it holds."""
        outside = lowerer.builder.icmp_unsigned(">=", value, extent)
        if self.returns_status:
            lowerer.fail_if(outside, ir.Constant(I32, STATUS_SUBSCRIPT), "subscript.ok")
        return outside

    def guard_subscripts(self, lowerer: FunctionLowerer, buffer: Buffer, pointer: ir.Value,
                         outside: Sequence[ir.Value]) -> ir.Value:
        """The pointer to access instead of ``pointer`` (an element of ``buffer``
        addressed with checked data-dependent subscripts, ``outside`` their
        :meth:`check_subscript` results). Default: ``pointer`` (the function
        has already left when a subscript was outside); a target without a
        status return must redirect the access, so it raises here."""
        if not self.returns_status:
            raise CompileError(f"{where(lowerer.function, buffer)}: checked subscripts of "
                               f"'{buffer.name}' need a status return or a target hook")
        return pointer

    # --------------------------------------------------------------- nodes
    def lower_parallel_loop(self, lowerer: FunctionLowerer, loop: For) -> None:
        """An outermost ``parallel`` loop (no ``mapping``). Default: serial."""
        lowerer.lower_serial_loop(loop)

    def lower_mapped_loop(self, lowerer: FunctionLowerer, loop: For) -> None:
        """A loop with ``mapping`` (``block.x`` ... ``thread.z``)."""
        raise CompileError(f"{where(lowerer.function, loop)}: loop '{loop.var}' mapped to "
                           f"gpu={loop.mapping} needs a GPU target")

    def lower_barrier(self, lowerer: FunctionLowerer, node: Barrier) -> None:
        raise CompileError(f"{where(lowerer.function, node)}: barrier needs a GPU target")

    def lower_fragment(self, lowerer: FunctionLowerer,
                       node: FragmentFill | FragmentLoad | FragmentMMA | FragmentStore) -> None:
        raise CompileError(f"{where(lowerer.function, node)}: {type(node).__name__} "
                           f"(tensor-core fragment) needs a GPU target")

    def lower_launch(self, lowerer: FunctionLowerer, node: Launch) -> None:
        raise CompileError(f"{where(lowerer.function, node)}: launch of kernel "
                           f"'{node.kernel}' needs a GPU target")
