"""``python -m bench [--quick] [--out DIR] [--sections kernels,models,...]``.

Runs polyir against numpy, torch eager and torch.compile (Inductor) in one
process on this machine, prints a table of medians and ratios, and writes
``results.json``, ``scaling.png`` and ``ratios.png`` to ``--out``
(default ``bench/results``). Ratios above 1 mean polyir is slower.
Sections: kernels (corpus vs numpy), models (vs eager and Inductor), fusion
(nests and intermediate bytes before and after fusion, and the time of both
builds, realistic model sizes included), attention (fused attention vs
scaled_dot_product_attention and Inductor), tiling (matrix products through
auto-tile vs numpy, f32/f64, 1 and 2 threads), conv (ResNet-18/50 and MobileNetV2
convolutions vs torch's own, oneDNN), compile
(cold/warm compile time vs Inductor), scaling (N stacked layers), dynamic
(one dynamic=True compile called at 10 sizes vs specialised builds and Inductor), native
(bench/cpu_bench.py), gpu (target="cuda"; nothing without a GPU), jax_models
(polyir.jax.jit vs jax.jit on XLA CPU, run and compile time), polly (the corpus kernels
written as C and compiled by clang-22 -O3 with and without Polly).
"""
from __future__ import annotations

import argparse
import json
import sys
import time
import traceback
from pathlib import Path
from typing import Any

from bench.timing import machine_description


def _threads_label() -> str:
    from bench import config
    return "all cores" if config.THREADS is None else str(config.THREADS)

SECTIONS = ("kernels", "models", "fusion", "attention", "tiling", "conv", "compile", "scaling",
            "dynamic", "native", "gpu", "jax_models", "polly")
FORMAT = 1
"""Version of the layout of results.json (bump when fields change meaning)."""


def run_sections(sections: list[str], quick: bool) -> dict[str, Any]:
    """The report: machine, mode, each section's rows, timings and notes."""
    report: dict[str, Any] = {
        "format": FORMAT,
        "mode": "quick" if quick else "full",
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "command": " ".join(["python -m bench", *sys.argv[1:]]),
        "machine": machine_description(),
        "threads": _threads_label(),
        "section_seconds": {},
        "notes": {},
        "failed_sections": [],
    }
    for section in sections:
        print(f"== {section} ==", flush=True)
        start = time.perf_counter()
        try:
            module = __import__(f"bench.{section}", fromlist=["run"])
            report[section] = module.run(quick=quick)
            note = getattr(module, "NOTE", None)
            if note:
                report["notes"][section] = note
        except Exception as error:  # keep the other sections' figures
            traceback.print_exc()
            report[section] = []
            report["notes"][section] = f"section failed: {type(error).__name__}: {error}"
            report["failed_sections"].append(section)
        report["section_seconds"][section] = round(time.perf_counter() - start, 2)
    from bench.caches import WARMUP_SECONDS
    report["warmup_seconds"] = {k: round(v, 2) for k, v in WARMUP_SECONDS.items()}
    report["finished"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes and few repetitions")
    parser.add_argument("--out", default="bench/results", help="folder for results.json and the PNGs")
    parser.add_argument("--threads", type=int, default=None,
                        help="threads for polyir, torch and BLAS alike (default: all cores)")
    parser.add_argument("--sections", default=",".join(SECTIONS),
                        help=f"comma-separated subset of {','.join(SECTIONS)}")
    args = parser.parse_args(argv)
    sections = [s for s in args.sections.split(",") if s]
    unknown = sorted(set(sections) - set(SECTIONS))
    if unknown:
        parser.error(f"unknown sections {unknown}; choose from {SECTIONS}")

    if args.threads is not None and args.threads < 1:
        parser.error("--threads must be at least 1")
    from bench.config import configure_threads
    configure_threads(args.threads)

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    report = run_sections(sections, args.quick)

    from bench.report import print_tables, write_plots
    print_tables(report)
    path = out / "results.json"
    path.write_text(json.dumps(report, indent=2, default=str))
    print(f"\nwrote {path}")
    for png in write_plots(report, out):
        print(f"wrote {png}")
    return 1 if report["failed_sections"] else 0


if __name__ == "__main__":
    sys.exit(main())
