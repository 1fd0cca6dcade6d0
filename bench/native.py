"""The CPU engineer's micro-benchmarks (bench/cpu_bench.py) as a section of ``python -m bench``.

Hand-written IR (a register-tiled matmul, an elementwise chain) built by the
native backend, against numpy and against the same code run serially.
``cpu_bench`` reports ``peer / polyir``; rows here carry ``ratio`` the other way
round, like every other section (polyir time / peer time, below 1: polyir
faster), and keep the original as ``speedup``.
"""
from __future__ import annotations

from typing import Any

from bench.timing import ratio


def run(quick: bool) -> list[dict[str, Any]]:
    """``cpu_bench.run(quick)`` with the ratio turned round."""
    from bench import config, cpu_bench
    from polyir.target import cpu

    rows = []
    for original in cpu_bench.run(quick):
        row = dict(original)
        row["speedup"] = original.get("ratio")
        row["ratio"] = ratio(original.get("polyir_s"), original.get("peer_s"))
        if row.get("peer") == "numpy" and config.THREADS is not None and config.THREADS != cpu().cores:
            mine = f"polyir on {cpu().cores} cores (cpu_bench ignores --threads), numpy on {config.THREADS}"
            row["note"] = "; ".join(filter(None, [original.get("note"), mine]))
        print(f"  {row['name']} {row['shape']}: polyir {row['polyir_s']:.3g} s, "
              f"{row['peer']} {row['peer_s']:.3g} s", flush=True)
        rows.append(row)
    return rows
