"""Outlined parallel loops on a thread pool give the serial results."""
from __future__ import annotations

import numpy as np
import pytest

from polyir.cpu.parallel import chunks

RNG = np.random.default_rng(3)

PROGRAMS = {
    "outer": """
func f(C: f32[N, M], A: f32[N, M], s: f32[]) {
  for i = 0 to N parallel {
    for j = 0 to M {
      S0: C[i, j] = C[i, j] + A[i, j] * s[] + cast<f32>(i)
    }
  }
}""",
    # parallel loop under a serial loop, bounds from outer variables, step 3
    "nested": """
func f(C: f32[N, M], A: f32[N, M], s: f32[]) {
  for t = 0 to 3 {
    for i = max(0, t - 1) to N - t step 3 parallel {
      for j = 0 to min(M, i + 4) parallel {
        S0: C[i, j] = C[i, j] * 0.5 + A[i, j] * s[] + cast<f32>(t)
      }
    }
  }
}""",
    # a private local (only used inside the loop) and a shared one
    "locals": """
func f(C: f32[N, M], A: f32[N, M], s: f32[]) {
  local row: f32[64] @local
  local big: f32[N, M] @global
  local t: f32[] @local
  for i = 0 to N parallel {
    for j = 0 to M {
      S0: row[j % 64] = A[i, j] * s[]
      S1: t[] = row[j % 64] + 1.0
      S2: big[i, j] = t[]
    }
  }
  for i2 = 0 to N {
    for j2 = 0 to M {
      S3: C[i2, j2] = big[i2, j2] + C[i2, j2]
    }
  }
}""",
}


@pytest.mark.parametrize("name", sorted(PROGRAMS))
@pytest.mark.parametrize("shape", [(1, 1), (7, 5), (61, 33), (200, 70)])
def test_parallel_equals_serial(native, name, shape):
    serial = native(PROGRAMS[name], cores=1)
    parallel = native(PROGRAMS[name], cores=4)
    assert "parallel_for" in parallel.llvm_ir and ".par0" in parallel.llvm_ir
    assert ".par0" not in serial.llvm_ir
    C = RNG.standard_normal(shape).astype(np.float32)
    A = RNG.standard_normal(shape).astype(np.float32)
    C_serial, C_parallel = C.copy(), C.copy()
    serial(C_serial, A, 1.5)
    parallel(C_parallel, A, 1.5)
    np.testing.assert_array_equal(C_parallel, C_serial)


def test_parallel_loop_runs_on_several_threads(native, monkeypatch):
    """Each dispatch drains the chunks from the calling thread and the pool's
    helper threads."""
    import threading

    import polyir.cpu.parallel as runtime
    ex = native(PROGRAMS["outer"], cores=3)
    calls: list[tuple[str, int, int]] = []
    original = runtime.ParallelRuntime.drain

    def spy(self, chunk_address, ctx, counter, parts, trip):
        calls.append((threading.current_thread().name, parts, trip))
        return original(self, chunk_address, ctx, counter, parts, trip)

    monkeypatch.setattr(runtime.ParallelRuntime, "drain", spy)
    A = np.ones((10, 100_000), np.float32)
    helpers_ran = False
    for _ in range(20):  # helpers may be slow to be scheduled on a loaded machine
        calls.clear()
        C = np.zeros((10, 100_000), np.float32)
        ex(C, A, 2.0)
        np.testing.assert_array_equal(C, np.broadcast_to(2.0 + np.arange(10)[:, None], C.shape))
        assert {(parts, trip) for _, parts, trip in calls} == {(10, 10)}
        names = [name for name, _, _ in calls]
        assert names.count("MainThread") == 1 and len(names) <= 3
        helpers_ran = any(name.startswith("polyir-cpu") for name in names)
        if helpers_ran:
            break
    assert helpers_ran


def test_native_drain_runs_every_chunk_once():
    """``polyir.drain`` hands out exactly the ranges of ``chunks``."""
    import ctypes

    import llvmlite.binding as llvm
    from llvmlite import ir

    from polyir.cpu import jit
    from polyir.cpu.parallel import CHUNK_FN, DRAIN_FN, DRAIN_NAME, emit_drain
    jit._initialise()
    module = ir.Module(name="drain_test")
    module.triple = llvm.get_process_triple()
    emit_drain(module)
    engine = llvm.create_mcjit_compiler(llvm.parse_assembly(str(module)), jit.host_machine())
    engine.finalize_object()
    drain = DRAIN_FN(engine.get_function_address(DRAIN_NAME))
    for trip, parts in [(10, 12), (10, 3), (1000, 8), (7, 7), (5, 1)]:
        seen: list[tuple[int, int]] = []

        def record(ctx, lo, hi, seen=seen):
            seen.append((lo, hi))
            return 3 if lo == 0 else 0

        callback = CHUNK_FN(record)
        counter = ctypes.c_int64(0)
        status = drain(ctypes.cast(callback, ctypes.c_void_p), None, ctypes.addressof(counter),
                       min(parts, trip), trip)
        assert status == 3
        assert seen == chunks(trip, parts)


@pytest.mark.parametrize("trip, parts", [(0, 4), (1, 4), (10, 3), (7, 7), (100, 2)])
def test_chunks_cover_the_range(trip, parts):
    ranges = chunks(trip, parts)
    covered = [k for lo, hi in ranges for k in range(lo, hi)]
    assert covered == list(range(trip))
    assert len(ranges) <= max(1, parts)
    sizes = [hi - lo for lo, hi in ranges]
    assert max(sizes) - min(sizes) <= 1


def test_runtime_failure_is_reported_not_ignored(native, monkeypatch):
    import polyir.cpu.parallel as runtime
    ex = native(PROGRAMS["locals"], cores=2)

    def broken(self, *args):
        raise OSError("simulated failure")

    monkeypatch.setattr(runtime.ParallelRuntime, "drain", broken)
    C = np.zeros((4, 3), np.float32)
    with pytest.raises(RuntimeError, match="status 2"):
        ex(C, np.ones((4, 3), np.float32), 1.0)


def test_shared_subtree_does_not_privatise_its_locals():
    """IR may hold the same loop object twice; a local both copies use stays shared."""
    import polyir
    from polyir.cpu.jit import build_cpu
    from polyir.ir.nodes import Function, Module
    from polyir.target import cpu as cpu_target
    parsed = polyir.parse("""
func f(C: f32[N], A: f32[N]) {
  local t: f32[N] @global
  for i = 0 to N parallel {
    S0: t[i] = t[i] + A[i]
    S1: C[i] = t[i]
  }
}""").entry
    twice = parsed.body[0]
    shared = Module((Function(parsed.name, parsed.params, (twice, twice), parsed.locals),))
    ex = build_cpu(shared, cpu_target(2), cache_dir=None)
    A = np.arange(50, dtype=np.float32)
    C = np.zeros(50, np.float32)
    ex(C, A)
    np.testing.assert_array_equal(C, 2 * A)
