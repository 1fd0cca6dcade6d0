"""The entry points of the public analysis API (re-exported by ``polyir.polyhedral``).

Each takes polyir IR, a :class:`~polyir.ir.nodes.Module` (its entry function
is analysed) or a :class:`~polyir.ir.nodes.Function`, and returns a record that
prints briefly, shows as a table in a notebook and iterates where it is a
collection. The legality queries and footprints are the functions of
:mod:`polyir.polyhedral.legality` and :mod:`polyir.polyhedral.footprint`
themselves; they accept the same IR.
"""
from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import overload

import islpy as isl

from polyir.ir.nodes import Function, Module
from polyir.polyhedral.dependences import Dependences, compute_dependences
from polyir.polyhedral.extract import Access, Scop, extract
from polyir.polyhedral.legality import Instance

IR = Module | Function


def scop(ir: IR | Scop) -> Scop:
    """The polyhedral view of ``ir``: statements with their domains, accesses and
    original schedule (``polyir.polyhedral.extract``). Raises ``NotPolyhedral``
    for functions with barriers or launches, ``TypeError`` for what is not IR."""
    return ir if isinstance(ir, Scop) else extract(ir)


def domains(ir: IR | Scop) -> dict[str, isl.Set]:
    """Statement name -> its iteration domain (an ``isl.Set`` over the loop
    variables, with the function's size symbols as parameters)."""
    return {s.name: s.domain for s in scop(ir)}


def schedules(ir: IR | Scop) -> dict[str, isl.Map]:
    """Statement name -> its original schedule: instance -> 2d+1 time vector
    ``[position, i, position, j, ...]``; instances run in lexicographic order of
    their vectors."""
    view = scop(ir)
    result: dict[str, isl.Map] = {}
    for stmt in view:
        one = view.schedule_from_vectors({stmt.name: view.schedule_vectors()[stmt.name]})
        result[stmt.name] = isl.Map.from_union_map(one)
    return result


@dataclass(frozen=True, eq=False)
class Accesses:
    """Every access of a :class:`Scop` (iterable; ``str``: ``S1 reads A[i, k]``
    per line)."""

    scop: Scop
    items: tuple[Access, ...]

    def __iter__(self) -> Iterator[Access]:
        return iter(self.items)

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, index: int) -> Access:
        return self.items[index]

    def __repr__(self) -> str:
        reads = sum(1 for a in self.items if a.kind == "read")
        return (f"<Accesses of {self.scop.function.name}: {len(self.items) - reads} writes, "
                f"{reads} reads>")

    def __str__(self) -> str:
        from polyir.polyhedral.report import access_line
        return "\n".join(access_line(self.scop, a) for a in self.items) or "no accesses"

    def _repr_markdown_(self) -> str:
        from polyir.polyhedral.report import access_text, table
        rows = [(a.statement, a.kind if a.exact else f"may {a.kind}", f"`{access_text(self.scop, a)}`",
                 f"`{a.relation}`") for a in self.items]
        return f"**{repr(self)[1:-1]}**\n\n" + table(
            ("statement", "access", "element", "isl relation"), rows)


def accesses(ir: IR | Scop, buffer: str | None = None) -> Accesses:
    """The reads and writes of every statement (writes first per statement),
    optionally of one ``buffer``."""
    view = scop(ir)
    return Accesses(view, tuple(a for s in view for a in s.writes + s.reads
                                if buffer is None or a.buffer == buffer))


def dependences(ir: IR | Scop, kinds: str | Sequence[str] | None = None) -> Dependences:
    """The dependences of ``ir`` (``polyir.polyhedral.dependences``): RAW, WAR,
    WAW (memory-based) and FLOW (value-based), per pair of statements and buffer,
    with the loops that carry them and their direction or distance. ``kinds``
    keeps only some (``"flow"``, ``("raw", "war")``, ``"memory"``)."""
    found = compute_dependences(scop(ir))
    return found if kinds is None else found.filter(kinds)


def instances(ir: IR, params: Mapping[str, int]) -> list[Instance]:
    """The statement instances ``ir`` runs for fixed symbol values, in the order
    it runs them (the brute-force trace of ``polyir.polyhedral.bruteforce``).
    Raises ``KeyError`` naming a symbol with no value."""
    from polyir.polyhedral.bruteforce import trace
    from polyir.polyhedral.extract import function_of
    function = function_of(ir)
    missing = [s for s in function.symbols if s not in params]
    if missing:
        raise KeyError(f"no value for symbol{'s' * (len(missing) > 1)} {', '.join(missing)} "
                       f"of {function.name}")
    names = loop_vars_of(function)
    return [Instance(name, tuple(zip(names[name], values, strict=True)))
            for name, values in (event.instance for event in trace(function, params))]


def loop_vars_of(function: Function) -> dict[str, tuple[str, ...]]:
    """Statement name -> the variables of its enclosing loops, outermost first."""
    from polyir.ir.nodes import For, If
    from polyir.ir.walk import STATEMENT_NODES
    found: dict[str, tuple[str, ...]] = {}

    def visit(nodes: tuple, loops: tuple[str, ...]) -> None:
        for node in nodes:
            if isinstance(node, For):
                visit(node.body, loops + (node.var,))
            elif isinstance(node, If):
                visit(node.then_body, loops)
                visit(node.else_body, loops)
            elif isinstance(node, STATEMENT_NODES):
                found[node.name] = loops

    visit(function.body, ())
    return found


@overload
def apply_schedule(ir: Module, schedule: isl.Schedule | isl.UnionMap | str,
                   accept_reassociation: bool = False) -> Module: ...
@overload
def apply_schedule(ir: Function, schedule: isl.Schedule | isl.UnionMap | str,
                   accept_reassociation: bool = False) -> Function: ...
def apply_schedule(ir: IR, schedule: isl.Schedule | isl.UnionMap | str,
                   accept_reassociation: bool = False) -> IR:
    """``ir`` with its body regenerated (isl's code generator) to run its
    instances in the order of ``schedule``: an isl map from instances to time
    vectors, as text (``"[n] -> { S0[i, j] -> [i + j, j] }"``) or an isl object.
    A module comes back as a module (its entry function rewritten). Raises
    ``IllegalTransform`` with the dependence and a witness when the schedule
    violates a dependence, ``ValueError`` when it misses some instances."""
    from polyir.polyhedral.codegen import apply_schedule as regenerate
    if isinstance(ir, Module):
        entry = ir.entry
        new = regenerate(entry, schedule, accept_reassociation)
        return Module(tuple(new if f is entry else f for f in ir.functions))
    return regenerate(ir, schedule, accept_reassociation)
