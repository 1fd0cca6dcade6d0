"""Every Python block of docs/jax.md runs, in order, in one namespace."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

pytest.importorskip("jax")

DOC = Path(__file__).resolve().parents[2] / "docs" / "jax.md"


def test_every_code_block_of_the_jax_page_runs(capsys: pytest.CaptureFixture[str]) -> None:
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(), flags=re.S)
    assert len(blocks) >= 4
    namespace: dict[str, object] = {}
    for number, block in enumerate(blocks):
        exec(compile(block, f"docs/jax.md block {number}", "exec"), namespace)  # noqa: S102
    printed = capsys.readouterr().out
    assert "ArrayImpl (8, 4)" in printed
    assert "primitives without a lowering run in JAX: sort" in printed
    assert printed.rstrip().splitlines()[-1].startswith("sort | ")
