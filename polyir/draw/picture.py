"""The :class:`Picture` every drawing returns, and matplotlib without a display.

Figures are built with matplotlib's object API (``matplotlib.figure.Figure``
rendered by the Agg canvas), never through ``pyplot``: nothing needs a
display, no global backend is switched, and a notebook's own matplotlib
setting is left alone. A :class:`Picture` shows itself in a notebook
(``_repr_png_``) and saves as PNG, SVG or PDF by the file's suffix, with no
date or version in the file (the same drawing gives the same bytes).

Artists carry a ``gid`` saying what they stand for (``instances:S0``,
``dependence:flow``, ``tile``, ``node:S1``, ``edge:raw``, ``nest-after:0``,
``link``, ``buffer-before:t``), so a test or a user can count what was drawn:
``picture.artists("dependence:")``.
"""
from __future__ import annotations

import io
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from polyir.errors import PolyirError

if TYPE_CHECKING:
    from matplotlib.figure import Figure

FORMATS = ("png", "svg", "pdf")
KIND_COLORS = {"flow": "#1f77b4", "raw": "#d62728", "war": "#2ca02c", "waw": "#9467bd"}
STATEMENT_COLORS = ("#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b3", "#937860", "#da8bc3",
                    "#8c8c8c", "#ccb974", "#64b5cd")
STATEMENT_MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*", "<", ">")


def statement_style(k: int) -> dict[str, Any]:
    """Colour and marker of the ``k``-th statement drawn."""
    return {"color": STATEMENT_COLORS[k % len(STATEMENT_COLORS)],
            "marker": STATEMENT_MARKERS[k % len(STATEMENT_MARKERS)]}


class DrawError(PolyirError, ValueError):
    """A drawing that cannot be made as asked: a symbol without a value, too many
    instances to draw, an unknown statement or kind, a format that is not PNG,
    SVG or PDF, or matplotlib missing (the ``plots`` extra)."""


def new_figure(width: float, height: float) -> Figure:
    """A figure on the Agg canvas (no display, no pyplot)."""
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError:
        raise DrawError("polyir.draw needs matplotlib: pip install 'polyir[plots]'") from None
    figure = Figure(figsize=(width, height), dpi=100, layout="constrained")
    FigureCanvasAgg(figure)
    return figure


@dataclass
class Picture:
    """A drawing: ``figure`` (a matplotlib ``Figure``, free to adjust),
    ``kind`` (``"domain"``, ``"schedule"``, ...), ``subject`` (what was drawn)
    and ``counts`` (what it shows: ``instances``, ``points``, ``dependences``,
    ``arrows``, ``tiles``, ``nodes``, ``edges``, ``nests``, ...)."""

    figure: Figure
    kind: str
    subject: str
    counts: dict[str, int] = field(default_factory=dict)

    def __repr__(self) -> str:
        shown = ", ".join(f"{v} {k}" for k, v in self.counts.items())
        return f"<Picture {self.kind} of {self.subject}: {shown or 'empty'}>"

    def artists(self, prefix: str) -> list[Any]:
        """Every artist whose ``gid`` starts with ``prefix`` (see the module docstring)."""
        found = []
        for artist in self.figure.findobj(lambda a: (a.get_gid() or "").startswith(prefix)):
            if artist not in found:
                found.append(artist)
        return found

    def render(self, format: str = "png") -> bytes:  # noqa: A002
        """The picture as bytes in ``format`` (png, svg or pdf)."""
        if format not in FORMATS:
            raise DrawError(f"cannot save a picture as {format!r}: use {', '.join(FORMATS)}")
        import matplotlib
        metadata: dict[str, Any] = {"png": {"Software": None}, "svg": {"Date": None, "Creator": None},
                                    "pdf": {"CreationDate": None, "Creator": None, "Producer": None}}[format]
        buffer = io.BytesIO()
        with matplotlib.rc_context({"svg.hashsalt": "polyir", "svg.fonttype": "path"}):
            self.figure.savefig(buffer, format=format, metadata=metadata, dpi=100)
        return buffer.getvalue()

    def save(self, path: str | os.PathLike[str]) -> Path:
        """Write the picture to ``path`` (PNG, SVG or PDF by its suffix), atomically:
        nothing is written when rendering fails. Returns the path."""
        target = Path(path)
        data = self.render(target.suffix.lstrip(".").lower())
        directory = target.parent if str(target.parent) else Path(".")
        handle, temporary = tempfile.mkstemp(dir=directory, prefix=".polyir-draw-")
        try:
            with os.fdopen(handle, "wb") as out:
                out.write(data)
            os.chmod(temporary, 0o666 & ~_umask())  # mkstemp makes it private; a saved picture is not
            os.replace(temporary, target)
        except BaseException:
            if os.path.exists(temporary):
                os.unlink(temporary)
            raise
        return target

    def _repr_png_(self) -> bytes:
        return self.render("png")


def _umask() -> int:
    current = os.umask(0)
    os.umask(current)
    return current


__all__ = ["Picture", "DrawError", "new_figure", "FORMATS", "KIND_COLORS", "STATEMENT_COLORS", "statement_style"]
