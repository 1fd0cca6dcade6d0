"""Runtime for outlined parallel loops: chunks on a Python thread pool.

Native code calls ``parallel_for(chunk_fn, ctx, trip_count)`` (a ctypes
callback, see ``polyir.cpu.hooks``). The callback splits ``[0, trip_count)``
into up to ``CHUNKS_PER_WORKER`` chunks per worker (chunk ``k`` of ``n`` is
``[k*trip//n, (k+1)*trip//n)``). The calling thread and ``workers - 1`` helpers
on a ``ThreadPoolExecutor`` each make one ctypes call to the module's native
``polyir.drain``, which takes chunk numbers from a shared atomic counter and
runs them until none is left. The GIL is released for the whole drain, so the
chunks run on all cores, with one GIL hand-off per thread and dispatch (not
per chunk), and a helper that the OS schedules late finds nothing left to do
instead of holding the others up.
"""
from __future__ import annotations

import ctypes
import threading
from concurrent.futures import Future, ThreadPoolExecutor

from llvmlite import ir

PARALLEL_FOR = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64)
CHUNK_FN = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64)
DRAIN_FN = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
                            ctypes.c_int64, ctypes.c_int64)
DRAIN_NAME = "polyir.drain"
CHUNKS_PER_WORKER = 4

_pool_lock = threading.Lock()
_pools: dict[int, ThreadPoolExecutor] = {}


def _pool(workers: int) -> ThreadPoolExecutor:
    with _pool_lock:
        pool = _pools.get(workers)
        if pool is None:
            pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="polyir-cpu")
            _pools[workers] = pool
        return pool


def chunks(trip_count: int, parts: int) -> list[tuple[int, int]]:
    """The ranges ``polyir.drain`` runs: ``[0, trip_count)`` in ``min(parts,
    trip_count)`` contiguous, near-equal pieces."""
    parts = max(1, min(parts, trip_count))
    return [(k * trip_count // parts, (k + 1) * trip_count // parts) for k in range(parts)]


def emit_drain(module: ir.Module) -> ir.Function:
    """``i32 polyir.drain(ptr chunk_fn, ptr ctx, ptr counter, i64 parts, i64 trip)``:
    run chunks ``k = atomic counter++`` while ``k < parts``; the largest status."""
    existing = module.globals.get(DRAIN_NAME)
    if existing is not None:
        return existing
    i32, i64, ptr = ir.IntType(32), ir.IntType(64), ir.PointerType()
    chunk_type = ir.FunctionType(i32, [ptr, i64, i64])
    drain = ir.Function(module, ir.FunctionType(i32, [chunk_type.as_pointer(), ptr, ptr, i64, i64]),
                        DRAIN_NAME)
    chunk_fn, ctx, counter, parts, trip = drain.args
    entry = drain.append_basic_block("entry")
    loop = drain.append_basic_block("loop")
    work = drain.append_basic_block("work")
    done = drain.append_basic_block("done")
    b = ir.IRBuilder(entry)
    b.branch(loop)
    b.position_at_end(loop)
    status = b.phi(i32, name="status")
    status.add_incoming(ir.Constant(i32, 0), entry)
    index = b.atomic_rmw("add", counter, ir.Constant(i64, 1), "monotonic")
    b.cbranch(b.icmp_signed("<", index, parts), work, done)
    b.position_at_end(work)
    lo = b.sdiv(b.mul(index, trip), parts)
    hi = b.sdiv(b.mul(b.add(index, ir.Constant(i64, 1)), trip), parts)
    result = b.call(chunk_fn, [ctx, lo, hi])
    worse = b.select(b.icmp_signed(">", result, status), result, status)
    status.add_incoming(worse, work)
    b.branch(loop)
    b.position_at_end(done)
    b.ret(status)
    return drain


class ParallelRuntime:
    """Holds the ctypes dispatcher passed to native code as ``parallel_for``.

    ``drain_address`` is the address of the module's ``polyir.drain`` (0 when
    the module has no parallel loop; the dispatcher is then never called).
    """

    def __init__(self, workers: int, drain_address: int = 0):
        self.workers = max(1, workers)
        self._drain = DRAIN_FN(drain_address) if drain_address else None
        self.callback = PARALLEL_FOR(self._parallel_for)
        self.address = ctypes.cast(self.callback, ctypes.c_void_p).value

    def drain(self, chunk_address: int, ctx: int, counter: int, parts: int, trip: int) -> int:
        """One thread's share of a dispatch (a single ctypes call into native code)."""
        assert self._drain is not None
        return int(self._drain(chunk_address, ctx, counter, parts, trip))

    def _parallel_for(self, chunk_address: int, ctx: int, trip_count: int) -> int:
        try:
            parts = min(trip_count, self.workers * CHUNKS_PER_WORKER)
            counter = ctypes.c_int64(0)
            args = (chunk_address, ctx, ctypes.addressof(counter), max(parts, 1), trip_count)
            if self.workers == 1 or parts <= 1:
                return self.drain(*args)
            helpers: list[Future[int]] = [_pool(self.workers - 1).submit(self.drain, *args)
                                          for _ in range(self.workers - 1)]
            status = self.drain(*args)
            for helper in helpers:
                if not helper.cancel():  # a helper that never started has nothing to do
                    status = max(status, helper.result())
            return status
        except BaseException:  # a callback must not raise into native code
            return 2
