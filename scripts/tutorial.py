"""Regenerate what docs/tutorial.md and docs/analysis.md show: run their blocks in a scratch directory,
copy the pictures they draw into docs/images/ and write their printed output
back into the page (tests/test_tutorial.py checks that both stay true).

    .venv/bin/python scripts/tutorial.py [docs/other-page.md ...]
"""
from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from polyir.testing.docs import images, refresh_outputs, run_page  # noqa: E402


def regenerate(page_path: Path) -> None:
    page = page_path.read_text()
    with tempfile.TemporaryDirectory() as scratch:
        for image in images(page):
            (Path(scratch) / image).parent.mkdir(parents=True, exist_ok=True)
        printed = run_page(page, scratch, page_path.stem)
        for image in images(page):
            target = page_path.parent / image
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(Path(scratch) / image, target)
            print(f"wrote {target.relative_to(ROOT)}")
    page_path.write_text(refresh_outputs(page, printed))
    print(f"refreshed the outputs of {page_path.relative_to(ROOT)}")


if __name__ == "__main__":
    for name in sys.argv[1:] or ["docs/tutorial.md", "docs/analysis.md"]:
        regenerate(ROOT / name)
