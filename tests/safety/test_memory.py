"""No memory growth per compiled kernel beyond its code: an executable nobody
holds is freed with its JIT engine, and compiling more kernels does not grow
polyir's Python heap (what LLVM's own pass pipeline keeps is measured in
``polyir.cpu.machine.optimise``'s docstring)."""
from __future__ import annotations

import gc
import tracemalloc
import weakref

import numpy as np

import polyir
from polyir.driver import compile_ir


def _kernel(k: int) -> polyir.ir.nodes.Module:
    return polyir.parse(f"func f{k}(A: f32[N], B: f32[N]) {{\n  for i = 0 to N {{\n"
                        f"    S0: B[i] = A[i] * {k}.0 + 1.0\n  }}\n}}\n")


def _compile_and_run(k: int) -> weakref.ref:
    executable = compile_ir(_kernel(k), "cpu", cache_dir=None)
    A, B = np.ones(8, np.float32), np.zeros(8, np.float32)
    executable(A, B)
    assert np.array_equal(B, np.full(8, k + 1.0, np.float32))
    return weakref.ref(executable)


def test_executables_are_freed_and_the_heap_does_not_grow() -> None:
    for k in range(3):
        _compile_and_run(k)                       # warm: imports, target machines
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        refs = [_compile_and_run(k) for k in range(3, 23)]
        gc.collect()
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert all(ref() is None for ref in refs), "an executable is kept alive"
    assert grown < 20 * 4096, f"the Python heap grew {grown} bytes over 20 kernels"
