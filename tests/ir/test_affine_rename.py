"""``Aff.rename``: the same expression as substituting the new names, whether
the renaming keeps the variables apart (names changed, terms re-sorted) or
merges two of them (folded by ``substitute``)."""
from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from polyir.ir.affine import Aff
from tests.ir.test_affine_expanded import expressions

NAMES = ["k", "n", "t", "a", "z_12", "i_3"]


@given(expressions(), st.dictionaries(st.sampled_from("knt"), st.sampled_from(NAMES), max_size=3))
def test_rename_equals_substitution(expr: Aff, mapping: dict[str, str]) -> None:
    expected = expr.substitute({old: Aff.var(new) for old, new in mapping.items()})
    assert expr.rename(mapping) == expected
    assert str(expr.rename(mapping)) == str(expected)


def test_rename_reorders_terms_by_the_new_names() -> None:
    i, j = Aff.var("i_3"), Aff.var("j_3")
    renamed = (32 * i + j + (i + 2 * j) // 4).rename({"i_3": "z", "j_3": "a"})
    assert str(renamed) == "a + 32*z + (2*a + z) // 4"
    merged = (Aff.var("i") - Aff.var("j") + (Aff.var("i") - Aff.var("j")) // 2).rename({"j": "i"})
    assert merged == Aff.const(0)
