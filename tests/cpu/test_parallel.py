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
  for i = 0 to N {
    for j = 0 to M {
      S3: C[i, j] = big[i, j] + C[i, j]
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
    """The iteration space is split into chunks, each run exactly once, by the
    calling thread and the pool's helper threads."""
    import threading

    import polyir.cpu.parallel as runtime
    ex = native(PROGRAMS["outer"], cores=3)
    seen: list[tuple[str, int, int]] = []
    original = runtime.ParallelRuntime._chunk_function

    def spy(self, address):
        function = original(self, address)

        def run(ctx, lo, hi):
            seen.append((threading.current_thread().name, lo, hi))
            return function(ctx, lo, hi)
        return run

    monkeypatch.setattr(runtime.ParallelRuntime, "_chunk_function", spy)
    A = np.ones((10, 100_000), np.float32)
    helpers_ran = False
    for _ in range(20):  # helpers may be slow to be scheduled on a loaded machine
        seen.clear()
        C = np.zeros((10, 100_000), np.float32)
        ex(C, A, 2.0)
        np.testing.assert_array_equal(C, np.broadcast_to(2.0 + np.arange(10)[:, None], C.shape))
        assert sorted((lo, hi) for _, lo, hi in seen) == chunks(10, 3 * runtime.CHUNKS_PER_WORKER)
        assert all(name == "MainThread" or name.startswith("polyir-cpu") for name, _, _ in seen)
        helpers_ran = any(name != "MainThread" for name, _, _ in seen)
        if helpers_ran:
            break
    assert helpers_ran


@pytest.mark.parametrize("trip, workers", [(0, 4), (1, 4), (10, 3), (7, 7), (100, 2)])
def test_chunks_cover_the_range(trip, workers):
    ranges = chunks(trip, workers)
    covered = [k for lo, hi in ranges for k in range(lo, hi)]
    assert covered == list(range(trip))
    assert len(ranges) <= max(1, workers)
    sizes = [hi - lo for lo, hi in ranges]
    assert max(sizes) - min(sizes) <= 1


def test_runtime_failure_is_reported_not_ignored(native, monkeypatch):
    import polyir.cpu.parallel as runtime
    ex = native(PROGRAMS["locals"], cores=2)

    def broken(self, address):
        raise OSError("simulated failure")

    monkeypatch.setattr(runtime.ParallelRuntime, "_chunk_function", broken)
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
