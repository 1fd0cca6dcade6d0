"""Reduce-reduce fusion: cascaded reductions over one axis in one traversal.

A row of softmax or attention, after producer-consumer fusion, is a block of
sibling loops over the same axis ``j``::

    m = -inf;  for j: m = max(m, x[j])                      (R1, the max)
    l = 0;     for j: l = l + exp(x[j] - m)                 (R2)
    for j: p[j] = exp(x[j] - m) / l                         (a map)
    for d: { o[d] = 0;  for j: o[d] = o[d] + p[j] * v[j, d] }   (R3)

R2 and R3 need R1's *final* value, so slicing fusion cannot merge them along
``j``. The rewrite (Milakov & Gimelshein's online softmax; Neptune's "repair
term", RedFuser's "cascaded reductions") runs them in one traversal over
tiles of ``T`` values of ``j`` with running values and a correction::

    m_prev = m;  m = max(m, max over the tile of x)
    alpha = (m == m_prev) ? 1 : exp(m_prev - m)
    e[j] = (m == -inf) ? 0 : exp(x[j] - m)          (once per tile element)
    l = l * alpha + sum e;   o[d] = o[d] * alpha + sum e[j] * v[j, d]

and after the loop the factors that do not depend on ``j`` are applied once
(``o[d] = o[d] / l``). The producer of ``x`` (the scores ``q . k``) moves
into the tile loop when nothing else reads ``x``, so no more than one tile of
it exists; where it sets ``x[j] = -inf`` under an affine guard (a causal
mask), the guard becomes the tile loop's bounds.

With ``rows=B > 1`` a row loop whose body is such a traversal, reading keys
every row shares, runs blocks of ``B`` rows against each tile
(:mod:`polyir.fusion.online_rows`). Recognition and the rule's checks are
:mod:`polyir.fusion.online_match`; this module builds the traversal.

**The rule and when it applies** (checked; otherwise a remark says which
condition failed and the reductions stay as they are):

* R1 is ``m = max(m, X)`` over ``j`` with ``m`` not indexed by ``j``;
* a dependent reduction is ``r = 0; r = r + F`` over the same ``j`` range,
  where ``F`` (after inlining maps whose only readers are such reductions)
  is ``G * c`` for a ``j``-invariant part ``c`` (factors ``* c``, ``/ c`` and
  guards ``cond ? 0 : _`` that read the final ``m``, the final results of
  the other reductions or outer values; these are applied after the loop,
  which needs the initial value 0) and a core ``G`` that is *linear* in the
  terms ``exp(X - m)`` (sums, differences, negation and products/quotients by
  ``m``-free factors), with each exponent's argument the value ``X`` whose
  max is taken. Then ``G(m') = exp(m - m') * G(m)`` (``exp`` turns shifts into
  scales, and ``+`` distributes over the scale), which is the correction.
  That ``X`` is the max's operand keeps every exponent ``<= 0`` (no overflow)
  and makes the ``-inf`` guard exact: a row that is ``-inf`` everywhere gives
  ``l = 0`` and ``o = 0``, hence the same ``NaN`` (or guarded 0) after the loop.
* the tile loop reads nothing the region writes except the tiles and ``m``;
* bounds from a guard are used only when the skipped elements are the
  constant ``-inf`` (the identity of ``max``; ``exp(-inf - m) = 0``). This
  is exact unless a skipped ``v[j, d]`` is ``inf`` or ``NaN`` (where the
  original computes ``0 * inf = NaN``).

**Rounding.** Exact in real arithmetic. In floating point each value
``exp(x - m)`` is computed against the running max and then rescaled by the
product of the corrections applied after its tile: each correction adds at
most a few ulp of relative error (one ``exp`` and one multiply), so the
results differ from the original by a relative ``O(k * eps)``, ``k`` the
number of tiles whose maximum rose (``k <= ceil(N / T)``); the hoisted
division adds one rounding. A ``NaN`` in ``X`` is propagated as ``max``
propagates it in both programs. Tests compare within tolerance.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from polyir.fusion.online_match import (
    DEFAULT_TILE,
    NEG_INF,
    Plan,
    Reduction,
    Region,
    apply_post,
    cascade_depth,
    match_region,
    plan_region,
)
from polyir.fusion.online_rows import RowsRefused, block_rows
from polyir.ir.affine import Aff
from polyir.ir.names import claim_name, names_in
from polyir.ir.nodes import (
    Assign,
    BinOp,
    Buffer,
    Call,
    Compare,
    Const,
    Expr,
    For,
    Function,
    If,
    Load,
    Node,
    Select,
)
from polyir.ir.walk import (
    buffer_accesses,
    loads,
    map_loads,
    statements,
    substitute,
    walk_nodes,
)

DEFAULT_ROWS = 1


@dataclass(frozen=True)
class OnlineResult:
    """What :func:`online_reductions` did: the new function and notes
    ``(where, why, kind)`` for the remarks (``applied`` or ``missed``)."""

    function: Function
    notes: list[tuple[str, str, str]]


# ---------------------------------------------------------------- emission
def _emit(block: tuple[Node, ...], region: Region, plan: Plan, function: Function, tile: int,
          taken: set[str], made: set[str]) -> tuple[Node, ...]:
    maximum = region.maximum
    j = region.canonical
    m = maximum.acc.load()
    buffers = function.buffers
    m_buffer = buffers[maximum.acc.buffer]
    dtype = m_buffer.dtype
    jt = claim_name(f"{j}_tile", taken)
    tile_index = Aff.var(j) - Aff.var(jt)
    lower, upper = plan.bounds
    made.add(jt)
    # a bound that varies (a row's first key) stays on the j loops, so that the
    # key tiles may start earlier (see online_rows)
    j_lower = (Aff.var(jt),) + tuple(b for b in lower if not b.is_constant)

    def stmt(buffer: str, indices: tuple, value: Expr) -> Assign:
        return Assign(claim_name("OS", taken), buffer, indices, value)

    def tile_loop(body: tuple[Node, ...]) -> For:
        var = claim_name(j, taken)
        return For(var, j_lower, tuple(upper) + (Aff.var(jt) + tile,),
                   substitute(body, {j: Aff.var(var)}))

    def scalar(base: str) -> Buffer:
        return replace(m_buffer, name=claim_name(base, taken), shape=())

    locals_: list[Buffer] = []
    scores_tile: Buffer | None = None
    if plan.scores is not None:
        scores_buffer = buffers[plan.scores[0]]
        scores_tile = replace(scores_buffer, name=claim_name(f"{plan.scores[0]}_tile", taken),
                              shape=(Aff.const(tile),))
        locals_.append(scores_tile)

    def to_tile(expr: Expr) -> Expr:
        if plan.scores is None or scores_tile is None:
            return expr
        name, prefix = plan.scores
        tile_name = scores_tile.name

        def change(load: Load) -> Expr:
            if load.buffer == name and tuple(load.indices[:-1]) == prefix and load.indices[-1] == Aff.var(j):
                return Load(tile_name, (tile_index,))
            return load
        return map_loads(expr, change)

    body: list[Node] = []
    if plan.producer is not None and scores_tile is not None:
        inner = substitute(plan.producer.body, {plan.producer.var: Aff.var(j)})
        if plan.guard_bounds:
            guard = inner[0]
            assert isinstance(guard, If)
            inner = guard.then_body

        def retarget(node: Node) -> Node:
            if isinstance(node, Assign):
                value = to_tile(node.value)
                if node.buffer == plan.scores[0]:  # type: ignore[index]
                    return replace(node, buffer=scores_tile.name, indices=(tile_index,), value=value)
                return replace(node, value=value)
            if isinstance(node, For):
                return replace(node, body=tuple(retarget(n) for n in node.body))
            if isinstance(node, If):
                return replace(node, then_body=tuple(retarget(n) for n in node.then_body),
                               else_body=tuple(retarget(n) for n in node.else_body))
            return node
        body.append(tile_loop(tuple(retarget(n) for n in inner)))

    operand = to_tile(maximum.operand)
    previous, alpha = scalar(f"{maximum.acc.buffer}_prev"), scalar("alpha")
    weights = replace(m_buffer, name=claim_name("weights", taken), shape=(Aff.const(tile),))
    locals_ += [previous, alpha, weights]
    neg_inf, zero, one = Const(NEG_INF, dtype), Const(0.0, dtype), Const(1.0, dtype)
    body.append(stmt(previous.name, (), m))
    body.append(tile_loop((stmt(maximum.acc.buffer, maximum.acc.indices, Call("max", (m, operand))),)))
    body.append(stmt(alpha.name, (), Select(Compare("==", m, Load(previous.name, ())), one,
                                            Call("exp", (BinOp("-", Load(previous.name, ()), m),)))))
    body.append(tile_loop((stmt(weights.name, (tile_index,),
                                Select(Compare("==", m, neg_inf), zero,
                                       Call("exp", (BinOp("-", operand, m),)))),)))
    shift = Call("exp", (BinOp("-", maximum.operand, m),))
    weight = Load(weights.name, (tile_index,))

    def use_weights(expr: Expr) -> Expr:
        if expr == shift:
            return weight
        if isinstance(expr, BinOp):
            return BinOp(expr.op, use_weights(expr.lhs), use_weights(expr.rhs))
        if isinstance(expr, Call):
            return Call(expr.fn, tuple(use_weights(a) for a in expr.args))
        return expr

    post: list[Node] = []
    for red in plan.fused:
        assert red.core is not None
        core = to_tile(use_weights(red.core))
        acc = red.acc.load()
        if red.outer is None:
            body.append(stmt(red.acc.buffer, red.acc.indices, BinOp("*", acc, Load(alpha.name, ()))))
            body.append(tile_loop((stmt(red.acc.buffer, red.acc.indices, BinOp("+", acc, core)),)))
            if red.post:
                post.append(stmt(red.acc.buffer, red.acc.indices, apply_post(red.post, acc)))
            continue
        d = red.outer.var

        def per_d(value: Callable[[Expr], Expr], d: str = d, red: Reduction = red) -> For:
            var = claim_name(d, taken)
            assert red.outer is not None
            return For(var, red.outer.lower, red.outer.upper,
                       substitute((stmt(red.acc.buffer, red.acc.indices, value(red.acc.load())),),
                                  {d: Aff.var(var)}), step=red.outer.step)
        alpha_load = Load(alpha.name, ())

        def rescale(a: Expr, alpha_load: Load = alpha_load) -> Expr:
            return BinOp("*", a, alpha_load)

        def accumulate(a: Expr, core: Expr = core) -> Expr:
            return BinOp("+", a, core)

        def finish(a: Expr, red: Reduction = red) -> Expr:
            return apply_post(red.post, a)
        body.append(per_d(rescale))
        body.append(tile_loop((per_d(accumulate),)))
        if red.post:
            post.append(per_d(finish))

    tiles = For(jt, tuple(lower), tuple(upper), tuple(body), step=tile, locals=tuple(locals_))
    inits: list[Node] = [maximum.init]
    inits += [red.outer if red.outer is not None else red.init for red in plan.fused]
    # A nested reduction's init loop also held its j loop: keep only the init.
    inits = [replace(n, body=n.body[:1]) if isinstance(n, For) else n for n in inits]
    before = list(block[:region.start])
    if plan.producer is not None:
        before = [n for n in before if n is not plan.producer]
    return tuple(before) + tuple(inits) + (tiles,) + tuple(post) + tuple(plan.kept) + block[region.stop:]




def pull_consumers(function: Function, ctx: Any) -> tuple[Function, list[tuple[str, str, str]]]:
    """Fuse into a nest holding a max cascade, at its row depth, each later nest
    that reads what it writes (``polyir.fusion.producer_consumer.fuse_into``,
    proved by its equivalence check). The cost model may have kept them apart
    (an intermediate row per query); after the online rewrite that row is gone,
    so the fusion pays here. Returns the function and the notes."""
    from polyir.errors import PolyirError
    from polyir.fusion.graph import NestGraph
    from polyir.fusion.producer_consumer import fuse_into
    notes: list[tuple[str, str, str]] = []
    tried: set[tuple[int, int]] = set()
    changed = True
    while changed:
        changed = False
        graph = NestGraph(function)
        for consumer in range(len(graph.nests)):
            for producer, flows in graph.producers(consumer):
                depth = cascade_depth(function.body[producer])
                key = (id(function.body[producer]), id(function.body[consumer]))
                if depth is None or key in tried:
                    continue
                tried.add(key)
                names = f"nests {graph.nests[producer].name} -> {graph.nests[consumer].name}"
                try:
                    pulled = fuse_into(function, producer, consumer, depth, ctx, check=True).function
                except PolyirError as error:
                    notes.append((f"function '{function.name}', {names}",
                                  f"not pulled into the rows of the cascade: {error}", "missed"))
                    continue
                # Kept only when the online rewrite then removes the intermediate.
                rewritten = online_reductions(pulled).function
                reads, writes = buffer_accesses(rewritten.body)
                if flows & (reads | writes):
                    continue
                function = pulled
                notes.append((f"function '{function.name}'", f"{names} ({', '.join(sorted(flows))}) "
                              f"fused at depth {depth} for the online rewrite", "applied"))
                changed = True
                break
            if changed:
                break
    return function, notes


# --------------------------------------------------------------- the pass
def _describe(region: Region, plan: Plan, tile: int) -> str:
    names = ", ".join(f"'{r.acc.buffer}'" for r in plan.fused)
    text = (f"max into '{region.maximum.acc.buffer}' with {names} in one traversal over "
            f"tiles of {tile} (online, with the correction exp(m_prev - m))")
    if plan.scores is not None:
        text += f"; '{plan.scores[0]}' computed per tile"
    if plan.guard_bounds:
        text += "; its -inf guard became the loop bounds"
    return text


def _fitted_tile(plan: Plan, tile: int) -> int:
    """``tile``, or the row's length when its bounds are constants and it is
    shorter: one tile then covers the row exactly, and the loops over a tile
    get that constant extent (a register tile of the scores then fits the
    keys: 32 keys in tiles of 256 had left every product in the partial-tile
    code)."""
    lower, upper = plan.bounds
    if not lower or not upper or not all(b.is_constant for b in (*lower, *upper)):
        return tile
    span = min(b.constant for b in upper) - max(b.constant for b in lower)
    return span if 0 < span < tile else tile


def _rewrite_block(block: tuple[Node, ...], function: Function, tile: int, taken: set[str],
                   notes: list[tuple[str, str, str]], made: set[str]) -> tuple[Node, ...]:
    start = 0
    while start < len(block):
        region = match_region(block, start)
        if region is None:
            start += 1
            continue
        where = f"function '{function.name}', statement {region.maximum.statement.name}"
        plan = plan_region(block, region, function)
        if not plan.fused:
            why = "; ".join(plan.reasons) or "no reduction over the same range uses it"
            notes.append((where, f"max reduction not fused: {why}", "missed"))
            start = region.stop
            continue
        fitted = _fitted_tile(plan, tile)
        block = _emit(block, region, plan, function, fitted, taken, made)
        notes.append((where, _describe(region, plan, fitted), "applied"))
        for why in plan.reasons:
            notes.append((where, f"left as it is: {why}", "missed"))
        return _rewrite_block(block, function, tile, taken, notes, made)
    return block


def _drop_unused(locals_: tuple[Buffer, ...], body: tuple[Node, ...]) -> tuple[Buffer, ...]:
    reads, writes = buffer_accesses(body)
    return tuple(b for b in locals_ if b.name in reads | writes)


def _shares_an_operand(tiles: For, row: For) -> bool:
    """Whether the key tile reads an array at subscripts free of the row
    variable (keys, values): what a block of rows reuses. The row's own
    scalars (its running max and sum) are no such thing."""
    private = {b.name for b in row.locals}
    for s in statements(tiles.body):
        if isinstance(s, Assign) and any(
                load.indices and load.buffer not in private
                and not any(isinstance(i, Aff) and row.var in i.variables() for i in load.indices)
                and not _is_local(load.buffer, tiles) for load in loads(s.value)):
            return True
    return False


def _is_local(buffer: str, tiles: For) -> bool:
    return any(b.name == buffer for b in tiles.locals)


CAUSAL_MIN_ROWS = 256
"""Rows a row loop with a row-dependent key range (a causal mask) must have, when
its trip count is known, for its rows to be blocked by default: below it the
block's triangular products gain nothing measurable (causal self-attention at
sequence 32: 0.85 against 0.75x eager's time, batch 8 1.62 against 1.69) and
cost 4-5x the compile time (13 s against 2.6 s); at sequence 2048 blocking is
1.5x faster."""


def _block(node: For, made: set[str], rows: int, taken: set[str], where: str,
           notes: list[tuple[str, str, str]], rectangular_only: bool = False,
           explicit: bool = False) -> For:
    """``node`` with its rows blocked (``online_rows.block_rows``) when it holds
    one key traversal that reads an operand every row shares; with
    ``rectangular_only``, only when no key bound depends on the row; unless
    ``explicit`` (rows asked for), a row-dependent key range only over at least
    :data:`CAUSAL_MIN_ROWS` rows."""
    tiles = [n for n in node.body if isinstance(n, For) and n.var in made]
    trip = None
    if len(node.lower) == 1 and len(node.upper) == 1 and node.lower[0].is_constant \
            and node.upper[0].is_constant:
        trip = node.upper[0].constant - node.lower[0].constant
        rows = min(rows, trip)  # no block past the rows
    if rows < 2 or not tiles:
        return node
    if len(tiles) > 1:
        notes.append((where, f"rows not blocked: {len(tiles)} key traversals in one row", "missed"))
        return node
    if not _shares_an_operand(tiles[0], node):
        return node       # softmax rows: nothing is reused across rows
    if rectangular_only and _row_dependent_bounds(tiles[0], node.var):
        notes.append((where, f"rows not blocked: the key range depends on row '{node.var}' (a causal "
                      "mask); a block's score product would be triangular, which the register "
                      "tiles do not cover well (rows=N blocks it anyway)", "missed"))
        return node
    if not explicit and trip is not None and trip < CAUSAL_MIN_ROWS \
            and _row_dependent_bounds(tiles[0], node.var):
        notes.append((where, f"rows not blocked: the key range depends on row '{node.var}' (a causal "
                      f"mask) and the loop has {trip} < {CAUSAL_MIN_ROWS} rows, too few for the "
                      f"block's triangular products to pay (rows=N blocks it anyway)", "missed"))
        return node
    try:
        blocked = block_rows(node, tiles[0], rows, taken)
    except RowsRefused as error:
        notes.append((where, f"rows not blocked: {error}", "missed"))
        return node
    notes.append((where, f"rows of loop '{node.var}' in blocks of {rows} against each key tile "
                  f"(loop '{blocked.var}')", "applied"))
    return blocked


def _row_dependent_bounds(tiles: For, row: str) -> bool:
    """Whether the key-tile loop or a loop inside it has a bound that uses ``row``."""
    return any(row in bound.variables()
               for loop in walk_nodes((tiles,)) if isinstance(loop, For)
               for bound in loop.lower + loop.upper)


def online_reductions(function: Function, tile: int = DEFAULT_TILE, rows: int = DEFAULT_ROWS,
                      rectangular_only: bool = False, explicit: bool = True) -> OnlineResult:
    """Rewrite every cascade of a max and the reductions that use it through
    ``exp(x - max)`` (see the module docstring) into one traversal over tiles
    of ``tile`` values; where the traversal is the body of a row loop and
    reads keys every row shares, ``rows`` rows traverse each tile together
    (``polyir.fusion.online_rows``; ``rows=1``: one row at a time;
    ``rectangular_only``: not where a key bound depends on the row; ``explicit``
    false, as for the pass's rows chosen from the target: a row-dependent key
    range only over :data:`CAUSAL_MIN_ROWS` rows or more). Returns the
    function (the same object when nothing matched) and the notes for the
    remarks. Raises ``ValueError`` for a tile or rows < 1."""
    if tile < 1:
        raise ValueError(f"tile must be >= 1, not {tile}")
    if rows < 1:
        raise ValueError(f"rows must be >= 1, not {rows}")
    notes: list[tuple[str, str, str]] = []
    taken = names_in(function)
    current = function
    made: set[str] = set()

    def rewrite_loops(nodes: tuple[Node, ...]) -> tuple[Node, ...]:
        result: list[Node] = []
        for node in nodes:
            if isinstance(node, For):
                body = _rewrite_block(rewrite_loops(node.body), current, tile, taken, notes, made)
                if body != node.body:
                    node = replace(node, body=body, locals=_drop_unused(node.locals, body))
                    node = _block(node, made, rows, taken, f"function '{current.name}'", notes,
                                  rectangular_only, explicit)
            elif isinstance(node, If):
                node = replace(node, then_body=rewrite_loops(node.then_body),
                               else_body=rewrite_loops(node.else_body))
            result.append(node)
        return tuple(result)

    body = _rewrite_block(rewrite_loops(function.body), current, tile, taken, notes, made)
    if body == function.body:
        return OnlineResult(function, notes)
    return OnlineResult(replace(function, body=body, locals=_drop_unused(function.locals, body)), notes)


__all__ = ["DEFAULT_ROWS", "DEFAULT_TILE", "OnlineResult", "cascade_depth", "online_reductions", "pull_consumers"]
