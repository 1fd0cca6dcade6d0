"""docs/tutorial.md and docs/analysis.md stay true: their Python blocks run in
order, print what the page shows under them, and draw every picture the page
shows (into a temporary directory; ``scripts/tutorial.py`` regenerates the
committed ones)."""
from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("matplotlib", reason="the tutorial draws with the plots extra")

from polyir.testing.docs import images, python_blocks, run_page  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
PAGES = {"tutorial": 12, "analysis": 3}   # page -> at least this many blocks


@pytest.mark.parametrize("name", sorted(PAGES))
def test_the_page_runs_prints_what_it_shows_and_draws_its_pictures(tmp_path, name) -> None:
    page = (ROOT / "docs" / f"{name}.md").read_text()
    shown = images(page)
    assert shown
    for image in shown:
        (tmp_path / image).parent.mkdir(parents=True, exist_ok=True)
        assert (ROOT / "docs" / image).is_file(), f"{image} is not committed (run scripts/tutorial.py)"
    blocks = python_blocks(page)
    printed = run_page(page, tmp_path, name)
    assert len(printed) == len(blocks) >= PAGES[name]
    for block, output in zip(blocks, printed, strict=True):
        if block.shown is not None:
            assert output.strip() == block.shown.strip(), f"the block at docs/{name}.md:{block.line}"
    for image in shown:
        drawn = tmp_path / image
        assert drawn.is_file() and drawn.read_bytes()[:4] == b"\x89PNG", image


def test_each_step_of_the_tutorial_is_short() -> None:
    for block in python_blocks((ROOT / "docs" / "tutorial.md").read_text()):
        assert len(block.source.strip().splitlines()) <= 16, f"docs/tutorial.md:{block.line}"
