"""Parallel loops on the OpenMP runtime: outlining, dispatch, privatised reductions.

An outermost ``parallel`` loop ``for v = lo to hi step s`` of a function ``F``
(``F`` is the entry function's LLVM name, ``N`` counts its parallel loops)
becomes

* ``i32 @F.parN.body(ptr noalias buffers..., i64 values..., i64 lo, i64 begin,
  i64 end)`` (internal): iterations ``begin <= k < end`` of the loop,
  ``v = lo + k*s``; the buffers it uses and the values (symbols, enclosing loop
  variables) it reads are arguments; locals used only inside the loop are
  allocated here, so they are private to each chunk; returns the status;
* ``void @F.parN(ptr ctx)`` (internal), run by every thread of the team that
  ``GOMP_parallel(@F.parN, ctx, cores, 0)`` starts: it reads the arguments
  from the context struct and runs chunks of ``[0, trip)`` through the body,
  either *dynamically* (``cores * CHUNKS_PER_THREAD`` chunks handed out by an
  atomic counter, so a thread the OS descheduled holds nobody up) or, when
  the loop has privatised reductions, *statically* (thread ``t`` of ``n`` takes
  ``[t*trip/n, (t+1)*trip/n)``, so the result does not depend on timing);
  then every thread waits for the others in a *gather* (it counts itself in,
  spins briefly on the count, then sleeps in ``usleep`` between looks), so the
  team reaches libgomp's final barrier together. libgomp's own waits spin for
  milliseconds, and on a machine whose cores are busy a spinning thread keeps
  a core from the team thread the OS has not run yet;
* at the loop's place in ``F``: the work estimate of ``polyir.cpu.policy``;
  above the threshold the dispatch, else a direct call of the body on
  ``[0, trip)`` in the calling thread. A non-zero status from any chunk (a
  local that could not be allocated) is returned by ``F``.

Privatised reductions (``polyir.cpu.reductions``): the dispatch allocates
``cores`` copies of each such buffer (``malloc``; failure: status 1, nothing
runs); thread ``t`` fills copy ``t`` with the operator's identity, its chunks
accumulate into it (the body is called with the copy in place of the buffer),
and after a gather each thread combines its slice of the elements:
``X[e] = (...(X[e] op copy_0[e]) op copy_1[e]...) op copy_{n-1}[e]``. The
identities are exact (``-0.0`` for float ``+``, NaN for ``max``/``min``, which
ignore a NaN operand; a copy still NaN is skipped), so elements no iteration
touched keep their bits.

Inside the body, nested ``parallel`` loops are serial. A call made while a
team is already running (from inside another OpenMP region) gets a team of
one thread from libgomp and runs serially too.

Globals per entry function: ``F.min_work`` (double, the policy's threshold,
initially ``Target.min_parallel_work``; ``polyir.cpu.jit`` sets it to infinity
in a child process after ``fork()``, where libgomp's thread pool is gone), and,
for tests and diagnostics, ``F.dispatches`` (i64, dispatches through the
runtime) and ``F.team`` (i64, the team size of the latest dispatch).
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from llvmlite import ir

from polyir.cpu import policy
from polyir.cpu.reductions import PrivateReduction, privatised_reductions
from polyir.ir.nodes import Buffer, For, If, Node
from polyir.ir.types import DType
from polyir.ir.walk import buffers_used, walk_nodes
from polyir.llvm.hooks import F32, F64, I1, I32, I64, compute_type
from polyir.llvm.lower import FunctionLowerer, loop_hints

PTR = ir.PointerType()
VOID = ir.VoidType()
TEAM_FUNCTION = ir.FunctionType(VOID, [PTR])
"""``void team_fn(ptr ctx)``: what ``GOMP_parallel`` runs on each thread."""
CHUNKS_PER_THREAD = 4
"""Dynamic schedule: chunks per thread of the team (``cores * 4`` in all)."""
SCALARS = ("lo", "trip", "parts", "counter", "status", "accumulated", "finished")
"""The i64 fields of the context after the values: the loop's first value,
trip count and number of chunks; the chunk counter; the worst status; the
arrival counters of the gathers after the chunks (reductions) and at the end."""
GATHER_SPINS = 50_000
"""Atomic loads a thread spends waiting for the others in a gather before it
starts sleeping (50-100 microseconds; libgomp spins for milliseconds)."""
GATHER_SLEEP_US = 20
"""Then it sleeps this long between looks (``usleep``), leaving its core to a
team thread the OS has not run yet."""


def dispatch_counter_names(llvm_name: str) -> tuple[str, str]:
    """The globals counting dispatches and holding the latest team size."""
    return f"{llvm_name}.dispatches", f"{llvm_name}.team"


def threshold_name(llvm_name: str) -> str:
    """The global (double) holding the work above which loops dispatch; set to
    infinity at run time to keep every loop serial (after ``fork()``)."""
    return f"{llvm_name}.min_work"


def _threshold(module: ir.Module, name: str, value: float) -> ir.GlobalVariable:
    existing = module.globals.get(name)
    if existing is not None:
        return existing
    threshold = ir.GlobalVariable(module, F64, name)
    threshold.initializer = ir.Constant(F64, float(value))
    return threshold


@dataclass(frozen=True)
class _Context:
    """Layout of the context struct the caller fills for the team."""

    shared: tuple[str, ...]
    values: tuple[str, ...]
    reductions: tuple[PrivateReduction, ...]

    @property
    def struct(self) -> ir.LiteralStructType:
        fields: list[ir.Type] = [PTR] * len(self.shared) + [I64] * (len(self.values) + 7)
        for _ in self.reductions:
            fields += [PTR, I64]
        return ir.LiteralStructType(fields)

    def scalar(self, name: str) -> int:
        """Index of one of :data:`SCALARS`."""
        return len(self.shared) + len(self.values) + SCALARS.index(name)

    def copies(self, position: int) -> int:
        """Index of reduction ``position``'s copies pointer (its count follows)."""
        return len(self.shared) + len(self.values) + len(SCALARS) + 2 * position


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
                       min_parallel_work: float) -> None:
    """Lower the outermost parallel ``loop`` at ``lowerer``'s position (see the
    module docstring); ``cores`` threads, dispatch above ``min_parallel_work``."""
    b = lowerer.builder
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
    context = _Context(shared, values, reductions)

    base = f"{lowerer.llfunc.name}.par{len(lowerer.outlined)}"
    while base in lowerer.llvm_module.globals:
        base += "_"
    lowerer.outlined.append(base)
    body_fn = _outline_body(lowerer, loop, context, private, base)
    team_fn = _team_function(lowerer, context, body_fn, base)

    work = policy.loop_work(lowerer, loop)
    private_elements: ir.Value | None = None
    for reduction in reductions:
        count = lowerer.element_count(lowerer.buffers[reduction.buffer].buffer)
        private_elements = count if private_elements is None else b.add(private_elements, count)
    limit = _threshold(lowerer.llvm_module, threshold_name(_entry_name(lowerer)),
                       min_parallel_work)
    threshold = policy.dispatch_threshold(lowerer, b.load(limit, typ=F64), cores,
                                          private_elements)
    on_threads = b.fcmp_ordered(">", work, threshold)

    threads_block = lowerer.llfunc.append_basic_block(f"{base}.threads")
    serial_block = lowerer.llfunc.append_basic_block(f"{base}.serial")
    merge_block = lowerer.llfunc.append_basic_block(f"{base}.done")
    b.cbranch(on_threads, threads_block, serial_block)

    b.position_at_end(threads_block)
    threads_status = _dispatch(lowerer, context, team_fn, cores, lo, trip)
    threads_end = b.block
    b.branch(merge_block)

    b.position_at_end(serial_block)
    pointers = [lowerer.buffers[name].pointer for name in shared]
    arguments = pointers + [lowerer.vars[v] for v in values] + [lo, ir.Constant(I64, 0), trip]
    serial_status = b.call(body_fn, arguments)
    serial_end = b.block
    b.branch(merge_block)

    b.position_at_end(merge_block)
    status = b.phi(I32, name=f"{base}.status")
    status.add_incoming(threads_status, threads_end)
    status.add_incoming(serial_status, serial_end)
    lowerer.fail_if(b.icmp_signed("!=", status, ir.Constant(I32, 0)), status, f"{base}.ok")


def _outline_body(lowerer: FunctionLowerer, loop: For, context: _Context,
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


def _counter(module: ir.Module, name: str) -> ir.GlobalVariable:
    existing = module.globals.get(name)
    if existing is not None:
        return existing
    counter = ir.GlobalVariable(module, I64, name)
    counter.initializer = ir.Constant(I64, 0)
    return counter


def _declare(module: ir.Module, name: str, ret: ir.Type, args: Sequence[ir.Type]) -> ir.Function:
    existing = module.globals.get(name)
    if existing is not None:
        return existing
    return ir.Function(module, ir.FunctionType(ret, list(args)), name)


def _field(builder: ir.IRBuilder, ctx: ir.Value, struct: ir.LiteralStructType,
           index: int) -> ir.Value:
    return builder.gep(ctx, [ir.Constant(I32, 0), ir.Constant(I32, index)], inbounds=True,
                       source_etype=struct)


def _dispatch(lowerer: FunctionLowerer, context: _Context, team_fn: ir.Function, cores: int,
              lo: ir.Value, trip: ir.Value) -> ir.Value:
    """Fill the context, allocate reduction copies, run the team; the status (i32)."""
    b = lowerer.builder
    module = lowerer.llvm_module
    struct = context.struct
    copies: list[ir.Value] = []
    counts: list[ir.Value] = []
    allocated: ir.Value = ir.Constant(I1, 1)
    for reduction in context.reductions:
        buffer = lowerer.buffers[reduction.buffer].buffer
        count = lowerer.element_count(buffer)
        size = _storage_bytes(lowerer, buffer.dtype)
        nbytes = b.mul(count, ir.Constant(I64, size * cores))
        malloc = _declare(module, "malloc", PTR, [I64])
        pointer = b.call(malloc, [b.select(b.icmp_signed(">", nbytes, ir.Constant(I64, 0)),
                                           nbytes, ir.Constant(I64, 1))])
        null = b.icmp_unsigned("==", pointer, ir.Constant(PTR, None))
        allocated = b.and_(allocated, b.not_(null))
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
        b.store(value, _field(b, ctx, struct, index))
    gomp_parallel = _declare(module, "GOMP_parallel", VOID, [PTR, PTR, I32, I32])
    b.call(gomp_parallel, [team_fn, ctx, ir.Constant(I32, cores), ir.Constant(I32, 0)])
    ran_status = b.trunc(b.load(_field(b, ctx, struct, context.scalar("status")), typ=I64), I32)
    dispatches, _ = dispatch_counter_names(_entry_name(lowerer))
    b.atomic_rmw("add", _counter(module, dispatches), ir.Constant(I64, 1), "monotonic")
    run_end = b.block
    b.branch(after)

    b.position_at_end(after)
    status = b.phi(I32, name=f"{team_fn.name}.status")
    status.add_incoming(ir.Constant(I32, 1), start)
    status.add_incoming(ran_status, run_end)
    if copies:
        free = _declare(module, "free", VOID, [PTR])
        for pointer in copies:
            b.call(free, [pointer])
    return status


def _entry_name(lowerer: FunctionLowerer) -> str:
    return lowerer.llfunc.name


def _storage_bytes(lowerer: FunctionLowerer, dtype: DType) -> int:
    storage = lowerer.hooks.storage_type(dtype)
    if isinstance(storage, ir.IntType):
        return max(1, storage.width // 8)
    return {ir.HalfType: 2, ir.FloatType: 4, ir.DoubleType: 8}[type(storage)]


def _team_function(lowerer: FunctionLowerer, context: _Context, body_fn: ir.Function,
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
        return b.load(_field(b, ctx, struct, index), typ=typ)

    thread = b.sext(b.call(_declare(module, "omp_get_thread_num", I32, []), []), I64)
    threads = b.sext(b.call(_declare(module, "omp_get_num_threads", I32, []), []), I64)
    pointers = [load(k, PTR) for k in range(len(context.shared))]
    values = [load(len(context.shared) + k, I64) for k in range(len(context.values))]
    lo, trip, parts = (load(context.scalar(n), I64) for n in ("lo", "trip", "parts"))
    status_slot = _field(b, ctx, struct, context.scalar("status"))

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
        _gather(team, _field(b, ctx, struct, context.scalar("accumulated")), threads)
        for reduction, base_pointer, count, target in copies:
            _combine(team, lowerer, reduction, base_pointer, count, target, thread, threads)
    else:
        _dynamic_chunks(team, ctx, struct, context, body_fn, arguments, lo, trip, parts,
                        status_slot)
    _gather(team, _field(b, ctx, struct, context.scalar("finished")), threads)

    _, team_size = dispatch_counter_names(_entry_name(lowerer))
    with b.if_then(b.icmp_signed("==", thread, ir.Constant(I64, 0))):
        b.store(threads, _counter(module, team_size))
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
    usleep = _declare(team.llvm_module, "usleep", I32, [I32])
    b.call(usleep, [ir.Constant(I32, GATHER_SLEEP_US)])
    b.cbranch(b.icmp_signed(">=", b.load_atomic(arrived, "acquire", 8, typ=I64), threads),
              done, sleep)
    b.position_at_end(done)


def _dynamic_chunks(team: FunctionLowerer, ctx: ir.Value, struct: ir.LiteralStructType,
                    context: _Context, body_fn: ir.Function, arguments: list[ir.Value],
                    lo: ir.Value, trip: ir.Value, parts: ir.Value,
                    status_slot: ir.Value) -> None:
    """Take chunk ``k = counter++`` while ``k < parts``; stop at a failing chunk."""
    b = team.builder
    function = team.llfunc
    counter = _field(b, ctx, struct, context.scalar("counter"))
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
