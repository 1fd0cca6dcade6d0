"""Compile-time scaling on a stack of N identical layers, N = 1, 2, 4, ..., 32.

Each N is compiled cold and warm (see ``bench.compile``) by polyir and, in the
full run, by Inductor (medians of 3 in the full run). ``loop_nests`` is the number of loop nests polyir
lowered, a measure of the code it compiles; ``cold_vs_1_layer`` is polyir's cold
time over its time for one layer (the goal: at most 40 at N = 32, linear).
"""
from __future__ import annotations

from typing import Any

import torch

from bench.caches import warm_up_inductor, warm_up_polyir
from bench.compile import cold_and_warm
from bench.models import LayerStack
from bench.timing import ratio

FULL_COUNTS = [1, 2, 4, 8, 16, 32]
QUICK_COUNTS = [1, 2, 4]


def run(quick: bool) -> list[dict[str, Any]]:
    """One row per N: polyir (and Inductor) compile seconds, cold and warm."""
    counts = QUICK_COUNTS if quick else FULL_COUNTS
    warm_up_polyir()
    if not quick:
        warm_up_inductor()
    rows = []
    for n in counts:
        torch.manual_seed(0)
        model, inputs = LayerStack(n).eval(), (torch.randn(8, 64),)
        row: dict[str, Any] = {"layers": n}
        row.update(cold_and_warm(model, inputs, repeats=1 if quick else 3, inductor=not quick))
        row["cold_vs_1_layer"] = ratio(row.get("polyir_cold_s"), rows[0].get("polyir_cold_s")) \
            if rows else 1.0
        print(f"  N={n}: {row}", flush=True)
        rows.append(row)
    return rows
