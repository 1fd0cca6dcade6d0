"""Dependence graphs as networkx multigraphs.

* :func:`statement_graph`: one node per statement, one edge per dependence
  (``kind``, ``buffer``, ``carried`` loop variables, ``distance``,
  ``direction``, ``dependence``).
* :func:`nest_graph`: one node per top-level node of the function body (a
  loop nest or a lone statement), one edge per (kind, buffer) between two
  different nests.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import networkx as nx

if TYPE_CHECKING:
    from polyir.polyhedral.dependences import Dependences


def statement_graph(deps: Dependences) -> nx.MultiDiGraph:
    """Statements and their dependences; see the module docstring."""
    scop = deps.scop
    graph = nx.MultiDiGraph(function=scop.function.name)
    for s in scop.statements.values():
        graph.add_node(s.name, loops=s.loop_vars, nest=s.nest,
                       reduction=s.reduction is not None)
    for d in deps.items:
        carried = tuple(scop.loops[loop].var for loop in d.carried_loops())
        graph.add_edge(d.source, d.sink, kind=d.kind, buffer=d.buffer, carried=carried,
                       levels=d.carried, distance=d.distance, direction=d.direction,
                       dependence=d)
    return graph


def nest_graph(deps: Dependences) -> nx.MultiDiGraph:
    """Top-level nests and the (kind, buffer) dependences between them."""
    scop = deps.scop
    graph = nx.MultiDiGraph(function=scop.function.name)
    for s in scop.statements.values():
        if s.nest not in graph:
            graph.add_node(s.nest, statements=[])
        graph.nodes[s.nest]["statements"].append(s.name)
    seen: set[tuple[int, int, str, str]] = set()
    for d in deps.items:
        a, b = scop.statements[d.source].nest, scop.statements[d.sink].nest
        key = (a, b, d.kind, d.buffer)
        if a == b or key in seen:
            continue
        seen.add(key)
        graph.add_edge(a, b, kind=d.kind, buffer=d.buffer)
    return graph
