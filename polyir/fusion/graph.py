"""The nest graph fusion works on: top-level nodes and the buffers between them.

``NestGraph(function)`` holds, per top-level node, the buffers it reads and
writes, and answers which earlier nests produce what a nest reads
(:meth:`producers`, nearest first), which nests read the same inputs
(:meth:`siblings`), and who else observes a buffer. It is rebuilt after each
fusion (nodes are immutable; rebuilding is a linear scan).
"""
from __future__ import annotations

from dataclasses import dataclass

from polyir.ir.nodes import Buffer, For, Function
from polyir.ir.walk import STATEMENT_NODES, buffer_accesses, walk_nodes


@dataclass(frozen=True)
class Nest:
    """One top-level node: its position, a statement naming it, its accesses."""

    index: int
    name: str            # the first statement's name: how options and remarks name the nest
    reads: frozenset[str]
    writes: frozenset[str]
    is_loop: bool


class NestGraph:
    """See the module docstring."""

    def __init__(self, function: Function):
        self.function = function
        self.nests: list[Nest] = []
        for index, node in enumerate(function.body):
            reads, writes = buffer_accesses((node,))
            name = next((n.name for n in walk_nodes((node,)) if isinstance(n, STATEMENT_NODES)), None)
            self.nests.append(Nest(index, name or f"#{index}", frozenset(reads),
                                   frozenset(writes), isinstance(node, For)))
        self.params = {p.name for p in function.params if isinstance(p, Buffer)}

    def by_name(self, name: str) -> Nest:
        """The nest holding statement ``name``; ``KeyError`` naming the nests otherwise."""
        for nest in self.nests:
            if nest.name == name:
                return nest
        for index, node in enumerate(self.function.body):
            if any(getattr(n, "name", None) == name for n in walk_nodes((node,))):
                return self.nests[index]
        raise KeyError(f"no statement '{name}' in function '{self.function.name}' (nests: "
                       f"{', '.join(n.name for n in self.nests)})")

    def producers(self, consumer: int) -> list[tuple[int, frozenset[str]]]:
        """``(producer index, buffers)``: earlier loop nests writing what ``consumer``
        reads, nearest first."""
        wanted = self.nests[consumer].reads
        found = []
        for index in range(consumer - 1, -1, -1):
            flows = self.nests[index].writes & wanted
            if flows and self.nests[index].is_loop:
                found.append((index, flows))
        return found

    def siblings(self, first: int) -> list[tuple[int, frozenset[str]]]:
        """``(index, shared inputs)``: later loop nests reading a buffer ``first``
        reads, with no buffer written by one and accessed by the other."""
        a = self.nests[first]
        found = []
        for index in range(first + 1, len(self.nests)):
            b = self.nests[index]
            shared = a.reads & b.reads
            conflict = (a.writes & (b.reads | b.writes)) | (b.writes & a.reads)
            if shared and not conflict and b.is_loop and a.is_loop:
                found.append((index, shared))
        return found

    def readers(self, buffer: str, after: int) -> list[int]:
        """Indices of the nests after ``after`` that read ``buffer``."""
        return [n.index for n in self.nests[after + 1:] if buffer in n.reads]


__all__ = ["Nest", "NestGraph"]
