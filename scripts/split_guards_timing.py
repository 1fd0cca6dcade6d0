"""Time benchmark models compiled with the default CPU pipeline and with the same
pipeline without ``split-guards``, against torch eager (one thread, batch 8):
cold compile seconds (best of 2, each in a fresh cache folder) and the median
over 3 rounds of polyir/eager ratios (10 interleaved calls each).

    PYTHONPATH=$PWD python scripts/split_guards_timing.py [MODEL ...]

``MODEL``: names from ``bench.models.MODELS`` (default residual_block small_cnn
transformer_block).
"""
from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

import torch

import polyir
from bench.models import make
from polyir.driver import default_pipeline


def _median_seconds(fn: Callable[[], Any], calls: int = 10) -> float:
    samples = []
    for _ in range(calls):
        begin = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - begin)
    return statistics.median(samples)


def measure(name: str, pipeline: str, batch: int = 8) -> tuple[float, float]:
    """(cold compile seconds, polyir/eager time ratio) of model ``name``."""
    compile_s = []
    for _ in range(2):
        os.environ["POLYIR_CACHE_DIR"] = tempfile.mkdtemp()
        model, inputs = make(name, batch)
        begin = time.perf_counter()
        compiled = polyir.compile(model, inputs, pipeline=pipeline)
        compiled(*inputs)
        compile_s.append(time.perf_counter() - begin)
    ratios = []
    with torch.no_grad():
        for _ in range(3):
            ours = _median_seconds(lambda: compiled(*inputs))
            eager = _median_seconds(lambda: model(*inputs))
            ratios.append(ours / eager)
    return min(compile_s), statistics.median(ratios)


def main(names: list[str]) -> None:
    torch.set_num_threads(1)
    with_pass = default_pipeline("cpu")
    without = with_pass.replace(",split-guards", "")
    for name in names:
        for label, pipeline in (("without split-guards", without), ("default", with_pass)):
            seconds, ratio = measure(name, pipeline)
            print(f"{name:20s} {label:22s} compile {seconds:6.2f} s   polyir/eager {ratio:6.2f}",
                  flush=True)


if __name__ == "__main__":
    main(sys.argv[1:] or ["residual_block", "small_cnn", "transformer_block"])
