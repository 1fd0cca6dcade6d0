"""Box tiles: a triangular tile computed over its whole box into a scratchpad (mechanism).

In a tile of a triangular band (``j >= i``), the point loop ``j`` starts at
``max(j_r, i)``: its trip count changes from row to row, so ``split-tiles``
leaves the diagonal tiles with exact bounds (a loop of variable length per
row, its accumulators in memory, a scalar remainder per row), several
times slower per instance than a full tile. After ``copies`` has given the
tile its accumulators in a local, ``pad_body(body, loops=("i", "j"), ...)``
drops from the named point loops every bound that uses another named loop,
so the tile runs over its box like a full tile, and guards each statement
that reads the local after the padded loops (the copy back) with the
dropped bounds, substituted through the local's subscripts::

    for k ... { for i = i_r to i_r + 6 { for j = max(j_r, i) to j_r + 64 {
        S: acc[i - i_r, j - j_r] = acc[i - i_r, j - j_r] + a * b } } }
    for x ... { for y ... { out: C[x, y] = acc[x - i_r, y - j_r] } }
  becomes
    for k ... { for i = i_r to i_r + 6 { for j = j_r to j_r + 64 { S ... } } }
    for x ... { for y ... { if (x <= y) { out: C[x, y] = acc[x - i_r, y - j_r] } } }

The added instances (``j < i``) compute into elements of the local that
nothing else reads; the statements keep their order and their values.

**Why it is exact** (:func:`require_scratch_only`, isl, on the padded nest
against the same nest unpadded): the added instances write only locals;
no original instance and no statement outside the padded loops reads an
element they write; every access of an added instance stays inside what
the unpadded nest accesses of that buffer or, for a local, inside its
declared shape. Then every original instance reads what it read before,
and everything the tile leaves behind is what it left before. Refused
(``UnsupportedNest``) besides: an integer ``/`` or ``%`` by anything but a
non-zero constant, a gathered subscript (an added instance could trap or
read anywhere), a parallel loop around or inside, a named loop left with no
bound free of the other named loops, and a kept bound that uses a loop
below the tile that is not named.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

import islpy as isl

from polyir.ir.affine import Aff, Constraint
from polyir.ir.nodes import Assign, BinOp, Buffer, Const, For, Function, If, Load, Node
from polyir.ir.verifier import expr_dtype
from polyir.ir.walk import walk_expr
from polyir.polyhedral.extract import NotPolyhedral, Scop, aff_to_isl, affine_index, extract
from polyir.tiling.bands import UnsupportedNest, loops_inside, nest_function


def pad_body(body: Sequence[Node], loops: Sequence[str], outer: set[str],
             buffers: Mapping[str, Buffer]) -> tuple[Node, ...] | None:
    """``body`` (of a tile loop, variables ``outer`` bound around it) with the
    point loops ``loops`` padded to their box and the reads of what they write
    after them guarded (see the module docstring); ``None`` when no named loop
    has a bound using another. The result still needs :func:`require_scratch_only`.

    Raises ``UnsupportedNest``."""
    inside = {loop.var: loop for loop in loops_inside(body)}
    for loop in inside.values():
        if loop.parallel or loop.mapping:
            raise UnsupportedNest(f"loop '{loop.var}' is parallel: added instances could race")
    named = set(loops)
    dropped: dict[str, list[Constraint]] = {}
    for name in loops:
        if name not in inside:
            raise UnsupportedNest(f"loop '{name}' is not in the tile")
        loop = inside[name]
        kept_lower = tuple(b for b in loop.lower if not (b.variables() & named))
        kept_upper = tuple(b for b in loop.upper if not (b.variables() & named))
        if not kept_lower or not kept_upper:
            raise UnsupportedNest(f"loop '{name}' has no {'lower' if not kept_lower else 'upper'} "
                                  f"bound free of the other named loops: no box to pad to")
        for bound in kept_lower + kept_upper:
            stray = sorted(bound.variables() - outer)
            if stray:
                raise UnsupportedNest(f"a bound of loop '{name}' ({bound}) uses {', '.join(stray)}, "
                                      f"a loop below the tile that is not padded")
        conditions = [Constraint(b, "<=", Aff.var(name)) for b in loop.lower if b not in kept_lower]
        conditions += [Constraint(Aff.var(name), "<", b) for b in loop.upper if b not in kept_upper]
        if conditions:
            dropped[name] = conditions
    if not dropped:
        return None
    written: dict[str, tuple[Aff, ...]] = {}
    out: list[Node] = []
    for node in body:
        padded = _pad(node, dropped, buffers, written) if _has_padded(node, dropped) else None
        if padded is not None:
            out.append(padded)
        else:
            out.append(_guard_reads(node, written, dropped, named))
    return tuple(out)


def _has_padded(node: Node, dropped: Mapping[str, list[Constraint]]) -> bool:
    return any(loop.var in dropped for loop in loops_inside([node]))


def _pad(node: Node, dropped: Mapping[str, list[Constraint]], buffers: Mapping[str, Buffer],
         written: dict[str, tuple[Aff, ...]]) -> Node:
    """``node`` with the dropped bounds gone; records what its statements write."""
    if isinstance(node, For):
        conditions = dropped.get(node.var, [])
        lower = tuple(b for b in node.lower if Constraint(b, "<=", Aff.var(node.var)) not in conditions)
        upper = tuple(b for b in node.upper if Constraint(Aff.var(node.var), "<", b) not in conditions)
        return replace(node, lower=lower, upper=upper,
                       body=tuple(_pad(n, dropped, buffers, written) for n in node.body))
    if isinstance(node, If):
        return replace(node, then_body=tuple(_pad(n, dropped, buffers, written) for n in node.then_body),
                       else_body=tuple(_pad(n, dropped, buffers, written) for n in node.else_body))
    if isinstance(node, Assign):
        _require_harmless(node, buffers)
        indices = tuple(affine_index(i) for i in node.indices)
        if any(i is None for i in indices):
            raise UnsupportedNest(f"statement {node.name} writes through a gathered subscript")
        known = written.setdefault(node.buffer, indices)  # type: ignore[arg-type]
        if known != indices:
            written[node.buffer] = ()  # two subscripts: no guard can be derived
        return node
    raise UnsupportedNest(f"a {type(node).__name__} in the padded loops")


def _require_harmless(node: Assign, buffers: Mapping[str, Buffer]) -> None:
    """Refuse a statement whose added instances could trap or read anywhere."""
    for expr in [node.value, *[i for i in node.indices if not isinstance(i, Aff)]]:
        for sub in walk_expr(expr):
            if isinstance(sub, Load) and any(affine_index(i) is None for i in sub.indices):
                raise UnsupportedNest(f"statement {node.name} reads through a gathered subscript: "
                                      f"an added instance could read anywhere")
            if isinstance(sub, BinOp) and sub.op in ("/", "%") \
                    and expr_dtype(sub, buffers).is_int \
                    and not (isinstance(sub.rhs, Const) and sub.rhs.value != 0):
                raise UnsupportedNest(f"statement {node.name} divides integers by a variable: "
                                      f"an added instance could trap")


def _guard_reads(node: Node, written: Mapping[str, tuple[Aff, ...]],
                 dropped: Mapping[str, list[Constraint]], named: set[str]) -> Node:
    """``node`` with each statement that reads a buffer the padded loops write
    guarded by the dropped bounds, its padded variables solved from the
    subscripts (``acc[i - i_r, j - j_r]`` read as ``acc[x - i_r, y - j_r]``:
    ``i = x``, ``j = y``). Left as it is when they cannot be solved (the
    isl check then refuses what would read an added instance's element)."""
    if isinstance(node, For):
        return replace(node, body=tuple(_guard_reads(n, written, dropped, named) for n in node.body))
    if isinstance(node, If):
        return replace(node, then_body=tuple(_guard_reads(n, written, dropped, named) for n in node.then_body),
                       else_body=tuple(_guard_reads(n, written, dropped, named) for n in node.else_body))
    if not isinstance(node, Assign):
        return node
    conditions: list[Constraint] = []
    for sub in walk_expr(node.value):
        if not isinstance(sub, Load) or not written.get(sub.buffer):
            continue
        solved = _solve(written[sub.buffer], sub.indices, named)
        if solved is None:
            return node
        for constraints in dropped.values():
            for c in constraints:
                if c.variables() & named <= set(solved):
                    guard = c.substitute(solved)
                    if guard not in conditions:
                        conditions.append(guard)
    return If(tuple(conditions), (node,)) if conditions else node


def _solve(write: tuple[Aff, ...], read: tuple[object, ...], padded: set[str]) -> dict[str, Aff] | None:
    """The padded variables as affine expressions of the reader's, from
    ``write == read`` subscript by subscript; each write subscript must hold
    one padded variable with coefficient 1 (``i - i_r``), else ``None``."""
    if len(write) != len(read):
        return None
    solved: dict[str, Aff] = {}
    for w, r in zip(write, read, strict=True):
        index = affine_index(r)
        mine = sorted(w.variables() & padded)
        if index is None or len(mine) != 1 or w.coefficient(mine[0]) != 1:
            if mine:
                return None
            continue
        var = mine[0]
        solved[var] = index - (w - Aff.var(var))
    return solved


def require_scratch_only(exact: Function, padded: Function, index: int, what: str) -> None:
    """Raise ``UnsupportedNest`` unless nest ``index`` of ``padded`` (the same
    statements as in ``exact``, some over larger domains) is exact: the added
    instances write only locals, nothing but added instances reads what they
    write, and their accesses stay inside ``exact``'s footprints or, for a
    local, its declared shape (isl)."""
    try:
        before = extract(nest_function(exact, index))
        after = extract(nest_function(padded, index), before.ctx)
    except NotPolyhedral as error:
        raise UnsupportedNest(f"{what}: {error}") from None
    params = {p.name for p in padded.params}
    reach = before.reads.union(before.writes).range()
    empty = isl.UnionSet.empty(before.context.get_space())
    added_writes, original_reads = empty, empty
    for statement in after:
        old = before.statements.get(statement.name)
        if old is None:
            raise UnsupportedNest(f"{what}: statement {statement.name} is new")
        extra = statement.domain.subtract(old.domain)
        # writes first: a global written by added instances is the reason to give
        for access in sorted(statement.accesses, key=lambda a: a.kind != "write"):
            if access.kind == "read":
                original_reads = original_reads.union(
                    isl.UnionSet.from_set(access.relation.intersect_domain(old.domain).range()))
            if extra.is_empty():
                continue
            elements = access.relation.intersect_domain(extra).range()
            buffer = padded.buffers[access.buffer]
            if access.kind == "write":
                if buffer.name in params:
                    raise UnsupportedNest(f"{what}: statement {statement.name} would write "
                                          f"{access.buffer}, not a local, in added instances")
                added_writes = added_writes.union(isl.UnionSet.from_set(elements))
            allowed = _part(reach, elements.get_space()) if buffer.name in params \
                else _declared_box(elements.get_space(), buffer.shape, before)
            if not elements.is_subset(allowed):
                raise UnsupportedNest(f"{what}: statement {statement.name} would access "
                                      f"{access.buffer} outside what the nest accesses")
    if not added_writes.intersect(original_reads).is_empty():
        raise UnsupportedNest(f"{what}: an element the added instances write is read by an "
                              f"original instance")


def _part(union: isl.UnionSet, space: isl.Space) -> isl.Set:
    """The part of ``union`` in ``space`` (empty when none)."""
    found = isl.Set.empty(space)
    pieces: list[isl.Set] = []
    union.foreach_set(pieces.append)
    for piece in pieces:
        if piece.get_space().is_equal(space):
            found = found.union(piece)
    return found


def _declared_box(space: isl.Space, shape: Sequence[Aff], scop: Scop) -> isl.Set:
    """The elements of a local buffer of ``shape`` in ``space`` (its last
    dimensions; the leading ones, its expansion along enclosing loops, free)."""
    dims = space.dim(isl.dim_type.set)
    names = [f"d{k}" for k in range(dims)]
    first = dims - len(shape)
    conditions = [f"0 <= {names[first + k]} < {aff_to_isl(extent, {})}"
                  for k, extent in enumerate(shape)]
    name = space.get_tuple_name(isl.dim_type.set)
    text = (f"{scop.param_space} -> {{ {name}[{', '.join(names)}] : "
            f"{' and '.join(conditions) or '0 = 0'} }}")
    return isl.Set(text, context=scop.ctx)


__all__ = ["pad_body", "require_scratch_only"]
