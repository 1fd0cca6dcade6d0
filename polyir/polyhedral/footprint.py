"""Footprints: the region of each buffer a loop nest touches below a depth.

``footprints(function, nest, depth)`` looks at the statements of top-level
node ``nest`` below its first ``depth`` loops and returns, per buffer, a
:class:`Footprint`: the isl map from the values of those outer loop
variables to the elements touched (reads, writes, both), and its bounding
box, each dimension's lowest and highest element as affine expressions of
the outer loop variables and the symbols (isl's ``dim_min``/``dim_max``).
A bound that isl gives as one piece is an :class:`Aff`; several pieces give
``max(...)`` or ``min(...)`` lists when one of those is exact, and a safe
(looser) list otherwise (``Bound.exact`` is then False).

``loop_footprints(function, loop)`` does the same below one loop (its
variable and the variables of enclosing loops are the outer ones).

This is the basis of scratchpad copies, packing and buffer shrinking: the
box's extent ``upper - lower + 1`` bounds the local buffer needed per
iteration of the outer loops.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import islpy as isl

from polyir.ir.affine import Aff
from polyir.ir.nodes import Function, Module
from polyir.polyhedral.extract import Scop, StatementInfo, extract, isl_name


@dataclass(frozen=True)
class Bound:
    """One side of a box dimension: ``kind`` is ``"aff"`` (one expression),
    ``"max"`` or ``"min"`` (of ``exprs``); ``exact`` is False when the list
    is only a safe over-approximation of isl's piecewise bound."""

    kind: str
    exprs: tuple[Aff, ...]
    exact: bool = True

    def __str__(self) -> str:
        if self.kind == "aff":
            return str(self.exprs[0])
        return f"{self.kind}({', '.join(map(str, self.exprs))})"

    def evaluate(self, env: dict[str, int]) -> int:
        values = [e.evaluate(env) for e in self.exprs]
        return max(values) if self.kind == "max" else min(values) if self.kind == "min" else values[0]


Box = tuple[tuple[Bound, Bound], ...]
"""Per buffer dimension, its ``(lower, upper)`` bounds (inclusive)."""


class Footprint:
    """The elements of ``buffer`` touched below the outer loops ``outer``.

    ``relation``, ``reads`` and ``writes`` are isl maps ``[outer] -> buffer[...]``
    with the function's symbols as parameters; ``box`` holds ``(lower,
    upper)`` (inclusive) per buffer dimension. ``box`` may be given as a
    function of no arguments, called on first use: isl's parametric
    ``dim_min``/``dim_max`` cost more than the maps, and most callers want
    the box of one buffer of a nest's footprints."""

    __slots__ = ("buffer", "outer", "relation", "reads", "writes", "_box")

    def __init__(self, buffer: str, outer: tuple[str, ...], relation: isl.Map, reads: isl.Map,
                 writes: isl.Map, box: Box | Callable[[], Box]):
        self.buffer, self.outer = buffer, outer
        self.relation, self.reads, self.writes = relation, reads, writes
        self._box = box

    @property
    def box(self) -> Box:
        if callable(self._box):
            self._box = self._box()
        return self._box

    def __str__(self) -> str:
        dims = ", ".join(f"{lo}..{hi}" for lo, hi in self.box)
        return f"{self.buffer}[{dims}]"

    def __repr__(self) -> str:
        from polyir.polyhedral.report import short
        return short(f"<Footprint {self}>")


class Footprints(dict[str, Footprint]):
    """Buffer name -> :class:`Footprint`, for the loops ``outer`` (a dict, so
    ``fps["A"]`` and ``.items()`` work; iterating gives the buffer names).
    ``str`` gives one line per buffer, a notebook shows a table."""

    def __init__(self, items: dict[str, Footprint], outer: tuple[str, ...] = ()):
        super().__init__(items)
        self.outer = outer

    def __repr__(self) -> str:
        from polyir.polyhedral.report import footprints_summary, short
        return short(f"<{footprints_summary(list(self.values()), self.outer)}>")

    def __str__(self) -> str:
        from polyir.polyhedral.report import footprints_text
        return footprints_text(list(self.values()), self.outer)

    def _repr_markdown_(self) -> str:
        from polyir.polyhedral.report import footprints_markdown
        return footprints_markdown(list(self.values()), self.outer)


def footprints(target: Scop | Function | Module, nest: int = 0, depth: int = 0) -> Footprints:
    """Per buffer, the footprint of top-level node ``nest`` below its first
    ``depth`` loops; raises ``ValueError`` when those loops do not enclose
    every statement of the nest."""
    scop = target if isinstance(target, Scop) else extract(target)
    members = scop.statements_in_nest(nest)
    if not members:
        raise ValueError(f"top-level node {nest} of {scop.function.name} holds no statement")
    outer = members[0].loops[:depth]
    if len(outer) < depth or any(s.loops[:depth] != outer for s in members):
        raise ValueError(f"the first {depth} loops of nest {nest} do not enclose all its statements")
    return _footprints(scop, members, depth)


def loop_footprints(target: Scop | Function | Module, loop: int | str) -> Footprints:
    """Per buffer, the footprint of the body of ``loop`` (id or unique variable name)
    as a function of it and its enclosing loops."""
    scop = target if isinstance(target, Scop) else extract(target)
    info = scop.loop(loop)
    return _footprints(scop, scop.statements_in(info.id), info.depth)


def statement_footprints(target: Scop | Function | Module, statements: Sequence[str],
                         loop: int | str) -> Footprints:
    """Per buffer, the footprint of the named ``statements`` alone below ``loop``
    (id or unique variable name), as a function of it and its enclosing loops
    (a copy statement's own reads, without the other accesses of the loop);
    raises ``ValueError`` for a statement that is not inside ``loop``."""
    scop = target if isinstance(target, Scop) else extract(target)
    info = scop.loop(loop)
    members = [scop.statements[name] for name in statements]
    outside = [s.name for s in members if info.id not in s.loops]
    if outside or not members:
        raise ValueError(f"statement(s) {', '.join(outside) or '(none)'} not inside loop '{info.var}'")
    return _footprints(scop, members, info.depth)


def _footprints(scop: Scop, members: list[StatementInfo], depth: int) -> Footprints:
    outer_vars = members[0].loop_vars[:depth]
    outer_dims = [f"o{k}" for k in range(depth)]
    per_buffer: dict[str, dict[str, isl.Map]] = {}
    for stmt in members:
        dims = ", ".join(stmt.dims)
        proj = scop.isl_map(f"{scop.param_space} -> {{ {isl_name(stmt.name)}[{dims}] -> "
                       f"[{', '.join(stmt.dims[:depth])}] }}")
        for acc in stmt.accesses:
            rel = acc.relation.apply_domain(proj)
            slot = per_buffer.setdefault(acc.buffer, {})
            slot[acc.kind] = rel if acc.kind not in slot else slot[acc.kind].union(rel)
    result: dict[str, Footprint] = {}
    for buffer, kinds in per_buffer.items():
        some = next(iter(kinds.values()))
        empty = isl.Map.empty(some.get_space())
        reads = kinds.get("read", empty).coalesce()
        writes = kinds.get("write", empty).coalesce()
        both = reads.union(writes).coalesce()
        for k, name in enumerate(outer_dims):
            both = both.set_dim_name(isl.dim_type.in_, k, name)
        result[buffer] = Footprint(buffer, outer_vars, both, reads, writes,
                                   _box_of(scop, both, outer_vars))
    return Footprints(result, outer_vars)


def _box_of(scop: Scop, relation: isl.Map, outer_vars: tuple[str, ...]) -> Callable[[], Box]:
    """:func:`bounding_box` of ``relation``, to be computed when first asked."""
    return lambda: bounding_box(scop, relation, outer_vars)


def bounding_box(scop: Scop, relation: isl.Map, outer_vars: tuple[str, ...]) -> Box:
    """Per output dimension of ``relation`` its (lower, upper) bound in terms of the
    input dimensions (named ``outer_vars``) and the parameters."""
    n_params = relation.dim(isl.dim_type.param)
    depth = relation.dim(isl.dim_type.in_)
    region = relation.move_dims(isl.dim_type.param, n_params, isl.dim_type.in_, 0, depth).range()
    names = {isl_name(p): p for p in scop.params}
    for k, var in enumerate(outer_vars):
        names[str(region.get_dim_name(isl.dim_type.param, n_params + k))] = var
    box = []
    # simplified against the outer values that reach the region: a tile loop's
    # stride (``kc`` a multiple of 256) would otherwise show as ``256*(kc // 256)``
    reached = region.params()
    for k in range(region.dim(isl.dim_type.set)):
        lower = _bound(region.dim_min(k).gist(reached), names, "lower")
        upper = _bound(region.dim_max(k).gist(reached), names, "upper")
        box.append((lower, upper))
    return tuple(box)


def _bound(pw: isl.PwAff, names: dict[str, str], side: str) -> Bound:
    pieces: list[isl.Aff] = []
    pw.foreach_piece(lambda _set, aff: pieces.append(aff))
    exprs = tuple(isl_aff_to_aff(aff, names) for aff in pieces)
    if len(pieces) == 1:
        return Bound("aff", exprs)
    domain = pw.domain()
    for kind in ("max", "min"):
        combined = None
        for aff in pieces:
            part = isl.PwAff.from_aff(aff).intersect_domain(domain)
            combined = part if combined is None else (combined.max(part) if kind == "max" else combined.min(part))
        if combined is not None and combined.is_equal(pw):
            return Bound(kind, _dedupe(exprs))
    # each piece's value is at least the smallest of all pieces: a safe bound
    return Bound("min" if side == "lower" else "max", _dedupe(exprs), exact=False)


def _dedupe(exprs: tuple[Aff, ...]) -> tuple[Aff, ...]:
    seen: list[Aff] = []
    for e in exprs:
        if e not in seen:
            seen.append(e)
    return tuple(seen)


def isl_aff_to_aff(aff: isl.Aff, names: dict[str, str]) -> Aff:
    """A polyir ``Aff`` equal to an integer-valued isl affine expression
    (parameters and set dims by name; integer divisions become ``//``)."""
    numerator, denominator = _scaled(aff, names)
    return numerator // denominator if denominator != 1 else numerator


def _scaled(aff: isl.Aff, names: dict[str, str]) -> tuple[Aff, int]:
    den = int(aff.get_denominator_val().to_python())
    result = Aff.const(int((aff.get_constant_val() * den).to_python()))
    for dim_type in (isl.dim_type.param, isl.dim_type.in_):
        for k in range(aff.dim(dim_type)):
            coeff = int((aff.get_coefficient_val(dim_type, k) * den).to_python())
            if coeff:
                name = str(aff.get_dim_name(dim_type, k))
                result = result + Aff.var(names.get(name, name)) * coeff
    for k in range(aff.dim(isl.dim_type.div)):
        coeff = int((aff.get_coefficient_val(isl.dim_type.div, k) * den).to_python())
        if coeff:
            inner_num, inner_den = _scaled(aff.get_div(k), names)
            result = result + (inner_num // inner_den) * coeff
    return result, den
