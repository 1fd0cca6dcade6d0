"""docs/fusion.md: its Python block runs and prints what the page shows."""
from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

PAGE = Path(__file__).resolve().parents[2] / "docs" / "fusion.md"


def test_the_fusion_page_example_prints_what_it_shows() -> None:
    text = PAGE.read_text()
    code = re.findall(r"```python\n(.*?)```", text, re.S)
    shown = re.findall(r"```\n(func .*?)```", text, re.S)
    assert code and shown
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code[0], str(PAGE), "exec"), {})
    printed = out.getvalue()
    assert shown[0].strip() in printed
    assert "fuse: applied: function 'f': fuse-nests{producer=S0 consumer=S1 depth=2}" in printed
