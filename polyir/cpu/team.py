"""What each thread of a dispatch runs: ``void @F.parN(ptr ctx)``.

A thread reads the context (``polyir.cpu.abi``), records when it started (the
``arrival`` field: the caller learns how late the team came), fills its
private reduction copies with the identity, runs chunks of ``[0, trip)``
through the outlined body (dynamic chunks from an atomic counter; static ones,
``[t*trip/n, (t+1)*trip/n)``, when there are privatised reductions), folds a
failing chunk's status into the context with an atomic ``max``, and combines
the reduction copies after a *gather*. Every thread ends in a gather too, so
the team reaches libgomp's final barrier together.

A gather counts the threads in and waits for all of them: it spins on the
count for :data:`GATHER_SPINS` loads, then sleeps :data:`GATHER_SLEEP_US`
between looks. libgomp's own barriers spin for milliseconds; on a machine
whose cores are busy, a spinning thread keeps a core from the team thread the
OS has not run yet, and each dispatch costs a scheduler time slice.
"""
from __future__ import annotations

from llvmlite import ir

from polyir.cpu.abi import (
    PTR,
    TEAM_FUNCTION,
    Context,
    declare,
    field,
    global_i64,
    global_names,
    now_ns,
)
from polyir.cpu.reductions import PrivateReduction
from polyir.ir.types import DType
from polyir.llvm.hooks import F32, I32, I64, compute_type
from polyir.llvm.lower import FunctionLowerer

GATHER_SPINS = 50_000
"""Atomic loads a thread spends waiting for the others in a gather before it
starts sleeping (50-100 microseconds; libgomp spins for milliseconds)."""
GATHER_SLEEP_US = 20
"""Then it sleeps this long between looks (``usleep``), leaving its core to a
team thread the OS has not run yet."""


def team_function(lowerer: FunctionLowerer, context: Context, body_fn: ir.Function,
                  base: str) -> ir.Function:
    """``void @base(ptr ctx)``: one thread's part of a dispatch."""
    module = lowerer.llvm_module
    team_fn = ir.Function(module, TEAM_FUNCTION, base)
    team_fn.linkage = "internal"
    team = FunctionLowerer(module, lowerer.function, team_fn, lowerer.hooks)
    team.parallel_depth = 1
    b = team.builder
    ctx = team_fn.args[0]
    ctx.name = "ctx"
    struct = context.struct

    def load(index: int, typ: ir.Type) -> ir.Value:
        return b.load(field(b, ctx, struct, index), typ=typ)

    arrival = field(b, ctx, struct, context.scalar("arrival"))
    b.atomic_rmw("max", arrival, now_ns(team), "monotonic")
    thread = b.sext(b.call(declare(module, "omp_get_thread_num", I32, []), []), I64)
    threads = b.sext(b.call(declare(module, "omp_get_num_threads", I32, []), []), I64)
    pointers = [load(k, PTR) for k in range(len(context.shared))]
    values = [load(len(context.shared) + k, I64) for k in range(len(context.values))]
    lo, trip, parts = (load(context.scalar(n), I64) for n in ("lo", "trip", "parts"))
    status_slot = field(b, ctx, struct, context.scalar("status"))

    copies: list[tuple[PrivateReduction, ir.Value, ir.Value, ir.Value]] = []
    arguments = list(pointers)
    for position, reduction in enumerate(context.reductions):
        buffer = lowerer.buffers[reduction.buffer].buffer
        storage = lowerer.hooks.storage_type(buffer.dtype)
        base_pointer = load(context.copies(position), PTR)
        count = load(context.copies(position) + 1, I64)
        mine = b.gep(base_pointer, [b.mul(thread, count)], inbounds=True, source_etype=storage)
        identity = lowerer.hooks.store_convert(team, buffer.dtype,
                                               identity_constant(reduction.op, buffer.dtype))

        def fill(e: ir.Value, mine: ir.Value = mine, identity: ir.Value = identity,
                 storage: ir.Type = storage) -> None:
            b.store(identity, b.gep(mine, [e], inbounds=True, source_etype=storage))

        team.emit_range_loop(ir.Constant(I64, 0), count, 1, fill, f"fill{position}")
        arguments[context.shared.index(reduction.buffer)] = mine
        copies.append((reduction, base_pointer, count, pointers[context.shared.index(
            reduction.buffer)]))
    arguments += values

    if copies:
        begin = b.sdiv(b.mul(thread, trip), threads)
        end = b.sdiv(b.mul(b.add(thread, ir.Constant(I64, 1)), trip), threads)
        result = b.call(body_fn, arguments + [lo, begin, end])
        with b.if_then(b.icmp_signed("!=", result, ir.Constant(I32, 0))):
            b.atomic_rmw("max", status_slot, b.sext(result, I64), "monotonic")
        _gather(team, field(b, ctx, struct, context.scalar("accumulated")), threads)
        for reduction, base_pointer, count, target in copies:
            _combine(team, lowerer, reduction, base_pointer, count, target, thread, threads)
    else:
        _dynamic_chunks(team, ctx, struct, context, body_fn, arguments, lo, trip, parts,
                        status_slot)
    _gather(team, field(b, ctx, struct, context.scalar("finished")), threads)

    team_size = global_i64(module, global_names(lowerer.llfunc.name)["team"])
    with b.if_then(b.icmp_signed("==", thread, ir.Constant(I64, 0))):
        b.store(threads, team_size)
    team.finish()
    return team_fn


def _gather(team: FunctionLowerer, arrived: ir.Value, threads: ir.Value) -> None:
    """Wait until all ``threads`` have come here (``arrived`` counts them): a
    barrier that spins :data:`GATHER_SPINS` loads and then sleeps, instead of
    libgomp's, which spins for milliseconds. On a machine whose cores are busy
    with other work, a spinning team thread keeps a core from the one thread
    the OS has not run yet and each dispatch costs a scheduler time slice; a
    sleeping one hands its core over. The team then reaches libgomp's final
    barrier together, where nobody waits long."""
    b = team.builder
    function = team.llfunc
    count = b.add(b.atomic_rmw("add", arrived, ir.Constant(I64, 1), "acq_rel"),
                  ir.Constant(I64, 1))
    spin = function.append_basic_block("gather.spin")
    check = function.append_basic_block("gather.check")
    sleep = function.append_basic_block("gather.sleep")
    done = function.append_basic_block("gather.done")
    start = b.block
    b.cbranch(b.icmp_signed("<", count, threads), spin, done)

    b.position_at_end(spin)
    tries = b.phi(I64, name="gather.tries")
    tries.add_incoming(ir.Constant(I64, 0), start)
    seen = b.load_atomic(arrived, "acquire", 8, typ=I64)
    b.cbranch(b.icmp_signed(">=", seen, threads), done, check)

    b.position_at_end(check)
    again = b.add(tries, ir.Constant(I64, 1))
    tries.add_incoming(again, check)
    b.cbranch(b.icmp_signed("<", again, ir.Constant(I64, GATHER_SPINS)), spin, sleep)

    b.position_at_end(sleep)
    usleep = declare(team.llvm_module, "usleep", I32, [I32])
    b.call(usleep, [ir.Constant(I32, GATHER_SLEEP_US)])
    b.cbranch(b.icmp_signed(">=", b.load_atomic(arrived, "acquire", 8, typ=I64), threads),
              done, sleep)
    b.position_at_end(done)


def _dynamic_chunks(team: FunctionLowerer, ctx: ir.Value, struct: ir.LiteralStructType,
                    context: Context, body_fn: ir.Function, arguments: list[ir.Value],
                    lo: ir.Value, trip: ir.Value, parts: ir.Value,
                    status_slot: ir.Value) -> None:
    """Take chunk ``k = counter++`` while ``k < parts``; stop at a failing chunk."""
    b = team.builder
    function = team.llfunc
    counter = field(b, ctx, struct, context.scalar("counter"))
    header = function.append_basic_block("chunk.next")
    work = function.append_basic_block("chunk.run")
    failed = function.append_basic_block("chunk.failed")
    done = function.append_basic_block("chunk.done")
    b.branch(header)
    b.position_at_end(header)
    chunk = b.atomic_rmw("add", counter, ir.Constant(I64, 1), "monotonic")
    b.cbranch(b.icmp_signed("<", chunk, parts), work, done)
    b.position_at_end(work)
    begin = b.sdiv(b.mul(chunk, trip), parts)
    end = b.sdiv(b.mul(b.add(chunk, ir.Constant(I64, 1)), trip), parts)
    result = b.call(body_fn, arguments + [lo, begin, end])
    b.cbranch(b.icmp_signed("==", result, ir.Constant(I32, 0)), header, failed)
    b.position_at_end(failed)
    b.atomic_rmw("max", status_slot, b.sext(result, I64), "monotonic")
    b.branch(done)
    b.position_at_end(done)


def _combine(team: FunctionLowerer, lowerer: FunctionLowerer, reduction: PrivateReduction,
             base_pointer: ir.Value, count: ir.Value, target: ir.Value, thread: ir.Value,
             threads: ir.Value) -> None:
    """This thread's slice of ``X[e] = X[e] op copy_t[e]`` for ``t = 0 .. threads-1``."""
    b = team.builder
    buffer = lowerer.buffers[reduction.buffer].buffer
    dtype = buffer.dtype
    storage = lowerer.hooks.storage_type(dtype)
    start = b.sdiv(b.mul(thread, count), threads)
    stop = b.sdiv(b.mul(b.add(thread, ir.Constant(I64, 1)), count), threads)

    def each_copy(t: ir.Value) -> None:
        copy = b.gep(base_pointer, [b.mul(t, count)], inbounds=True, source_etype=storage)

        def each_element(e: ir.Value) -> None:
            slot = b.gep(target, [e], inbounds=True, source_etype=storage)
            mine = lowerer.hooks.load_convert(team, dtype, b.load(slot, typ=storage))
            theirs = lowerer.hooks.load_convert(
                team, dtype, b.load(b.gep(copy, [e], inbounds=True, source_etype=storage),
                                    typ=storage))
            combined = combine_values(team, reduction.op, dtype, mine, theirs)
            if dtype.is_float and reduction.op in ("max", "min"):
                # a copy still at its NaN identity leaves the element's bits alone
                untouched = b.fcmp_unordered("uno", theirs, theirs)
                combined = b.select(untouched, mine, combined)
            b.store(lowerer.hooks.store_convert(team, dtype, combined), slot)

        team.emit_range_loop(start, stop, 1, each_element, "combine.e")

    team.emit_range_loop(ir.Constant(I64, 0), threads, 1, each_copy, "combine.t")


def identity_constant(op: str, dtype: DType) -> ir.Constant:
    """The identity of reduction ``op`` on ``dtype`` as a compute value: ``-0.0``
    / ``0`` for ``+``, ``1`` for ``*``; for float ``max``/``min`` NaN (they
    ignore a NaN operand), for integers the smallest / largest value."""
    typ = compute_type(dtype)
    if dtype.is_float:
        value = {"+": -0.0, "*": 1.0, "max": float("nan"), "min": float("nan")}[op]
        return ir.Constant(typ, value)
    bits = typ.width
    value = {"+": 0, "*": 1, "max": -(1 << (bits - 1)), "min": (1 << (bits - 1)) - 1}[op]
    return ir.Constant(typ, value)


def combine_values(lowerer: FunctionLowerer, op: str, dtype: DType, a: ir.Value,
                   b_value: ir.Value) -> ir.Value:
    """``a op b`` with the IR's semantics for ``dtype`` (compute values)."""
    b = lowerer.builder
    if dtype.is_float:
        if op == "+":
            return b.fadd(a, b_value)
        if op == "*":
            return b.fmul(a, b_value)
        suffix = "f64" if a.type != F32 else "f32"
        name = f"llvm.{'maxnum' if op == 'max' else 'minnum'}.{suffix}"
        return b.call(lowerer.intrinsic(name, a.type, [a.type, a.type]), [a, b_value])
    if op == "+":
        return b.add(a, b_value)
    if op == "*":
        return b.mul(a, b_value)
    width = a.type.width
    name = f"llvm.{'smax' if op == 'max' else 'smin'}.i{width}"
    return b.call(lowerer.intrinsic(name, a.type, [a.type, a.type]), [a, b_value])
