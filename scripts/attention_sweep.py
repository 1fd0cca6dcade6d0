"""Fused attention against torch's SDPA at sequence 2048, one head, f32, for
several query-block and key-tile sizes of ``online-reductions`` (issue 15).

Each configuration is ``polyir.compile`` of ``F.scaled_dot_product_attention``
with the default CPU pipeline but ``online-reductions{rows=R tile=T}``,
checked against eager, then timed interleaved with eager's SDPA (medians of
15 calls each). Usage::

    PYTHONPATH=. python scripts/attention_sweep.py THREADS HEAD_DIM 48x256 24x256 48x512
"""
from __future__ import annotations

import sys
import time

import numpy as np
import torch

import polyir
from polyir.target import cpu


class Attention(torch.nn.Module):
    """Plain (non-causal) scaled dot-product attention."""

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.scaled_dot_product_attention(q, k, v)


def main() -> None:
    threads, depth, length = int(sys.argv[1]), int(sys.argv[2]), 2048
    torch.set_num_threads(threads)
    model = Attention().eval()
    q, k, v = (torch.randn(1, 1, length, depth) for _ in range(3))
    parallel = f",mark-parallel{{outermost=true min_trip={threads}}}" if threads > 1 else ""
    contenders = {"sdpa": lambda: model(q, k, v)}
    with torch.no_grad():
        want = model(q, k, v)
        for config in sys.argv[3:]:
            rows, tile = config.split("x")
            pipeline = (f"fuse,online-reductions{{rows={rows} tile={tile}}},single-pass-moments,"
                        f"shrink-buffers,distribute,auto-tile{{zero_pad=true reassociate=true}}"
                        f"{parallel},split-guards")
            compiled = polyir.compile(model, (q, k, v), target=cpu(threads), pipeline=pipeline)
            torch.testing.assert_close(compiled(q, k, v), want, rtol=1e-4, atol=1e-4)
            contenders[config] = lambda compiled=compiled: compiled(q, k, v)
        samples: dict[str, list[float]] = {name: [] for name in contenders}
        for _ in range(15):
            for name, call in contenders.items():
                start = time.perf_counter()
                call()
                samples[name].append(time.perf_counter() - start)
    base = float(np.median(samples["sdpa"]))
    for name, seconds in samples.items():
        print(f"{name:>8}  {np.median(seconds) * 1e3:8.2f} ms  {np.median(seconds) / base:.3f} x sdpa")


if __name__ == "__main__":
    main()
