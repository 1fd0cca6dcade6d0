"""Query blocking for the online traversal: a block of rows against one key tile.

After :func:`polyir.fusion.online.online_reductions` a row loop holds one
traversal over key tiles per row ``i``::

    for i { m = -inf; l = 0; o[i, :] = 0
            for jt step T { s[j] = q[i] . k[j];  m = max(..);  alpha = ..;
                            w[j] = exp(s[j] - m);  l = l * alpha + sum w;
                            o[i, :] = o[i, :] * alpha + sum w[j] * v[j, :] }
            o[i, :] = o[i, :] / l }

:func:`block_rows` strip-mines ``i`` by ``B``, moves the key-tile loop out of
the rows of a block and distributes the rows over its statements (the loop
structure of FlashAttention)::

    for i0 step B { m[B] = -inf; ...
                    for jt step T { for i in block: for j: s[i, j] = q[i] . k[j]   (a B x T x D product)
                                    for i in block: m[i] = max(..) ...
                                    for i in block: for j: for d: o[i, d] += w[i, j] * v[j, d] }
                    for i in block: o[i, :] = o[i, :] / l[i] }

so ``q . k`` for a block is a small matrix product (``auto-tile`` gives it a
register tile), a key tile is read once per block rather than once per row,
and still no more than ``B x T`` scores exist. The per-row scalars (the
running max, sum, correction) and the per-row tiles become arrays with a
leading dimension of ``B``.

**Legality** (checked; otherwise the loop stays as it is and the caller says
why): the row loop is a plain loop; every buffer its body writes, except the
loop-scoped locals (which become per-row arrays), is accessed in it only at
subscripts with one dimension equal to the same ``i + c`` (so two rows touch
disjoint elements and any order of rows is allowed; moving the key loop out
and distributing the rows only reorders instances of different rows). A
``j`` loop inside the key tile whose iterations are independent in the same
sense is split into one loop per statement (the scores' init, accumulation
and scale), so the product is a perfect band.

**The key range of a block** is the union of its rows' ranges: a bound that
depends on ``i`` (a causal mask turned into bounds) is taken at the row that
widens it, and each ``j`` loop keeps its row's own bounds. A key tile that is
empty for a row then leaves that row's values as they are: its max is
unchanged, so its correction is exactly ``1`` (multiplying by 1 is exact).
Rounding is otherwise that of the unblocked traversal, except that a row's
tiles start at the block's first key rather than its own (a different
partition into tiles; the bound of the online rewrite applies).
"""
from __future__ import annotations

from dataclasses import replace

from polyir.ir.affine import Aff
from polyir.ir.canonical import rename_nodes
from polyir.ir.names import claim_name
from polyir.ir.nodes import Assign, Buffer, Expr, For, If, Load, Node
from polyir.ir.walk import (
    STATEMENT_NODES,
    buffer_accesses,
    loads,
    map_loads,
    statements,
    substitute,
    walk_nodes,
)


class RowsRefused(Exception):
    """The row loop cannot be blocked; the message says which condition failed."""


def _bound_vars(nodes: tuple[Node, ...]) -> set[str]:
    return {n.var for n in walk_nodes(nodes) if isinstance(n, For)}


def _accesses(nodes: tuple[Node, ...], buffer: str) -> list[tuple]:
    found: list[tuple] = []
    for s in statements(nodes):
        if not isinstance(s, Assign):
            continue
        if s.buffer == buffer:
            found.append(tuple(s.indices))
        found += [tuple(load.indices) for load in loads(s.value) if load.buffer == buffer]
    return found


def independent_rows(loop: For, private: set[str]) -> str | None:
    """``None`` when no two iterations of ``loop`` touch the same element of a
    buffer the body writes (``private`` buffers aside), else why not."""
    inner = _bound_vars(loop.body)
    _, writes = buffer_accesses(loop.body)
    for buffer in sorted(writes - private):
        subscripts = _accesses(loop.body, buffer)
        rank = min((len(s) for s in subscripts), default=0)
        found = False
        for dim in range(rank):
            first = subscripts[0][dim]
            if not isinstance(first, Aff) or first.coefficient(loop.var) != 1 \
                    or first.variables() & inner:
                continue
            if all(s[dim] == first for s in subscripts):
                found = True
                break
        if not found:
            return f"'{buffer}' is not accessed at one subscript i + c in every row"
    return None


def _expand_accesses(nodes: tuple[Node, ...], expanded: dict[str, str], row: Aff) -> tuple[Node, ...]:
    """``nodes`` with each access ``L[idx]`` of an expanded local ``L`` turned
    into ``L_rows[row, idx]``."""
    def load(ld: Load) -> Expr:
        if ld.buffer in expanded:
            return Load(expanded[ld.buffer], (row,) + tuple(ld.indices))
        return ld

    def node(n: Node) -> Node:
        if isinstance(n, Assign):
            value = map_loads(n.value, load)
            indices = tuple(i if isinstance(i, Aff) else map_loads(i, load) for i in n.indices)
            if n.buffer in expanded:
                return replace(n, buffer=expanded[n.buffer], indices=(row,) + indices, value=value)
            return replace(n, indices=indices, value=value)
        if isinstance(n, For):
            return replace(n, body=tuple(node(b) for b in n.body))
        if isinstance(n, If):
            return replace(n, then_body=tuple(node(b) for b in n.then_body),
                           else_body=tuple(node(b) for b in n.else_body))
        return n
    return tuple(node(n) for n in nodes)


def _widest(bounds: tuple[Aff, ...], var: str, first: Aff, last: Aff, upper: bool) -> tuple[Aff, ...]:
    """Each bound at the row of the block that widens the range most."""
    result = []
    for bound in bounds:
        c = bound.coefficient(var)
        if c == 0:
            result.append(bound)
        else:
            result.append(bound.substitute({var: last if (c > 0) == upper else first}))
    return tuple(result)


def _split_tile_loop(loop: For, taken: set[str]) -> tuple[For, ...]:
    """A ``j`` loop with several nodes as one loop per node, when its iterations
    are independent (then splitting keeps each ``j``'s order)."""
    if len(loop.body) < 2 or loop.locals:
        return (loop,)
    if independent_rows(loop, set()) is not None:
        return (loop,)
    pieces = [replace(loop, body=(loop.body[0],))]
    for node in loop.body[1:]:
        var = claim_name(loop.var, taken)
        pieces.append(replace(loop, var=var, body=substitute((node,), {loop.var: Aff.var(var)})))
    return tuple(pieces)


def block_rows(loop: For, tiles: For, rows: int, taken: set[str]) -> For:
    """``loop`` (a row loop whose body holds the key-tile loop ``tiles``) with
    blocks of ``rows`` rows traversing the key tiles together (see the module
    docstring). Raises :class:`RowsRefused` when a condition does not hold."""
    if rows < 2:
        raise RowsRefused("blocks of one row")
    if not (loop.step == 1 and loop.mapping is None and not loop.parallel):
        raise RowsRefused("the row loop is not a plain sequential loop")
    position = next((k for k, n in enumerate(loop.body) if n is tiles), None)
    if position is None:
        raise RowsRefused("the key-tile loop is not directly in the row loop")
    private = {b.name for b in loop.locals} | {b.name for b in tiles.locals}
    why = independent_rows(loop, private)
    if why is not None:
        raise RowsRefused(why)
    i = loop.var
    i0 = claim_name(f"{i}_rows", taken)
    first, last = Aff.var(i0), Aff.var(i0) + (rows - 1)
    expanded: dict[str, str] = {}
    locals_: dict[str, list[Buffer]] = {"loop": [], "tiles": []}
    for scope, buffers in (("loop", loop.locals), ("tiles", tiles.locals)):
        for buffer in buffers:
            name = claim_name(f"{buffer.name}_rows", taken)
            expanded[buffer.name] = name
            locals_[scope].append(replace(buffer, name=name, shape=(Aff.const(rows),) + tuple(buffer.shape)))

    def per_row(nodes: tuple[Node, ...]) -> For:
        var = claim_name(i, taken)
        row = Aff.var(var) - Aff.var(i0)
        body = _expand_accesses(substitute(nodes, {i: Aff.var(var)}), expanded, row)
        return For(var, (Aff.var(i0),), tuple(loop.upper) + (Aff.var(i0) + rows,), body)

    inner: list[Node] = []
    for node in tiles.body:
        pieces = _split_tile_loop(node, taken) if isinstance(node, For) else (node,)
        inner += [per_row((piece,)) for piece in pieces]
    key_tiles = replace(tiles, lower=_widest(tiles.lower, i, first, last, upper=False),
                        upper=_widest(tiles.upper, i, first, last, upper=True),
                        body=_rectangular_apart(tuple(inner), first, last, taken),
                        locals=tuple(locals_["tiles"]))
    before, after = loop.body[:position], loop.body[position + 1:]
    body: list[Node] = []
    if before:
        body.append(per_row(before))
    body.append(key_tiles)
    if after:
        body.append(per_row(after))
    return For(i0, loop.lower, loop.upper, tuple(body), step=rows, locals=tuple(locals_["loop"]),
               loc=loop.loc)


def _rectangular_apart(body: tuple[Node, ...], first: Aff, last: Aff,
                       taken: set[str]) -> tuple[Node, ...]:
    """``body`` (a key tile's per-row loops, rows ``first`` to at most ``last``)
    with each per-row loop whose subtree has one key bound that varies by row
    split in two: the keys every row of the block has (the bound taken at the
    block's tightest row: a rectangle, which ``auto-tile`` register-tiles), then
    the rest (at most a block's width of keys per row: the triangle a causal
    diagonal or a sliding window leaves). Each row still runs its keys in order
    and rows are independent (the blocking's own condition), so the split only
    reorders instances of different rows."""
    result: list[Node] = []
    for node in body:
        split = _split_row_range(node, first, last, taken) if isinstance(node, For) else None
        result.extend(split if split is not None else (node,))
    return tuple(result)


def _split_row_range(row: For, first: Aff, last: Aff, taken: set[str]) -> tuple[For, For] | None:
    if row.lower != (first,):
        return None
    found: list[tuple[For, str, Aff]] = []
    for loop in walk_nodes(row.body):
        if isinstance(loop, For):
            for side, bounds in (("lower", loop.lower), ("upper", loop.upper)):
                found += [(loop, side, b) for b in bounds if row.var in b.variables()]
    if len(found) != 1:
        return None
    loop, side, bound = found[0]
    c = bound.coefficient(row.var)
    tightest = bound.substitute({row.var: first if (c > 0) == (side == "upper") else last})

    def rebuild(nodes: tuple[Node, ...], part: str) -> tuple[Node, ...]:
        out: list[Node] = []
        for n in nodes:
            if n is loop:
                if side == "upper":
                    lower, upper = (n.lower, tuple(tightest if b is bound else b for b in n.upper)) \
                        if part == "all" else (n.lower + (tightest,), n.upper)
                else:
                    lower, upper = (tuple(tightest if b is bound else b for b in n.lower), n.upper) \
                        if part == "all" else (n.lower, n.upper + (tightest,))
                out.append(replace(n, lower=lower, upper=upper))
            elif isinstance(n, For):
                out.append(replace(n, body=rebuild(n.body, part)))
            else:
                out.append(n)
        return tuple(out)

    shared = replace(row, body=rebuild(row.body, "all"))
    rest = replace(row, body=rebuild(row.body, "rest"))
    mapping: dict[str, str] = {}
    for node in walk_nodes((rest,)):
        if isinstance(node, For) or isinstance(node, STATEMENT_NODES):
            old = node.var if isinstance(node, For) else node.name
            mapping[old] = claim_name(old, taken)
    (renamed,) = rename_nodes((rest,), mapping)
    assert isinstance(renamed, For)
    return shared, renamed


__all__ = ["RowsRefused", "block_rows", "independent_rows"]
