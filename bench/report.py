"""Tables and pictures from a benchmark report."""
from __future__ import annotations

from pathlib import Path
from typing import Any


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
    print("  ".join(c.ljust(w) for c, w in zip(columns, widths)))
    for row in rows:
        print("  ".join(_fmt(row.get(c)).ljust(w) for c, w in zip(columns, widths)))


def print_tables(report: dict[str, Any]) -> None:
    machine = report["machine"]
    print(f"\nmachine: {machine.get('cpu', '?')}, {machine.get('cores')} cores, "
          f"torch {machine.get('torch')}, numpy {machine.get('numpy')}; mode {report['mode']}")
    print("times are medians in seconds; ratio = polyir time / peer time (below 1: polyir faster)")
    print_table("kernels (polyir native vs numpy)", report.get("kernels", []),
                ["name", "shape", "dtype", "polyir_s", "numpy_s", "ratio_vs_numpy", "note"])
    print_table("models on CPU (polyir vs eager vs Inductor)", report.get("models", []),
                ["model", "batch", "polyir_s", "eager_s", "inductor_s", "ratio_vs_eager",
                 "ratio_vs_inductor", "note"])
    print_table("compile time (seconds)", report.get("compile", []),
                ["model", "polyir_cold_s", "polyir_warm_s", "inductor_s", "ratio_cold_vs_inductor"])
    print_table("compile-time scaling on a stack of N layers", report.get("scaling", []),
                ["layers", "polyir_s", "inductor_s"])
    print_table("GPU", report.get("gpu", []), ["name", "shape", "dtype", "polyir_s", "peer", "peer_s", "ratio", "note"])


def write_plots(report: dict[str, Any], out: Path) -> list[Path]:
    """``scaling.png`` and ``ratios.png`` (needs matplotlib; skipped with a note without it)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: no pictures (pip install 'polyir[plots]')")
        return []
    written = []
    scaling = report.get("scaling") or []
    if scaling:
        fig, ax = plt.subplots(figsize=(6, 4))
        layers = [r["layers"] for r in scaling]
        for key, label in (("polyir_s", "polyir (cold)"), ("inductor_s", "Inductor")):
            points = [(n, r[key]) for n, r in zip(layers, scaling) if r.get(key) is not None]
            if points:
                ax.plot(*zip(*points), marker="o", label=label)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("identical layers N")
        ax.set_ylabel("compile time (s)")
        ax.set_title("Compile-time scaling")
        ax.legend()
        fig.tight_layout()
        path = out / "scaling.png"
        fig.savefig(path, dpi=100)
        plt.close(fig)
        written.append(path)
    bars: list[tuple[str, float]] = []
    for row in report.get("models") or []:
        for peer in ("eager", "inductor"):
            ratio = row.get(f"ratio_vs_{peer}")
            if ratio:
                bars.append((f"{row['model']} b{row['batch']} vs {peer}", ratio))
    for row in report.get("kernels") or []:
        if row.get("ratio_vs_numpy"):
            bars.append((f"{row['name']} vs numpy", row["ratio_vs_numpy"]))
    if bars:
        fig, ax = plt.subplots(figsize=(8, 0.3 * len(bars) + 1.5))
        labels, values = zip(*bars)
        ax.barh(range(len(bars)), values, color=["tab:green" if v < 1 else "tab:red" for v in values])
        ax.set_yticks(range(len(bars)), labels, fontsize=7)
        ax.axvline(1.0, color="black", linewidth=0.8)
        ax.set_xscale("log")
        ax.set_xlabel("polyir time / peer time (log; below 1 = polyir faster)")
        ax.set_title("Speed ratios")
        fig.tight_layout()
        path = out / "ratios.png"
        fig.savefig(path, dpi=100)
        plt.close(fig)
        written.append(path)
    return written
