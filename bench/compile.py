"""Compile time of each model: polyir cold (empty cache), polyir warm, Inductor."""
from __future__ import annotations

import os
import tempfile
from typing import Any

import torch

from bench.models import MODELS, make
from bench.timing import time_once


def polyir_compile_seconds(model: torch.nn.Module, inputs: tuple[Any, ...], cache_dir: str) -> float:
    """Seconds to compile and run once with polyir, using ``cache_dir`` as the disk cache."""
    import polyir
    from polyir.cpu import cache

    previous = os.environ.get("POLYIR_CACHE_DIR")
    os.environ["POLYIR_CACHE_DIR"] = cache_dir
    try:
        cache.clear_memory_cache()
        seconds, _ = time_once(lambda: polyir.compile(model, inputs, target="cpu")(*inputs))
    finally:
        if previous is None:
            os.environ.pop("POLYIR_CACHE_DIR", None)
        else:
            os.environ["POLYIR_CACHE_DIR"] = previous
    return seconds


def inductor_compile_seconds(model: torch.nn.Module, inputs: tuple[Any, ...]) -> float:
    """Seconds for torch.compile (Inductor) to compile and run once, minus one eager run."""
    import torch._dynamo

    torch._dynamo.reset()
    compiled = torch.compile(model)
    seconds, _ = time_once(lambda: compiled(*inputs))
    eager, _ = time_once(lambda: model(*inputs))
    return max(seconds - eager, 0.0)


def run(quick: bool) -> list[dict[str, Any]]:
    names = ["mlp_layernorm"] if quick else list(MODELS)
    rows = []
    for name in names:
        model, inputs = make(name, 1)
        row: dict[str, Any] = {"model": name}
        with torch.no_grad(), tempfile.TemporaryDirectory() as cache_dir:
            try:
                row["polyir_cold_s"] = polyir_compile_seconds(model, inputs, cache_dir)
                row["polyir_warm_s"] = polyir_compile_seconds(model, inputs, cache_dir)
            except Exception as error:
                row["note"] = f"polyir failed: {type(error).__name__}: {str(error)[:120]}"
            row["inductor_s"] = inductor_compile_seconds(model, inputs)
        if row.get("polyir_cold_s"):
            row["ratio_cold_vs_inductor"] = row["polyir_cold_s"] / row["inductor_s"]
        print(f"  {name}: {row}", flush=True)
        rows.append(row)
    return rows
