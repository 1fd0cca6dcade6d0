"""polyir's time over eager's for ``bench.models`` models at given batch sizes,
from one checkout: the A/B tool for comparing two commits on this noisy
machine (run it once per checkout, alternating, pinned to one core).

Each model is compiled with ``polyir.compile`` (checked against eager), then
both are timed interleaved in 30 blocks of 20 calls (100 at batch 1), one
intra-op thread; the figure is the ratio of the block medians, with polyir's
time per call. Usage (every other job stopped, one core)::

    taskset -c 1 python scripts/model_ratios.py CHECKOUT causal_attention:8 transformer_block:1

``CHECKOUT`` is the root of the polyir tree to import (``.`` for this one).
"""
from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path


def main() -> None:
    tree = str(Path(sys.argv[1]).resolve())
    sys.path.insert(0, tree)
    import torch

    import polyir
    from bench.config import configure_threads
    from bench.models import make

    if not polyir.__file__ or not polyir.__file__.startswith(tree):
        raise SystemExit(f"polyir imported from {polyir.__file__}, not from {tree}")
    configure_threads(1)
    figures = []
    for spec in sys.argv[2:]:
        name, batch = spec.split(":")
        model, inputs = make(name, int(batch))
        with torch.no_grad():
            compiled = polyir.compile(model, inputs)
            torch.testing.assert_close(compiled(*inputs), model(*inputs), rtol=1e-3, atol=1e-3)
            times: dict[str, list[float]] = {"eager": [], "polyir": []}
            calls = 20 if int(batch) > 1 else 100
            for _ in range(30):
                for key, run in (("eager", model), ("polyir", compiled)):
                    start = time.perf_counter()
                    for _ in range(calls):
                        run(*inputs)
                    times[key].append((time.perf_counter() - start) / calls)
        eager, ours = (statistics.median(times[k]) for k in ("eager", "polyir"))
        figures.append(f"{spec}={ours / eager:.2f}({ours * 1e6:.0f}us)")
    print(Path(tree).name, " ".join(figures), flush=True)


if __name__ == "__main__":
    main()
