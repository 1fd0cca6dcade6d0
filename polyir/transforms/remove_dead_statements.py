"""``remove-dead-statements``: drop statements whose writes nothing live reads.

Parameters are live (the caller sees them). A local buffer is live when a
live statement reads it; a statement is live when it writes a live buffer
(or is a launch or barrier). The fixed point of these rules is computed at
buffer granularity, which is conservative: one live read of a local keeps
every write to it. Loops and ifs left empty, and locals no longer
mentioned, are removed too.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from polyir.ir.nodes import Function, Module, Node
from polyir.ir.walk import STATEMENT_NODES, leaf_nodes, node_accesses
from polyir.passes import register_pass
from polyir.transforms._util import prune_leaves


def accesses(node: Node) -> tuple[set[str], set[str]]:
    """``(writes, reads)``: buffer names a leaf node writes and reads."""
    reads, writes = node_accesses(node)
    return writes, reads


def live_buffers(function: Function) -> set[str]:
    """Buffers whose contents can reach a parameter (the fixed point above)."""
    local_names = {b.name for b in function.locals} | {b.name for b in function.loop_locals}
    live = {p.name for p in function.params}
    leaves = [(node, *accesses(node)) for node in leaf_nodes(function.body)]
    changed = True
    while changed:
        changed = False
        for node, writes, reads in leaves:
            always = not isinstance(node, STATEMENT_NODES)
            if always or writes - local_names or writes & live:
                new = reads - live
                if new:
                    live |= new
                    changed = True
    return live


def _prune(nodes: Sequence[Node], dead: set[str]) -> tuple[Node, ...]:
    def live(node: Node) -> bool:
        writes, _ = accesses(node)
        return not (writes and writes <= dead)
    return prune_leaves(nodes, live, lambda loop: tuple(b for b in loop.locals if b.name not in dead))


def _mentioned(function: Function) -> set[str]:
    names: set[str] = set()
    for node in leaf_nodes(function.body):
        writes, reads = accesses(node)
        names |= writes | reads
    return names


def remove_dead_in_function(function: Function) -> Function:
    """``function`` without the statements that only feed dead locals."""
    live = live_buffers(function)
    dead = ({b.name for b in function.locals} | {b.name for b in function.loop_locals}) - live
    if not dead:
        return function
    pruned = replace(function, body=_prune(function.body, dead))
    mentioned = _mentioned(pruned)
    return replace(pruned, locals=tuple(b for b in function.locals if b.name in mentioned))


def remove_dead_statements(module: Module) -> Module:
    """Every function of ``module`` without dead statements and unused locals."""
    return Module(tuple(remove_dead_in_function(f) for f in module.functions))


@register_pass("remove-dead-statements")
@dataclass(frozen=True)
class RemoveDeadStatements:
    """Remove statements writing local buffers that no live statement reads (iteratively)."""

    def run(self, module: Module) -> Module:
        result = remove_dead_statements(module)
        same = all(a == b for a, b in zip(result.functions, module.functions, strict=True))
        return module if same else result
