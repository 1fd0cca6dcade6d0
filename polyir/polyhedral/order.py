"""The original execution order of a scop's statement instances, one pair of statements at a time.

Each statement's instances run in the lexicographic order of its 2d+1 time
vector ``[p0, i1, p1, ..., id, pd]`` (``Scop.schedule_vectors``: textual
positions as integers, loop values as dimensions; shorter vectors padded with
zeros). Comparing two statements' vectors position by position, the
constant positions decide statically: the pair is ordered by the loop values
before the first constant position where they differ, and not by anything
after it. So the relation "an instance of ``first`` runs before one of
``second``" needs at most one disjunct per loop value compared (none at all
when a constant decides first), where the same relation over the whole
padded time space (``isl.Map.lex_lt`` composed with both schedules) needs
``2d+1`` disjuncts and existentials for every pair at once. Dataflow built
from these per-pair relations (``polyir.polyhedral.equivalence``) is the same
set, computed without parametric optimisation (see
``polyir.polyhedral.dependences.last_writers`` for why not ``lexmax``).
"""
from __future__ import annotations

import weakref
from collections.abc import Iterable, Sequence

import islpy as isl

from polyir.polyhedral.extract import Scop, isl_name

Entry = str | int
"""One time-vector entry: a dimension name or a textual position."""


def precedence_disjuncts(first: Sequence[Entry], second: Sequence[Entry]) -> list[list[tuple[Entry, str, Entry]]]:
    """When time vector ``first`` is lexicographically before ``second``, as a
    disjunction of conjunctions of ``(left, op, right)`` constraints (``op``
    ``=`` or ``<``; ``left`` from ``first``, ``right`` from ``second``); an
    empty list: never; a list holding an empty conjunction: always.

    Vectors of different lengths compare as if padded with zeros."""
    width = max(len(first), len(second))
    padded = (list(first) + [0] * (width - len(first)), list(second) + [0] * (width - len(second)))
    equal: list[tuple[Entry, str, Entry]] = []
    found: list[list[tuple[Entry, str, Entry]]] = []
    for left, right in zip(*padded, strict=True):
        if isinstance(left, int) and isinstance(right, int):
            if left < right:
                found.append(list(equal))
            if left != right:
                return found
            continue
        found.append([*equal, (left, "<", right)])
        equal.append((left, "=", right))
    return found


_MAPS: weakref.WeakKeyDictionary[Scop, dict[tuple[str, str], isl.Map]] = weakref.WeakKeyDictionary()
"""Scop -> the :func:`precedence` maps built for it (a scop never changes)."""


def precedence(scop: Scop, first: str, second: str) -> isl.Map:
    """``{ first[a] -> second[b] : instance a of first runs before instance b of
    second }`` under the original schedule (not restricted to the statements'
    domains). Kept per scop: callers must not change the map they get."""
    known = _MAPS.setdefault(scop, {})
    found = known.get((first, second))
    if found is None:
        found = known[(first, second)] = _build_precedence(scop, first, second)
    return found


def _build_precedence(scop: Scop, first: str, second: str) -> isl.Map:
    vectors = scop.schedule_vectors()
    s1, s2 = scop.statements[first], scop.statements[second]
    names1 = _fresh_names(s1.dims, "_a", scop.params)
    names2 = _fresh_names(s2.dims, "_b", scop.params)

    def side(entry: Entry, names: dict[str, str]) -> str:
        return str(entry) if isinstance(entry, int) else names[entry]

    clauses = []
    for conjunction in precedence_disjuncts(vectors[first], vectors[second]):
        terms = [f"{side(a, names1)} {op} {side(b, names2)}" for a, op, b in conjunction]
        clauses.append("(" + (" and ".join(terms) or "true") + ")")
    condition = " or ".join(clauses) or "false"
    text = (f"{scop.param_space} -> {{ {isl_name(first)}[{', '.join(names1.values())}] -> "
            f"{isl_name(second)}[{', '.join(names2.values())}] : {condition} }}")
    return scop.isl_map(text)


def _fresh_names(dims: Sequence[str], prefix: str, params: Iterable[str]) -> dict[str, str]:
    """Dimension -> a name for it that no parameter has (``_a0``, ``_a1``, ...)."""
    taken = {isl_name(p) for p in params}
    while any(f"{prefix}{k}" in taken for k in range(len(dims))):
        prefix = "_" + prefix
    return {dim: f"{prefix}{k}" for k, dim in enumerate(dims)}


def precedence_union(scop: Scop, firsts: Iterable[str], seconds: Iterable[str]) -> isl.UnionMap:
    """:func:`precedence` of every pair of ``firsts`` and ``seconds``, as one union map."""
    result = isl.UnionMap.empty(scop.context.get_space())
    later = list(dict.fromkeys(seconds))
    for first in dict.fromkeys(firsts):
        for second in later:
            result = result.union(isl.UnionMap.from_map(precedence(scop, first, second)))
    return result


__all__ = ["precedence", "precedence_disjuncts", "precedence_union"]
