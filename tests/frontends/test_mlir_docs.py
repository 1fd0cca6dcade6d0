"""docs/mlir.md stays true: its Python blocks run in order, what it says they
print is what they print, and its fusion table is what the harness measures."""
from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest

pytest.importorskip("xdsl", reason="docs/mlir.md imports MLIR with xDSL")

from polyir.frontends.mlir.tools import mlir_opt  # noqa: E402

DOC = (Path(__file__).resolve().parents[2] / "docs" / "mlir.md").read_text()


def _blocks() -> list[tuple[str, str | None]]:
    """(python source, the printed output the doc shows after it, if any)."""
    found = []
    pieces = re.split(r"```(\w*)\n(.*?)```", DOC, flags=re.S)
    for k in range(1, len(pieces), 3):
        if pieces[k] == "python":
            shown = None
            after = pieces[k + 2]
            if k + 4 < len(pieces) and after.strip() == "prints" and pieces[k + 3] == "":
                shown = pieces[k + 4]
            elif after.strip().startswith("prints `"):
                shown = after.strip()[len("prints `"):].split("`", 1)[0]
            found.append((pieces[k + 1], shown))
    return found


def test_code_blocks_run_and_print_what_the_doc_shows() -> None:
    namespace: dict[str, object] = {}
    blocks = _blocks()
    assert len(blocks) >= 4
    for source, shown in blocks:
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            exec(compile(source, "docs/mlir.md", "exec"), namespace)
        if shown is not None:
            assert out.getvalue().strip() == shown.strip()


@pytest.mark.skipif(mlir_opt() is None, reason="mlir-opt is not installed (apt-get install mlir-22-tools)")
def test_the_fusion_table_is_what_the_harness_measures() -> None:
    from polyir.frontends.mlir.compare import fusion_table
    assert fusion_table(native=False) in DOC
