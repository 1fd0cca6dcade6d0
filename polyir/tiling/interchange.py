"""Loop interchange: reorder the loops of a band (mechanism).

``interchange_band(function, loops=("i", "j", "k"), order=("i", "k", "j"))``
rewrites the band ``for i { for j { for k { B } } }`` as
``for i { for k { for j { B } } }``: each loop keeps its variable, bounds,
step and attributes; the body is unchanged.

A loop whose bounds use a loop that the new order puts inside it (a
triangular band: ``for i { for j = 0 to i + 1 }`` made ``j, i``) gets the
bounds of the projection (Fourier-Motzkin over loops with unit coefficients
and steps): ``for j = 0 to N { for i = j to N }``.

Legality: ``check_permutation`` (the new order of the band against every
dependence), with its witness, and the result is checked against the
original's dependences (``check_rewrite``), the proof. Refused: loops with
GPU mappings, loop-scoped buffers on a band loop that would move
(``UnsupportedNest``), coupled bounds with non-unit coefficients or steps.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from polyir.ir.affine import Aff
from polyir.ir.nodes import For, Function
from polyir.polyhedral.dependences import Dependences
from polyir.polyhedral.legality import check_permutation, check_rewrite
from polyir.tiling.bands import UnsupportedNest, band, nest_dependences, nest_function, nest_of, replace_node


def _swap_adjacent(outer: For, inner: For) -> tuple[For, For]:
    """``(new_outer, new_inner)`` for ``for o { for n { ... } }`` run as
    ``for n { for o { ... } }`` (bodies are set by the caller)."""
    o = outer.var
    coupled = [b for b in inner.lower + inner.upper if o in b.variables()]
    if not coupled:
        return inner, outer
    if outer.step != 1 or inner.step != 1:
        raise UnsupportedNest(f"loop '{inner.var}' has bounds that depend on loop '{o}' and a step "
                              f"other than 1: cannot move it outside '{o}'")
    for b in coupled:
        if not b.is_linear or abs(b.coefficient(o)) != 1:
            raise UnsupportedNest(f"bound {b} of loop '{inner.var}' uses '{o}' with a coefficient "
                                  f"other than 1: cannot move '{inner.var}' outside '{o}'")
    # inner's new bounds: its own bounds with o at its extremes
    o_lo, o_hi = outer.lower, tuple(u - 1 for u in outer.upper)

    def extremes(bounds: tuple[Aff, ...], lowest: bool) -> tuple[Aff, ...]:
        found: list[Aff] = []
        for b in bounds:
            c = b.coefficient(o)
            if c == 0:
                found.append(b)
                continue
            rest = b - Aff.var(o) * c
            picks = o_lo if (c > 0) == lowest else o_hi
            found.extend(rest + p * c for p in picks)
        return tuple(dict.fromkeys(found))

    new_lower = extremes(inner.lower, lowest=True)
    new_upper = tuple(u + 1 for u in extremes(tuple(u - 1 for u in inner.upper), lowest=False))
    # outer's new bounds: its own plus those the inner loop's bounds put on it
    n = Aff.var(inner.var)
    lower, upper = list(outer.lower), list(outer.upper)
    for b in inner.lower:                       # b <= n, b = c*o + r
        c = b.coefficient(o)
        if c:
            rest = b - Aff.var(o) * c
            if c > 0:
                upper.append(n - rest + 1)       # o <= n - r
            else:
                lower.append(rest - n)           # o >= r - n
    for b in inner.upper:                       # n < b, n <= b - 1, b = c*o + r
        c = b.coefficient(o)
        if c:
            rest = b - Aff.var(o) * c
            if c > 0:
                lower.append(n - rest + 1)       # o >= n - r + 1
            else:
                upper.append(rest - n)           # o < r - n
    new_inner = replace(inner, lower=new_lower, upper=new_upper)
    new_outer = replace(outer, lower=tuple(dict.fromkeys(lower)), upper=tuple(dict.fromkeys(upper)))
    return new_inner, new_outer


def interchange_band(function: Function, loops: Sequence[str], order: Sequence[str],
                     deps: Dependences | None = None, check: bool = True) -> Function:
    """``function`` with the band ``loops`` (outer to inner) reordered to ``order``
    (the same variables, outer to inner). ``deps``: the dependences of the
    top-level nest holding the band, when known.

    Raises ``UnknownLoop``, ``UnsupportedNest`` and ``IllegalTransform``
    (with the dependence and two instances whose order the change reverses)."""
    chain = band(function, loops)
    if sorted(order) != sorted(loops):
        raise UnsupportedNest(f"interchange: order {', '.join(order)} is not a permutation of "
                              f"{', '.join(loops)}")
    if list(order) == list(loops):
        return function
    for position, loop in enumerate(chain):
        if loop.mapping is not None:
            raise UnsupportedNest(f"loop '{loop.var}' is mapped to {loop.mapping}; interchange before "
                                  f"gpu-map")
        moves = order.index(loop.var) != position
        if loop.locals and (moves or position < len(chain) - 1 and any(
                order.index(other.var) < order.index(loop.var) for other in chain[position + 1:])):
            raise UnsupportedNest(f"loop '{loop.var}' declares loop-scoped buffers and would move")
    index = nest_of(function, chain[0])
    if check:
        deps = deps if deps is not None else nest_dependences(function, index)
        check_permutation(deps, list(loops), [list(loops).index(v) for v in order]).require()
    # bubble the loops into the new order by adjacent swaps (bounds follow)
    current = list(chain)
    rank = {v: k for k, v in enumerate(order)}
    for sweep in range(len(current)):
        del sweep
        for k in range(len(current) - 1):
            if rank[current[k].var] > rank[current[k + 1].var]:
                current[k], current[k + 1] = _swap_adjacent(current[k], current[k + 1])
    body = chain[-1].body
    for loop in reversed(current):
        body = (replace(loop, body=body),)
    result = replace_node(function, chain[0], body)
    if check:
        assert deps is not None
        check_rewrite(deps, nest_function(result, index),
                      what=f"interchanging {', '.join(loops)} to {', '.join(order)}").require()
    return result


__all__ = ["interchange_band"]
