"""``python -m bench [--quick] [--out DIR] [--sections kernels,models,compile,scaling]``.

Runs polyir against numpy, torch eager and torch.compile (Inductor) in one
process on this machine, prints a table of medians and ratios, and writes
``results.json``, ``scaling.png`` and ``ratios.png`` to ``--out``
(default ``bench/results``). Ratios above 1 mean polyir is slower.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from bench.timing import machine_description

SECTIONS = ("kernels", "models", "compile", "scaling", "gpu")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes and few repetitions")
    parser.add_argument("--out", default="bench/results", help="folder for results.json and the PNGs")
    parser.add_argument("--sections", default=",".join(SECTIONS),
                        help=f"comma-separated subset of {','.join(SECTIONS)}")
    args = parser.parse_args(argv)
    sections = [s for s in args.sections.split(",") if s]
    unknown = sorted(set(sections) - set(SECTIONS))
    if unknown:
        parser.error(f"unknown sections {unknown}; choose from {SECTIONS}")

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    report: dict[str, Any] = {
        "mode": "quick" if args.quick else "full",
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "machine": machine_description(),
    }
    for section in sections:
        module = __import__(f"bench.{section}", fromlist=["run"])
        print(f"== {section} ==", flush=True)
        report[section] = module.run(quick=args.quick)

    from bench.report import print_tables, write_plots
    print_tables(report)
    path = out / "results.json"
    path.write_text(json.dumps(report, indent=2, default=str))
    print(f"\nwrote {path}")
    for png in write_plots(report, out):
        print(f"wrote {png}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
