"""The cost of checked bounds (``polyir.cpu.bounds``): checked / unchecked time per call.

    python -m bench.bounds            # corpus kernels (small and medium sizes) and models

Each row times the same compiled code with ``check_bounds`` on and off,
interleaved, and prints the medians and their ratio (above 1: the check costs
that fraction). The check is an isl test once per distinct tuple of sizes
(memoised) plus, for gathers, a numpy min/max over the ids on every call.
"""
from __future__ import annotations

import sys
from typing import Any

import numpy as np

from bench.timing import interleaved_medians


def _kernel_rows(repeats: int) -> list[tuple[str, float, float]]:
    import polyir
    from bench.kernels import MEDIUM
    from polyir.testing.corpus import corpus_kernel

    rows = []
    for name in ("gemm", "jacobi-2d", "boundary-stencil", "gather-rows", "saxpy", "dot"):
        entry = corpus_kernel(name)
        for label, sizes in (("corpus sizes", entry.sizes), ("medium", MEDIUM.get(name))):
            if sizes is None:
                continue
            args = entry.make_args(sizes, np.random.default_rng(0), dtype=np.float32)
            checked = polyir.kernel(entry.func)
            unchecked = polyir.kernel(entry.func, check_bounds=False)
            checked(*[a.copy() if isinstance(a, np.ndarray) else a for a in args])
            unchecked(*[a.copy() if isinstance(a, np.ndarray) else a for a in args])
            samples = interleaved_medians({"checked": lambda c=checked, a=args: c(*a),
                                           "unchecked": lambda u=unchecked, a=args: u(*a)},
                                          repeats, min_seconds=0.01)
            rows.append((f"{name} ({label})", samples["checked"].median,
                         samples["unchecked"].median))
    return rows


def _model_rows(repeats: int) -> list[tuple[str, float, float]]:
    import torch

    import polyir
    from bench.models import make

    class Embedder(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embed = torch.nn.Embedding(1000, 64)
            self.proj = torch.nn.Linear(64, 64)

        def forward(self, ids: Any) -> Any:
            return torch.relu(self.proj(self.embed(ids)))

    cases: list[tuple[str, Any, tuple[Any, ...]]] = []
    for name in ("mlp_layernorm", "transformer_block"):
        model, inputs = make(name, 1)
        cases.append((name, model, inputs))
    cases.append(("embedding+linear (32 ids)", Embedder().eval(), (torch.randint(0, 1000, (32,)),)))
    rows = []
    with torch.no_grad():
        for name, model, inputs in cases:
            checked = polyir.compile(model, inputs)
            unchecked = polyir.compile(model, inputs, check_bounds=False)
            samples = interleaved_medians({"checked": lambda c=checked, a=inputs: c(*a),
                                           "unchecked": lambda u=unchecked, a=inputs: u(*a)},
                                          repeats, min_seconds=0.01)
            rows.append((name, samples["checked"].median, samples["unchecked"].median))
    return rows


def main(argv: list[str]) -> None:
    repeats = 15
    rows = _kernel_rows(repeats) + _model_rows(repeats)
    print(f"{'case':40s} {'checked s':>12s} {'unchecked s':>12s} {'ratio':>7s}")
    for name, checked, unchecked in rows:
        print(f"{name:40s} {checked:12.3e} {unchecked:12.3e} {checked / unchecked:7.3f}")


if __name__ == "__main__":
    main(sys.argv[1:])
