"""Compile-time scaling on a stack of N identical layers, N = 1, 2, 4, ..., 32."""
from __future__ import annotations

import tempfile
from typing import Any

import torch

from bench.compile import inductor_compile_seconds, polyir_compile_seconds
from bench.models import LayerStack


def run(quick: bool) -> list[dict[str, Any]]:
    counts = [1, 2, 4] if quick else [1, 2, 4, 8, 16, 32]
    rows = []
    for n in counts:
        torch.manual_seed(0)
        model, inputs = LayerStack(n).eval(), (torch.randn(1, 64),)
        row: dict[str, Any] = {"layers": n}
        with torch.no_grad(), tempfile.TemporaryDirectory() as cache_dir:
            try:
                row["polyir_s"] = polyir_compile_seconds(model, inputs, cache_dir)
            except Exception as error:
                row["note"] = f"polyir failed: {type(error).__name__}: {str(error)[:120]}"
            if not quick or n == 1:
                row["inductor_s"] = inductor_compile_seconds(model, inputs)
        print(f"  N={n}: {row}", flush=True)
        rows.append(row)
    return rows
