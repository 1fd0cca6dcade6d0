"""CPU lowering hooks: host math, and outlining of parallel loops.

An outermost ``parallel`` loop becomes

* ``i32 @F.parN.body(ptr noalias buffers..., i64 values..., i64 begin, i64 end)``
  (internal): iterations ``begin <= k < end`` of the loop, ``var = lo + k*step``;
* ``i32 @F.parN(ptr ctx, i64 begin, i64 end)``: reads the captured pointers and
  values from the context struct and calls the body;
* at the loop's place in the caller: the context struct on the stack and a
  call ``parallel_for(@F.parN, ctx, trip_count)`` through the function's last
  parameter, a pointer to the runtime's dispatcher (``polyir.cpu.parallel``),
  which runs chunks of ``[0, trip_count)`` on a thread pool through the
  module's ``polyir.drain`` (emitted with the first parallel loop).

Local buffers used only inside the loop are private to each chunk (allocated
in ``@F.parN.body``); locals used elsewhere too are shared.
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence

from llvmlite import ir

from polyir.cpu.parallel import emit_drain
from polyir.ir.nodes import Buffer, For, Function, If, Node
from polyir.ir.types import DType
from polyir.ir.walk import buffers_used, walk_nodes
from polyir.llvm.hooks import I32, I64, LoweringHooks
from polyir.llvm.lower import FunctionLowerer, loop_hints
from polyir.llvm.mathlib import emit_exp_f32, emit_tanh_f32

PTR = ir.PointerType()
PARALLEL_FOR_TYPE = ir.FunctionType(I32, [PTR, PTR, I64])
"""``i32 parallel_for(ptr chunk_fn, ptr ctx, i64 trip_count)``."""
CHUNK_TYPE = ir.FunctionType(I32, [PTR, I64, I64])
"""``i32 chunk_fn(ptr ctx, i64 begin, i64 end)``."""


def _occurrences(nodes: Iterable[Node], loop: For) -> int:
    """How many times the object ``loop`` occurs in ``nodes`` (IR may share subtrees)."""
    return sum(1 for node in walk_nodes(nodes) if node is loop)


def _used_outside(nodes: Iterable[Node], loop: For) -> set[str]:
    """Buffers used in ``nodes`` outside the node ``loop`` (by identity)."""
    found: set[str] = set()
    for node in nodes:
        if node is loop:
            continue
        if isinstance(node, For):
            found |= _used_outside(node.body, loop)
        elif isinstance(node, If):
            found |= _used_outside(node.then_body, loop) | _used_outside(node.else_body, loop)
        else:
            found |= buffers_used([node])
    return found


class CpuHooks(LoweringHooks):
    """Host CPU: address space 0, libm/LLVM intrinsics, parallel loops outlined
    when ``cores > 1`` (serial otherwise)."""

    returns_status = True

    def __init__(self, cores: int = 1):
        self.cores = cores

    def function_params(self, function: Function) -> list[tuple[str, ir.Type]]:
        # typed so that llvmlite can call through it; prints as a plain pointer
        return [("parallel_for", PARALLEL_FOR_TYPE.as_pointer())]

    def math_call(self, lowerer: FunctionLowerer, fn: str, args: Sequence[ir.Value],
                  dtype: DType) -> ir.Value | None:
        """float32 ``exp``/``tanh``/``sigmoid`` inline (vectorisable); libm otherwise."""
        if dtype is DType.F64 or fn not in ("exp", "tanh", "sigmoid"):
            return None
        b = lowerer.builder
        if fn == "exp":
            return emit_exp_f32(b, args[0])
        if fn == "tanh":
            return emit_tanh_f32(b, args[0])
        one = ir.Constant(args[0].type, 1.0)
        return b.fdiv(one, b.fadd(one, emit_exp_f32(b, b.fneg(args[0]))))

    def lower_parallel_loop(self, lowerer: FunctionLowerer, loop: For) -> None:
        if self.cores <= 1:
            lowerer.lower_serial_loop(loop)
            return
        b = lowerer.builder
        lo, hi = lowerer.loop_bounds(loop)
        span = b.sub(hi, lo)
        step = ir.Constant(I64, loop.step)
        trip = b.sdiv(b.add(span, ir.Constant(I64, loop.step - 1)), step)
        trip = b.select(b.icmp_signed(">", span, ir.Constant(I64, 0)), trip, ir.Constant(I64, 0))

        used = buffers_used(loop.body)
        local_names = {buf.name for buf in lowerer.function.locals}
        body = lowerer.function.body
        private_names = (used & local_names) - _used_outside(body, loop) \
            if _occurrences(body, loop) == 1 else set()
        shared = [name for name in lowerer.buffers if name in used and name not in private_names]
        values = sorted(lowerer.vars)
        private = [buf for buf in lowerer.function.locals if buf.name in private_names]

        chunk = self._outline(lowerer, loop, shared, values, private)
        emit_drain(lowerer.llvm_module)
        ctx_type = ir.LiteralStructType([PTR] * len(shared) + [I64] * (len(values) + 1))
        ctx = lowerer.entry_alloca(ctx_type, name=f"{chunk.name}.ctx")
        fields = [lowerer.buffers[n].pointer for n in shared] + [lowerer.vars[v] for v in values]
        for position, value in enumerate(fields + [lo]):
            slot = b.gep(ctx, [ir.Constant(I32, 0), ir.Constant(I32, position)], inbounds=True,
                         source_etype=ctx_type)
            b.store(value, slot)
        dispatcher = lowerer.llfunc.args[-1]
        status = b.call(dispatcher, [chunk, ctx, trip])
        failed = b.icmp_signed("!=", status, ir.Constant(I32, 0))
        lowerer.fail_if(failed, status, f"{chunk.name}.done")

    def _outline(self, lowerer: FunctionLowerer, loop: For, shared: list[str],
                 values: list[str], private: list[Buffer]) -> ir.Function:
        module = lowerer.llvm_module
        base = f"{lowerer.llfunc.name}.par{len(lowerer.outlined)}"
        while base in module.globals:
            base += "_"
        lowerer.outlined.append(base)
        arg_types = [PTR] * len(shared) + [I64] * (len(values) + 3)
        body_fn = ir.Function(module, ir.FunctionType(I32, arg_types), f"{base}.body")
        body_fn.linkage = "internal"
        inner = FunctionLowerer(module, lowerer.function, body_fn, self)
        inner.parallel_depth = 1
        inner.outlined = lowerer.outlined
        args = list(body_fn.args)
        for name, arg in zip(shared, args, strict=False):
            arg.name = name
            arg.add_attribute("noalias")
        for name, arg in zip(values, args[len(shared):], strict=False):
            arg.name = name
            inner.bind(name, arg)
        lo, begin, end = args[-3:]
        lo.name, begin.name, end.name = f"{loop.var}.lo", "begin", "end"
        for name, arg in zip(shared, args, strict=False):
            inner.bind_buffer(lowerer.buffers[name].buffer, arg)
        inner.allocate_locals(private)
        inner.ensure_locals(loop.locals)  # the parallel loop's own loop-scoped locals, per thread

        def iteration(k: ir.Value) -> None:
            scaled = inner.builder.mul(k, ir.Constant(I64, loop.step))
            scaled.flags.append("nsw")
            value = inner.builder.add(lo, scaled)
            value.flags.append("nsw")
            inner.bind(loop.var, value)
            inner.lower_body(loop.body)

        inner.emit_range_loop(begin, end, 1, iteration, f"{loop.var}.k", loop_hints(loop))
        inner.finish()

        chunk = ir.Function(module, CHUNK_TYPE, base)
        ctx_arg, begin_arg, end_arg = chunk.args
        cb = ir.IRBuilder(chunk.append_basic_block("entry"))
        ctx_type = ir.LiteralStructType([PTR] * len(shared) + [I64] * (len(values) + 1))
        loaded = []
        for position, typ in enumerate(ctx_type.elements):
            slot = cb.gep(ctx_arg, [ir.Constant(I32, 0), ir.Constant(I32, position)],
                          inbounds=True, source_etype=ctx_type)
            loaded.append(cb.load(slot, typ=typ))
        cb.ret(cb.call(body_fn, loaded + [begin_arg, end_arg]))
        return chunk
