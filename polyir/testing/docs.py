"""Run the Python blocks of a Markdown page, as a test or to refresh the page.

A page is a sequence of fenced blocks; each ``python`` block runs, in order,
in one namespace (so later blocks see earlier names), from a file of its own
(``@polyir.kernel`` reads a function's source from its file). A block that
the page says prints something is followed by a line ``prints`` and a plain
fenced block with the text. :func:`run_page` returns what each block printed;
:func:`refresh_outputs` writes those outputs back into the page.
"""
from __future__ import annotations

import contextlib
import io
import os
import re
from dataclasses import dataclass
from pathlib import Path

_FENCE = re.compile(r"```(\w*)\n(.*?)```", re.S)
_IMAGE = re.compile(r"!\[[^\]]*\]\(([^)\s]+)\)")


@dataclass(frozen=True)
class Block:
    """A ``python`` block: its ``source``, the 1-based ``line`` it starts on, and
    the output the page shows for it (``shown``, with its span in the page)."""

    source: str
    line: int
    shown: str | None = None
    shown_span: tuple[int, int] | None = None


def python_blocks(page: str) -> list[Block]:
    """The ``python`` blocks of ``page`` with the outputs shown after them."""
    matches = list(_FENCE.finditer(page))
    found = []
    for k, match in enumerate(matches):
        if match.group(1) != "python":
            continue
        shown = span = None
        if k + 1 < len(matches):
            following = matches[k + 1]
            between = page[match.end():following.start()]
            if between.strip() == "prints" and following.group(1) == "":
                shown, span = following.group(2), following.span(2)
        found.append(Block(match.group(2), page.count("\n", 0, match.start()) + 2, shown, span))
    return found


def images(page: str) -> list[str]:
    """The image paths the page shows (``![...](path)``), in order."""
    return _IMAGE.findall(page)


def run_page(page: str, directory: str | os.PathLike[str], name: str = "page") -> list[str]:
    """Run every ``python`` block of ``page`` with ``directory`` as the working
    directory (the blocks' files are written there too); returns what each
    printed. An exception in a block propagates, with the block's file and
    line in its traceback."""
    root = Path(directory)
    namespace: dict[str, object] = {"__name__": f"{name}_blocks"}
    printed = []
    previous = os.getcwd()
    os.chdir(root)
    try:
        for number, block in enumerate(python_blocks(page)):
            path = root / f"{name}_block_{number:02d}_line_{block.line}.py"
            path.write_text(block.source)
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                exec(compile(block.source, str(path), "exec"), namespace)  # noqa: S102
            printed.append(out.getvalue())
    finally:
        os.chdir(previous)
    return printed


def refresh_outputs(page: str, printed: list[str]) -> str:
    """``page`` with each shown output replaced by what its block printed."""
    pieces = []
    position = 0
    for block, output in zip(python_blocks(page), printed, strict=True):
        if block.shown_span is None:
            continue
        start, end = block.shown_span
        pieces.append(page[position:start])
        pieces.append(output.rstrip("\n") + "\n")
        position = end
    pieces.append(page[position:])
    return "".join(pieces)


__all__ = ["Block", "python_blocks", "images", "run_page", "refresh_outputs"]
