"""Interpreter speed figures (run by hand: ``python tests/interpreter/bench_interpreter.py``).

Not collected by pytest: timings on a shared machine are not a pass/fail
criterion. The figures in ``polyir/ir/interpreter.py``'s docstring come from here.
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

from polyir.ir.interpreter import interpret
from polyir.ir.parser import parse

GEMM = """
func gemm(C: DT[N, M], A: DT[N, K], B: DT[K, M]) {
  for i = 0 to N {
    for j = 0 to M {
      for k = 0 to K {
        S0: C[i, j] = C[i, j] + A[i, k] * B[k, j]
      }
    }
  }
}
"""

STENCIL = """
func jacobi(B: f32[N, N], A: f32[N, N]) {
  for i = 1 to N - 1 {
    for j = 1 to N - 1 {
      S0: B[i, j] = 0.2 * (A[i, j] + A[i - 1, j] + A[i + 1, j] + A[i, j - 1] + A[i, j + 1])
    }
  }
}
"""


def timed(module, *args, **options) -> float:
    """CPU seconds of one run after a warm-up (CPU time: the machine is shared)."""
    interpret(module, *args, **options)   # compile + warm up
    start = time.process_time()
    interpret(module, *args, **options)
    return time.process_time() - start


def main() -> None:
    rng = np.random.default_rng(0)
    for dt, np_dt in (("f32", np.float32), ("f64", np.float64)):
        module = parse(GEMM.replace("DT", dt))
        for n in (64, 128, 160):
            A, B = rng.random((n, n)).astype(np_dt), rng.random((n, n)).astype(np_dt)
            C = np.zeros((n, n), np_dt)
            on = timed(module, C, A, B)
            off = timed(module, C, A, B, check_bounds=False)
            print(f"gemm {dt} N={n}: {on:.3f}s checks on, {off:.3f}s off, "
                  f"{n ** 3 / on / 1e6:.2f} M iterations/s")
    guarded = parse(GEMM.replace("DT", "f32").replace(
        "        S0: C[i, j] = C[i, j] + A[i, k] * B[k, j]",
        "        if (k >= 0) {\n          S0: C[i, j] = C[i, j] + A[i, k] * B[k, j]\n        }"))
    n = 128
    A, B, C = rng.random((n, n)).astype(np.float32), rng.random((n, n)).astype(np.float32), \
        np.zeros((n, n), np.float32)
    on, off = timed(guarded, C, A, B), timed(guarded, C, A, B, check_bounds=False)
    print(f"gemm f32 N={n} under an if (checks not hoisted): {on:.3f}s checks on, {off:.3f}s off")
    module = parse(STENCIL)
    n = 512
    A, B = rng.random((n, n)).astype(np.float32), np.zeros((n, n), np.float32)
    on = timed(module, B, A)
    print(f"jacobi 2-d f32 N={n}: {on:.3f}s ({(n - 2) ** 2 / on / 1e6:.2f} M points/s)")
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from tests.interpreter.test_gpu import mma_source, tiled
    tiled_mm = parse(tiled())
    n = 64
    A, B = rng.random((n, n)).astype(np.float32), rng.random((n, n)).astype(np.float32)
    C = np.zeros((n, n), np.float32)
    print(f"GPU tiled matmul kernel (8x8 blocks, shared memory, barriers) N={n}: "
          f"{timed(tiled_mm, C, A, B):.3f}s")
    mma = parse(mma_source("m16n16k16.f16.f32", "f16", "row"))
    n = 256
    A, B = rng.random((n, n)).astype(np.float16), rng.random((n, n)).astype(np.float16)
    C = np.zeros((n, n), np.float32)
    print(f"fragment MMA kernel N={n}: {timed(mma, C, A, B):.3f}s")


if __name__ == "__main__":
    main()
