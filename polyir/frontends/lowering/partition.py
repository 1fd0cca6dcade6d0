"""Partitioning a graph into compiled segments and fallback nodes.

Frontends with a fallback (torch eager for fx graphs, JAX itself for jaxprs)
compile runs of supported nodes as one polyir function each and run the rest
through their framework. :func:`group_by_fallback_depth` gives the fewest
segments for a graph in topological order.
"""
from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from typing import TypeVar

Node = TypeVar("Node", bound=Hashable)


def group_by_fallback_depth(nodes: Sequence[Node], inputs_of: Callable[[Node], Iterable[Node]],
                            reasons: Mapping[Node, str | None]) -> list[tuple[bool, list[Node]]]:
    """Steps in execution order: ``(True, members)`` for a compiled segment,
    ``(False, [node])`` for a node that falls back (its reason is not None).

    A supported node's depth is the number of fallback nodes on its longest
    input path; all supported nodes of one depth form one segment, run before
    the fallback nodes of that depth (which need only segments up to their
    depth and earlier fallback nodes). ``nodes`` are in topological order;
    inputs that are not in ``nodes`` (graph inputs, constants) are ignored.
    """
    depth: dict[Node, int] = {}
    for node in nodes:
        levels = [0]
        for arg in inputs_of(node):
            if arg in depth:
                fallback_input = reasons.get(arg) is not None
                levels.append(depth[arg] + (1 if fallback_input and reasons[node] is None else 0))
        depth[node] = max(levels)
    steps: list[tuple[bool, list[Node]]] = []
    for level in range(max(depth.values(), default=-1) + 1):
        members = [n for n in nodes if depth[n] == level and reasons[n] is None]
        if members:
            steps.append((True, members))
        steps += [(False, [n]) for n in nodes if depth[n] == level and reasons[n] is not None]
    return steps
