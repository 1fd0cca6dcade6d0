"""Matrix products through ``auto-tile`` against numpy (OpenBLAS), same run.

``python -m bench --sections tiling [--quick]`` (or ``python -m bench.tiling``)
compiles the textbook kernel ``C = 0; C[i, j] += A[i, k] * B[k, j]`` (symbolic
extents) with the default CPU pipeline (``fuse,online-reductions,shrink-buffers,
distribute,auto-tile``; on 2 threads ``auto-tile`` runs the row blocks in
parallel, its default on a multi-core target) and ``fast_math``
(as ``polyir.compile`` uses it), checks it against ``A @ B`` and times both,
interleaved, for f32 and f64 at 256^3 ... 2048^3 (``--quick``: 256^3 on one
thread), on 1 thread and on 2 threads (numpy's OpenBLAS is given the same
number of threads through its ``set_num_threads`` entry point, so both
thread counts are measured in one process). Ratio = polyir time / numpy
time (below 1: polyir faster). The ``textbook`` row (1024^3 f32, 1 thread, not
quick) is the same kernel without ``auto-tile``.
"""
from __future__ import annotations

import ctypes
import glob
import os
import time
from collections.abc import Callable
from typing import Any

import numpy as np

import polyir
from bench.timing import interleaved_medians, ratio, record_medians
from polyir.driver import compile_ir, default_pipeline
from polyir.target import cpu

MATMUL = """func mm(C: {t}[M, N], A: {t}[M, K], B: {t}[K, N]) {{
  for i = 0 to M {{
    for j = 0 to N {{
      S0: C[i, j] = 0.0:{t}
    }}
    for k = 0 to K {{
      for j2 = 0 to N {{
        S1: C[i, j2] = C[i, j2] + A[i, k] * B[k, j2]
      }}
    }}
  }}
}}"""

NOTE = "textbook C = A @ B (symbolic extents), default pipeline with auto-tile, fast_math; numpy = OpenBLAS"


SETTLE_S = 0.2
"""Rows on more than one thread: the pause before each contender's turn
(``interleaved_medians``' ``settle``), longer than OpenBLAS's threads spin
after a call, so that polyir's team and OpenBLAS's do not take turns stealing
each other's core (on two cores, an interleaved run kept polyir's team from
starting in time on every dispatch: it ran serially)."""


def _blas_threads() -> Callable[[int], None] | None:
    """numpy's OpenBLAS ``set_num_threads`` (``None`` when not found)."""
    import numpy
    libs = glob.glob(os.path.join(os.path.dirname(numpy.__file__), os.pardir, "numpy.libs", "*openblas*.so*"))
    for path in libs:
        lib = ctypes.CDLL(path)
        for name in ("scipy_openblas_set_num_threads64_", "openblas_set_num_threads64_",
                     "openblas_set_num_threads"):
            fn = getattr(lib, name, None)
            if fn is not None:
                fn.argtypes = [ctypes.c_int]
                return lambda n, fn=fn: fn(n)
    return None


def bench_matmul(n: int, dtype: str, threads: int, repeats: int, pipeline: str | None = None
                 ) -> dict[str, Any]:
    """One row: polyir and numpy seconds for an ``n``^3 product on ``threads``."""
    row: dict[str, Any] = {"name": "matmul" if pipeline is None else "matmul textbook",
                           "shape": f"{n}^3", "dtype": dtype, "threads": threads}
    target = cpu(threads)
    if pipeline is None:
        pipeline = default_pipeline(target)  # auto-tile runs the row blocks in parallel on 2
    start = time.perf_counter()
    executable = compile_ir(polyir.parse(MATMUL.format(t=dtype)), target, pipeline, cache_dir=None,
                            fast_math=True)
    row["compile_s"] = round(time.perf_counter() - start, 2)
    plans = [r.why.split(":")[0] + ": " + r.why.split(": ")[1] for r in executable.remarks
             if r.pass_name == "auto-tile" and r.kind == "applied"]
    row["plan"] = "; ".join(plans)
    rng = np.random.default_rng(0)
    np_type = np.float32 if dtype == "f32" else np.float64
    A = rng.standard_normal((n, n)).astype(np_type)
    B = rng.standard_normal((n, n)).astype(np_type)
    C = np.empty((n, n), np_type)
    executable(C, A, B)
    expected = A @ B
    tolerance = 1e-3 if dtype == "f32" else 1e-9
    if not np.allclose(C, expected, rtol=tolerance, atol=tolerance * n ** 0.5):
        row["note"] = f"wrong result: max error {float(np.abs(C - expected).max())}"
        return row
    out = np.empty_like(C)
    samples = interleaved_medians({"polyir": lambda: executable(C, A, B),
                                   "numpy": lambda: np.matmul(A, B, out=out)}, repeats,
                                  settle=SETTLE_S if threads > 1 else 0.0)
    record_medians(row, samples)
    row["ratio_vs_numpy"] = ratio(row["polyir_s"], row["numpy_s"])
    row["polyir_gflops"] = round(2 * n ** 3 / row["polyir_s"] / 1e9, 1)
    row["numpy_gflops"] = round(2 * n ** 3 / row["numpy_s"] / 1e9, 1)
    return row


def bench_thread_scaling(n: int, repeats: int, set_threads: Callable[[int], None]) -> dict[str, Any]:
    """One row: the f32 ``n``^3 product compiled for 1 and for 2 threads, and
    numpy on 1 and 2 threads, all four timed interleaved (the fairest
    comparison on a shared machine); ``polyir_2_vs_1`` = 2-thread time / 1-thread time."""
    row: dict[str, Any] = {"name": "matmul 2 vs 1 threads", "shape": f"{n}^3", "dtype": "f32",
                           "threads": 2}
    executables = {}
    for threads in (1, 2):
        target = cpu(threads)
        executables[threads] = compile_ir(polyir.parse(MATMUL.format(t="f32")), target,
                                          default_pipeline(target), cache_dir=None, fast_math=True)
    rng = np.random.default_rng(0)
    A = rng.standard_normal((n, n)).astype(np.float32)
    B = rng.standard_normal((n, n)).astype(np.float32)
    C = np.empty((n, n), np.float32)
    out = np.empty_like(C)

    def numpy_on(threads: int) -> Callable[[], None]:
        def call() -> None:
            set_threads(threads)
            np.matmul(A, B, out=out)
        return call

    samples = interleaved_medians({"polyir_1": lambda: executables[1](C, A, B),
                                   "polyir_2": lambda: executables[2](C, A, B),
                                   "numpy_1": numpy_on(1), "numpy_2": numpy_on(2)}, repeats,
                                  settle=SETTLE_S)
    seconds = {name: sample.median for name, sample in samples.items()}
    row.update({f"{name}_s": value for name, value in seconds.items()})
    row["polyir_s"], row["numpy_s"] = seconds["polyir_2"], seconds["numpy_2"]
    row["ratio_vs_numpy"] = ratio(seconds["polyir_2"], seconds["numpy_2"])
    row["polyir_2_vs_1"] = ratio(seconds["polyir_2"], seconds["polyir_1"])
    row["numpy_2_vs_1"] = ratio(seconds["numpy_2"], seconds["numpy_1"])
    return row


def run(quick: bool) -> list[dict[str, Any]]:
    """Every row (see the module docstring)."""
    set_threads = _blas_threads()
    sizes = (256,) if quick else (256, 512, 1024, 2048)
    thread_counts = [1] if set_threads is None or quick else [1, 2]
    rows: list[dict[str, Any]] = []
    for threads in thread_counts:
        if set_threads is not None:
            set_threads(threads)
        for dtype in ("f32", "f64"):
            for n in sizes:
                repeats = 3 if quick else (5 if n >= 2048 else 9)
                row = bench_matmul(n, dtype, threads, repeats)
                rows.append(row)
                print(f"  {row['name']} {dtype} {n}^3 {threads} thread(s): ratio "
                      f"{row.get('ratio_vs_numpy')} ({row.get('polyir_gflops')} vs "
                      f"{row.get('numpy_gflops')} GFLOPS) {row.get('note', '')}", flush=True)
    if not quick and set_threads is not None:
        for n in (1024, 2048):
            row = bench_thread_scaling(n, 9 if n < 2048 else 5, set_threads)
            rows.append(row)
            print(f"  {row['name']} {n}^3: polyir {row['polyir_2_vs_1']}, numpy "
                  f"{row['numpy_2_vs_1']} (2-thread time / 1-thread time)", flush=True)
    if not quick:
        if set_threads is not None:
            set_threads(1)
        rows.append(bench_matmul(1024, "f32", 1, 3, pipeline="fuse,shrink-buffers"))
    return rows


def main() -> None:
    import argparse
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    from bench.report import print_table
    rows = run(args.quick)
    print_table("matrix products (auto-tile) vs numpy", rows,
                ["name", "shape", "dtype", "threads", "polyir_s", "numpy_s", "ratio_vs_numpy",
                 "polyir_gflops", "numpy_gflops", "polyir_2_vs_1", "numpy_2_vs_1", "compile_s",
                 "note"])


if __name__ == "__main__":
    main()
