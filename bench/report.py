"""Tables and pictures from a benchmark report.

``python -m bench.report results.json`` prints the tables of a saved run again;
``--markdown`` prints them as Markdown (for bench/README.md); ``--plots DIR``
redraws the PNGs; ``--compare OLD.json`` lists how each polyir time and ratio
changed since an earlier run (bench/baseline/results.json is the first one).
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

# section -> (title, columns)
TABLES: dict[str, tuple[str, list[str]]] = {
    "kernels": ("corpus kernels, native CPU: polyir vs numpy (seconds per call)",
                ["name", "shape", "dtype", "polyir_s", "numpy_s", "ratio_vs_numpy",
                 "polyir_fast_s", "ratio_fast_math_vs_numpy", "compile_cold_s", "compile_warm_s",
                 "note"]),
    "models": ("models on CPU: polyir vs torch eager vs Inductor (seconds per call)",
               ["model", "batch", "shape", "polyir_s", "eager_s", "inductor_s", "ratio_vs_eager",
                "ratio_vs_inductor", "note"]),
    "compile": ("compile time, batch 1 (seconds; cold: empty disk cache, warm: populated)",
                ["model", "loop_nests", "polyir_cold_s", "polyir_warm_s", "inductor_cold_s",
                 "inductor_warm_s", "ratio_cold_vs_inductor", "ratio_warm_vs_inductor",
                 "inductor_graph_ops", "inductor_cold_nofastpath_s",
                 "ratio_cold_vs_inductor_nofastpath", "note"]),
    "scaling": ("compile-time scaling on a stack of N Linear-LayerNorm-GELU layers (seconds)",
                ["layers", "loop_nests", "polyir_cold_s", "polyir_warm_s", "inductor_cold_s",
                 "inductor_warm_s", "ratio_cold_vs_inductor", "cold_vs_1_layer", "note"]),
    "dynamic": ("dynamic shapes: one dynamic=True compile of TransformerBlock called at each size "
                "(seconds per call; the first row: compile seconds and recompiles)",
                ["size", "polyir_compile_s", "inductor_compile_s", "polyir_recompiles",
                 "inductor_recompiles", "polyir_dynamic_s", "polyir_static_s", "inductor_dynamic_s",
                 "ratio_dynamic_vs_static", "ratio_vs_inductor", "note"]),
    "tiling": ("matrix products through auto-tile vs numpy (seconds per call)",
               ["name", "shape", "dtype", "threads", "polyir_s", "numpy_s", "ratio_vs_numpy",
                "polyir_gflops", "numpy_gflops", "polyir_2_vs_1", "numpy_2_vs_1", "compile_s",
                "note"]),
    "conv": ("convolutions (ResNet-18/50, MobileNetV2 shapes) vs torch's own (seconds per call)",
             ["name", "shape", "dtype", "threads", "polyir_s", "torch_s", "ratio_vs_torch", "plan",
              "compile_s", "note"]),
    "native": ("native CPU micro-benchmarks (bench/cpu_bench.py)",
               ["name", "shape", "polyir_s", "peer", "peer_s", "ratio", "note"]),
    "gpu": ("GPU (target=\"cuda\")", ["name", "shape", "dtype", "polyir_s", "peer", "peer_s", "ratio",
                                     "note"]),
    "jax_models": ("JAX models on CPU: polyir.jax.jit vs jax.jit (XLA); seconds per call and to compile",
                   ["model", "batch", "shape", "loop_nests", "polyir_s", "xla_s", "ratio_vs_xla",
                    "polyir_compile_s", "xla_compile_s", "ratio_compile_vs_xla", "note"]),
    "polly": ("corpus kernels vs the same kernels in C, clang-22 -O3 with and without Polly "
              "(seconds per call)",
              ["name", "shape", "polyir_s", "clang_s", "polly_s", "polly_stripmine_s",
               "polly_parallel_s", "polly_best", "ratio_vs_polly_best", "ratio_vs_clang", "note"]),
}


GEOMETRIC_MEANS = ("kernels", "models", "compile", "scaling", "dynamic", "jax_models", "polly")
"""Sections whose ratio columns get a geometric mean (the others mix peers)."""


def _fmt(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.3g}"
    return str(value)


def print_table(title: str, rows: list[dict[str, Any]], columns: list[str]) -> None:
    """Print ``rows`` as a fixed-width table of ``columns``."""
    if not rows:
        return
    print(f"\n{title}")
    widths = [max(len(c), *(len(_fmt(r.get(c))) for r in rows)) for c in columns]
    print("  ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True)).rstrip())
    for row in rows:
        print("  ".join(_fmt(row.get(c)).ljust(w) for c, w in zip(columns, widths, strict=True)).rstrip())


def machine_line(report: dict[str, Any]) -> str:
    """One line describing the machine and the run."""
    m = report["machine"]
    return (f"{m.get('cpu', '?')}, {m.get('cores')} cores, {m.get('memory_gib')} GiB, "
            f"load {m.get('load_average')}, GPU {m.get('gpu') or 'none'}; python {m.get('python')}, "
            f"torch {m.get('torch')}, numpy {m.get('numpy')}, llvmlite {m.get('llvmlite')}; "
            f"commit {m.get('git_commit')}; mode {report['mode']}, started {report.get('started')}")


def load_warning(report: dict[str, Any]) -> str | None:
    """A warning when other work shared the machine while thread teams were in use."""
    machine = report["machine"]
    load, cores = (machine.get("load_average") or [0.0])[0], machine.get("cores") or 1
    if load > 0.5 * cores and report.get("threads", "all cores") != "1":
        return (f"warning: load average {load} on {cores} cores: multi-threaded timings (torch's "
                f"OpenMP, polyir's parallel loops) stall when a thread is descheduled; "
                f"--threads 1 gives steadier ratios")
    return None


def print_tables(report: dict[str, Any]) -> None:
    """Every section's table, the machine, and the notes of sections that measured nothing."""
    print(f"\nmachine: {machine_line(report)}")
    print(f"threads per contender: {report.get('threads', 'all cores')}")
    print("times are medians in seconds; ratio = polyir time / peer time (below 1: polyir faster)")
    warning = load_warning(report)
    if warning:
        print(warning)
    for section, (title, columns) in TABLES.items():
        print_table(title, report.get(section) or [], columns)
    for section, note in (report.get("notes") or {}).items():
        print(f"\n{section}: {note}")
    if report.get("warmup_seconds"):
        print(f"\none-time process warm-up before timing (s): {report['warmup_seconds']}")
    if report.get("section_seconds"):
        print(f"section wall times (s): {report['section_seconds']}")


def geometric_mean(values: list[float]) -> float | None:
    """The geometric mean of the positive ``values`` (``None`` without any)."""
    import math
    positive = [v for v in values if v and v > 0]
    if not positive:
        return None
    return math.exp(sum(math.log(v) for v in positive) / len(positive))


def markdown(report: dict[str, Any]) -> str:
    """The tables as Markdown, with the machine line and geometric means of the ratios."""
    lines = [f"Machine: {machine_line(report)}", ""]
    for section, (title, columns) in TABLES.items():
        rows = report.get(section) or []
        if not rows:
            continue
        lines += [f"**{title}**", "", "| " + " | ".join(columns) + " |",
                  "|" + "|".join("---" for _ in columns) + "|"]
        for row in rows:
            lines.append("| " + " | ".join(_fmt(row.get(c)).replace("|", "/") for c in columns) + " |")
        for column in columns if section in GEOMETRIC_MEANS else []:
            if column.startswith("ratio"):
                mean = geometric_mean([r.get(column) for r in rows if r.get(column)])
                if mean is not None:
                    lines.append(f"\nGeometric mean of {column}: {mean:.3g}")
        lines.append("")
    return "\n".join(lines)


def _ratio_bars(report: dict[str, Any]) -> list[tuple[str, list[tuple[str, float, str]]]]:
    """Panels of (label, ratio, colour) bars for ``ratios.png``."""
    kernels = [(f"{r['name']}", r["ratio_vs_numpy"], "tab:green" if r["ratio_vs_numpy"] < 1 else "tab:red")
               for r in report.get("kernels") or [] if r.get("ratio_vs_numpy")]
    models = []
    for row in report.get("models") or []:
        for peer, colour in (("eager", "tab:blue"), ("inductor", "tab:orange")):
            value = row.get(f"ratio_vs_{peer}")
            if value:
                models.append((f"{row['model']} b{row['batch']} vs {peer}", value, colour))
    others = [(f"{r['name']} {r.get('shape', '')} vs {r.get('peer')}", r["ratio"], "tab:purple")
              for section in ("native", "gpu") for r in report.get(section) or []
              if r.get("ratio") and not str(r.get("peer", "")).startswith(("polyir", "1 thread"))]
    panels = [("corpus kernels: polyir / numpy", kernels),
              ("models: polyir / eager (blue), / Inductor (orange)", models),
              ("native micro-benchmarks and GPU", others)]
    return [(title, bars) for title, bars in panels if bars]


def write_plots(report: dict[str, Any], out: Path) -> list[Path]:
    """``scaling.png`` and ``ratios.png`` (needs matplotlib; skipped with a note without it)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.ticker import NullFormatter
    except ImportError:
        print("matplotlib is not installed: no pictures (pip install 'polyir[plots]')")
        return []
    written = []
    scaling = report.get("scaling") or []
    if scaling:
        fig, ax = plt.subplots(figsize=(7, 4.5))
        series = (("polyir_cold_s", "polyir cold", "tab:blue", "-"),
                  ("polyir_warm_s", "polyir warm", "tab:blue", "--"),
                  ("inductor_cold_s", "Inductor cold", "tab:orange", "-"),
                  ("inductor_warm_s", "Inductor warm", "tab:orange", "--"))
        for key, label, colour, style in series:
            points = [(r["layers"], r[key]) for r in scaling if r.get(key)]
            if points:
                ax.plot(*zip(*points, strict=True), marker="o", color=colour, linestyle=style, label=label)
        first = next((r for r in scaling if r.get("polyir_cold_s")), None)
        if first is not None:
            layers = [r["layers"] for r in scaling]
            ax.plot(layers, [first["polyir_cold_s"] * n / first["layers"] for n in layers],
                    color="grey", linestyle=":", label="linear in N (from polyir cold)")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("identical Linear-LayerNorm-GELU layers N")
        ax.set_ylabel("compile time (s, log)")
        ax.set_title(f"Compile-time scaling ({report['mode']} run)")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend()
        fig.tight_layout()
        path = out / "scaling.png"
        fig.savefig(path, dpi=100)
        plt.close(fig)
        written.append(path)
    panels = _ratio_bars(report)
    if panels:
        heights = [0.22 * len(bars) + 0.8 for _, bars in panels]
        fig, axes = plt.subplots(len(panels), 1, figsize=(8, sum(heights) + 0.8),
                                 gridspec_kw={"height_ratios": heights}, squeeze=False)
        for ax, (title, bars) in zip(axes[:, 0], panels, strict=True):
            labels, values, colours = zip(*bars, strict=True)
            ax.barh(range(len(bars)), values, color=colours)
            for position, value in enumerate(values):
                ax.annotate(f"{value:.2g}", (value, position), xytext=(2, 0), textcoords="offset points",
                            va="center", fontsize=6)
            ax.xaxis.set_minor_formatter(NullFormatter())
            low, high = min(values + (1.0,)), max(values + (1.0,))
            ax.set_xlim(low / 1.5, high * 2.0)
            ax.set_yticks(range(len(bars)), labels, fontsize=7)
            ax.invert_yaxis()
            ax.axvline(1.0, color="black", linewidth=0.8)
            ax.set_xscale("log")
            ax.set_title(title, fontsize=9)
            ax.grid(True, axis="x", which="both", alpha=0.3)
        axes[-1, 0].set_xlabel("polyir time / peer time (log; below 1 = polyir faster)")
        fig.suptitle(f"Speed ratios ({report['mode']} run, medians)")
        fig.tight_layout(rect=(0, 0, 1, 0.985))
        path = out / "ratios.png"
        fig.savefig(path, dpi=100)
        plt.close(fig)
        written.append(path)
    return written


ROW_KEYS: dict[str, tuple[str, ...]] = {
    "kernels": ("name",), "models": ("model", "batch"), "compile": ("model",),
    "scaling": ("layers",), "dynamic": ("size",), "tiling": ("name", "shape", "dtype", "threads"),
    "conv": ("name", "threads"),
    "native": ("name", "shape"), "gpu": ("name", "shape", "peer"), "polly": ("name",),
}
"""The fields that identify a row of each section across runs."""


def compare(old: dict[str, Any], new: dict[str, Any]) -> list[dict[str, Any]]:
    """Rows present in both reports: each polyir time and ratio, before and after.

    ``change`` is new / old: below 1, polyir got faster (a time) or gained on its
    peer (a ratio).
    """
    changes = []
    for section, keys in ROW_KEYS.items():
        before = {tuple(r.get(k) for k in keys): r for r in old.get(section) or []}
        for row in new.get(section) or []:
            key = tuple(row.get(k) for k in keys)
            previous = before.get(key)
            if previous is None:
                continue
            for field in row:
                if not (field.startswith("ratio") or (field.startswith("polyir") and field.endswith("_s"))):
                    continue
                if isinstance(row[field], float) and isinstance(previous.get(field), float):
                    changes.append({"section": section, "row": " ".join(map(str, key)), "figure": field,
                                    "old": previous[field], "new": row[field],
                                    "change": row[field] / previous[field] if previous[field] else None})
    return changes


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.report", description=__doc__.splitlines()[0])
    parser.add_argument("results", help="a results.json written by python -m bench")
    parser.add_argument("--markdown", action="store_true", help="print Markdown tables")
    parser.add_argument("--plots", metavar="DIR", help="redraw the PNGs into DIR")
    parser.add_argument("--compare", metavar="OLD", help="a results.json to compare against "
                        "(for example bench/baseline/results.json)")
    args = parser.parse_args(argv)
    report = json.loads(Path(args.results).read_text())
    if args.compare:
        old = json.loads(Path(args.compare).read_text())
        print(f"old: {machine_line(old)}\nnew: {machine_line(report)}")
        print("change = new / old (below 1: polyir faster, or closer to its peer)")
        print_table("changes", compare(old, report), ["section", "row", "figure", "old", "new", "change"])
        return 0
    if args.markdown:
        print(markdown(report))
    else:
        print_tables(report)
    if args.plots:
        Path(args.plots).mkdir(parents=True, exist_ok=True)
        for path in write_plots(report, Path(args.plots)):
            print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
