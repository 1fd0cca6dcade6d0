"""The entry function of a split CPU build: allocate shared locals, call the kernels.

``emit_entry(llvm_module, split, hooks, llvm_name, symbol_of)`` adds
``llvm_name`` with the original function's signature
(:func:`polyir.llvm.lower.signature`: buffers as ``noalias`` pointers, the
``i64`` size symbols, then the hooks' extra parameters). Its body allocates the
locals that several kernels share (zero-filled, as the lowering does for any
local: in one heap block, ``FunctionLowerer.allocate_arena``, small ones on the
stack; of the heap block only the locals some read may see unwritten,
``polyir.cpu.split.reads_initial``, computed here: only on a cache miss), then calls each kernel in order with its buffers, its ``i64`` symbols
and the entry's extra parameters (the parallel dispatcher); a non-zero status
frees the locals and is returned at once. The kernels themselves are only
declared here: each lives in its own module (``polyir.cpu.jit``), and the
loader links them by name.
"""
from __future__ import annotations

from collections.abc import Callable

from llvmlite import ir

from polyir.cpu.split import Kernel, SplitFunction, reads_initial
from polyir.ir.nodes import Buffer
from polyir.llvm.hooks import I32, LoweringHooks
from polyir.llvm.lower import FunctionLowerer, function_type, signature


def emit_entry(llvm_module: ir.Module, split: SplitFunction, hooks: LoweringHooks,
               llvm_name: str, symbol_of: Callable[[Kernel], str]) -> ir.Function:
    """Add the entry function of ``split`` to ``llvm_module`` (see the module
    docstring); ``symbol_of(kernel)`` is the LLVM name of a kernel's code."""
    function = split.function
    slots = signature(function, hooks)
    llfunc = ir.Function(llvm_module, function_type(function, hooks), llvm_name)
    lowerer = FunctionLowerer(llvm_module, function, llfunc, hooks)
    buffers = function.buffers
    extras: list[ir.Value] = []
    for slot, arg in zip(slots, llfunc.args, strict=True):
        arg.name = slot.name
        if slot.kind == "buffer":
            arg.add_attribute("noalias")
        elif slot.kind == "symbol":
            lowerer.bind(slot.name, arg)
        else:
            extras.append(arg)
    hooks.prepare_function(lowerer)
    for slot, arg in zip(slots, llfunc.args, strict=True):
        if slot.kind == "buffer":
            lowerer.bind_buffer(buffers[slot.name], arg)
    lowerer.allocate_arena(split.shared_locals, cached=True, zeroed=_zeroed(split))
    builder = lowerer.builder
    for position, kernel in enumerate(split.kernels):
        callee = lowerer.declare(symbol_of(kernel), I32, function_type(kernel.function, hooks).args)
        args = [lowerer.buffers[name].pointer for name in kernel.buffers]
        args += [lowerer.var(name) for name in kernel.symbols]
        status = builder.call(callee, args + extras)
        lowerer.fail_if(builder.icmp_signed("!=", status, ir.Constant(I32, 0)), status,
                        f"kernel{position}.ok")
    lowerer.finish()
    return llfunc


ANALYSED_ARENA_BYTES = 1 << 20
"""Shared locals of constant size below this many bytes in all are cleared
whole on each call without asking which need it (a memset of less than a
MiB costs microseconds; the analysis, tens of milliseconds of compile time)."""


def _zeroed(split: SplitFunction) -> frozenset[str] | None:
    """The shared locals the entry clears on each call (``None``: all)."""
    counts = [_elements(b) for b in split.shared_locals]
    total = sum(c * b.dtype.storage_bytes() for c, b in zip(counts, split.shared_locals, strict=True)
                if c is not None)
    if None not in counts and total < ANALYSED_ARENA_BYTES:
        return None
    return reads_initial(split.function, [b.name for b in split.shared_locals])


def _elements(buffer: Buffer) -> int | None:
    count = 1
    for extent in buffer.shape:
        if not extent.is_constant:
            return None
        count *= extent.constant
    return count
