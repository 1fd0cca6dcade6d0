"""Full/partial tile separation (mechanism).

After tiling, a point loop ``for i = ir to min(M, ir + 8)`` runs 8 times
except in the last tile. ``split_tiles(function, at="ir", loops=("i", "j"))``
versions the body of loop ``ir``::

    for ir ... {
      if (ir + 8 <= M, jr + 32 <= N) {
        ...the body, with i = ir to ir + 8 and j = jr to jr + 32 (constant trip counts)
      } else {
        ...the body as it was (loops, statements and loop-scoped buffers renamed)
      }
    }

Every other bound in the full version that the guard makes redundant is
dropped too (the copy loops of a scratchpad, for instance), so the full tiles
have constant trip counts that LLVM unrolls and vectorises, and register
tiles (``unroll-jam``) apply to them.

Each named loop must have one lower bound ``L`` and an upper bound ``L + c``
(``c`` a constant) among others; the guard says ``L + c`` is the smallest,
and may only use variables bound at ``at``. The two versions run the same
instances in the same order, which ``check_rewrite`` proves.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

from polyir.ir.affine import Aff, Constraint
from polyir.ir.names import UnknownLoop, find_loop, names_in
from polyir.ir.nodes import For, Function, If, Node
from polyir.ir.walk import substitute
from polyir.polyhedral.dependences import Dependences
from polyir.polyhedral.legality import Origin, check_rewrite, compose_origins
from polyir.tiling.bands import (
    UnsupportedNest,
    loops_inside,
    nest_dependences,
    nest_function,
    nest_of,
    renamed_copy,
    replace_node,
)


def enclosing_vars(function: Function, loop: For) -> list[str]:
    """Variables of the loops around ``loop`` (outermost first), not including it."""
    path: list[str] = []

    def visit(nodes: Sequence[Node], chain: list[str]) -> bool:
        for node in nodes:
            if node is loop:
                path.extend(chain)
                return True
            if isinstance(node, For) and visit(node.body, chain + [node.var]):
                return True
            if isinstance(node, If) and (visit(node.then_body, chain) or visit(node.else_body, chain)):
                return True
        return False

    if not visit(function.body, []):
        raise ValueError(f"loop '{loop.var}' is not in function '{function.name}'")
    return path


def full_tile_guard(loop: For) -> tuple[Aff, list[Constraint]] | None:
    """``(L + c, guard)`` when ``loop`` runs ``max(..., L)`` to ``min(..., L + c)``:
    the upper bound of its full tiles and the constraints that make ``L + c``
    the smallest upper bound and ``L`` the largest lower one; ``None`` when it
    has no such pair of bounds."""
    for start in loop.lower:
        for bound in loop.upper:
            span = bound - start
            if span.is_constant and span.constant > 0:
                uppers = [Constraint(bound, "<=", u) for u in loop.upper if u != bound]
                lowers = [Constraint(lo, "<=", start) for lo in loop.lower if lo != start]
                return bound, uppers + lowers
    return None


def _implied(difference: Aff, facts: Sequence[Aff]) -> bool:
    """Whether ``difference >= 0`` follows from ``fact >= 0`` for each fact (one
    or two facts plus a non-negative constant, or a non-negative constant alone)."""
    if difference.is_constant:
        return difference.constant >= 0
    for k, fact in enumerate(facts):
        rest = difference - fact
        if rest.is_constant and rest.constant >= 0:
            return True
        for other in facts[k + 1:]:
            remainder = rest - other
            if remainder.is_constant and remainder.constant >= 0:
                return True
    return False


def _loop_facts(loop: For) -> list[Aff]:
    """What holds inside ``loop``'s body: its variable within its bounds."""
    var = Aff.var(loop.var)
    return [var - lo for lo in loop.lower] + [up - 1 - var for up in loop.upper]


def prune_bounds(nodes: Sequence[Node], facts: Sequence[Aff]) -> tuple[Node, ...]:
    """``nodes`` with every loop bound entry dropped that another entry makes
    redundant given ``facts`` (each ``fact >= 0`` holds)."""
    def prune(bounds: tuple[Aff, ...], upper: bool) -> tuple[Aff, ...]:
        kept = list(bounds)
        for b in bounds:
            if len(kept) == 1:
                break
            for other in kept:
                if other is b or other == b:
                    continue
                # an upper bound b is redundant when b >= other; a lower one when b <= other
                if _implied(b - other if upper else other - b, facts):
                    kept.remove(b)
                    break
        return tuple(kept)

    out: list[Node] = []
    for node in nodes:
        if isinstance(node, For):
            node = replace(node, lower=prune(node.lower, False), upper=prune(node.upper, True),
                           body=prune_bounds(node.body, list(facts) + _loop_facts(node)))
        elif isinstance(node, If):
            node = replace(node, then_body=prune_bounds(node.then_body, facts),
                           else_body=prune_bounds(node.else_body, facts))
        out.append(node)
    return tuple(out)


def _versions(body: tuple[Node, ...], guards: list[list[Constraint]], taken: set[str],
              leaf: Callable[[tuple[Node, ...]], tuple[Node, ...]] | None = None,
              last: Sequence[tuple[str, int] | None] = ()
              ) -> tuple[tuple[Node, ...], dict[str, Origin]]:
    """``body`` versioned on each guard in turn: the full version of the first
    (bounds pruned by its facts), else the body renamed; then the next guard
    inside both. The versions that are full for every guard keep the names
    (and are passed through ``leaf`` when given). ``last[k]``, when given and
    not ``None``, is ``(tile variable, value)``: the one value the tile loop
    of guard ``k`` takes when the guard fails (:func:`_last_tile`), put in
    for the variable in that version."""
    if not guards:
        return (leaf(body) if leaf is not None else body), {}
    first, rest = guards[0], guards[1:]
    pinned, later = (last[0], last[1:]) if last else (None, ())
    if not first:
        return _versions(body, rest, taken, leaf, later)
    facts = [c.rhs - c.lhs for c in first]
    full, full_origins = _versions(prune_bounds(body, facts), rest, taken, leaf, later)
    partial_body = body if pinned is None else \
        prune_bounds(substitute(body, {pinned[0]: Aff.const(pinned[1])}), [])
    renamed, renamed_origins = renamed_copy(partial_body, taken)
    partial, partial_origins = _versions(renamed, rest, taken, last=later)
    origins = dict(full_origins)
    origins.update(renamed_origins)  # the inner full versions keep these names
    origins.update(compose_origins(renamed_origins, partial_origins))
    return (If(tuple(first), full, partial),), origins


def _over_tile(test: Constraint, inside: dict[str, For], loops: Sequence[str],
               bound_here: set[str]) -> Constraint:
    """``test`` (``L + c <= u``) made to hold over a whole tile when ``u`` uses
    another point loop ``v`` of ``loops`` (a triangular tile: ``j < i + 1``):
    ``v`` replaced by the value of its tile that makes ``u`` smallest (and a
    lower-bound test's ``l <= L`` ``l`` largest). A sufficient test: a tile
    passing it is full for every ``v`` (the pruned bounds are implied by the
    guard and ``v``'s own bounds)."""
    lhs = _extreme_over(test.lhs, False, inside, loops, bound_here)
    rhs = _extreme_over(test.rhs, True, inside, loops, bound_here)
    return test if lhs is test.lhs and rhs is test.rhs else Constraint(lhs, test.op, rhs)


def _extreme_over(expr: Aff, lowest: bool, inside: dict[str, For], loops: Sequence[str],
                  bound_here: set[str]) -> Aff:
    """``expr`` with each point loop variable of ``loops`` it uses replaced by the
    value of that loop's tile that makes ``expr`` smallest (``lowest``) or
    largest: its lower bound ``L_v`` or its full tile's last value
    ``L_v + c_v - 1`` (``v <= L_v + c_v - 1`` holds in every tile)."""
    for var in sorted(expr.variables() - bound_here):
        loop = inside.get(var)
        tile = full_tile_guard(loop) if var in loops and loop is not None else None
        if loop is None or tile is None:
            continue
        first = next(lo for lo in loop.lower if (tile[0] - lo).is_constant)
        extreme = first if (expr.coefficient(var) > 0) == lowest else tile[0] - 1
        if extreme.variables() <= bound_here:
            expr = expr.substitute({var: extreme})
    return expr


def split_tiles(function: Function, at: str, loops: Sequence[str],
                deps: Dependences | None = None, check: bool = True, pad: Sequence[str] = ()
                ) -> tuple[Function, dict[str, Origin]]:
    """``function`` with the body of loop ``at`` versioned into full tiles of the
    point loops ``loops`` (constant trip counts) and the rest, one loop after
    the other (``if (i full) { if (j full) {...} else {...} } else {...}``: a
    tile partial in one loop keeps the constant trip count of the other); also
    returns the origins of the renamed statements of the other versions.
    Returns ``function`` itself (and no origins) when every named loop is
    already full.

    With ``pad`` (one new loop name per named loop), a tile that is full but
    for bounds using another named loop (a triangular tile on the diagonal)
    is computed over its box instead, its loops named ``pad``
    (``polyir.tiling.pad``: the added instances write only elements of a
    local nothing else reads, proven by isl whether ``check`` or not)::

        if (box tests) { if (triangle tests) { full tiles } else { box tiles } }
        else { the body as it was, renamed }

    Raises ``UnknownLoop`` and ``UnsupportedNest`` (a loop without a tile
    bound, or a guard needing variables not bound at ``at``; with ``pad``,
    what ``pad_body`` and ``require_scratch_only`` refuse)."""
    scope = find_loop(function, at)
    inside = {loop.var: loop for loop in loops_inside(scope.body)}
    bound_here = set(enclosing_vars(function, scope)) | {scope.var} | set(function.symbols)
    guards: list[list[Constraint]] = []
    for name in loops:
        if name not in inside:
            find_loop(function, name)  # UnknownLoop for a name no loop has
            raise UnsupportedNest(f"loop '{name}' is not inside loop '{at}'")
        found = full_tile_guard(inside[name])
        if found is None:
            raise UnsupportedNest(f"loop '{name}' has no upper bound of the form lower + constant: "
                                  f"it is not a tile's point loop")
        tests = [_over_tile(c, inside, loops, bound_here) for c in found[1]]
        for c in tests:
            unbound = sorted(c.variables() - bound_here)
            if unbound:
                raise UnsupportedNest(f"the full-tile test of loop '{name}' ({c}) uses "
                                      f"{', '.join(unbound)}, not bound at loop '{at}'")
        guards.append([c for c in tests if not any(c in g for g in guards)])
    if not any(guards):
        return function, {}
    if pad:
        padded = _padded_versions(function, scope, loops, pad, bound_here, deps, check)
        if padded is not None:
            return padded
    last = [_last_tile(function, inside[name], guard) for name, guard in zip(loops, guards, strict=True)]
    body, origins = _versions(scope.body, guards, names_in(function), last=last)
    all_facts = [c.rhs - c.lhs for g in guards for c in g]
    for loop in loops_inside(prune_bounds(scope.body, all_facts)):
        if loop.var in loops and len(loop.upper) != 1:
            raise UnsupportedNest(f"loop '{loop.var}' keeps bounds {', '.join(map(str, loop.upper))} "
                                  f"in the full tiles")
    new_scope = replace(scope, body=body)
    result = replace_node(function, scope, (new_scope,))
    if check:
        index = nest_of(function, scope)
        if deps is None:
            deps = nest_dependences(function, index)
        check_rewrite(deps, nest_function(result, index), what=f"splitting the tiles of '{at}'",
                      origins=origins).require()
    return result, origins


def _last_tile(function: Function, point: For, guard: Sequence[Constraint]) -> tuple[str, int] | None:
    """``(v, value)`` when the tiles of ``point`` fail their full-tile test
    ``guard`` only at the last tile, whose start ``value`` is a constant:
    ``point`` runs from ``v`` to ``min(U, v + c)`` inside a tile loop ``for v
    = L to U step c`` (``L`` and ``U`` constants, ``U - L`` not a multiple of
    ``c``) and the test is ``v + c <= U``. In the partial version ``v`` is
    then ``L + c * floor((U - L - 1) / c)``, and putting it in gives that
    version's loops constant bounds (a 56-wide row in tiles of 48: the last
    tile runs 8 iterations, which LLVM unrolls and vectorises, instead of
    ``min(56, v + 48) - v``)."""
    found = full_tile_guard(point)
    if found is None or len(guard) != 1:
        return None
    bound, _ = found
    start = next((lo for lo in point.lower if (bound - lo).is_constant), None)
    if start is None or len(start.variables()) != 1:
        return None
    var = next(iter(start.variables()))
    if not _same(start, Aff.var(var)):
        return None
    span = (bound - start).constant
    try:
        tile = find_loop(function, var)
    except UnknownLoop:
        return None
    if tile.step != span or len(tile.lower) != 1 or len(tile.upper) != 1 \
            or not tile.lower[0].is_constant or not tile.upper[0].is_constant:
        return None
    low, high = tile.lower[0].constant, tile.upper[0].constant
    test = guard[0]
    if high <= low or not (high - low) % span or test.op != "<=" or not _same(test.lhs, bound) \
            or not _same(test.rhs, Aff.const(high)):
        return None
    return var, low + span * ((high - low - 1) // span)


def _same(a: Aff, b: Aff) -> bool:
    difference = a - b
    return difference.is_constant and difference.constant == 0


def _padded_versions(function: Function, scope: For, loops: Sequence[str], pad: Sequence[str],
                     bound_here: set[str], deps: Dependences | None, check: bool
                     ) -> tuple[Function, dict[str, Origin]] | None:
    """:func:`split_tiles` with box tiles (see its docstring): the versions of
    the box tests, loop by loop as without ``pad``; in the one full for all of
    them, the triangle tests choose between the full tiles and the box tiles.
    ``None`` when no full-tile test uses another named loop (nothing to pad)."""
    from polyir.tiling.pad import pad_body, require_scratch_only
    if len(pad) != len(loops):
        raise UnsupportedNest(f"pad names {len(pad)} loops, split-tiles {len(loops)}")
    taken = names_in(function)
    clash = sorted(set(pad) & taken)
    if clash:
        raise UnsupportedNest(f"pad names {', '.join(clash)} are taken")
    named = set(loops)
    inside = {loop.var: loop for loop in loops_inside(scope.body)}
    box: list[list[Constraint]] = []
    triangle: list[Constraint] = []
    for name in loops:
        found = full_tile_guard(inside[name])
        assert found is not None  # split_tiles checked
        tests: list[Constraint] = []
        for test in found[1]:
            tile_test = _over_tile(test, inside, loops, bound_here)
            part = triangle if test.variables() & named else tests
            if tile_test not in part and not any(tile_test in g for g in box):
                part.append(tile_test)
        box.append(tests)
    if not triangle:
        return None
    triangle_facts = [c.rhs - c.lhs for c in triangle]
    renames = dict(zip(loops, pad, strict=True))
    made: dict[str, tuple[Node, ...]] = {}
    box_origins: dict[str, Origin] = {}

    def leaf(full_box: tuple[Node, ...]) -> tuple[Node, ...]:
        copy, origins = renamed_copy(full_box, taken, names=renames)
        box_origins.update(origins)
        padded = pad_body(copy, list(pad), bound_here, function.buffers)
        if padded is None:
            raise UnsupportedNest("no bound of a named loop uses another: nothing to pad")
        made["exact"], made["padded"] = copy, prune_bounds(padded, [])
        return (If(tuple(triangle), prune_bounds(full_box, triangle_facts), copy),)

    body, origins = _versions(scope.body, box, taken, leaf)
    origins.update(box_origins)
    for loop in loops_inside(made["padded"]):
        if loop.var in pad and (len(loop.upper) != 1 or len(loop.lower) != 1):
            raise UnsupportedNest(f"loop '{loop.var}' keeps bounds {', '.join(map(str, loop.upper))} "
                                  f"in the box tiles")
    exact = replace_node(function, scope, (replace(scope, body=body),))
    padded_body = _swap(body, made["exact"], made["padded"])
    result = replace_node(function, scope, (replace(scope, body=padded_body),))
    index = nest_of(function, scope)
    if check:
        if deps is None:
            deps = nest_dependences(function, index)
        check_rewrite(deps, nest_function(exact, index), what=f"splitting the tiles of '{scope.var}'",
                      origins=origins).require()
    require_scratch_only(exact, result, index, f"padding the tiles of '{scope.var}'")
    return result, origins


def _swap(nodes: tuple[Node, ...], old: tuple[Node, ...], new: tuple[Node, ...]) -> tuple[Node, ...]:
    """``nodes`` with the body ``old`` (an ``If``'s branch, by identity) replaced by ``new``."""
    out: list[Node] = []
    for node in nodes:
        if isinstance(node, If):
            then_body = new if node.then_body is old else _swap(node.then_body, old, new)
            else_body = new if node.else_body is old else _swap(node.else_body, old, new)
            node = replace(node, then_body=then_body, else_body=else_body)
        elif isinstance(node, For):
            node = replace(node, body=_swap(node.body, old, new))
        out.append(node)
    return tuple(out)


__all__ = ["split_tiles", "full_tile_guard", "prune_bounds", "enclosing_vars"]
