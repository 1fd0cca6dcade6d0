"""Data-dependent subscripts checked inside CUDA kernels (issue 16).

The host checks what it can before any launch (``polyir.cpu.bounds``: affine
footprints, and *hoisted* gathers whose ids it evaluates). A data-dependent
subscript it cannot hoist (its index buffer written by the function, loop
variables or several buffers in the index: ``BoundsCheck.unchecked``) is
checked in the kernel instead, when the function has one and ``check_bounds``
is on:

* such a kernel takes one more parameter, :data:`STATUS_PARAM`, a global
  buffer of :data:`STATUS_BYTES` bytes that the runtime allocates and zeroes
  once per executable: word 0 is the status, the bytes from
  :data:`SCRATCH_OFFSET` on are a scratch area;
* each data-dependent subscript of the kernel is tested (unsigned
  ``value >= extent``, so negative values fail too); when one fails, the
  thread stores :data:`~polyir.llvm.hooks.STATUS_SUBSCRIPT` into word 0 and
  its access goes to a safe place instead: the scratch area for global
  buffers (same address space), element 0 of the buffer for shared and local
  ones (those always hold at least one element). Never the out-of-range
  address, and no ``trap`` (it would poison the CUDA context).

Word 0 is written with a plain store, not an atomic: every failing thread
writes the same constant and the host only asks whether it is nonzero, so
racing stores cannot lose anything an atomic would keep, and a plain store
costs nothing on the path that never fails. The runtime reads the word back
after the launches of a call (``polyir.ptx.runtime``) and raises
:class:`polyir.BoundsError`; outputs may then be partly written, as on the CPU.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from llvmlite import ir

from polyir.errors import CompileError
from polyir.ir.nodes import Buffer, Function
from polyir.ir.types import MemorySpace
from polyir.llvm.hooks import I8, I32, STATUS_SUBSCRIPT, where

if TYPE_CHECKING:
    from polyir.llvm.lower import FunctionLowerer

STATUS_PARAM = "__polyir_status"
"""The name of the status buffer parameter (a ``ParamSlot`` of kind ``extra``)."""

STATUS_BYTES = 128
"""Bytes of the status buffer: the status word, then the scratch area."""

SCRATCH_OFFSET = 64
"""Byte offset of the scratch area that redirected global accesses use (64
bytes: more than the widest element, 8, and aligned for any vector access)."""

GLOBAL_ADDRESS_SPACE = 1


def has_data_dependent_subscripts(function: Function) -> bool:
    """Whether some access of ``function`` has a non-affine subscript (a gather
    or scatter through loaded values)."""
    from polyir.cpu.bounds import data_dependent_subscripts
    return bool(data_dependent_subscripts(function))


def status_params(function: Function) -> list[tuple[str, ir.Type]]:
    """``[(STATUS_PARAM, global pointer)]`` for a kernel with data-dependent
    subscripts, else ``[]``."""
    if not has_data_dependent_subscripts(function):
        return []
    return [(STATUS_PARAM, ir.PointerType(addrspace=GLOBAL_ADDRESS_SPACE))]


def guard_access(lowerer: FunctionLowerer, buffer: Buffer, pointer: ir.Value,
                 outside: Sequence[ir.Value]) -> ir.Value:
    """Record a failed check in the status word and return the pointer to
    access: ``pointer`` when every subscript is inside, else a safe location
    (see the module docstring). Raises ``CompileError`` when the kernel has no
    status parameter (its subscripts were not found by
    :func:`has_data_dependent_subscripts`)."""
    status = next((arg for arg in lowerer.llfunc.args if arg.name == STATUS_PARAM), None)
    if status is None:
        raise CompileError(f"{where(lowerer.function, buffer)}: a checked subscript of "
                           f"'{buffer.name}' in a kernel without a status parameter")
    b = lowerer.builder
    failed = outside[0]
    for other in outside[1:]:
        failed = b.or_(failed, other)
    with b.if_then(failed, likely=False):
        b.store(ir.Constant(I32, STATUS_SUBSCRIPT), status)
    if buffer.space is MemorySpace.GLOBAL:
        safe = b.gep(status, [ir.Constant(I32, SCRATCH_OFFSET)], inbounds=True, source_etype=I8)
    else:
        safe = lowerer.buffers[buffer.name].pointer
    return b.select(failed, safe, pointer, name=f"{buffer.name}.checked")


__all__ = ["STATUS_PARAM", "STATUS_BYTES", "SCRATCH_OFFSET", "has_data_dependent_subscripts",
           "status_params", "guard_access"]
