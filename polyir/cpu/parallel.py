"""Parallel loops on the OpenMP runtime: outlining and dispatch.

An outermost ``parallel`` loop ``for v = lo to hi step s`` of a function ``F``
(``F`` is the entry function's LLVM name, ``N`` counts its parallel loops)
becomes

* ``i32 @F.parN.body(ptr noalias buffers..., i64 values..., i64 lo, i64 begin,
  i64 end)`` (internal): iterations ``begin <= k < end`` of the loop,
  ``v = lo + k*s``; the buffers it uses and the values (symbols, enclosing loop
  variables) it reads are arguments; locals used only inside the loop are
  allocated here, so they are private to each chunk; returns the status;
* ``void @F.parN(ptr ctx)`` (internal, ``polyir.cpu.team``), run by every
  thread of the team that ``GOMP_parallel(@F.parN, ctx, cores, 0)`` starts;
* at the loop's place in ``F``: the size policy (``polyir.cpu.policy``): above
  its threshold, and unless the team came late at this loop recently, the
  context (``polyir.cpu.abi``) is filled and the loop dispatched; else the
  body runs on ``[0, trip)`` in the calling thread. A non-zero status from any
  chunk (a local that could not be allocated) is returned by ``F``.

Privatised reductions (``polyir.cpu.reductions``): the dispatch allocates
``cores`` copies of each such buffer (``malloc``; failure: status 1, nothing
runs); the team fills them with the operator's identity, accumulates into
them and combines them into the buffer in thread order (``polyir.cpu.team``).

Inside the body, nested ``parallel`` loops are serial. A call made while a
team is already running (from inside another OpenMP region) gets a team of
one thread from libgomp and runs serially too.
"""
from __future__ import annotations

from collections.abc import Iterable

from llvmlite import ir

from polyir.cpu import policy
from polyir.cpu.abi import (
    PTR,
    SCALARS,
    VOID,
    Context,
    declare,
    field,
    global_f64,
    global_i64,
    global_names,
    now_ns,
    storage_bytes,
)
from polyir.cpu.reductions import privatised_reductions
from polyir.cpu.team import team_function
from polyir.ir.nodes import Buffer, For, If, Node
from polyir.ir.types import DType
from polyir.ir.walk import buffers_used, walk_nodes
from polyir.llvm.hooks import F64, I1, I32, I64
from polyir.llvm.lower import FunctionLowerer, loop_hints

CHUNKS_PER_THREAD = 4
"""Dynamic schedule: chunks per thread of the team (``cores * 4`` in all)."""


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


def emit_parallel_loop(lowerer: FunctionLowerer, loop: For, cores: int,
                       min_parallel_work: float, team_late_ns: int = policy.LATE_NS,
                       work_unit_ns: float = 0.1) -> None:
    """Lower the outermost parallel ``loop`` at ``lowerer``'s position (see the
    module docstring); ``cores`` threads, dispatch above ``min_parallel_work``,
    back off when a team thread starts later than ``team_late_ns`` or the
    dispatch takes much longer than the estimated serial time (the work times
    ``work_unit_ns``)."""
    b = lowerer.builder
    module = lowerer.llvm_module
    names = global_names(lowerer.llfunc.name)
    trip, lo = policy.trip_count(lowerer, loop)
    used = buffers_used(loop.body)
    local_names = {buf.name for buf in lowerer.function.locals}
    body = lowerer.function.body
    private_names = (used & local_names) - _used_outside(body, loop) \
        if _occurrences(body, loop) == 1 else set()
    shared = tuple(name for name in lowerer.buffers if name in used and name not in private_names)
    values = tuple(sorted(lowerer.vars))
    private = [buf for buf in lowerer.function.locals if buf.name in private_names]
    reductions = tuple(r for r in privatised_reductions(loop, set(shared))
                       if lowerer.buffers[r.buffer].buffer.dtype is not DType.BOOL)
    context = Context(shared, values, reductions)

    base = f"{lowerer.llfunc.name}.par{len(lowerer.outlined)}"
    while base in module.globals:
        base += "_"
    lowerer.outlined.append(base)
    body_fn = _outline_body(lowerer, loop, context, private, base)
    team_fn = team_function(lowerer, context, body_fn, base)

    work = policy.loop_work(lowerer, loop)
    private_elements: ir.Value | None = None
    for reduction in reductions:
        count = lowerer.element_count(lowerer.buffers[reduction.buffer].buffer)
        private_elements = count if private_elements is None else b.add(private_elements, count)
    limit = b.load(global_f64(module, names["min_work"], min_parallel_work), typ=F64)
    threshold = policy.dispatch_threshold(lowerer, limit, cores, private_elements)
    big_enough = b.fcmp_ordered(">", work, threshold)

    when_block = lowerer.llfunc.append_basic_block(f"{base}.when")
    threads_block = lowerer.llfunc.append_basic_block(f"{base}.threads")
    deferred_block = lowerer.llfunc.append_basic_block(f"{base}.deferred")
    serial_block = lowerer.llfunc.append_basic_block(f"{base}.serial")
    merge_block = lowerer.llfunc.append_basic_block(f"{base}.done")
    b.cbranch(big_enough, when_block, serial_block)

    b.position_at_end(when_block)
    start = now_ns(lowerer)
    late = policy.LateTeam(lowerer, base, names, team_late_ns, work_unit_ns)
    if reductions:  # results must not depend on timing: always the team
        b.branch(threads_block)
    else:
        b.cbranch(late.allowed(start), threads_block, deferred_block)

    pointers = [lowerer.buffers[name].pointer for name in shared]
    arguments = pointers + [lowerer.vars[v] for v in values] + [lo, ir.Constant(I64, 0), trip]
    ends: list[tuple[ir.Value, ir.Block]] = []

    b.position_at_end(threads_block)
    threads_status, arrival = _dispatch(lowerer, context, team_fn, cores, lo, trip)
    late.record(start, arrival, work)
    ends.append((threads_status, b.block))
    b.branch(merge_block)

    b.position_at_end(deferred_block)  # serial for now, and timed: what the team must beat
    deferred_status = b.call(body_fn, arguments)
    late.learn_serial(start, work)
    ends.append((deferred_status, b.block))
    b.branch(merge_block)

    b.position_at_end(serial_block)
    ends.append((b.call(body_fn, arguments), b.block))
    b.branch(merge_block)

    b.position_at_end(merge_block)
    status = b.phi(I32, name=f"{base}.status")
    for value, block in ends:
        status.add_incoming(value, block)
    lowerer.fail_if(b.icmp_signed("!=", status, ir.Constant(I32, 0)), status, f"{base}.ok")


def _outline_body(lowerer: FunctionLowerer, loop: For, context: Context,
                  private: list[Buffer], base: str) -> ir.Function:
    module = lowerer.llvm_module
    arg_types = [PTR] * len(context.shared) + [I64] * (len(context.values) + 3)
    body_fn = ir.Function(module, ir.FunctionType(I32, arg_types), f"{base}.body")
    body_fn.linkage = "internal"
    inner = FunctionLowerer(module, lowerer.function, body_fn, lowerer.hooks)
    inner.parallel_depth = 1
    inner.outlined = lowerer.outlined
    args = list(body_fn.args)
    for name, arg in zip(context.shared, args, strict=False):
        arg.name = name
        arg.add_attribute("noalias")
    for name, arg in zip(context.values, args[len(context.shared):], strict=False):
        arg.name = name
        inner.bind(name, arg)
    lo, begin, end = args[-3:]
    lo.name, begin.name, end.name = f"{loop.var}.lo", "begin", "end"
    for name, arg in zip(context.shared, args, strict=False):
        inner.bind_buffer(lowerer.buffers[name].buffer, arg)
    inner.allocate_locals(private)
    inner.ensure_locals(loop.locals)  # the parallel loop's own loop-scoped locals, per thread
    # the first value again, from the values: constant bounds stay constants here
    # (the ``lo`` argument is then unused and dropped by LLVM)
    first, _ = inner.loop_bounds(loop)

    def iteration(k: ir.Value) -> None:
        scaled = inner.builder.mul(k, ir.Constant(I64, loop.step))
        scaled.flags.append("nsw")
        value = inner.builder.add(first, scaled)
        value.flags.append("nsw")
        inner.bind(loop.var, value)
        inner.lower_body(loop.body)

    inner.emit_range_loop(begin, end, 1, iteration, f"{loop.var}.k", loop_hints(loop))
    inner.finish()
    return body_fn


def _dispatch(lowerer: FunctionLowerer, context: Context, team_fn: ir.Function, cores: int,
              lo: ir.Value, trip: ir.Value) -> tuple[ir.Value, ir.Value]:
    """Allocate reduction copies, fill the context, run the team. Returns the
    status (i32) and when the last team thread started (i64 ns; 0 when
    nothing ran)."""
    b = lowerer.builder
    module = lowerer.llvm_module
    struct = context.struct
    copies: list[ir.Value] = []
    counts: list[ir.Value] = []
    allocated: ir.Value = ir.Constant(I1, 1)
    for reduction in context.reductions:
        buffer = lowerer.buffers[reduction.buffer].buffer
        count = lowerer.element_count(buffer)
        nbytes = b.mul(count, ir.Constant(I64, storage_bytes(lowerer, buffer.dtype) * cores))
        malloc = declare(module, "malloc", PTR, [I64])
        pointer = b.call(malloc, [b.select(b.icmp_signed(">", nbytes, ir.Constant(I64, 0)),
                                           nbytes, ir.Constant(I64, 1))])
        allocated = b.and_(allocated, b.icmp_unsigned("!=", pointer, ir.Constant(PTR, None)))
        copies.append(pointer)
        counts.append(count)

    start = b.block
    run = lowerer.llfunc.append_basic_block(f"{team_fn.name}.run")
    after = lowerer.llfunc.append_basic_block(f"{team_fn.name}.ran")
    b.cbranch(allocated, run, after)

    b.position_at_end(run)
    ctx = lowerer.entry_alloca(struct, name=f"{team_fn.name}.ctx")
    fields: list[ir.Value] = [lowerer.buffers[n].pointer for n in context.shared]
    fields += [lowerer.vars[v] for v in context.values]
    parts = b.call(lowerer.intrinsic("llvm.smin.i64", I64, [I64, I64]),
                   [trip, ir.Constant(I64, cores * CHUNKS_PER_THREAD)])
    fields += [lo, trip, parts] + [ir.Constant(I64, 0)] * (len(SCALARS) - 3)
    for pointer, count in zip(copies, counts, strict=True):
        fields += [pointer, count]
    for index, value in enumerate(fields):
        b.store(value, field(b, ctx, struct, index))
    gomp_parallel = declare(module, "GOMP_parallel", VOID, [PTR, PTR, I32, I32])
    b.call(gomp_parallel, [team_fn, ctx, ir.Constant(I32, cores), ir.Constant(I32, 0)])
    ran_status = b.trunc(b.load(field(b, ctx, struct, context.scalar("status")), typ=I64), I32)
    ran_arrival = b.load(field(b, ctx, struct, context.scalar("arrival")), typ=I64)
    dispatches = global_i64(module, global_names(lowerer.llfunc.name)["dispatches"])
    b.atomic_rmw("add", dispatches, ir.Constant(I64, 1), "monotonic")
    run_end = b.block
    b.branch(after)

    b.position_at_end(after)
    status = b.phi(I32, name=f"{team_fn.name}.status")
    status.add_incoming(ir.Constant(I32, 1), start)
    status.add_incoming(ran_status, run_end)
    arrival = b.phi(I64, name=f"{team_fn.name}.arrival")
    arrival.add_incoming(ir.Constant(I64, 0), start)
    arrival.add_incoming(ran_arrival, run_end)
    if copies:
        free = declare(module, "free", VOID, [PTR])
        for pointer in copies:
            b.call(free, [pointer])
    return status, arrival
