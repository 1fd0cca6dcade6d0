"""Timing helpers: medians over repetitions, and a description of the machine.

On a shared machine the load changes while a benchmark runs, so peers are
timed *interleaved* (:func:`interleaved_medians`): each repetition times every
contender once, in turn, and the medians are taken afterwards. Ratios of such
medians are much steadier than the absolute times.
"""
from __future__ import annotations

import os
import platform
import statistics
import subprocess
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any


def median_seconds(fn: Callable[[], Any], repeats: int = 5, warmup: int = 1,
                   min_seconds: float = 0.0) -> float:
    """Median wall time of ``fn()`` over ``repeats`` runs after ``warmup`` runs.

    When one run is shorter than ``min_seconds``, each sample times a batch of
    calls and is divided by the batch size.
    """
    return interleaved_medians({"fn": fn}, repeats, warmup=warmup,
                               min_seconds=min_seconds)["fn"].median


class Samples:
    """Seconds per call of one contender: every sample, and their median."""

    def __init__(self, seconds: list[float]):
        if not seconds:
            raise ValueError("no samples")
        self.seconds = seconds

    @property
    def median(self) -> float:
        return statistics.median(self.seconds)

    @property
    def spread(self) -> float:
        """Interquartile range over the median (0 for fewer than 4 samples)."""
        if len(self.seconds) < 4:
            return 0.0
        q1, _, q3 = statistics.quantiles(self.seconds, n=4)
        return (q3 - q1) / self.median if self.median > 0 else 0.0


def interleaved_medians(contenders: Mapping[str, Callable[[], Any]], repeats: int, *,
                        warmup: int = 1, min_seconds: float = 0.0,
                        setup: Callable[[str], Any] | None = None,
                        settle: float = 0.0) -> dict[str, Samples]:
    """Time each of ``contenders`` ``repeats`` times, in turn, and return their samples.

    ``warmup`` untimed calls of each come first. ``setup(name)``, when given, runs
    before every call of contender ``name`` and is not timed (it restores the
    inputs of in-place kernels); then each sample is one call. Without ``setup``
    a contender faster than ``min_seconds`` is called in batches and each sample
    is the batch time over the batch size.

    ``settle`` (seconds, for multi-threaded contenders): before each turn, a
    pause of that long and one untimed call. Thread pools spin after a call
    (OpenBLAS's for about 0.1 s), so without it a contender's threads compete
    for the cores with the previous contender's still-spinning ones; with it,
    each is timed with its own pool awake and the others' asleep.
    """
    for name, fn in contenders.items():
        for _ in range(warmup):
            if setup is not None:
                setup(name)
            fn()
    batches: dict[str, int] = {}
    for name, fn in contenders.items():
        batches[name] = 1
        if setup is None and min_seconds > 0:
            start = time.perf_counter()
            fn()
            once = time.perf_counter() - start
            batches[name] = max(1, min(10_000, int(min_seconds / max(once, 1e-9))))
    samples: dict[str, list[float]] = {name: [] for name in contenders}
    for _ in range(repeats):
        for name, fn in contenders.items():
            if setup is not None:
                setup(name)
            batch = batches[name]
            if settle > 0:
                time.sleep(settle)
                fn()
                if setup is not None:
                    setup(name)
            start = time.perf_counter()
            for _ in range(batch):
                fn()
            samples[name].append((time.perf_counter() - start) / batch)
    return {name: Samples(seconds) for name, seconds in samples.items()}


def record_medians(row: dict[str, Any], samples: Mapping[str, Samples]) -> None:
    """``row[f"{who}_s"]`` (the median) and ``row[f"{who}_spread"]`` for each contender."""
    for who, sample in samples.items():
        row[f"{who}_s"] = sample.median
        row[f"{who}_spread"] = round(sample.spread, 3)


def time_once(fn: Callable[[], Any]) -> tuple[float, Any]:
    """Seconds taken by one call of ``fn`` and its result."""
    start = time.perf_counter()
    result = fn()
    return time.perf_counter() - start, result


def ratio(numerator: float | None, denominator: float | None) -> float | None:
    """``numerator / denominator``, or ``None`` when either is missing or zero."""
    if not numerator or not denominator:
        return None
    return numerator / denominator


def _git_commit() -> str | None:
    root = Path(__file__).resolve().parent.parent
    try:
        result = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True,
                                text=True, timeout=10, check=False)
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=root,
                               capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    if result.returncode != 0:
        return None
    return result.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")


def machine_description() -> dict[str, Any]:
    """Processor, cores, memory, load, GPU and library versions of this run."""
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
    try:
        info["load_average"] = [round(x, 2) for x in os.getloadavg()]
    except OSError:
        pass
    for name in ("numpy", "torch", "llvmlite", "islpy", "cupy"):
        try:
            module = __import__(name)
            info[name] = getattr(module, "__version__", "?")
        except ImportError:
            info[name] = None
    try:
        import torch
        info["torch_threads"] = torch.get_num_threads()
        info["gpu"] = torch.cuda.get_device_name(0) if torch.cuda.is_available() else None
    except Exception:  # a broken CUDA install must not stop the CPU benchmarks
        info["gpu"] = None
    info["OPENBLAS_CORETYPE"] = os.environ.get("OPENBLAS_CORETYPE")
    info["git_commit"] = _git_commit()
    return info
