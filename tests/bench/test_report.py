"""bench.report: Markdown tables and geometric means from a small made-up report,
and both pictures written as PNGs."""
from __future__ import annotations

import math
from pathlib import Path

from bench.report import geometric_mean, markdown, write_plots

REPORT = {
    "mode": "quick", "started": "t", "threads": "1",
    "machine": {"cpu": "test cpu", "cores": 2, "load_average": [0.1, 0.1, 0.1]},
    "kernels": [{"name": "gemm", "shape": "n=4", "polyir_s": 2.0, "numpy_s": 1.0, "ratio_vs_numpy": 2.0},
                {"name": "dot", "shape": "n=8", "polyir_s": 1.0, "numpy_s": 8.0, "ratio_vs_numpy": 0.125}],
    "models": [{"model": "mlp", "batch": 1, "polyir_s": 3.0, "eager_s": 1.0, "ratio_vs_eager": 3.0,
                "note": "a|b"}],
    "scaling": [{"layers": 1, "polyir_cold_s": 0.5, "inductor_cold_s": 2.0},
                {"layers": 2, "polyir_cold_s": 1.0, "inductor_cold_s": 2.5}],
    "native": [{"name": "matmul", "shape": "4", "polyir_s": 1.0, "peer": "polyir serial",
                "peer_s": 2.0, "ratio": 0.5}],
}


def test_geometric_mean() -> None:
    assert math.isclose(geometric_mean([2.0, 0.125]), 0.5)
    assert math.isclose(geometric_mean([4.0, None, 0.0, 1.0]), 2.0)  # type: ignore[list-item]
    assert geometric_mean([]) is None


def test_markdown_has_every_row_and_the_means_of_comparable_sections() -> None:
    text = markdown(REPORT)
    assert "| gemm | n=4 |" in text and "| dot | n=8 |" in text
    assert "Geometric mean of ratio_vs_numpy: 0.5" in text
    assert "Geometric mean of ratio_vs_eager: 3" in text
    assert "a/b" in text                         # a '|' in a cell would break the table
    assert "Geometric mean of ratio:" not in text  # native rows mix peers: no mean
    assert "test cpu, 2 cores" in text


def test_plots_are_written(tmp_path: Path) -> None:
    written = write_plots(REPORT, tmp_path)
    assert sorted(p.name for p in written) == ["ratios.png", "scaling.png"]
    for path in written:
        assert path.read_bytes().startswith(b"\x89PNG")


def test_compare_pairs_rows_by_identity_and_divides() -> None:
    from bench.report import compare
    newer = {"kernels": [{"name": "dot", "polyir_s": 0.5, "numpy_s": 8.0, "ratio_vs_numpy": 0.0625},
                         {"name": "new-kernel", "polyir_s": 1.0}],
             "models": [{"model": "mlp", "batch": 8, "polyir_s": 1.0}]}
    changes = {(c["section"], c["row"], c["figure"]): c["change"] for c in compare(REPORT, newer)}
    assert changes == {("kernels", "dot", "polyir_s"): 0.5, ("kernels", "dot", "ratio_vs_numpy"): 0.5}
