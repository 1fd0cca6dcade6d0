"""Local buffers of a lowered function: stack slots, heap blocks, arenas.

:class:`LocalAllocation` is the part of ``polyir.llvm.lower.FunctionLowerer``
that gives local buffers memory: small constant-size locals (at most
``STACK_LIMIT_BYTES``) are stack slots in the entry block, cleared when they
must start at zero; larger or symbolic ones are ``calloc``ed (``malloc``ed
when their contents need not start at zero) and freed on return, a failed
allocation taking the function's failure path (status 1).
"""
from __future__ import annotations

from collections.abc import Container, Sequence
from typing import TYPE_CHECKING, cast

from llvmlite import ir

from polyir.ir.nodes import Buffer
from polyir.ir.types import MemorySpace
from polyir.llvm.hooks import I1, I64, STACK_LIMIT_BYTES, LoweringHooks

if TYPE_CHECKING:
    from polyir.ir.affine import Aff
    from polyir.llvm.lower import BufferBinding, FunctionLowerer

ZERO_STORE_MAX_ELEMENTS = 64
"""Stack locals up to this many elements are cleared by one aggregate store,
larger ones by ``llvm.memset`` (see ``LocalAllocation._zero_stack_array``)."""


def byte_size(typ: ir.Type) -> int:
    """Bytes of an LLVM storage type (integers, half, float, double)."""
    if isinstance(typ, ir.IntType):
        return max(1, typ.width // 8)
    return {ir.HalfType: 2, ir.FloatType: 4, ir.DoubleType: 8}.get(type(typ), 8)



class LocalAllocation:
    """Allocation of local buffers, mixed into ``FunctionLowerer``; needs from it
    ``builder``, ``hooks``, ``buffers``, ``bind_buffer``, ``entry_alloca``,
    ``declare``, ``intrinsic``, ``aff``, the ``_mul_nsw`` and ``_add_nsw``
    helpers, ``_check_allocations`` and the ``_entry``, ``_heap`` and
    ``_pending_failure`` state."""

    builder: ir.IRBuilder
    hooks: LoweringHooks
    _entry: ir.Block
    _heap: list[ir.Value]
    _arena_release: list[tuple[ir.Value, ir.Value, ir.GlobalVariable]]
    _pending_failure: list[ir.Value]
    buffers: dict[str, BufferBinding]

    def entry_alloca(self, typ: ir.Type, name: str = "") -> ir.Value: ...
    def declare(self, name: str, ret: ir.Type, args: Sequence[ir.Type]) -> ir.Function: ...
    def intrinsic(self, name: str, ret: ir.Type, args: Sequence[ir.Type]) -> ir.Function: ...
    def aff(self, a: Aff) -> ir.Value: ...
    def _mul_nsw(self, a: ir.Value, b: ir.Value) -> ir.Value: ...
    def _add_nsw(self, a: ir.Value, b: ir.Value) -> ir.Value: ...
    def _check_allocations(self) -> None: ...

    def _lowerer(self) -> FunctionLowerer:
        """This object as the hooks see it (the host class)."""
        return cast("FunctionLowerer", self)

    def element_count(self, buffer: Buffer) -> ir.Value:
        count: ir.Value = ir.Constant(I64, 1)
        for dim in buffer.shape:
            count = self._mul_nsw(count, self.aff(dim))
        return count

    def allocate_locals(self, buffers: Sequence[Buffer]) -> None:
        """Bind each local buffer to fresh zero-filled memory (hooks first)."""
        for buffer in buffers:
            pointer = self.hooks.allocate_local(self._lowerer(), buffer)
            if pointer is None:
                pointer = self._default_local(buffer)
            self._lowerer().bind_buffer(buffer, pointer)
        self._check_allocations()

    def ensure_locals(self, buffers: Sequence[Buffer]) -> None:
        """Bind loop-scoped locals not bound yet in this LLVM function: their
        memory is allocated once, in the entry block, and reused by every
        iteration (each iteration's contents are undefined, so reuse is exact);
        an outlined parallel loop body allocates its own, per thread."""
        missing = [b for b in buffers if b.name not in self.buffers]
        if not missing:
            return
        with self.builder.goto_block(self._entry):
            for buffer in missing:
                pointer = self.hooks.allocate_local(self._lowerer(), buffer)
                if pointer is None:
                    pointer = self._default_local(buffer, zeroed=False)
                self._lowerer().bind_buffer(buffer, pointer)
        self._check_allocations()

    def allocate_arena(self, buffers: Sequence[Buffer], align: int = 64, cached: bool = False,
                       zeroed: Container[str] | None = None) -> None:
        """Bind ``buffers`` to one zero-filled heap block (``calloc``ed once, freed
        on return), each at an offset aligned to ``align`` bytes; buffers the
        hooks or the default place on the stack stay there. One allocation
        instead of one per buffer: cheaper to call and to compile.

        ``cached``: the block is kept between calls (:meth:`_cached_arena`)
        and cleared on each; with ``zeroed`` (names), only those buffers are
        (placed first, one ``memset`` of their span): the others' contents
        are then left from the previous call, which no read may see."""
        heap: list[tuple[Buffer, ir.Value]] = []
        stack: list[Buffer] = []
        for buffer in buffers:
            if self.hooks.allocate_local(self._lowerer(), buffer) is not None or self._on_stack(buffer):
                stack.append(buffer)
            else:
                size = self._mul_nsw(self.element_count(buffer),
                                     ir.Constant(I64, byte_size(self.hooks.storage_type(buffer.dtype))))
                heap.append((buffer, size))
        self.allocate_locals(stack)
        if not heap:
            return
        if zeroed is not None:
            heap.sort(key=lambda item: item[0].name not in zeroed)
        b = self.builder
        mask = ir.Constant(I64, -align)
        offsets: list[ir.Value] = []
        total: ir.Value = ir.Constant(I64, 0)
        cleared: ir.Value = total
        for buffer, size in heap:
            offsets.append(total)
            rounded = b.and_(self._add_nsw(size, ir.Constant(I64, align - 1)), mask)
            total = self._add_nsw(total, rounded)
            if zeroed is None or buffer.name in zeroed:
                cleared = total
        # at least one byte: calloc(0) may return NULL, which is not a failure
        request = b.select(b.icmp_signed(">", total, ir.Constant(I64, 0)), total, ir.Constant(I64, 1))
        if cached:
            arena = self._cached_arena(request)
        else:
            calloc = self.declare("calloc", ir.PointerType(), [I64, I64])
            arena = b.call(calloc, [request, ir.Constant(I64, 1)], name="locals")
            self._heap.append(arena)
        self._pending_failure.append(
            b.icmp_unsigned("==", arena, ir.Constant(ir.PointerType(), None)))
        for (buffer, _), offset in zip(heap, offsets, strict=True):
            pointer = b.gep(arena, [offset], inbounds=True, source_etype=ir.IntType(8),
                            name=buffer.name)
            self._lowerer().bind_buffer(buffer, pointer)
        self._check_allocations()
        if cached:  # fresh locals are zero-filled, as calloc's were
            memset = self.declare("llvm.memset.p0.i64", ir.VoidType(),
                                  [ir.PointerType(), ir.IntType(8), I64, I1])
            span = request if zeroed is None else cleared
            if not (isinstance(span, ir.Constant) and span.constant == 0):
                b.call(memset, [arena, ir.Constant(ir.IntType(8), 0), span, ir.Constant(I1, 0)])

    def _cached_arena(self, size: ir.Value) -> ir.Value:
        """A heap block of ``size`` bytes kept between calls: the function's
        globals ``<name>.arena`` and ``<name>.arena_bytes`` hold it, and
        ``<name>.arena_busy`` (taken with a compare-and-swap, released on
        return) gives it to one call at a time; a call that finds it taken
        (another thread, a re-entrant call) ``malloc``s its own block and frees
        it on return, and a larger request replaces the block. A fresh block
        of megabytes per call is fresh pages from the kernel, faulted in on
        first touch: MobileNetV2's 35 MB of intermediates cost 14 ms a call
        that way, more than its convolutions (24.7 -> 10.6 ms for its first
        ten blocks)."""
        from polyir.cpu.abi import global_i64
        b = self.builder
        module = self._lowerer().llvm_module
        name = self._lowerer().llfunc.name
        ptr_type = ir.PointerType()
        block = module.globals.get(f"{name}.arena")
        if block is None:
            block = ir.GlobalVariable(module, ptr_type, f"{name}.arena")
            block.initializer = ir.Constant(ptr_type, None)
        capacity = global_i64(module, f"{name}.arena_bytes")
        busy = global_i64(module, f"{name}.arena_busy")
        malloc = self.declare("malloc", ptr_type, [I64])
        free = self.declare("free", ir.VoidType(), [ptr_type])
        taken = self.entry_alloca(I1, name="arena.taken")
        slot = self.entry_alloca(ptr_type, name="arena.ptr")
        with b.goto_block(self._entry):
            b.store(ir.Constant(I1, 0), taken)
            b.store(ir.Constant(ptr_type, None), slot)
        swap = b.cmpxchg(busy, ir.Constant(I64, 0), ir.Constant(I64, 1), "acquire", "monotonic")
        got = b.extract_value(swap, 1)
        b.store(got, taken)
        with b.if_else(got) as (mine, other):
            with mine:
                kept = b.load(block, typ=ptr_type)
                fits = b.icmp_signed(">=", b.load(capacity, typ=I64), size)
                with b.if_else(fits) as (reuse, grow):
                    with reuse:
                        b.store(kept, slot)
                    with grow:
                        b.call(free, [kept])
                        fresh = b.call(malloc, [size])
                        b.store(fresh, block)
                        null = b.icmp_unsigned("==", fresh, ir.Constant(ptr_type, None))
                        b.store(b.select(null, ir.Constant(I64, 0), size), capacity)
                        b.store(fresh, slot)
            with other:
                b.store(b.call(malloc, [size]), slot)
        self._arena_release.append((taken, slot, busy))
        return b.load(slot, typ=ptr_type, name="locals")

    def _on_stack(self, buffer: Buffer) -> bool:
        """Whether the default allocation puts ``buffer`` on the stack."""
        if not buffer.shape:
            return True
        if buffer.space not in (MemorySpace.LOCAL, MemorySpace.SHARED) \
                or not all(d.is_constant for d in buffer.shape):
            return False
        count = 1
        for d in buffer.shape:
            count *= max(0, d.constant)
        return count * byte_size(self.hooks.storage_type(buffer.dtype)) <= STACK_LIMIT_BYTES

    def _default_local(self, buffer: Buffer, zeroed: bool = True) -> ir.Value:
        """Stack memory for a small constant-size local, else heap memory
        (``calloc``; ``malloc`` when not ``zeroed``: a loop-scoped local's
        contents are undefined at the start of each iteration, and a scratchpad
        of megabytes would otherwise be cleared on every call)."""
        storage = self.hooks.storage_type(buffer.dtype)
        elem_bytes = byte_size(storage)
        const_count = 1
        constant = all(d.is_constant for d in buffer.shape)
        if constant:
            for d in buffer.shape:
                const_count *= max(0, d.constant)
        small = constant and const_count * elem_bytes <= STACK_LIMIT_BYTES
        if not buffer.shape or (small and buffer.space in (MemorySpace.LOCAL, MemorySpace.SHARED)):
            array = ir.ArrayType(storage, max(1, const_count))
            slot = self.entry_alloca(array, name=buffer.name)
            if zeroed:
                self._zero_stack_array(slot, array, const_count * elem_bytes)
            return slot
        count = self.element_count(buffer)
        if zeroed:
            calloc = self.declare("calloc", ir.PointerType(), [I64, I64])
            pointer = self.builder.call(calloc, [count, ir.Constant(I64, elem_bytes)],
                                        name=buffer.name)
        else:
            malloc = self.declare("malloc", ir.PointerType(), [I64])
            size = self._mul_nsw(count, ir.Constant(I64, elem_bytes))
            pointer = self.builder.call(malloc, [size], name=buffer.name)
        self._heap.append(pointer)
        is_null = self.builder.icmp_unsigned("==", pointer, ir.Constant(ir.PointerType(), None))
        nonempty = self.builder.icmp_signed(">", count, ir.Constant(I64, 0))
        self._pending_failure.append(self.builder.and_(is_null, nonempty))
        return pointer

    def _zero_stack_array(self, slot: ir.Value, array: ir.ArrayType, size_bytes: int) -> None:
        """Clear a stack local: one aggregate store when it is small (SROA splits it
        into scalars it can promote), else ``llvm.memset``. SROA would split a large
        aggregate store into one store per element too, and InstCombine then spends
        most of the O3 time on them (small_cnn's padded inputs: 0.6 of 0.8 s) before
        MemCpyOpt merges them back into the same memset."""
        if array.count <= ZERO_STORE_MAX_ELEMENTS:
            self.builder.store(ir.Constant(array, None), slot)
            return
        i8 = ir.IntType(8)
        memset = self.intrinsic("llvm.memset.p0.i64", ir.VoidType(), [ir.PointerType(), i8, I64, I1])
        self.builder.call(memset, [slot, ir.Constant(i8, 0), ir.Constant(I64, size_bytes),
                                   ir.Constant(I1, 0)])


__all__ = ["LocalAllocation", "byte_size", "ZERO_STORE_MAX_ELEMENTS"]
