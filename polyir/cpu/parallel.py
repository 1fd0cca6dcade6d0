"""Runtime for outlined parallel loops: chunks on a Python thread pool.

Native code calls ``parallel_for(chunk_fn, ctx, trip_count)`` (a ctypes
callback, see ``polyir.cpu.hooks``). The callback splits ``[0, trip_count)``
into ``CHUNKS_PER_WORKER`` contiguous chunks per worker; the calling thread and
``workers - 1`` helpers on a ``ThreadPoolExecutor`` take chunks from a shared
counter until none is left (so a helper the OS does not schedule soon costs
nothing: the others take its share). Each chunk is a ctypes call into native
code, which releases the GIL, so the chunks run on all cores.
"""
from __future__ import annotations

import ctypes
import itertools
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

CHUNK_FN = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64)
PARALLEL_FOR = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64)

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


def chunks(trip_count: int, workers: int) -> list[tuple[int, int]]:
    """``[0, trip_count)`` as at most ``workers`` contiguous, near-equal ranges."""
    parts = max(1, min(workers, trip_count))
    base, extra = divmod(trip_count, parts)
    ranges, start = [], 0
    for index in range(parts):
        end = start + base + (1 if index < extra else 0)
        ranges.append((start, end))
        start = end
    return ranges


class ParallelRuntime:
    """Holds the ctypes dispatcher passed to native code as ``parallel_for``."""

    def __init__(self, workers: int):
        self.workers = max(1, workers)
        self._functions: dict[int, Callable[[int, int, int], int]] = {}
        self.callback = PARALLEL_FOR(self._parallel_for)
        self.address = ctypes.cast(self.callback, ctypes.c_void_p).value

    def _chunk_function(self, address: int) -> Callable[[int, int, int], int]:
        function = self._functions.get(address)
        if function is None:
            function = CHUNK_FN(address)
            self._functions[address] = function
        return function

    def _parallel_for(self, chunk_address: int, ctx: int, trip_count: int) -> int:
        try:
            function = self._chunk_function(chunk_address)
            ranges = chunks(trip_count, self.workers * CHUNKS_PER_WORKER)
            if self.workers == 1 or len(ranges) == 1:
                return int(function(ctx, 0, trip_count))
            taken = itertools.count()

            def drain() -> int:
                status = 0
                for index in iter(taken.__next__, None):
                    if index >= len(ranges):
                        break
                    status = max(status, int(function(ctx, *ranges[index])))
                return status

            helpers = [_pool(self.workers - 1).submit(drain) for _ in range(self.workers - 1)]
            status = drain()
            for helper in helpers:
                if not helper.cancel():  # a helper that never started has nothing to do
                    status = max(status, helper.result())
            return status
        except BaseException:  # a callback must not raise into native code
            return 2
