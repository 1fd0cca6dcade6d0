"""Cold compile time of bench models (issue 17): the median of a few cold compiles.

Each compile is ``polyir.compile(model, inputs)`` (default CPU target) into a
fresh, empty disk cache (``POLYIR_CACHE_DIR`` pointed at a new temporary
folder), after ``bench.caches.drop_polyir_memory_caches`` (which also empties
the isl memo, ``polyir.polyhedral.memo.ISL_MEMO``, where the tree has one);
polyir's one-time process costs are paid first on a throwaway model. Prints
one JSON line per model, with the isl memo's counters of the last compile
when the tree has the memo, and the median of the compiling process' CPU
seconds next to the wall-clock median. Usage::

    PYTHONPATH=. python scripts/compile_time.py transformer_encoder small_cnn --repeats 3
"""
from __future__ import annotations

import argparse
import importlib
import json
import statistics
import tempfile
import time
from typing import Any

import torch

from bench.caches import drop_polyir_memory_caches, polyir_cache, warm_up_polyir
from bench.models import make


def cold_seconds(name: str) -> tuple[float, float]:
    """Wall-clock and this process' CPU seconds of one cold ``polyir.compile`` of
    bench model ``name`` at batch 1 (the CPU figure leaves out the LLVM worker
    process and most of the noise of a shared machine)."""
    import polyir
    model, inputs = make(name, 1)
    with tempfile.TemporaryDirectory() as directory, polyir_cache(directory), torch.no_grad():
        drop_polyir_memory_caches()
        start, cpu = time.perf_counter(), time.process_time()
        polyir.compile(model, inputs)
        return time.perf_counter() - start, time.process_time() - cpu


def memo_counters() -> dict[str, Any]:
    """The isl memo's hits, misses and bypassed lookups per kind ({} without a memo)."""
    try:
        memo = importlib.import_module("polyir.polyhedral.memo").ISL_MEMO
    except ModuleNotFoundError:
        return {}
    return {"hits": dict(memo.hits), "misses": dict(memo.misses), "bypassed": dict(memo.bypassed)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="+", help="names in bench.models.MODELS")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    warm_up_polyir()
    for name in args.models:
        runs = [cold_seconds(name) for _ in range(args.repeats)]
        walls, cpus = [wall for wall, _ in runs], [cpu for _, cpu in runs]
        print(json.dumps({"model": name, "median_s": round(statistics.median(walls), 2),
                          "median_cpu_s": round(statistics.median(cpus), 2),
                          "runs_s": [round(r, 2) for r in walls], "memo": memo_counters()}), flush=True)


if __name__ == "__main__":
    main()
