"""Attention on the CPU: polyir's fused attention against torch.

For ``F.scaled_dot_product_attention`` (batch 1, 1 head, causal and not) at
sequence 512-2048 and head dim 64 and 128 it times, interleaved: polyir with
the default pipeline (``fuse,online-reductions,shrink-buffers``: one
traversal over key tiles per query row), polyir without the online rewrite
(``fuse,shrink-buffers``: a score row per query), torch eager's SDPA (its CPU
flash-attention kernel) and Inductor; medians and ratios (above 1: polyir is
slower). Then the transformer block of the models section before and after.
Run with one thread for steady ratios: ``python -m bench --threads 1 --sections attention``.
"""
from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

import polyir
from bench.caches import polyir_cache, session_dir, warm_up_inductor, warm_up_polyir
from bench.config import cpu_target
from bench.models import compile_inductor, make
from bench.timing import interleaved_medians, ratio, record_medians

NOTE = ("polyir: default pipeline (online-reductions); polyir_rows: fuse,shrink-buffers only; "
        "polyir_blocked: online-reductions{rows=48 tile=192}; ratios are polyir over the peer")
BEFORE = "fuse,shrink-buffers"
BLOCKED = "fuse,online-reductions{rows=48 tile=192},single-pass-moments,shrink-buffers,distribute,auto-tile"
"""polyir_blocked: 48 query rows against each key tile of 192 (``polyir.fusion.online_rows``)."""


class Attention(torch.nn.Module):
    """``F.scaled_dot_product_attention(q, k, v, is_causal=causal)``."""

    def __init__(self, causal: bool):
        super().__init__()
        self.causal = causal

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return F.scaled_dot_product_attention(q, k, v, is_causal=self.causal)


def _row(label: str, model: torch.nn.Module, inputs: tuple[Any, ...], repeats: int,
         with_rows: bool, with_inductor: bool = True, with_blocked: bool = False) -> dict[str, Any]:
    target = cpu_target()
    with polyir_cache(session_dir("polyir")):
        fused = polyir.compile(model, inputs, target=target)
        rows = polyir.compile(model, inputs, target=target, pipeline=BEFORE) if with_rows else None
        blocked = polyir.compile(model, inputs, target=target, pipeline=BLOCKED) if with_blocked else None
    contenders = {"polyir": lambda: fused(*inputs), "eager": lambda: model(*inputs)}
    if with_inductor:
        inductor = compile_inductor(model, inputs)
        contenders["inductor"] = lambda: inductor(*inputs)
    if rows is not None:
        contenders["polyir_rows"] = lambda: rows(*inputs)
    if blocked is not None:
        contenders["polyir_blocked"] = lambda: blocked(*inputs)
    with torch.no_grad():
        want = model(*inputs)
        error = float((fused(*inputs) - want).abs().max())
        samples = interleaved_medians(contenders, repeats, min_seconds=0.05)
    row: dict[str, Any] = {"case": label, "max_abs_error": error}
    record_medians(row, samples)
    for peer in ("eager", "inductor", "polyir_rows"):
        if f"{peer}_s" in row:
            row[f"vs_{peer}"] = ratio(row["polyir_s"], row[f"{peer}_s"])
    if "polyir_blocked_s" in row:
        row["blocked_vs_eager"] = ratio(row["polyir_blocked_s"], row["eager_s"])
    print(f"  {label:34s} polyir {row['polyir_s'] * 1e3:8.2f} ms  eager {row['eager_s'] * 1e3:8.2f} ms"
          + (f"  inductor {row['inductor_s'] * 1e3:8.2f} ms" if with_inductor else "")
          + (f"  rows {row['polyir_rows_s'] * 1e3:8.2f} ms" if rows is not None else "")
          + f"  x eager {row['vs_eager']:.2f}"
          + (f"  blocked x eager {row['blocked_vs_eager']:.2f}" if blocked is not None else ""), flush=True)
    return row


def run(quick: bool = False) -> list[dict[str, Any]]:
    """The rows: SDPA cases, then the transformer models before/after
    (``quick``: one small case, no Inductor, no GPT-2 block)."""
    warm_up_polyir()
    torch.manual_seed(0)
    if quick:
        q, k, v = (torch.randn(1, 1, 128, 64) for _ in range(3))
        return [_row("sdpa T=128 D=64", Attention(False).eval(), (q, k, v), 3, with_rows=True,
                     with_inductor=False)]
    warm_up_inductor()
    rows: list[dict[str, Any]] = []
    for length in (512, 1024, 2048):
        for depth in (64, 128):
            for causal in (False, True):
                q, k, v = (torch.randn(1, 1, length, depth) for _ in range(3))
                label = f"sdpa T={length} D={depth}{' causal' if causal else ''}"
                rows.append(_row(label, Attention(causal).eval(), (q, k, v), 5,
                                 with_rows=length <= 1024, with_blocked=True))
    model, inputs = make("transformer_block", 1)
    rows.append(_row("transformer_block b=1 (models section)", model.eval(), inputs, 5, with_rows=True))
    from bench.fusion import GPT2Block
    gpt2 = GPT2Block().eval()
    tokens = torch.randn(1, 512, 768)
    rows.append(_row("GPT-2-small block T=512", gpt2, (tokens,), 3, with_rows=True))
    return rows
