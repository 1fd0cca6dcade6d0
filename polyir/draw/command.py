"""``polyir-opt FILE [--pipeline P] --draw WHAT [--params N=6,M=4] -o picture.png``.

``domain``, ``deps`` and ``nests`` draw the pipeline's result (the input when
there is no pipeline); ``schedule``, ``tiles`` and ``fusion`` compare the
input with the result. The picture is written only when it could be drawn.
"""
from __future__ import annotations

from collections.abc import Callable

from polyir.draw.picture import DrawError, Picture
from polyir.ir.nodes import Module

DRAWINGS = ("domain", "deps", "nests", "schedule", "tiles", "fusion")


def parse_params(text: str) -> dict[str, int]:
    """``"N=6,M=4"`` -> ``{"N": 6, "M": 4}``; raises ``DrawError`` naming a malformed item."""
    params: dict[str, int] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        name, equals, value = item.partition("=")
        try:
            if not equals or not name.strip().isidentifier():
                raise ValueError
            params[name.strip()] = int(value)
        except ValueError:
            raise DrawError(f"--params: {item!r} is not NAME=INTEGER (e.g. --params N=6,M=4)") from None
    return params


def draw_command(what: str, before: Module, after: Module, params_text: str, output: str | None) -> Picture:
    """Draw ``what`` (one of :data:`DRAWINGS`) and save it to ``output``."""
    from polyir import draw
    if what not in DRAWINGS:
        raise DrawError(f"--draw {what!r}: choose one of {', '.join(DRAWINGS)}")
    if not output:
        raise DrawError("--draw needs -o FILE (.png, .svg or .pdf)")
    params = parse_params(params_text)
    drawings: dict[str, Callable[[], Picture]] = {
        "domain": lambda: draw.domain(after, params),
        "deps": lambda: draw.dependence_graph(after),
        "nests": lambda: draw.nest_graph(after),
        "schedule": lambda: draw.schedule(before, after, params),
        "tiles": lambda: draw.tiles(before, after, params),
        "fusion": lambda: draw.fusion(before, after, params or None),
    }
    picture = drawings[what]()
    picture.save(output)
    return picture
