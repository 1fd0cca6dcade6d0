"""The README's first example computes the right numbers (tests/test_docs.py runs
every block of the README and checks the output it shows)."""
from __future__ import annotations

import runpy
from pathlib import Path

import numpy as np

import polyir

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()


def test_first_look_kernel_runs_and_matches_numpy(tmp_path) -> None:
    block = README.split("## A first look", 1)[1].split("```python", 1)[1].split("```", 1)[0]
    script = tmp_path / "readme_first_look.py"  # @polyir.kernel reads its source from a file
    script.write_text(block.replace("print(", "str("))
    namespace = runpy.run_path(str(script))
    C, A, B = namespace["C"], namespace["A"], namespace["B"]
    np.testing.assert_allclose(C, 1.5 * A @ B, rtol=1e-12)
    assert isinstance(namespace["gemm"].ir(C, A, B, 1.5, 0.0), polyir.ir.nodes.Module)
