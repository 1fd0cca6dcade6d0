"""The corpus kernels: ``polyir.kernel`` (native CPU) against their numpy formulations.

For every kernel of ``polyir.testing.corpus.CORPUS``:

1. the numpy formulation (``bench.numpy_kernels``) is checked against the
   plain-Python kernel at the corpus' own small sizes;
2. at the benchmark size, polyir's compile time is measured cold (empty disk
   cache, no in-process cache) and warm (populated disk cache; medians of 3 in
   the full run), and polyir's result is checked against numpy's;
3. polyir and numpy are timed interleaved; the inputs are restored (untimed)
   before every call, since the kernels update them in place.
4. ``polyir_fast_s`` / ``ratio_fast_math_vs_numpy``: the same kernel compiled with
   ``polyir.kernel(..., fast_math=True)`` (reassociation and FMA contraction
   allowed, as numpy's BLAS and pairwise sums do), timed in the same interleaved
   run and checked against numpy within tolerance. The default build stays
   bit-equal to the plain Python function, so a sum's adds stay in order: an
   exact f32 ``dot`` is one chain of dependent adds, latency-bound, which no
   schedule can vectorise; this column says what the kernel costs when the user
   allows what numpy does.

Arrays are float32 (``int-arith`` stays int64, ``gather-rows`` indices int32;
the ``dtype`` column lists them).
The time of a polyir call includes the ``Kernel`` call overhead (binding the
arguments), as a user sees it.
"""
from __future__ import annotations

import statistics
import tempfile
import time
from collections.abc import Mapping
from typing import Any

import numpy as np

from bench.caches import drop_polyir_memory_caches, polyir_cache, warm_up_polyir
from bench.config import cpu_target
from bench.numpy_kernels import NO_FORMULATION, NUMPY_KERNELS
from bench.timing import interleaved_medians, ratio

DTYPE = np.float32

MEDIUM: dict[str, dict[str, int]] = {
    "gemm": {"ni": 256, "nj": 256, "nk": 256},
    "2mm": {"ni": 192, "nj": 192, "nk": 192, "nl": 192},
    "trmm": {"m": 256, "n": 256},
    "syrk": {"n": 256, "m": 256},
    "gemver": {"n": 1000},
    "mvt": {"n": 1000},
    "atax": {"m": 1000, "n": 1000},
    "bicg": {"n": 1000, "m": 1000},
    "jacobi-1d": {"n": 1 << 18, "tsteps": 20},
    "jacobi-2d": {"n": 512, "tsteps": 10},
    "seidel-2d": {"n": 256, "tsteps": 5},
    "heat-3d": {"n": 64, "tsteps": 5},
    "boundary-stencil": {"n": 1024, "m": 1024},
    "conv2d-pad": {"h": 512, "w": 512, "k": 5, "pad": 2},
    "trisolv": {"n": 2000},
    "backsolve": {"n": 2000},
    "lu": {"n": 256},
    "cholesky": {"n": 256},
    "floyd-warshall": {"n": 256},
    "dot": {"n": 1 << 20},
    "row-norms": {"n": 1024, "m": 1024},
    "softmax-rows": {"n": 1024, "m": 1024},
    "covariance": {"n": 1024, "m": 256},
    "correlation": {"n": 1024, "m": 256},
    "suffix-sum": {"n": 1 << 20},
    "strided-backward": {"n": 1 << 20},
    "saxpy": {"n": 1 << 20},
    "gather-rows": {"v": 8192, "n": 8192, "d": 64},
    "clamp": {"n": 1 << 20},
    "int-arith": {"n": 1 << 20},
}
"""Benchmark sizes of the full run (medium: a few milliseconds per call)."""

QUICK_SCALE = 4
"""``--quick`` divides every extent by this (time steps, padding and filter kept)."""
_FIXED = {"tsteps", "pad", "k"}


def sizes_for(name: str, quick: bool) -> dict[str, int]:
    """The sizes ``name`` is benchmarked at."""
    sizes = MEDIUM[name]
    if not quick:
        return dict(sizes)
    return {k: v if k in _FIXED else max(8, v // QUICK_SCALE) for k, v in sizes.items()}


def _copy(args: list[Any]) -> list[Any]:
    return [a.copy() if isinstance(a, np.ndarray) else a for a in args]


def _tolerance(dtype: Any) -> float:
    return 2e-3 if np.dtype(dtype).kind == "f" and np.dtype(dtype).itemsize <= 4 else 1e-9


def _mismatch(name: str, got: list[Any], want: list[Any]) -> str | None:
    """``None`` when every array argument of ``got`` is close to ``want``, else what differs."""
    for position, (have, expected) in enumerate(zip(got, want, strict=True)):
        if not isinstance(expected, np.ndarray):
            continue
        tolerance = _tolerance(expected.dtype)
        scale = max(1.0, float(np.max(np.abs(expected))) if expected.size else 1.0)
        if not np.allclose(have, expected, rtol=tolerance, atol=tolerance * scale, equal_nan=True):
            error = float(np.max(np.abs(have.astype(np.float64) - expected)))
            return f"argument {position} differs (max abs error {error:.3g})"
    return None


def check_formulation(name: str) -> str | None:
    """Run the numpy formulation against the plain-Python kernel at the corpus sizes."""
    from polyir.testing.corpus import corpus_kernel

    kernel = corpus_kernel(name)
    args = kernel.make_args(kernel.sizes, np.random.default_rng(1), dtype=DTYPE)
    expected, got = _copy(args), _copy(args)
    kernel.func(*expected)
    NUMPY_KERNELS[name](*got)
    return _mismatch(name, got, expected)


def compile_seconds(func: Any, args: list[Any], cache_dir: str) -> tuple[float, Any]:
    """Seconds to make ``polyir.kernel(func)`` and compile it for ``args`` with
    ``cache_dir`` as the disk cache and nothing in memory; and the kernel."""
    import polyir

    with polyir_cache(cache_dir):
        drop_polyir_memory_caches()
        start = time.perf_counter()
        kernel = polyir.kernel(func, target=cpu_target())
        kernel.compile_for(*args)
        return time.perf_counter() - start, kernel


def bench_kernel(name: str, sizes: Mapping[str, int], repeats: int,
                 compile_repeats: int = 1) -> dict[str, Any]:
    """One row: compile times (medians of ``compile_repeats`` fresh caches), medians of
    ``repeats`` calls, ratio and notes for corpus kernel ``name``."""
    from polyir.testing.corpus import corpus_kernel

    kernel = corpus_kernel(name)
    row: dict[str, Any] = {"name": name, "shape": ",".join(f"{k}={v}" for k, v in sizes.items()),
                           "dtype": np.dtype(DTYPE).name}
    notes: list[str] = []
    formulation = NUMPY_KERNELS.get(name)
    if formulation is None:
        notes.append(NO_FORMULATION.get(name, "no numpy formulation"))
    else:
        problem = check_formulation(name)
        row["numpy_checked"] = problem is None
        if problem:
            notes.append(f"numpy formulation differs from plain Python: {problem}")
            formulation = None

    pristine = kernel.make_args(sizes, np.random.default_rng(0), dtype=DTYPE)
    row["dtype"] = ",".join(dict.fromkeys(a.dtype.name for a in pristine if isinstance(a, np.ndarray)))
    work = {"polyir": _copy(pristine), "numpy": _copy(pristine)}
    contenders: dict[str, Any] = {}
    try:
        cold_times, warm_times = [], []
        for _ in range(compile_repeats):
            with tempfile.TemporaryDirectory() as cache_dir:
                seconds, cold = compile_seconds(kernel.func, work["polyir"], cache_dir)
                cold_times.append(seconds)
                seconds, compiled = compile_seconds(kernel.func, work["polyir"], cache_dir)
                warm_times.append(seconds)
            if any(getattr(e, "cache_hit", False) for e in cold.cache.values()):
                notes.append("the cold compile hit the cache")
            if not all(getattr(e, "cache_hit", False) for e in compiled.cache.values()):
                notes.append("the warm compile missed the cache")
        row["compile_cold_s"] = statistics.median(cold_times)
        row["compile_warm_s"] = statistics.median(warm_times)
        compiled(*work["polyir"])
        contenders["polyir"] = lambda: compiled(*work["polyir"])
    except Exception as error:  # report it and keep measuring the others
        notes.append(f"polyir failed: {type(error).__name__}: {str(error)[:160]}")
    try:
        import polyir
        work["polyir_fast"] = _copy(pristine)
        with tempfile.TemporaryDirectory() as cache_dir, polyir_cache(cache_dir):
            fast = polyir.kernel(kernel.func, target=cpu_target(), fast_math=True)
            fast.compile_for(*work["polyir_fast"])
        fast(*work["polyir_fast"])
        contenders["polyir_fast"] = lambda: fast(*work["polyir_fast"])
    except Exception as error:
        notes.append(f"polyir fast_math failed: {type(error).__name__}: {str(error)[:160]}")
    if formulation is not None:
        formulation(*work["numpy"])
        if "polyir" in contenders:
            problem = _mismatch(name, work["polyir"], work["numpy"])
            row["polyir_checked"] = problem is None
            if problem:
                notes.append(f"polyir differs from numpy: {problem}")
        if "polyir_fast" in contenders:
            problem = _mismatch(name, work["polyir_fast"], work["numpy"])
            row["polyir_fast_checked"] = problem is None
            if problem:
                notes.append(f"polyir fast_math differs from numpy: {problem}")
        contenders["numpy"] = lambda: formulation(*work["numpy"])

    def restore(who: str) -> None:
        for target, source in zip(work[who], pristine, strict=True):
            if isinstance(source, np.ndarray):
                np.copyto(target, source)

    if contenders:
        samples = interleaved_medians(contenders, repeats, setup=restore)
        for who, sample in samples.items():
            row[f"{who}_s"] = sample.median
            row[f"{who}_spread"] = round(sample.spread, 3)
    if row.get("polyir_checked", True):
        row["ratio_vs_numpy"] = ratio(row.get("polyir_s"), row.get("numpy_s"))
    if row.get("polyir_fast_checked", True):
        row["ratio_fast_math_vs_numpy"] = ratio(row.get("polyir_fast_s"), row.get("numpy_s"))
    if notes:
        row["note"] = "; ".join(dict.fromkeys(notes))
    return row


def run(quick: bool) -> list[dict[str, Any]]:
    """Every corpus kernel (see the module docstring)."""
    from polyir.testing.corpus import CORPUS

    warm_up_polyir()
    repeats = 3 if quick else 20
    rows = []
    for entry in CORPUS:
        if entry.name not in MEDIUM:
            rows.append({"name": entry.name, "note": "no benchmark size (new corpus kernel?)"})
            continue
        row = bench_kernel(entry.name, sizes_for(entry.name, quick), repeats,
                           compile_repeats=1 if quick else 3)
        print(f"  {entry.name}: polyir {row.get('polyir_s')}, numpy {row.get('numpy_s')}"
              f"{', ' + row['note'] if row.get('note') else ''}", flush=True)
        rows.append(row)
    return rows
