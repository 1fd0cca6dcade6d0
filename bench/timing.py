"""Timing helpers: medians over repetitions, and a description of the machine."""
from __future__ import annotations

import os
import platform
import statistics
import time
from typing import Any, Callable


def median_seconds(fn: Callable[[], Any], repeats: int = 5, warmup: int = 1,
                   min_seconds: float = 0.0) -> float:
    """Median wall time of ``fn()`` over ``repeats`` runs after ``warmup`` runs.

    When one run is shorter than ``min_seconds``, each sample times a batch of
    calls and is divided by the batch size.
    """
    for _ in range(warmup):
        fn()
    batch = 1
    if min_seconds > 0:
        start = time.perf_counter()
        fn()
        once = time.perf_counter() - start
        batch = max(1, int(min_seconds / max(once, 1e-9)))
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(batch):
            fn()
        samples.append((time.perf_counter() - start) / batch)
    return statistics.median(samples)


def time_once(fn: Callable[[], Any]) -> tuple[float, Any]:
    """Seconds taken by one call of ``fn`` and its result."""
    start = time.perf_counter()
    result = fn()
    return time.perf_counter() - start, result


def machine_description() -> dict[str, Any]:
    """Processor, cores, memory and library versions of this run."""
    info: dict[str, Any] = {
        "platform": platform.platform(),
        "python": platform.python_version(),
        "cores": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
    }
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    info["cpu"] = line.split(":", 1)[1].strip()
                    break
        with open("/proc/meminfo") as f:
            info["memory_gib"] = round(int(f.readline().split()[1]) / 2**20, 1)
    except OSError:
        pass
    for name in ("numpy", "torch", "llvmlite", "islpy"):
        try:
            module = __import__(name)
            info[name] = getattr(module, "__version__", "?")
        except ImportError:
            info[name] = None
    info["OPENBLAS_CORETYPE"] = os.environ.get("OPENBLAS_CORETYPE")
    return info
