"""Multi-level tiling of a permutable band (mechanism; sizes come from ``sizes.py``).

``tile_band(function, loops=("i", "j", "k"), sizes=(64, 64, 256))`` turns the
band ``i, j, k`` into tile loops ``i_t, j_t, k_t`` (steps 64, 64, 256) around
point loops ``i, j, k``::

    for i_t = 0 to M step 64 {
      for j_t = 0 to N step 64 {
        for k_t = 0 to K step 256 {
          for i = i_t to min(M, i_t + 64) {
            for j = j_t to min(N, j_t + 64) {
              for k = k_t to min(K, k_t + 256) { ...unchanged body... }

The point loops keep the original variables, so subscripts are unchanged;
partial tiles get ``min`` bounds; extents may be symbolic. A size of 0 leaves
that loop untiled (it stays a point loop). Tiling again the point loops gives
the next level (the bound a finer level inherits from a coarser one whose
size it divides is dropped: ``min(M, i_t + 64, i_t2 + 8)`` is ``min(M, i_t2 + 8)``).

Non-rectangular bands (``for j = 0 to i + 1``) are tiled too: a tile loop
runs over the range its loop takes over the tile of the loops outside it (an
over-approximation: some tiles may be empty), and the point loops keep the
exact bounds; in such a band a loop whose smallest value is a constant gets
its tile origins on the grid from 0 (``j = i + 1``: 0, 64, ..., so the last
tile is full when the extent is a multiple of the size). A loop with a step other than 1 is tiled when its lower bound
does not depend on other loops of the band (the tile origins then keep its
residue).

Legality: the band must be permutable (``check_permutable``: no dependence
inside it has a negative component along a band loop), and the result is
checked against the original's dependences (``check_rewrite``), the proof.
Refused: GPU-mapped loops, loop-scoped buffers on a band loop other than the
innermost (their iterations would be split across tiles), subscripts of
bounds with ``//``/``%`` of band variables.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from polyir.errors import IllegalTransform
from polyir.ir.affine import Aff
from polyir.ir.names import claim_name, names_in
from polyir.ir.nodes import For, Function
from polyir.polyhedral.dependences import Dependences
from polyir.polyhedral.legality import check_permutable, check_rewrite
from polyir.tiling.bands import UnsupportedNest, band, nest_dependences, nest_function, nest_of, replace_node

Interval = tuple[tuple[Aff, ...], tuple[Aff, ...]]
"""A variable's range as (max-list of lower bounds, min-list of inclusive upper bounds)."""


def _extreme(expr: Aff, ranges: dict[str, Interval], lowest: bool) -> tuple[Aff, ...]:
    """Bounds of ``expr`` over the variables' ranges: for ``lowest`` a list whose
    max is <= every value of ``expr``; else a list whose min is >= every value."""
    if not expr.is_linear and any(v in ranges for v in expr.variables()):
        raise UnsupportedNest(f"bound {expr} divides a tiled loop variable")
    options: list[Aff] = [Aff.const(expr.constant)]
    for atom, coeff in expr.terms:
        if isinstance(atom, str) and atom in ranges:
            lo, hi = ranges[atom]
            use_low = (coeff > 0) == lowest
            picks = lo if use_low else hi
            options = [o + p * coeff for o in options for p in picks]
        else:
            options = [o + Aff(((atom, coeff),), 0) for o in options]
    return tuple(dict.fromkeys(options))


def _bound_list(exprs: Sequence[Aff], ranges: dict[str, Interval], lowest: bool) -> tuple[Aff, ...]:
    found: list[Aff] = []
    for e in exprs:
        found.extend(_extreme(e, ranges, lowest))
    return tuple(dict.fromkeys(found))


def tile_band(function: Function, loops: Sequence[str], sizes: Sequence[int],
              names: Sequence[str] = (), deps: Dependences | None = None,
              check: bool = True, ends: Sequence[str] = ()) -> Function:
    """``function`` with the band ``loops`` (outer to inner) tiled by ``sizes``
    (0: not tiled); ``names`` are the new tile loops' variables (default
    ``i_t`` for loop ``i``). ``deps``: the dependences of the top-level nest
    holding the band, when known. With ``check`` (the default) the band's
    permutability is required and the result is proven against the dependences.
    The tiles of the loops in ``ends`` (step 1, one lower and one upper bound
    free of the band) end at the loop's end instead of starting at its start:
    the partial tile comes first (``for j_t = m - 64 * ((m + 63) // 64) to m
    step 64``); a triangle's narrow end is then the partial one.

    Raises ``UnknownLoop``, ``UnsupportedNest`` (not a band, unsupported
    bounds or loops) and ``IllegalTransform`` (with the dependence and two
    instances) when the band is not permutable."""
    chain = band(function, loops)
    sizes = tuple(int(s) for s in sizes)
    if len(sizes) != len(chain):
        raise UnsupportedNest(f"tile: {len(chain)} loops but {len(sizes)} sizes")
    if any(s < 0 for s in sizes):
        raise UnsupportedNest(f"tile sizes must be >= 0 (0: not tiled), got {list(sizes)}")
    tiled = [loop for loop, size in zip(chain, sizes, strict=True) if size > 0]
    if not tiled:
        return function
    if names and len(names) != len(tiled):
        raise UnsupportedNest(f"tile: {len(tiled)} tiled loops but {len(names)} names")
    band_vars = {loop.var for loop in chain}
    for position, loop in enumerate(chain):
        if loop.mapping is not None:
            raise UnsupportedNest(f"loop '{loop.var}' is mapped to {loop.mapping}; tile before gpu-map")
        if loop.locals and position < len(chain) - 1:
            raise UnsupportedNest(f"loop '{loop.var}' declares loop-scoped buffers "
                                  f"({', '.join(b.name for b in loop.locals)}) and is not the "
                                  f"innermost loop of the band")
    index = nest_of(function, chain[0])
    if check:
        deps = deps if deps is not None else nest_dependences(function, index)
        if len(chain) > 1:
            check_permutable(deps, list(loops)).require()

    taken = names_in(function)
    for name in names:
        if name in taken:
            raise UnsupportedNest(f"tile loop name '{name}' is already used in function '{function.name}'")
    size_of = {loop.var: size for loop, size in zip(chain, sizes, strict=True)}
    tile_var: dict[str, str] = {}
    for k, loop in enumerate(tiled):
        tile_var[loop.var] = names[k] if names else claim_name(f"{loop.var}_t", taken)
        taken.add(tile_var[loop.var])

    triangular = any(_triangular(loop, band_vars) for loop in chain)
    # ranges of the band variables as seen from the tile loops
    ranges: dict[str, Interval] = {}
    tile_loops: list[For] = []
    for loop in chain:
        var = loop.var
        if var in tile_var:
            span = size_of[var] * loop.step
            if loop.step != 1 and any(v in band_vars for b in loop.lower for v in b.variables()):
                raise UnsupportedNest(f"loop '{var}' has step {loop.step} and a lower bound that "
                                      f"depends on the band; tile it first without that")
            first = loop.lower if loop.step != 1 else _bound_list(loop.lower, ranges, lowest=True)
            if loop.step == 1 and triangular:
                first = _aligned(first, span)
            if var in ends:
                first = _from_end(loop, band_vars, span) or first
            last = _bound_list([u - 1 for u in loop.upper], ranges, lowest=False)
            tile_loops.append(For(tile_var[var], first, tuple(u + 1 for u in last), (), step=span,
                                  parallel=loop.parallel))
            t = Aff.var(tile_var[var])
            ranges[var] = ((t,), (t + (span - loop.step),))
        else:
            lo = _bound_list(loop.lower, ranges, lowest=True)
            hi = _bound_list([u - 1 for u in loop.upper], ranges, lowest=False)
            ranges[var] = (lo, hi)

    points: list[For] = []
    for loop, tile in zip(chain, tile_loops_for(chain, tile_loops, tile_var), strict=True):
        if tile is None:
            points.append(loop)
            continue
        t = Aff.var(tile.var)
        span = tile.step
        if loop.step != 1 or tile.lower == loop.lower:
            lower: tuple[Aff, ...] = (t,)
        else:
            lower = tuple(dict.fromkeys((t,) + loop.lower))
        kept = [u for u in loop.upper if not _inherited(loop, u, span)]
        upper = tuple(dict.fromkeys(kept + [t + span]))
        points.append(replace(loop, lower=lower, upper=upper))

    body = chain[-1].body
    inner: For | None = None
    for loop in reversed(points):
        inner = replace(loop, body=body)
        body = (inner,)
    for loop in reversed(tile_loops):
        body = (replace(loop, body=body),)
    result = replace_node(function, chain[0], body)
    if check:
        assert deps is not None
        new_nest = nest_function(result, index)
        check_rewrite(deps, new_nest, what=f"tiling {', '.join(loops)}").require()
    return result


def _triangular(loop: For, band_vars: set[str]) -> bool:
    """Does a bound of ``loop`` use another loop of the band (``j = i + 1``)?"""
    return any(v in band_vars for b in loop.lower + loop.upper for v in b.variables())


def _aligned(first: tuple[Aff, ...], span: int) -> tuple[Aff, ...]:
    """The tile origins of a loop of a triangular band on the grid of ``span``
    from 0 when its smallest value is a constant (``j = i + 1`` tiled by 64:
    origins 0, 64, ..., not 1, 65, ...): its tiles then end where a rectangular
    loop's do (``m`` a multiple of 64: no partial last tile) and start
    vector-aligned. The point loop keeps the exact bound, so the first tile
    only starts later."""
    if len(first) == 1 and first[0].is_constant and first[0].constant > 0:
        return (Aff.const(first[0].constant // span * span),)
    return first


def _from_end(loop: For, band_vars: set[str], span: int) -> tuple[Aff, ...] | None:
    """The first tile origin of ``loop`` for tiles that end at its end
    (``U - span * ceil((U - L) / span)``), or ``None`` when it has not one lower
    bound ``L`` and one upper bound ``U`` free of the band, or a step."""
    if loop.step != 1 or len(loop.lower) != 1 or len(loop.upper) != 1:
        return None
    (start,), (stop,) = loop.lower, loop.upper
    if (start.variables() | stop.variables()) & band_vars:
        return None
    return (stop - ((stop - start + (span - 1)) // span) * span,)


def tile_loops_for(chain: Sequence[For], tile_loops: Sequence[For],
                   tile_var: dict[str, str]) -> list[For | None]:
    """The tile loop of each band loop (``None`` when untiled), in band order."""
    by_var = {loop.var: loop for loop in tile_loops}
    return [by_var.get(tile_var.get(loop.var, ""), None) for loop in chain]


def _inherited(loop: For, bound: Aff, span: int) -> bool:
    """Whether ``bound`` (an upper bound of ``loop``) is ``L + c`` for the loop's
    only lower bound ``L`` and a multiple ``c`` of the new tile span: a tile
    starting at ``L + m*span < L + c`` then ends at or before it."""
    if len(loop.lower) != 1 or loop.step != 1 and span % loop.step:
        return False
    difference = bound - loop.lower[0]
    return difference.is_constant and difference.constant > 0 and difference.constant % span == 0


def strip_mine(function: Function, loop: str, size: int, name: str | None = None,
               check: bool = True) -> Function:
    """``function`` with loop ``loop`` split into a loop of step ``size`` times its
    step around the original (always legal: the order of iterations is kept)."""
    return tile_band(function, [loop], [size], [name] if name else (), check=check)


__all__ = ["tile_band", "strip_mine", "IllegalTransform"]
