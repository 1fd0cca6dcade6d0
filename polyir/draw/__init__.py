"""Pictures of loop nests for research and teaching (matplotlib: the ``plots`` extra).

Every function returns a :class:`Picture` (``.save("x.png")`` or ``.svg``;
shown inline in a notebook) and draws without a display.

=====================  =====================================================
``domain``             instances of statements as points, dependences as arrows
``schedule``           the order a transformed program runs the same instances in
``tiles``              the tiles of a tiled program over the original domain
``dependence_graph``   statements and their dependences (kinds, carried loops)
``nest_graph``         top-level nests and the dependences between them
``fusion``             nests before and after fusion, fused groups, local buffers
=====================  =====================================================

``polyir-opt FILE --draw WHAT -o picture.png`` draws from the command line
(:mod:`polyir.draw.command`).
"""
from __future__ import annotations

from polyir.draw.domain import domain, schedule, tiles
from polyir.draw.fusion import fusion
from polyir.draw.graphs import dependence_graph, nest_graph
from polyir.draw.picture import DrawError, Picture

__all__ = ["domain", "schedule", "tiles", "dependence_graph", "nest_graph", "fusion", "Picture", "DrawError"]
