"""Names in a function: fresh names, unique loop variables, unique statements.

Loop variables are unique per function (the verifier checks it), so passes,
options, remarks and witnesses can name a loop by its variable
(``tile{loops=i,j}``), as loopy names inames. Statement names are unique too.
Frontends make them so with :func:`unique_loop_vars` and
:func:`unique_statement_names`; :func:`find_loop` resolves a loop by name and
raises :class:`UnknownLoop` (a typed error listing the loops) otherwise.
"""
from __future__ import annotations

import re
from collections.abc import Collection, Iterable
from dataclasses import replace

from polyir.errors import PolyirError
from polyir.ir.affine import Aff
from polyir.ir.nodes import For, Function, If, Module, Node
from polyir.ir.walk import STATEMENT_NODES, substitute, subtree_names, walk_nodes


class UnknownLoop(PolyirError, KeyError):
    """A loop named by a variable that no loop (or more than one) of the function has."""

    def __init__(self, function: str, name: str, known: Iterable[str]):
        self.function, self.name, self.known = function, name, tuple(known)
        listed = ", ".join(self.known) or "none"
        super().__init__(f"function '{function}' has no loop '{name}' (its loops: {listed})")

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0])


def names_in(function: Function) -> set[str]:
    """Every name a function uses: itself, parameters, symbols, locals (loop-scoped
    ones too), loop variables and statement names (for choosing fresh ones)."""
    names = {function.name, *function.symbols, *function.buffers}
    for p in function.params:
        names.add(p.name)
    for node in function.body:   # remembered per nest: a rewrite re-reads the nests it made
        inner = subtree_names(node)
        names.update(inner.loop_vars)
        names |= inner.locals
        names |= inner.statements
    return names


def fresh_name(base: str, taken: Collection[str]) -> str:
    """``base`` if unused, else ``base_1``, ``base_2``, ... the first not in ``taken``."""
    if base not in taken:
        return base
    counter = 1
    while f"{base}_{counter}" in taken:
        counter += 1
    return f"{base}_{counter}"


def base_name(name: str) -> str:
    """``name`` without a numeric suffix that fresh naming added (``j_2`` -> ``j``)."""
    stripped = re.sub(r"_\d+$", "", name)
    return stripped or name


def claim_name(base: str, taken: set[str]) -> str:
    """:func:`fresh_name`, added to ``taken``."""
    name = fresh_name(base, taken)
    taken.add(name)
    return name


def loop_vars(nodes: Iterable[Node]) -> list[str]:
    """The variable of every loop under ``nodes``, in pre-order (duplicates kept)."""
    return [n.var for n in walk_nodes(nodes) if isinstance(n, For)]


def unique_loop_vars(function: Function) -> Function:
    """``function`` with every loop variable unique: the second and later loops
    of a name are renamed (``i`` -> ``i_1``) in their headers and bodies."""
    if len(set(loop_vars(function.body))) == len(loop_vars(function.body)):
        return function
    taken = names_in(function)
    seen: set[str] = set()

    def visit(nodes: tuple[Node, ...]) -> tuple[Node, ...]:
        out: list[Node] = []
        for node in nodes:
            if isinstance(node, For):
                if node.var in seen:
                    new = claim_name(node.var, taken)
                    body = substitute(node.body, {node.var: Aff.var(new)})
                    node = replace(node, var=new, body=body)
                seen.add(node.var)
                node = replace(node, body=visit(node.body))
            elif isinstance(node, If):
                node = replace(node, then_body=visit(node.then_body), else_body=visit(node.else_body))
            out.append(node)
        return tuple(out)

    return replace(function, body=visit(function.body))


def unique_statement_names(function: Function) -> Function:
    """``function`` with every statement name unique (later duplicates get ``_1``, ...)."""
    names = [n.name for n in walk_nodes(function.body) if isinstance(n, STATEMENT_NODES)]
    if len(set(names)) == len(names):
        return function
    taken = names_in(function)
    seen: set[str] = set()

    def visit(nodes: tuple[Node, ...]) -> tuple[Node, ...]:
        out: list[Node] = []
        for node in nodes:
            if isinstance(node, For):
                node = replace(node, body=visit(node.body))
            elif isinstance(node, If):
                node = replace(node, then_body=visit(node.then_body), else_body=visit(node.else_body))
            elif isinstance(node, STATEMENT_NODES):
                if node.name in seen:
                    node = replace(node, name=claim_name(node.name, taken))
                seen.add(node.name)
            out.append(node)
        return tuple(out)

    return replace(function, body=visit(function.body))


def uniquify(module: Module) -> Module:
    """Every function of ``module`` with unique loop variables and statement names."""
    return Module(tuple(unique_statement_names(unique_loop_vars(f)) for f in module.functions))


def find_loop(function: Function, name: str) -> For:
    """The loop of ``function`` whose variable is ``name``; raises :class:`UnknownLoop`."""
    holding = [node for node in function.body if name in subtree_names(node).loop_vars]
    found = [n for n in walk_nodes(holding) if isinstance(n, For) and n.var == name]
    if len(found) != 1:
        raise UnknownLoop(function.name, name, loop_vars(function.body))
    return found[0]


__all__ = ["UnknownLoop", "names_in", "fresh_name", "base_name", "claim_name", "loop_vars", "unique_loop_vars",
           "unique_statement_names", "uniquify", "find_loop"]
