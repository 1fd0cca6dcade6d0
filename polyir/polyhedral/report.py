"""Readable forms of the analysis records: short text, and Markdown for notebooks.

The records of the polyhedral layer (:class:`~polyir.polyhedral.extract.Scop`,
:class:`~polyir.polyhedral.dependences.Dependences`,
:class:`~polyir.polyhedral.legality.Legality`, ``Witness``,
:class:`~polyir.polyhedral.footprint.Footprints`) print through these
functions: ``str`` gives a few lines of plain text, ``repr`` one short line,
``_repr_markdown_`` a table that a notebook renders. Formatting lives here so
that the records stay plain data.

Loops are named by their variables (unique per function), accesses by their
subscripts (``A[i - 1, j]``, recovered from the isl relation), sets by their
constraints with the parameter prefix left out.
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

import islpy as isl

if TYPE_CHECKING:
    from polyir.polyhedral.dependences import Dependence, Dependences
    from polyir.polyhedral.extract import Access, Scop, StatementInfo
    from polyir.polyhedral.footprint import Footprint
    from polyir.polyhedral.legality import Legality, Witness

MAX_ROWS = 40
"""Rows a Markdown table shows before it says how many more there are."""

REPR_LIMIT = 160
"""The longest ``repr`` of an analysis record (a test keeps them short)."""


def short(text: str, limit: int = REPR_LIMIT) -> str:
    """``text`` on one line, cut to ``limit`` characters with an ellipsis."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[:limit - 3].rstrip() + "..."


def plural(count: int, word: str, many: str | None = None) -> str:
    """``1 remark``, ``2 remarks`` (``many``: the plural when not ``word + "s"``)."""
    return f"{count} {word if count == 1 else many or word + 's'}"


def isl_body(obj: object) -> str:
    """isl text without its ``[params] -> { ... }`` wrapping (``S0[i] : 0 <= i < N``)."""
    text = str(obj)
    if " -> {" in text and text.startswith("["):
        text = text.split(" -> {", 1)[1]
    text = text.strip()
    if text.startswith("{"):
        text = text[1:]
    if text.endswith("}"):
        text = text[:-1]
    return text.strip()


def cell(text: object) -> str:
    """``text`` made safe for one Markdown table cell."""
    return str(text).replace("|", "\\|").replace("\n", " ")


def table(header: Sequence[str], rows: Iterable[Sequence[object]], limit: int = MAX_ROWS) -> str:
    """A Markdown table; after ``limit`` rows a line says how many were left out."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    rows = list(rows)
    for row in rows[:limit]:
        lines.append("| " + " | ".join(cell(x) for x in row) + " |")
    if len(rows) > limit:
        lines.append(f"\n... and {len(rows) - limit} more")
    return "\n".join(lines)


# ------------------------------------------------------------------ accesses
def _dim_names(scop: Scop, stmt: StatementInfo) -> dict[str, str]:
    from polyir.polyhedral.extract import isl_name
    names = {isl_name(p): p for p in scop.params}
    names.update(dict(zip(stmt.dims, stmt.loop_vars, strict=False)))
    return names


def access_text(scop: Scop, access: Access) -> str:
    """``A[i - 1, j]`` for an affine access, else the isl relation's text
    (a gather spans a whole dimension: ``may read E[...]``)."""
    from polyir.polyhedral.footprint import isl_aff_to_aff
    stmt = scop.statements[access.statement]
    relation = access.relation.gist_domain(stmt.domain)
    if access.exact and relation.is_single_valued():
        pieces: list[isl.MultiAff] = []
        isl.PwMultiAff.from_map(relation).foreach_piece(lambda _set, ma: pieces.append(ma))
        if len(pieces) == 1:
            names = _dim_names(scop, stmt)
            ma = pieces[0]
            subscripts = [str(isl_aff_to_aff(ma.get_at(k), names)) for k in range(ma.dim(isl.dim_type.out))]
            return f"{access.buffer}[{', '.join(subscripts)}]" if subscripts else access.buffer
    return isl_body(relation)


def access_phrase(scop: Scop, access: Access) -> str:
    """``reads A[i, k]`` (``may read ...`` for a gather)."""
    verb = f"{access.kind}s" if access.exact else f"may {access.kind}"
    return f"{verb} {access_text(scop, access)}"


def access_line(scop: Scop, access: Access) -> str:
    """``S1 reads A[i, k]``."""
    return f"{access.statement} {access_phrase(scop, access)}"


# ------------------------------------------------------------------ scop
def statement_heading(stmt: StatementInfo) -> str:
    return f"{stmt.name}[{', '.join(stmt.loop_vars)}]"


def domain_text(scop: Scop, stmt: StatementInfo) -> str:
    """The constraints of ``stmt``'s domain, the symbols' context left out."""
    body = isl_body(stmt.domain.gist_params(scop.context))
    return body.split(":", 1)[1].strip() if ":" in body else "(every point)"


def scop_summary(scop: Scop) -> str:
    n, loops = len(scop.statements), len(scop.loops)
    params = ", ".join(scop.params) or "none"
    return (f"Scop of {scop.function.name}: {n} statement{'s' * (n != 1)}, "
            f"{loops} loop{'s' * (loops != 1)}, symbols {params}")


def scop_text(scop: Scop) -> str:
    """Per statement: instance tuple, domain, accesses and 2d+1 schedule."""
    vectors = scop.schedule_vectors()
    lines = [scop_summary(scop), f"  context: {isl_body(scop.context).lstrip(':').strip() or 'true'}"]
    for stmt in scop.statements.values():
        lines.append(f"  {statement_heading(stmt)} : {domain_text(scop, stmt)}")
        for access in stmt.writes + stmt.reads:
            lines.append(f"    {access_phrase(scop, access)}")
        time = ", ".join(str(dict(zip(stmt.dims, stmt.loop_vars, strict=False)).get(str(x), x))
                         for x in vectors[stmt.name])
        lines.append(f"    schedule [{time}]" + (f"  (reduction on {stmt.reduction[0]} with "
                                                   f"{stmt.reduction[1]})" if stmt.reduction else ""))
    return "\n".join(lines)


def scop_markdown(scop: Scop) -> str:
    vectors = scop.schedule_vectors()
    rows = []
    for stmt in scop.statements.values():
        names = dict(zip(stmt.dims, stmt.loop_vars, strict=False))
        rows.append((f"`{statement_heading(stmt)}`", f"`{domain_text(scop, stmt)}`",
                     ", ".join(f"`{access_text(scop, a)}`" for a in stmt.writes),
                     ", ".join(f"`{access_text(scop, a)}`" for a in stmt.reads),
                     "`[" + ", ".join(str(names.get(str(x), x)) for x in vectors[stmt.name]) + "]`"))
    return f"**{scop_summary(scop)}**\n\n" + table(
        ("statement", "domain", "writes", "reads", "schedule"), rows)


# ------------------------------------------------------------------ dependences
def carried_text(scop: Scop, dep: Dependence) -> str:
    """``i, j`` (the loops that carry it), with ``loop-independent`` when some
    instance pair is equal on every common loop."""
    parts = [scop.loops[loop].var for loop in dep.carried_loops()]
    if 0 in dep.carried:
        parts.append("loop-independent")
    return ", ".join(parts) or "-"


def vector_text(dep: Dependence) -> str:
    if dep.distance is not None:
        return f"distance ({', '.join(map(str, dep.distance))})"
    if dep.direction:
        return f"direction ({', '.join(dep.direction)})"
    return ""


def dependences_summary(deps: Dependences) -> str:
    from polyir.polyhedral.dependences import ALL_KINDS
    counts = ", ".join(f"{k}={sum(1 for d in deps if d.kind == k)}" for k in ALL_KINDS)
    return f"Dependences of {deps.scop.function.name}: {len(deps)} ({counts})"


def dependences_markdown(deps: Dependences) -> str:
    scop = deps.scop
    rows = [(d.kind.upper(), f"{d.source} → {d.sink}", d.buffer, carried_text(scop, d),
             vector_text(d), "yes" if d.reduction else "") for d in deps]
    return f"**{dependences_summary(deps)}**\n\n" + table(
        ("kind", "source → sink", "buffer", "carried by", "vector", "reduction"), rows)


# ------------------------------------------------------------------ legality
def witness_markdown(witness: Witness) -> str:
    elem = ", ".join(map(str, witness.element))
    params = ", ".join(f"{k}={v}" for k, v in witness.params)
    text = (f"`{witness.source}` {witness.source_access} `{witness.buffer}[{elem}]` before "
            f"`{witness.sink}` {witness.sink_access} it; {witness.consequence}")
    return text + (f" (at {params})" if params else "")


def legality_markdown(result: Legality) -> str:
    if result.legal:
        return "**legal**"
    text = f"**illegal**: {result.reason}"
    if result.witness is not None:
        text += f"\n\nwitness: {witness_markdown(result.witness)}"
    if len(result.violations) > 1:
        text += f"\n\n{len(result.violations)} dependences are violated."
    return text


# ------------------------------------------------------------------ footprints
def extent_text(footprint: Footprint) -> str:
    """Elements per iteration of the outer loops: ``1 x M`` (a product of the
    box's extents; ``?`` where a bound is a max/min list)."""
    from polyir.ir.affine import Aff
    parts = []
    for lower, upper in footprint.box:
        if lower.kind == "aff" and upper.kind == "aff":
            extent: Aff = upper.exprs[0] - lower.exprs[0] + 1
            text = str(extent)
            parts.append(text if extent.is_constant or len(extent.terms) == 1 and not extent.constant
                         else f"({text})")
        else:
            parts.append("?")
    return " x ".join(parts) or "1"


def accessed_text(footprint: Footprint) -> str:
    kinds = [k for k, m in (("reads", footprint.reads), ("writes", footprint.writes)) if not m.is_empty()]
    return " and ".join(kinds)


def footprints_summary(items: Sequence[Footprint], outer: tuple[str, ...]) -> str:
    below = f"below loops ({', '.join(outer)})" if outer else "of the whole nest"
    return f"Footprints {below}: {', '.join(f.buffer for f in items) or 'no buffer'}"


def footprints_text(items: Sequence[Footprint], outer: tuple[str, ...]) -> str:
    lines = [footprints_summary(items, outer)]
    for f in items:
        lines.append(f"  {f}  ({accessed_text(f)}; {extent_text(f)} elements)")
    return "\n".join(lines)


def footprints_markdown(items: Sequence[Footprint], outer: tuple[str, ...]) -> str:
    rows = [(f"`{f.buffer}`", accessed_text(f), f"`{f}`", f"`{extent_text(f)}`",
             "yes" if all(lo.exact and hi.exact for lo, hi in f.box) else "no") for f in items]
    return f"**{footprints_summary(items, outer)}**\n\n" + table(
        ("buffer", "accessed", "box", "elements", "exact"), rows)
