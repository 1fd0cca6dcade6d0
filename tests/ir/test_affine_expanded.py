"""``Aff.expanded``: the same value, digit sums folded (gathered addresses)."""
from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from polyir.ir.affine import Aff

k, n, t = Aff.var("k"), Aff.var("n"), Aff.var("t")


def test_a_convolution_weight_gather_folds_to_its_offset() -> None:
    # w[n, k // 9, (k // 3) % 3, k % 3] of a 64x64x3x3 buffer: offset 576*n + k
    offset = n * 576 + (k // 9) * 9 + ((k // 3) % 3) * 3 + k % 3
    assert offset.atom_count() == 4
    assert offset.expanded() == n * 576 + k


def test_nested_floor_divisions_merge() -> None:
    assert ((k // 4) // 8).expanded() == k // 32
    assert ((k // 4) % 8).expanded() == k // 4 - (k // 32) * 8


@st.composite
def expressions(draw: st.DrawFn, depth: int = 3) -> Aff:
    """Random affine expressions in k, n, t with nested // and %."""
    expr = Aff.const(draw(st.integers(-20, 20)))
    for _ in range(draw(st.integers(1, 4))):
        atom = Aff.var(draw(st.sampled_from("knt")))
        if depth > 0 and draw(st.booleans()):
            inner = draw(expressions(depth - 1))
            divisor = draw(st.integers(1, 12))
            atom = inner // divisor if draw(st.booleans()) else inner % divisor
        expr = expr + atom * draw(st.integers(-9, 9))
    return expr


@given(expressions(), st.integers(-1000, 1000), st.integers(-1000, 1000), st.integers(0, 1000))
def test_expanded_keeps_the_value(expr: Aff, kv: int, nv: int, tv: int) -> None:
    env = {"k": kv, "n": nv, "t": tv}
    assert expr.expanded().evaluate(env) == expr.evaluate(env)
