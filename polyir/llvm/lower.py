"""Lower polyir functions to LLVM IR (llvmlite), shared by the CPU and NVPTX backends.

Entry points
------------
``lower_function(llvm_module, function, hooks, llvm_name=None) -> LoweredFunction``
    Adds one polyir ``Function`` to an ``llvmlite.ir.Module``. The LLVM signature
    is :func:`signature` (``LoweredFunction.params``): every ``Buffer``
    parameter is a ``noalias`` pointer (address space ``hooks.address_space``)
    to row-major elements of ``hooks.storage_type(dtype)``; every ``Symbol``
    parameter an ``i64``; then the symbols that only appear in parameter
    shapes (``Function.symbols`` order) as ``i64``; then
    ``hooks.function_params(function)``. It returns ``i32`` status (0; 1
    when a heap local could not be allocated; 2, ``STATUS_SUBSCRIPT``, when a
    data-dependent subscript checked in the loop is outside its buffer; other
    values from ``fail_if``)
    when ``hooks.returns_status``, else ``void``.
``function_type(function, hooks) -> ir.FunctionType``
    That signature as an LLVM function type (to declare a function lowered
    in another module, as the CPU backend's entry does for its kernels).
``lower_module(module, hooks, names=None) -> (llvm_module, {name: LoweredFunction})``
    The same for several functions of a module (default: all).

Values: f16/bf16 are computed in ``float`` and rounded on store (bf16 storage
is ``float`` rounded to bfloat16, ties to even, as host arrays hold it); bool
is ``i1`` in registers and ``i8`` in memory; loop variables and symbols are
``i64``. Affine ``//`` and ``%`` floor; integer ``/`` and ``%`` truncate (a
zero divisor gives 0 where the interpreter raises, ``MIN / -1`` wraps: nothing
traps). Float -> int casts saturate (NaN -> 0) like the interpreter.

Target hooks (``polyir.llvm.hooks.LoweringHooks``; subclass to retarget)
-----------------------------------------------------------------------
* ``returns_status`` (attribute)             i32 status return vs ``void``.
* ``address_space(space) -> int``            pointer address space per MemorySpace.
* ``pointer_type(space) -> ir.PointerType``
* ``storage_type(dtype) -> ir.Type``         element type in memory.
* ``load_convert(lowerer, dtype, raw)``      storage -> compute value.
* ``store_convert(lowerer, dtype, value)``   compute -> storage value.
* ``function_params(function)``              extra trailing (name, ir.Type) params.
* ``prepare_function(lowerer)``              after the entry block exists
                                             (attributes, kernel metadata).
* ``math_call(lowerer, fn, args, dtype)``    a math ``Call`` on floats; ``None``
                                             = default (LLVM intrinsics, erff/erf).
* ``allocate_local(lowerer, buffer)``        pointer for a local, ``None`` =
                                             default (stack / zeroed heap);
                                             FRAGMENT locals raise by default.
* ``check_subscript(lowerer, value, extent)``, ``guard_subscripts(lowerer, buffer,
  pointer, outside)``                         data-dependent subscripts checked in
                                             the loop (``check_subscripts``).
* ``row_block_lanes(dtype) -> int``         lanes for a jammed row block's sums
                                             run across rows (``polyir.llvm.row_block``);
                                             0 (default): scalar code.
* ``lower_parallel_loop(lowerer, loop)``     outermost ``parallel`` loop without
                                             mapping (default: serial; CPU outlines).
* ``lower_mapped_loop(lowerer, loop)``       ``gpu=block.*/thread.*`` loops.
* ``lower_barrier(lowerer, node)``, ``lower_fragment(lowerer, node)`` (any
  ``Fragment*`` node), ``lower_launch(lowerer, node)``: raise ``CompileError``
  naming the construct by default; a GPU backend overrides them.

What hooks may use on ``FunctionLowerer`` (stable): ``builder``, ``function``
(polyir), ``llfunc``, ``llvm_module``, ``hooks``, ``vars`` (name -> i64 value),
``buffers`` (name -> ``BufferBinding``), ``parallel_depth``, ``aff(a)``,
``expr(e)``, ``typed_expr(e) -> (value, dtype)``, ``condition(constraints)``,
``loop_bounds(loop) -> (lo, hi)``, ``element_pointer(name, indices)``,
``load(name, indices)``, ``store(name, indices, value)``, ``bind(name, value)``,
``unbind(name, previous)``,
``bind_buffer(buffer, pointer)``, ``allocate_locals(buffers)``, ``allocate_arena(buffers)``,
``lower_body(nodes)``, ``lower_serial_loop(loop)``,
``emit_range_loop(lo, hi, step, body, name, hints=None)``, ``entry_alloca(type, name)``
(an opaque pointer), ``intrinsic(name, ret, args)``, ``declare(name, ret, args)``,
``round_bf16(value)``, ``fail_if(failed, status)``, ``finish()``; and :func:`buffers_used`,
:func:`signature`, :func:`loop_hints` (``vectorize``/``unroll`` as
``!llvm.loop`` properties).
"""
from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace

from llvmlite import ir

from polyir.errors import CompileError
from polyir.ir.affine import Aff, Constraint, FloorDiv, Mod
from polyir.ir.nodes import (
    Assign,
    Barrier,
    Buffer,
    For,
    Function,
    If,
    Launch,
    Module,
    Node,
    Symbol,
    to_affine,
)
from polyir.ir.walk import FRAGMENT_NODES, buffers_used
from polyir.llvm.exprs import ExprLowering
from polyir.llvm.hints import jammed_copies, reorders_float_reduction
from polyir.llvm.hooks import I1, I32, I64, LoweringHooks, where
from polyir.llvm.lane_loop import lane_loops, lower_lane_loop
from polyir.llvm.locals import ZERO_STORE_MAX_ELEMENTS, LocalAllocation, byte_size
from polyir.llvm.row_block import lower_row_block, match_row_block
from polyir.llvm.transposed_copy import lower_transposed_copy, match_transposed_copy

__all__ = ["LoweringHooks", "FunctionLowerer", "BufferBinding", "LoweredFunction",
           "lower_function", "lower_module", "signature", "function_type", "buffers_used",
           "byte_size", "ZERO_STORE_MAX_ELEMENTS"]


@dataclass
class BufferBinding:
    """A buffer visible in the function being lowered: its pointer and strides."""

    buffer: Buffer
    pointer: ir.Value
    strides: list[ir.Value]


@dataclass(frozen=True)
class ParamSlot:
    """One LLVM parameter: ``kind`` is ``buffer``, ``symbol`` or ``extra``."""

    kind: str
    name: str


@dataclass
class LoweredFunction:
    """A polyir function lowered into an LLVM module."""

    function: Function
    llvm_name: str
    params: list[ParamSlot]
    outlined: list[str] = field(default_factory=list)


def signature(function: Function, hooks: LoweringHooks) -> list[ParamSlot]:
    """The LLVM parameters of ``function`` in order (see the module docstring)."""
    slots: list[ParamSlot] = []
    for p in function.params:
        slots.append(ParamSlot("buffer" if isinstance(p, Buffer) else "symbol", p.name))
    explicit = {p.name for p in function.params if isinstance(p, Symbol)}
    slots += [ParamSlot("symbol", s) for s in function.symbols if s not in explicit]
    slots += [ParamSlot("extra", name) for name, _ in hooks.function_params(function)]
    return slots


class FunctionLowerer(LocalAllocation, ExprLowering):
    """Emits the LLVM code of one polyir function (or of an outlined part of it)."""

    def __init__(self, llvm_module: ir.Module, function: Function, llfunc: ir.Function,
                 hooks: LoweringHooks):
        self.llvm_module = llvm_module
        self.function = function
        self.llfunc = llfunc
        self.hooks = hooks
        self.vars: dict[str, ir.Value] = {}
        self.buffers: dict[str, BufferBinding] = {}
        self.parallel_depth = 0
        self.outlined: list[str] = []
        self._entry = llfunc.append_basic_block("entry")
        self._body = llfunc.append_basic_block("body")
        self.builder = ir.IRBuilder(self._body)
        self._heap: list[ir.Value] = []
        self._arena_release: list[tuple[ir.Value, ir.Value, ir.GlobalVariable]] = []
        self._pending_failure: list[ir.Value] = []
        self._fail: ir.Block | None = None
        self._fail_status: ir.PhiInstr | None = None
        self._interleave: dict[int, tuple[For, int]] = {}   # jammed copies of several vectors

    # ---------------------------------------------------------- bindings
    def bind(self, name: str, value: ir.Value) -> ir.Value | None:
        """Bind variable ``name`` (i64); returns the previous binding."""
        previous = self.vars.get(name)
        self.vars[name] = value
        return previous

    def unbind(self, name: str, previous: ir.Value | None) -> None:
        if previous is None:
            self.vars.pop(name, None)
        else:
            self.vars[name] = previous

    def bind_buffer(self, buffer: Buffer, pointer: ir.Value) -> BufferBinding:
        """Make ``buffer`` visible at ``pointer``; its strides are computed here."""
        strides: list[ir.Value] = []
        stride: ir.Value = ir.Constant(I64, 1)
        for dim in reversed(buffer.shape[1:]):
            strides.append(stride)
            stride = self._mul_nsw(stride, self.aff(dim))
        if buffer.shape:
            strides.append(stride)
        strides.reverse()
        binding = BufferBinding(buffer, pointer, strides)
        self.buffers[buffer.name] = binding
        return binding

    def _declared(self, name: str) -> Buffer | None:
        binding = self.buffers.get(name)
        return None if binding is None else binding.buffer

    def entry_alloca(self, typ: ir.Type, name: str = "") -> ir.Value:
        """An ``alloca`` in the entry block (so mem2reg/SROA can promote it), as an
        opaque pointer."""
        with self.builder.goto_block(self._entry):
            slot = self.builder.alloca(typ, name=name)
        slot.type = ir.PointerType()  # llvmlite types allocas as typed pointers
        return slot

    def _check_allocations(self) -> None:
        """One branch to the failure path after all heap locals exist (so that it
        can free every one of them)."""
        if not self._pending_failure:
            return
        failed = self._pending_failure[0]
        for other in self._pending_failure[1:]:
            failed = self.builder.or_(failed, other)
        self._pending_failure = []
        self.fail_if(failed, ir.Constant(I32, 1), "locals.ok")

    def fail_if(self, failed: ir.Value, status: ir.Value, name: str = "ok") -> None:
        """When i1 ``failed`` holds, free the heap locals and return i32 ``status``
        (``void`` functions just return); code continues in a new block."""
        if self._fail is None:
            self._fail = self.llfunc.append_basic_block("failed")
            with self.builder.goto_block(self._fail):
                self._fail_status = self.builder.phi(I32, name="status")
        assert self._fail_status is not None
        self._fail_status.add_incoming(status, self.builder.block)
        ok = self.llfunc.append_basic_block(name)
        self.builder.cbranch(failed, self._fail, ok)
        self.builder.position_at_end(ok)

    def finish(self) -> None:
        """Free heap locals and return (status 0, or the failure path's status)."""
        self._free_heap()
        self._return(ir.Constant(I32, 0))
        if self._fail is not None:
            self.builder.position_at_end(self._fail)
            self._free_heap()
            assert self._fail_status is not None
            self._return(self._fail_status)
        with self.builder.goto_block(self._entry):
            self.builder.branch(self._body)

    def _free_heap(self) -> None:
        if self._heap or self._arena_release:
            free = self.declare("free", ir.VoidType(), [ir.PointerType()])
            for pointer in self._heap:
                self.builder.call(free, [pointer])
            b = self.builder
            for taken, slot, busy in self._arena_release:
                # a kept block is handed back; one of this call's own is freed
                mine = b.load(taken, typ=I1)
                own = b.select(mine, ir.Constant(ir.PointerType(), None), b.load(slot, typ=ir.PointerType()))
                b.call(free, [own])
                b.atomic_rmw("and", busy, b.select(mine, ir.Constant(I64, 0), ir.Constant(I64, -1)),
                             "release")

    def _return(self, status: ir.Value) -> None:
        if self.llfunc.function_type.return_type == I32:
            self.builder.ret(status)
        else:
            self.builder.ret_void()

    # ------------------------------------------------------- declarations
    def declare(self, name: str, ret: ir.Type, args: Sequence[ir.Type]) -> ir.Function:
        """An external function (declared once per module)."""
        existing = self.llvm_module.globals.get(name)
        if existing is not None:
            return existing
        return ir.Function(self.llvm_module, ir.FunctionType(ret, list(args)), name)

    def intrinsic(self, name: str, ret: ir.Type, args: Sequence[ir.Type]) -> ir.Function:
        """An LLVM intrinsic by its full mangled name, e.g. ``llvm.smax.i64``."""
        return self.declare(name, ret, args)

    # --------------------------------------------------------- addresses
    def aff(self, a: Aff) -> ir.Value:
        """An affine expression as an i64 value (floor semantics for // and %)."""
        total: ir.Value | None = None
        for atom, coeff in a.terms:
            if isinstance(atom, str):
                value = self.var(atom)
            elif isinstance(atom, FloorDiv):
                value = self.floordiv(self.aff(atom.expr), atom.divisor)
            else:
                assert isinstance(atom, Mod)
                value = self.floormod(self.aff(atom.expr), atom.divisor)
            term = value if coeff == 1 else self._mul_nsw(value, ir.Constant(I64, coeff))
            total = term if total is None else self._add_nsw(total, term)
        if total is None:
            return ir.Constant(I64, a.constant)
        if a.constant:
            total = self._add_nsw(total, ir.Constant(I64, a.constant))
        return total

    def floordiv(self, x: ir.Value, divisor: int) -> ir.Value:
        """``floor(x / divisor)`` for a positive constant divisor."""
        b = self.builder
        if divisor == 1:
            return x
        negative = b.icmp_signed("<", x, ir.Constant(I64, 0))
        adjusted = b.select(negative, b.sub(x, ir.Constant(I64, divisor - 1)), x)
        return b.sdiv(adjusted, ir.Constant(I64, divisor))

    def floormod(self, x: ir.Value, divisor: int) -> ir.Value:
        """``x - divisor * floor(x / divisor)``, in ``[0, divisor)``."""
        b = self.builder
        rem = b.srem(x, ir.Constant(I64, divisor))
        negative = b.icmp_signed("<", rem, ir.Constant(I64, 0))
        return b.select(negative, b.add(rem, ir.Constant(I64, divisor)), rem)

    def element_pointer(self, name: str, indices: Sequence[object]) -> ir.Value:
        """Pointer to ``name[indices]`` (row-major)."""
        binding = self.buffers.get(name)
        if binding is None:
            raise CompileError(f"function '{self.function.name}': unknown buffer '{name}'")
        buffer = binding.buffer
        if len(indices) != buffer.rank:
            raise CompileError(f"function '{self.function.name}': buffer '{name}' has rank "
                               f"{buffer.rank}, subscripted with {len(indices)} indices")
        if not indices:
            return binding.pointer
        storage = self.hooks.storage_type(buffer.dtype)
        flat = _flat_offset(indices, binding.strides)
        if flat is not None:
            return self.builder.gep(binding.pointer, [self.aff(flat)], inbounds=True,
                                    source_etype=storage)
        offset: ir.Value | None = None
        checked: list[ir.Value] = []   # hooks.check_subscript of each data-dependent subscript
        for index, stride, extent in zip(indices, binding.strides, buffer.shape, strict=True):
            value = self.index_value(index)
            if self.hooks.check_subscripts and not isinstance(index, Aff) and \
                    to_affine(index) is None:  # type: ignore[arg-type]
                checked.append(self.hooks.check_subscript(self, value, self.aff(extent)))
            if not (isinstance(stride, ir.Constant) and stride.constant == 1):
                value = self._mul_nsw(value, stride)
            offset = value if offset is None else self._add_nsw(offset, value)
        pointer = self.builder.gep(binding.pointer, [offset], inbounds=True, source_etype=storage)
        return self.hooks.guard_subscripts(self, buffer, pointer, checked) if checked else pointer

    def load(self, name: str, indices: Sequence[object]) -> ir.Value:
        """The compute value of ``name[indices]``."""
        dtype = self.buffers[name].buffer.dtype if name in self.buffers else None
        held = self.hooks.load_value(self, name, indices)
        if held is not None:
            return held
        pointer = self.element_pointer(name, indices)
        assert dtype is not None
        raw = self.builder.load(pointer, typ=self.hooks.storage_type(dtype))
        return self.hooks.load_convert(self, dtype, raw)

    def store(self, name: str, indices: Sequence[object], value: ir.Value) -> None:
        """Store compute value ``value`` to ``name[indices]`` (rounding f16/bf16)."""
        pointer = self.element_pointer(name, indices)
        dtype = self.buffers[name].buffer.dtype
        self.builder.store(self.hooks.store_convert(self, dtype, value), pointer)

    # ------------------------------------------------------------- nodes
    def lower_body(self, nodes: Iterable[Node]) -> None:
        nodes = tuple(nodes)
        rows = lane_loops(nodes, self._declared, self.hooks.row_block_lanes)
        if rows:   # a register tile's rows: vector statements, no loops for LLVM to vectorise
            for row in rows:
                lower_lane_loop(self, row)
            return
        copies = jammed_copies(nodes, self.function, self.hooks.row_block_lanes)
        for node in nodes:
            vectors = copies.get(id(node))
            if vectors is not None:
                assert isinstance(node, For)
                node = replace(node, unroll=1)   # LLVM vectorises it; no full unroll first
                if vectors > 1:                  # one vector iteration of `vectors` parts
                    lanes = (constant_trip_count(node) or 0) // vectors
                    node = replace(node, vectorize=lanes)
                    self._interleave[id(node)] = (node, vectors)
            self.lower_node(node)

    def lower_node(self, node: Node) -> None:
        if isinstance(node, Assign):
            value, dtype = self.typed_expr(node.value)
            target = self.buffers.get(node.buffer)
            if target is not None and target.buffer.dtype is not dtype:
                raise CompileError(f"{where(self.function, node)}: stores {dtype} into "
                                   f"{target.buffer.dtype} buffer '{node.buffer}'")
            self.store(node.buffer, node.indices, value)
        elif isinstance(node, For):
            if node.mapping is not None:
                self.hooks.lower_mapped_loop(self, node)
            elif node.parallel and self.parallel_depth == 0:
                self.hooks.lower_parallel_loop(self, node)
            else:
                self.lower_serial_loop(node)
        elif isinstance(node, If):
            self.lower_if(node)
        elif isinstance(node, Barrier):
            self.hooks.lower_barrier(self, node)
        elif isinstance(node, FRAGMENT_NODES):
            self.hooks.lower_fragment(self, node)
        elif isinstance(node, Launch):
            self.hooks.lower_launch(self, node)
        else:
            raise CompileError(f"function '{self.function.name}': cannot lower "
                               f"{type(node).__name__}")

    def loop_bounds(self, loop: For) -> tuple[ir.Value, ir.Value]:
        """``(max(lower), min(upper))`` as i64 values."""
        if not loop.lower or not loop.upper:
            raise CompileError(f"{where(self.function, loop)}: loop '{loop.var}' without bounds")
        if loop.step <= 0:
            raise CompileError(f"{where(self.function, loop)}: loop '{loop.var}' has "
                               f"non-positive step {loop.step}")
        lo = self.aff(loop.lower[0])
        for extra in loop.lower[1:]:
            lo = self.builder.call(self.intrinsic("llvm.smax.i64", I64, [I64, I64]),
                                   [lo, self.aff(extra)])
        hi = self.aff(loop.upper[0])
        for extra in loop.upper[1:]:
            hi = self.builder.call(self.intrinsic("llvm.smin.i64", I64, [I64, I64]),
                                   [hi, self.aff(extra)])
        return lo, hi

    def lower_serial_loop(self, loop: For) -> None:
        self.ensure_locals(loop.locals)
        copy = match_transposed_copy(loop, self._declared, self.hooks.row_block_lanes)
        if copy is not None:
            lower_transposed_copy(self, copy)
            return
        block = match_row_block(loop, self.function, self.hooks.row_block_lanes)
        if block is not None:
            lower_row_block(self, loop, block, lambda: self._lower_scalar_loop(loop))
            return
        self._lower_scalar_loop(loop)

    def _lower_scalar_loop(self, loop: For) -> None:
        hints = loop_hints(loop, None if "reassoc" in self.hooks.float_flags else self.function)
        interleaved = self._interleave.get(id(loop))
        if interleaved is not None and interleaved[0] is loop:
            hints["llvm.loop.interleave.count"] = interleaved[1]
        trips = constant_trip_count(loop)
        if trips is not None:
            self._lower_counted_loop(loop, trips, hints)
            return
        lo, hi = self.loop_bounds(loop)

        def body(value: ir.Value) -> None:
            previous = self.bind(loop.var, value)
            self.lower_body(loop.body)
            self.unbind(loop.var, previous)

        self.emit_range_loop(lo, hi, loop.step, body, loop.var, hints)

    def _lower_counted_loop(self, loop: For, trips: int, hints: dict[str, int | None]) -> None:
        """``loop`` (``for v = a to a + c``: ``trips`` iterations whatever ``a``)
        as ``for t = 0 to trips: v = a + t*step``. The counter's trip count is a
        constant LLVM sees in any context; on ``v < a + c`` it would have to
        prove that ``a + c`` does not wrap, which it cannot when ``a`` comes from
        an argument of unknown range (an outlined parallel body's enclosing
        loop variables): the register tile's loops would then be neither fully
        unrolled nor their accumulators promoted to registers."""
        first = self.aff(loop.lower[0])

        def body(counter: ir.Value) -> None:
            value = self._add_nsw(first, self._mul_nsw(counter, ir.Constant(I64, loop.step)))
            previous = self.bind(loop.var, value)
            self.lower_body(loop.body)
            self.unbind(loop.var, previous)

        self.emit_range_loop(ir.Constant(I64, 0), ir.Constant(I64, trips), 1, body,
                             f"{loop.var}.t", hints)

    def emit_range_loop(self, lo: ir.Value, hi: ir.Value, step: int,
                        body: Callable[[ir.Value], None], name: str = "i",
                        hints: dict[str, int | None] | None = None) -> None:
        """``for (v = lo; v < hi; v += step) body(v)`` with a phi induction variable.

        ``hints`` become ``!llvm.loop`` properties on the back edge, e.g.
        ``{"llvm.loop.vectorize.width": 8}`` (see :func:`loop_hints`)."""
        b = self.builder
        pre = b.block
        header = self.llfunc.append_basic_block(f"{name}.header")
        loop_body = self.llfunc.append_basic_block(f"{name}.body")
        exit_block = self.llfunc.append_basic_block(f"{name}.exit")
        b.branch(header)
        b.position_at_end(header)
        phi = b.phi(I64, name=name)
        phi.add_incoming(lo, pre)
        b.cbranch(b.icmp_signed("<", phi, hi), loop_body, exit_block)
        b.position_at_end(loop_body)
        body(phi)
        following = self._add_nsw(phi, ir.Constant(I64, step))
        phi.add_incoming(following, b.block)
        back_edge = b.branch(header)
        if hints:
            back_edge.set_metadata("llvm.loop", self._loop_id(hints))
        b.position_at_end(exit_block)

    def _loop_id(self, hints: dict[str, int | None]) -> ir.MDValue:
        """A distinct, self-referential loop ID ``!{!self, !{!"name", i32 value}...}``."""
        module = self.llvm_module
        properties = []
        for name, value in sorted(hints.items()):
            operands: list[object] = [ir.MetaDataString(module, name)]
            if value is not None:
                operands.append(ir.Constant(I1 if name.endswith(".enable") else I32, value))
            properties.append(module.add_metadata(operands))
        # a placeholder unique to this loop, so llvmlite's metadata uniquing cannot
        # hand the same node to two loops; then the operands are made self-referential
        placeholder = ir.MetaDataString(module, f"polyir.loop.{len(module.metadata)}")
        loop_id = module.add_metadata([placeholder])
        loop_id.operands = tuple([loop_id] + properties)
        return loop_id

    def condition(self, constraints: Sequence[Constraint]) -> ir.Value:
        """The conjunction of affine constraints as an i1."""
        result: ir.Value | None = None
        for c in constraints:
            test = self.builder.icmp_signed(c.op, self.aff(c.lhs), self.aff(c.rhs))
            result = test if result is None else self.builder.and_(result, test)
        return ir.Constant(I1, 1) if result is None else result

    def lower_if(self, node: If) -> None:
        cond = self.condition(node.conditions)
        if node.else_body:
            with self.builder.if_else(cond) as (then, otherwise):
                with then:
                    self.lower_body(node.then_body)
                with otherwise:
                    self.lower_body(node.else_body)
        else:
            with self.builder.if_then(cond):
                self.lower_body(node.then_body)

    # ------------------------------------------------------------ helpers
    def _add_nsw(self, a: ir.Value, b: ir.Value) -> ir.Value:
        if isinstance(a, ir.Constant) and a.constant == 0:
            return b
        value = self.builder.add(a, b)
        value.flags.append("nsw")
        return value

    def _mul_nsw(self, a: ir.Value, b: ir.Value) -> ir.Value:
        if isinstance(a, ir.Constant) and a.constant == 1:
            return b
        if isinstance(b, ir.Constant) and b.constant == 1:
            return a
        value = self.builder.mul(a, b)
        value.flags.append("nsw")
        return value


def loop_hints(loop: For, exact_in: Function | None = None) -> dict[str, int | None]:
    """LLVM loop properties for a loop's ``vectorize``/``unroll`` factors
    (1 means "do not": no vectorisation / no unrolling). An explicit width lets
    LLVM reorder float reductions, so when float order must be kept (``exact_in``,
    the loop's function, given: no fast math) a loop that reduces floats across
    its iterations gets no vectorize hint (``polyir.llvm.hints``)."""
    hints: dict[str, int | None] = {}
    if loop.vectorize > 1 and exact_in is not None and reorders_float_reduction(loop, exact_in):
        pass
    elif loop.vectorize > 1:
        hints["llvm.loop.vectorize.width"] = loop.vectorize
        hints["llvm.loop.vectorize.enable"] = 1
    elif loop.vectorize == 1:
        hints["llvm.loop.vectorize.width"] = 1
    if loop.unroll > 1:
        hints["llvm.loop.unroll.count"] = loop.unroll
    elif loop.unroll == 1:
        hints["llvm.loop.unroll.disable"] = None
    return hints


def function_type(function: Function, hooks: LoweringHooks) -> ir.FunctionType:
    """The LLVM type of ``function`` lowered with ``hooks`` (parameters as :func:`signature`)."""
    extras = dict(hooks.function_params(function))
    buffers = function.buffers
    arg_types: list[ir.Type] = []
    for slot in signature(function, hooks):
        if slot.kind == "buffer":
            arg_types.append(hooks.pointer_type(buffers[slot.name].space))
        elif slot.kind == "symbol":
            arg_types.append(I64)
        else:
            arg_types.append(extras[slot.name])
    return ir.FunctionType(I32 if hooks.returns_status else ir.VoidType(), arg_types)


def _flat_offset(indices: Sequence[object], strides: Sequence[ir.Value]) -> Aff | None:
    """The element offset ``sum(index * stride)`` as one affine expression when
    the strides are constants and folding it (:meth:`Aff.expanded`) leaves
    fewer floor divisions and remainders than the subscripts hold: a gather
    such as ``w[n, k // 9, (k // 3) % 3, k % 3]`` of a contiguous buffer is
    then addressed as ``w + 9*C*n + k``. ``None``: address subscript by subscript."""
    if not all(isinstance(i, Aff) for i in indices) or \
            not all(isinstance(s, ir.Constant) for s in strides):
        return None
    affs = [i for i in indices if isinstance(i, Aff)]
    atoms = sum(i.atom_count() for i in affs)
    if atoms == 0:
        return None
    flat = Aff.const(0)
    for index, stride in zip(affs, strides, strict=True):
        flat = flat + index * int(stride.constant)
    flat = flat.expanded()
    return flat if flat.atom_count() < atoms else None


def lower_function(llvm_module: ir.Module, function: Function, hooks: LoweringHooks,
                   llvm_name: str | None = None) -> LoweredFunction:
    """Add ``function`` to ``llvm_module``; see the module docstring for the signature."""
    slots = signature(function, hooks)
    buffers = function.buffers
    name = llvm_name or function.name
    llfunc = ir.Function(llvm_module, function_type(function, hooks), name)
    lowerer = FunctionLowerer(llvm_module, function, llfunc, hooks)
    for slot, arg in zip(slots, llfunc.args, strict=True):
        arg.name = slot.name
        if slot.kind == "buffer":
            arg.add_attribute("noalias")
        if slot.kind == "symbol":
            lowerer.bind(slot.name, arg)
    hooks.prepare_function(lowerer)
    for slot, arg in zip(slots, llfunc.args, strict=True):
        if slot.kind == "buffer":
            lowerer.bind_buffer(buffers[slot.name], arg)
    lowerer.allocate_locals(function.locals)
    lowerer.lower_body(function.body)
    lowerer.finish()
    return LoweredFunction(function, name, slots, list(lowerer.outlined))


def lower_module(module: Module, hooks: LoweringHooks, names: Sequence[str] | None = None,
                 llvm_module: ir.Module | None = None) -> tuple[ir.Module, dict[str, LoweredFunction]]:
    """Lower the functions ``names`` (default: all) of ``module``."""
    llvm_module = llvm_module or ir.Module(name="polyir")
    lowered: dict[str, LoweredFunction] = {}
    for function in module.functions:
        if names is None or function.name in names:
            lowered[function.name] = lower_function(llvm_module, function, hooks)
    return llvm_module, lowered


def constant_trip_count(loop: For) -> int | None:
    """The iteration count of ``loop`` when it has one lower and one upper bound
    whose difference is a constant (``for v = a to a + c step s``: ``ceil(c/s)``,
    0 when negative), whatever ``a``; ``None`` otherwise."""
    if len(loop.lower) != 1 or len(loop.upper) != 1 or loop.step <= 0:
        return None
    extent = loop.upper[0] - loop.lower[0]
    if not extent.is_constant:
        return None
    return max(0, -(-extent.constant // loop.step))
