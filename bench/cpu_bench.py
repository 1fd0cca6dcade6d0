"""Native CPU backend benchmarks: polyir vs numpy, and parallel vs serial polyir.

``run(quick)`` returns rows ``{name, shape, dtype, polyir_s, peer, peer_s, ratio, note}``
where ``polyir_s`` and ``peer_s`` are median wall-clock seconds over repeated
calls (compilation excluded; the two are timed alternately, so that both see
the same machine load) and ``ratio = polyir_s / peer_s`` (below 1: polyir is
faster; the convention of ``python -m bench``).
Run ``python -m bench.cpu_bench [--quick]`` for a table.

The matrix product is written directly in IR with a hand-chosen tiling (polyir's
tiling passes come later): a 4 x 64 register tile of ``C`` accumulated in a
local buffer over the whole ``k`` range, rows of tiles in parallel. numpy's
matmul calls OpenBLAS (multi-threaded, FMA; its speed can depend on
``OPENBLAS_CORETYPE``), reported as is.
"""
from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from typing import Any

import numpy as np

import polyir
from polyir.cpu.jit import build_cpu
from polyir.target import cpu

TILE_ROWS, TILE_COLS = 4, 64

MATMUL = f"""
func matmul(C: f32[N, M], A: f32[N, K], B: f32[K, M]) {{
  local acc: f32[{TILE_ROWS}, {TILE_COLS}] @local
  for i0 = 0 to N step {TILE_ROWS} parallel {{
    for j0 = 0 to M step {TILE_COLS} {{
      for r = 0 to {TILE_ROWS} {{
        for c = 0 to {TILE_COLS} {{
          S0: acc[r, c] = 0.0
        }}
      }}
      for k = 0 to K {{
        for r = 0 to {TILE_ROWS} {{
          for c = 0 to {TILE_COLS} {{
            S1: acc[r, c] = acc[r, c] + A[i0 + r, k] * B[k, j0 + c]
          }}
        }}
      }}
      for r = 0 to {TILE_ROWS} {{
        for c = 0 to {TILE_COLS} {{
          S2: C[i0 + r, j0 + c] = acc[r, c]
        }}
      }}
    }}
  }}
}}
"""
"""``C = A @ B`` for N a multiple of 4 and M a multiple of 64."""

CHAIN = """
func chain(y: f32[N], x: f32[N], a: f32[], b: f32[]) {
  for i = 0 to N parallel {
    S0: y[i] = tanh(a[] * x[i] + b[]) * x[i]
  }
}
"""
"""``y = tanh(a*x + b) * x``."""


def paired_medians(first: Callable[[], Any], second: Callable[[], Any],
                   repeats: int) -> tuple[float, float]:
    """Median wall-clock seconds of ``first()`` and ``second()``, timed alternately
    (after one warm-up call each) so that both see the same machine load."""
    first()
    second()
    times: tuple[list[float], list[float]] = ([], [])
    for _ in range(repeats):
        for call, into in ((first, times[0]), (second, times[1])):
            start = time.perf_counter()
            call()
            into.append(time.perf_counter() - start)
    return statistics.median(times[0]), statistics.median(times[1])


def concurrency_check(work: Callable[[], Any], repeats: int) -> tuple[float, float]:
    """Median seconds of ``work()`` on one thread and of ``work()`` on each of two
    threads at once. Their ratio is about 1 when two cores are free for this
    process and about 2 when other load leaves it one: read the parallel rows
    in that light."""
    import threading

    def both() -> None:
        threads = [threading.Thread(target=work) for _ in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()

    two, one = paired_medians(both, work, repeats)
    return two, one


def _row(name: str, shape: str, polyir_s: float, peer: str, peer_s: float, note: str) -> dict:
    return {"name": name, "shape": shape, "dtype": "f32", "polyir_s": polyir_s, "peer": peer,
            "peer_s": peer_s, "ratio": polyir_s / peer_s, "note": note}


def run(quick: bool) -> list[dict]:
    """Benchmark rows (see the module docstring); ``quick`` uses fewer repetitions."""
    repeats = 5 if quick else 20
    cores = cpu().cores
    rows: list[dict] = []
    rng = np.random.default_rng(0)
    with tempfile.TemporaryDirectory() as cache:
        matmul = build_cpu(polyir.parse(MATMUL), cpu(cores), cache_dir=cache)
        matmul_serial = build_cpu(polyir.parse(MATMUL), cpu(1), cache_dir=cache)
        chain = build_cpu(polyir.parse(CHAIN), cpu(cores), cache_dir=cache)
        chain_serial = build_cpu(polyir.parse(CHAIN), cpu(1), cache_dir=cache)

    for n in (256, 512):
        A = rng.standard_normal((n, n), dtype=np.float32)
        B = rng.standard_normal((n, n), dtype=np.float32)
        C = np.empty((n, n), np.float32)
        matmul(C, A, B)
        np.testing.assert_allclose(C, A @ B, rtol=1e-3, atol=1e-3 * np.sqrt(n))
        shape = f"{n}x{n}x{n}"
        polyir_s, numpy_s = paired_medians(lambda C=C, A=A, B=B: matmul(C, A, B),
                                           lambda A=A, B=B: A @ B, repeats)
        rows.append(_row("matmul", shape, polyir_s, "numpy", numpy_s,
                         f"hand-tiled IR, {cores} cores; numpy = OpenBLAS"))
        polyir_s, serial_s = paired_medians(lambda C=C, A=A, B=B: matmul(C, A, B),
                                            lambda C=C, A=A, B=B: matmul_serial(C, A, B), repeats)
        rows.append(_row(f"matmul parallel ({cores} cores)", shape, polyir_s, "polyir serial",
                         serial_s, "same IR, cores=1"))

    C = np.empty((256, 256), np.float32)
    A = rng.standard_normal((256, 256), dtype=np.float32)
    two, one = concurrency_check(lambda: matmul_serial(C, A, A), repeats)
    rows.append(_row("machine check: 2 threads at once", "256x256x256", two, "1 thread", one,
                     "serial matmul per thread; ratio ~1: 2 free cores, ~2: one"))

    size = 1 << 22
    x = rng.standard_normal(size, dtype=np.float32)
    y = np.empty_like(x)
    a, b = np.float32(0.5), np.float32(0.25)
    chain(y, x, a, b)
    np.testing.assert_allclose(y, np.tanh(a * x + b) * x, rtol=1e-5, atol=1e-6)
    polyir_s, numpy_s = paired_medians(lambda: chain(y, x, a, b),
                                       lambda: np.tanh(a * x + b) * x, repeats)
    rows.append(_row("tanh(a*x+b)*x", "2^22", polyir_s, "numpy", numpy_s,
                     f"fused, inline vector tanh, {cores} cores"))
    polyir_s, serial_s = paired_medians(lambda: chain(y, x, a, b),
                                        lambda: chain_serial(y, x, a, b), repeats)
    rows.append(_row(f"tanh(a*x+b)*x parallel ({cores} cores)", "2^22", polyir_s,
                     "polyir serial", serial_s, "same IR, cores=1"))
    return rows


def format_rows(rows: list[dict]) -> str:
    """A fixed-width table; ratio = polyir time / peer time."""
    lines = [f"{'benchmark':36} {'shape':12} {'polyir ms':>10} {'peer':>14} {'peer ms':>10} "
             f"{'ratio':>7}"]
    for r in rows:
        lines.append(f"{r['name']:36} {r['shape']:12} {r['polyir_s'] * 1e3:10.3f} "
                     f"{r['peer']:>14} {r['peer_s'] * 1e3:10.3f} {r['ratio']:7.2f}")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repetitions")
    print(format_rows(run(parser.parse_args().quick)))


if __name__ == "__main__":
    main()
