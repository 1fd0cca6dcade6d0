"""Value-based equivalence of a rewritten program: the proof fusion uses.

A rewrite that *duplicates* statement instances (fusion with recomputation:
each consumer iteration computes the producer values it needs) or drops
instances whose values nobody reads (a producer whose buffer is now private)
is not a reordering, so schedule validity does not decide it. This module
checks what makes two programs equal instead, exactly, with isl:

Every statement of the new program ``F`` is a copy of a statement of the
original ``O`` (same body, its loop variables renamed): an *instance map*
``h`` sends each ``F`` instance to the ``O`` instance it repeats. Then ``F``
computes what ``O`` computes when

1. every read of ``F`` (instance ``x``, element ``e``) gets its value from the
   copy of the instance ``O``'s read ``h(x)`` of ``e`` gets it from (the last
   writer before it, under each program's own order), or both read the
   initial contents; and
2. for every *observable* buffer (a parameter, or a local the rest of the
   function reads), the last writer of each element in ``F`` is a copy of the
   last writer in ``O``.

By induction over ``F``'s order each instance then computes the same value as
the one it copies (statements are functions of the values they read and of
their iteration vector), and the observable final contents agree. The last
writers are computed exactly, without parametric optimisation (as
``polyir.polyhedral.dependences.last_writers`` does), from the execution
order of each pair of statements (``polyir.polyhedral.order``). Refused with
a reason (never accepted) when a program writes through a gather (a may-write) or when an instance map cannot be built.

:func:`check_equivalent` returns a :class:`~polyir.polyhedral.legality.Legality`
whose reason names the buffer and the first disagreement: the instance, the
element, the writer it would read from in each program.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import islpy as isl

from polyir.ir.affine import Aff
from polyir.ir.nodes import Function
from polyir.polyhedral.extract import Scop, aff_to_isl, extract, isl_name
from polyir.polyhedral.legality import Legality
from polyir.polyhedral.order import precedence_union


@dataclass(frozen=True)
class Copy:
    """Statement ``name`` of the new program repeats statement ``origin`` of the
    original; ``dims`` gives each of the origin's loop variables (in order) as
    an affine expression of the new statement's loop variables."""

    name: str
    origin: str
    dims: tuple[Aff, ...]


def identity_copies(scop: Scop, names: Iterable[str]) -> list[Copy]:
    """:class:`Copy` records for statements kept as they are (same loop variables)."""
    return [Copy(n, n, tuple(Aff.var(v) for v in scop.statements[n].loop_vars)) for n in names]


def _instance_map(new: Scop, old: Scop, copies: Mapping[str, Copy]) -> isl.UnionMap:
    result = isl.UnionMap.empty(new.context.get_space())
    for name, stmt in new.statements.items():
        copy = copies[name]
        origin = old.statements[copy.origin]
        names = dict(zip(stmt.loop_vars, stmt.dims, strict=True))
        exprs = ", ".join(aff_to_isl(d, names) for d in copy.dims)
        text = (f"{new.param_space} -> {{ {isl_name(name)}[{', '.join(stmt.dims)}] -> "
                f"{isl_name(origin.name)}[{exprs}] }}")
        result = result.union(isl.UnionMap.from_map(new.isl_map(text).intersect_domain(stmt.domain)))
    return result


def _touching(scop: Scop, buffer: str, kind: str) -> list[str]:
    """The statements with an access of ``kind`` to ``buffer``, in order."""
    return [name for name, stmt in scop.statements.items()
            if any(a.kind == kind and a.buffer == buffer for a in stmt.accesses)]


def read_sources(scop: Scop, buffer: str) -> tuple[isl.UnionMap, isl.UnionMap]:
    """``([reader -> element] -> last writer, [reader -> element] -> element)``
    for the reads of ``buffer`` (the last writer strictly before the read; a
    read with no writer before it has no entry). A write is dropped when
    another write of the same element falls between it and the read; when no
    element is written twice, nothing is."""
    reads = scop.access_map("read", buffer=buffer)
    writes = scop.access_map("write", buffer=buffer)
    empty = isl.UnionMap.empty(scop.context.get_space())
    if reads.is_empty() or writes.is_empty():
        return empty, reads.range_map()
    writers = _touching(scop, buffer, "write")
    before_read = precedence_union(scop, writers, _touching(scop, buffer, "read"))   # W[y] -> R[x]
    same_element = reads.range_map().apply_range(writes.reverse())   # [R[x] -> e] -> W[y]
    before = same_element.intersect(reads.domain_map().apply_range(before_read.reverse()))
    if writes.is_injective():   # no element written twice: the only writer before is the last
        return before.coalesce(), reads.range_map()
    earlier = precedence_union(scop, writers, writers).reverse()   # W2[y2] -> W1[y1], y1 first
    last = before.subtract(before.apply_range(earlier))
    return last.coalesce(), reads.range_map()


def final_writers(scop: Scop, buffer: str) -> isl.UnionMap:
    """``element -> the instance that writes it last``."""
    writes = scop.access_map("write", buffer=buffer)
    if writes.is_empty():
        return isl.UnionMap.empty(scop.context.get_space())
    written = writes.reverse()
    if writes.is_injective():
        return written.coalesce()
    writers = _touching(scop, buffer, "write")
    earlier = precedence_union(scop, writers, writers).reverse()
    return written.subtract(written.apply_range(earlier)).coalesce()


def check_equivalent(original: Function | Scop, rewritten: Function, copies: Iterable[Copy],
                     observable: Iterable[str], ctx: isl.Context | None = None,
                     what: str = "the rewrite", buffers: Iterable[str] | None = None) -> Legality:
    """Does ``rewritten`` compute what ``original`` computes (see the module
    docstring)? ``copies`` describes every statement of ``rewritten``;
    ``observable`` names the buffers whose final contents matter; ``buffers``
    (default: all) limits the check to the buffers a rewrite can affect (for
    a fusion: what the moved producer reads and writes; the order of every
    other buffer's accesses is unchanged). ``original`` may be its scop."""
    ctx = isl.DEFAULT_CONTEXT if ctx is None else ctx
    old = original if isinstance(original, Scop) else extract(original, ctx)
    new = extract(rewritten, ctx)
    by_name = {c.name: c for c in copies}
    missing = sorted(set(new.statements) - set(by_name))
    if missing:
        return Legality(False, f"{what}: no origin given for statement(s) {', '.join(missing)}")
    for scop in (old, new):
        for stmt in scop.statements.values():
            if any(a.kind == "write" and not a.exact for a in stmt.accesses):
                return Legality(False, f"{what}: statement {stmt.name} writes through a gather "
                                       f"(a may-write), which this check does not model")
    h = _instance_map(new, old, by_name)
    checked = set(new.buffers) | set(old.buffers)
    if buffers is not None:
        checked &= set(buffers)
    # a buffer neither program writes is read with its initial contents by both
    written = {a.buffer for scop in (old, new) for s in scop.statements.values() for a in s.writes}
    checked &= written
    for buffer in sorted(checked):
        problem = _reads_agree(old, new, h, buffer)
        if problem:
            return Legality(False, f"{what}: {problem}")
    for buffer in sorted(set(observable) & checked):
        mapped = final_writers(new, buffer).apply_range(h)
        expected = final_writers(old, buffer)
        if not mapped.is_equal(expected):
            diff = mapped.subtract(expected).union(expected.subtract(mapped))
            return Legality(False, f"{what}: the final contents of {buffer} would change "
                                   f"({_sample(diff)})")
    return Legality(True)


def _reads_agree(old: Scop, new: Scop, h: isl.UnionMap, buffer: str) -> str:
    new_sources, new_reads = read_sources(new, buffer)
    old_sources, old_reads = read_sources(old, buffer)
    if new_reads.is_empty():
        return ""
    elements = new_reads.range()
    # [x -> e] -> [h(x) -> e] on the reads of the new program
    lift = h.product(elements.identity()).intersect_domain(new_reads.domain())
    mapped_reads = new_reads.domain().apply(lift)
    if not mapped_reads.is_subset(old_reads.domain()):
        extra = mapped_reads.subtract(old_reads.domain())
        return f"a copy reads {buffer} where the original does not ({_sample(extra)})"
    got = new_sources.apply_range(h)
    expected = lift.apply_range(old_sources)
    if got.is_equal(expected):
        return ""
    diff = got.subtract(expected).union(expected.subtract(got))  # a missing writer counts too
    return f"a read of {buffer} would see a different write ({_sample(diff)})"


def _sample(umap: isl.UnionMap | isl.UnionSet) -> str:
    """One element of ``umap``, as isl prints it, preferring small parameters."""
    pieces: list = []
    if isinstance(umap, isl.UnionMap):
        umap.foreach_map(pieces.append)
    else:
        umap.foreach_set(pieces.append)
    for piece in pieces:
        if piece.is_empty():
            continue
        return str(piece.sample())
    return "no example"


__all__ = ["Copy", "identity_copies", "check_equivalent", "read_sources", "final_writers"]
