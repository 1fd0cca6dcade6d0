"""Counting the integer points of a set (the fusion cost model's recomputation
estimate, ``polyir.polyhedral.slices``): the counts agree with enumerating
every point, on random bounded sets (unions, holes, strides, skewed faces)."""
from __future__ import annotations

import islpy as isl
from hypothesis import given, settings
from hypothesis import strategies as st

from polyir.polyhedral.slices import _count


def _enumerate(target: isl.Set) -> int:
    points: list[isl.Point] = []
    target.foreach_point(points.append)
    return len(points)


@st.composite
def bounded_sets(draw: st.DrawFn) -> isl.Set:
    rank = draw(st.integers(1, 4))
    dims = [f"x{k}" for k in range(rank)]
    parts = []
    for _ in range(draw(st.integers(1, 2))):
        constraints = [f"{draw(st.integers(-2, 3))} <= {v} <= {draw(st.integers(3, 9))}" for v in dims]
        for _ in range(draw(st.integers(0, 3))):
            coefficients = draw(st.lists(st.integers(-3, 3), min_size=rank, max_size=rank))
            terms = " + ".join(f"{c}*{v}" for c, v in zip(coefficients, dims, strict=True))
            constraints.append(f"{terms} <= {draw(st.integers(-5, 15))}")
        if draw(st.booleans()):
            stride, offset = draw(st.integers(2, 3)), draw(st.integers(0, 1))
            constraints.append(f"exists (e: {draw(st.sampled_from(dims))} = {stride}e + {offset})")
        parts.append(f"[{', '.join(dims)}] : {' and '.join(constraints)}")
    return isl.Set("{ " + "; ".join(parts) + " }")


@settings(max_examples=150, deadline=None)
@given(bounded_sets())
def test_counts_agree_with_enumeration(target: isl.Set) -> None:
    assert _count(target, 10**9) == _enumerate(target)


def test_a_set_past_the_cap_is_not_counted() -> None:
    skew = isl.Set("{ [i, j] : 0 <= i < 200 and 0 <= j <= i }")    # not a box: 20,100 points
    assert _count(skew, 10_000) is None
    assert _count(skew, 100_000) == 20_100
    assert _count(isl.Set("{ [i, j] : 0 <= i < 1000 and 0 <= j < 1000 }"), 10) == 10**6   # a box costs nothing
