"""The README's examples stay true."""
from __future__ import annotations

import re
import runpy
from pathlib import Path

import numpy as np

import polyir
from polyir.cli import main

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()


def test_polyir_opt_example_prints_what_the_readme_shows(capsys, monkeypatch) -> None:
    command = re.search(r'polyir-opt (examples/\S+) --pipeline "([^"]+)"', README)
    assert command, "README lost its polyir-opt example"
    shown = README[command.end():].split("```")[2]
    monkeypatch.chdir(ROOT)
    assert main([command.group(1), "--pipeline", command.group(2)]) == 0
    assert capsys.readouterr().out.strip("\n") == shown.strip("\n")


def test_first_look_kernel_runs_and_matches_numpy(tmp_path) -> None:
    block = README.split("## A first look", 1)[1].split("```python", 1)[1].split("```", 1)[0]
    script = tmp_path / "readme_first_look.py"  # @polyir.kernel reads its source from a file
    script.write_text(block.replace("print(", "str("))
    namespace = runpy.run_path(str(script))
    C, A, B = namespace["C"], namespace["A"], namespace["B"]
    np.testing.assert_allclose(C, 1.5 * A @ B, rtol=1e-12)
    assert isinstance(namespace["gemm"].ir(C, A, B, 1.5, 0.0), polyir.ir.nodes.Module)
