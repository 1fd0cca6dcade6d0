"""A dynamic-shape model called at 10 (batch, sequence) sizes: compile once, recompiles, speed.

polyir: ``polyir.compile(model, example, dynamic=True)`` once (cold: empty
disk cache), then a call at every size; ``recompiles`` counts the plans it
built after the first. At each size the dynamic plan is timed against a
specialised build for that size (``ratio_dynamic_vs_static``: the price of
symbolic sizes) and against Inductor's ``torch.compile(model, dynamic=True)``,
interleaved. Inductor's compile time is its first call less one eager call;
its recompiles are dynamo's ``unique_graphs`` after the first.

The model is the demo's TransformerBlock (d_model 64, 4 heads, causal
attention); sizes avoid 1 (a size of 1 broadcasts and is compiled apart, by
polyir and by dynamo alike) and the first sequence length differs from
d_model (dynamo would otherwise give both one symbol).
"""
from __future__ import annotations

import tempfile
import time
from typing import Any

import torch

from bench.caches import (
    drop_inductor_memory_caches,
    drop_polyir_memory_caches,
    inductor_cache,
    polyir_cache,
    session_dir,
    warm_up_inductor,
    warm_up_polyir,
)
from bench.config import cpu_target
from bench.timing import interleaved_medians, median_seconds, ratio
from polyir.frontends.demo_models import TransformerBlock

FULL_SIZES = [(2, 7), (3, 16), (4, 32), (8, 12), (2, 48), (6, 20), (5, 9), (8, 64), (3, 3), (16, 24)]
QUICK_SIZES = [(2, 7), (3, 16), (4, 5)]
D_MODEL = 64


def _polyir(model: torch.nn.Module, sizes: list[tuple[int, int]]) -> tuple[Any, float]:
    import polyir

    with tempfile.TemporaryDirectory() as cache_dir, polyir_cache(cache_dir), torch.no_grad():
        drop_polyir_memory_caches()
        example = torch.randn(*sizes[0], D_MODEL)
        start = time.perf_counter()
        compiled = polyir.compile(model, (example,), target=cpu_target(), dynamic=True)
        return compiled, time.perf_counter() - start


def _inductor(model: torch.nn.Module, example: torch.Tensor) -> tuple[Any, float]:
    import torch._dynamo

    with inductor_cache(session_dir("inductor")), torch.no_grad():
        eager = median_seconds(lambda: model(example), repeats=3)
        drop_inductor_memory_caches()
        torch._dynamo.utils.counters.clear()
        compiled = torch.compile(model, backend="inductor", dynamic=True)
        start = time.perf_counter()
        compiled(example)
        return compiled, max(time.perf_counter() - start - eager, 0.0)


def run(quick: bool) -> list[dict[str, Any]]:
    """A summary row (compile times, recompiles) and one row per size."""
    import torch._dynamo

    import polyir

    sizes = QUICK_SIZES if quick else FULL_SIZES
    repeats = 5 if quick else 15
    warm_up_polyir()
    if not quick:
        warm_up_inductor()
    torch.manual_seed(0)
    model = TransformerBlock(d_model=D_MODEL, heads=4).eval()
    summary: dict[str, Any] = {"size": "all", "sizes": len(sizes)}
    notes: list[str] = []
    dynamic, summary["polyir_compile_s"] = _polyir(model, sizes)
    inductor = None
    if not quick:
        try:
            inductor, summary["inductor_compile_s"] = _inductor(model, torch.randn(*sizes[0], D_MODEL))
        except Exception as error:
            notes.append(f"Inductor failed: {type(error).__name__}: {str(error)[:160]}")
    else:
        notes.append("Inductor skipped (--quick)")
    rows = []
    with torch.no_grad(), polyir_cache(session_dir("polyir")):
        for batch, length in sizes:
            x = torch.randn(batch, length, D_MODEL)
            expected = model(x)
            row: dict[str, Any] = {"size": f"{batch}x{length}"}
            torch.testing.assert_close(dynamic(x), expected, rtol=1e-3, atol=1e-3)
            static = polyir.compile(model, (x,), target=cpu_target())
            contenders = {"polyir_dynamic": lambda x=x: dynamic(x),
                          "polyir_static": lambda x=x, s=static: s(x)}
            if inductor is not None:
                with inductor_cache(session_dir("inductor")):
                    torch.testing.assert_close(inductor(x), expected, rtol=1e-3, atol=1e-3)
                contenders["inductor_dynamic"] = lambda x=x: inductor(x)
            samples = interleaved_medians(contenders, repeats, warmup=2, min_seconds=0.01)
            for who, sample in samples.items():
                row[f"{who}_s"] = sample.median
            row["ratio_dynamic_vs_static"] = ratio(row.get("polyir_dynamic_s"), row.get("polyir_static_s"))
            row["ratio_vs_inductor"] = ratio(row.get("polyir_dynamic_s"), row.get("inductor_dynamic_s"))
            print(f"  {row}", flush=True)
            rows.append(row)
    summary["polyir_recompiles"] = dynamic.compiles - 1
    if inductor is not None:
        summary["inductor_recompiles"] = int(torch._dynamo.utils.counters["stats"]["unique_graphs"]) - 1
    summary["ratio_compile_vs_inductor"] = ratio(summary.get("polyir_compile_s"),
                                                 summary.get("inductor_compile_s"))
    if notes:
        summary["note"] = "; ".join(notes)
    print(f"  {summary}", flush=True)
    return [summary] + rows
