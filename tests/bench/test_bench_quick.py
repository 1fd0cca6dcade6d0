"""``python -m bench --quick`` runs and writes its results (not a timed test:
no figure is asserted, only that every section measured something and that
the JSON and the pictures are there)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from bench.__main__ import SECTIONS
from bench.gpu import gpu_unavailable

ROOT = Path(__file__).resolve().parents[2]


def test_quick_run_writes_every_section_and_the_pictures(tmp_path: Path) -> None:
    env = dict(os.environ, POLYIR_CACHE_DIR=str(tmp_path / "polyir-cache"))
    result = subprocess.run([sys.executable, "-m", "bench", "--quick", "--out", str(tmp_path)],
                            cwd=ROOT, env=env, capture_output=True, text=True, timeout=1500)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    report = json.loads((tmp_path / "results.json").read_text())
    assert report["mode"] == "quick"
    assert report["failed_sections"] == []
    assert report["machine"]["cores"] >= 1
    no_gpu = gpu_unavailable()
    for section in SECTIONS:
        rows = report[section]
        if section == "gpu" and no_gpu is not None:
            assert rows == [] and "no GPU" in report["notes"]["gpu"]
            continue
        assert rows, f"section {section} has no rows"
    for section, key in (("kernels", "polyir_s"), ("kernels", "numpy_s"), ("models", "polyir_s"),
                         ("models", "eager_s"), ("models", "inductor_s"),
                         ("compile", "polyir_cold_s"), ("compile", "inductor_cold_s"),
                         ("scaling", "polyir_cold_s"), ("jax_models", "polyir_s"),
                         ("jax_models", "xla_s"), ("jax_models", "polyir_compile_s")):
        measured = [row[key] for row in report[section] if row.get(key) is not None]
        assert measured and all(value > 0 for value in measured), f"{section}: no {key}"
    assert all(row.get("polyir_checked", True) for row in report["kernels"])
    for name in ("scaling.png", "ratios.png"):
        png = (tmp_path / name).read_bytes()
        assert png.startswith(b"\x89PNG\r\n\x1a\n") and len(png) > 5000, name
