"""Distribution analysed on the loop and what encloses it (``loop_scope``):
the same splits and refusals as the analysis of the whole function, and a
nest's earlier splits kept when a later loop's analysis runs past the budget."""
from __future__ import annotations

import islpy as isl
import pytest
from hypothesis import given, settings

import polyir
from polyir.errors import IllegalTransform
from polyir.ir.names import find_loop
from polyir.ir.nodes import Function, Module
from polyir.polyhedral.dependences import MEMORY_KINDS, compute_dependences
from polyir.polyhedral.extract import extract
from polyir.testing import programs
from polyir.tiling import distribute
from polyir.tiling.distribute import (
    distribute_function,
    distribute_loop,
    imperfect_loops,
    loop_scope,
)
from tests.conftest import examples

NEST = """\
func f(A: f32[8, 6], B: f32[8, 6], C: f32[8], D: f32[8, 6]) {
  for i = 0 to 8 {
    for j = 0 to 6 {
      S0: B[i, j] = A[i, j] * 2.0
      S1: C[i] = C[i] + A[i, j]
    }
    for j2 = 0 to 6 {
      S2: D[i, j2] = B[i, j2] + C[i]
    }
  }
}
"""


def _outcome(function: Function, name: str, whole: bool) -> str:
    deps = compute_dependences(extract(function), MEMORY_KINDS) if whole else None
    try:
        return str(distribute_loop(function, name, deps=deps))
    except IllegalTransform as error:
        return f"refused: {error.message.split(' (')[0]}"


def test_the_scope_keeps_only_the_path_to_the_loop() -> None:
    function = polyir.parse(NEST).entry
    scope = loop_scope(function, find_loop(function, "j"))
    text = str(Module((scope,)))
    assert "S0" in text and "S1" in text and "S2" not in text and "for i = 0 to 8" in text


@settings(max_examples=examples(100, 1000), deadline=None)
@given(module=programs())
def test_scoped_and_whole_analyses_decide_the_same(module: Module) -> None:
    function = module.entry
    for name in imperfect_loops(function):
        assert _outcome(function, name, whole=False) == _outcome(function, name, whole=True), name


def test_a_budget_past_the_outer_loop_keeps_the_inner_split(monkeypatch: pytest.MonkeyPatch) -> None:
    function = polyir.parse(NEST).entry
    original = distribute.distribute_loop

    def outer_too_costly(nest: Function, name: str, **options):
        if name == "i":
            raise isl.Error("operation limit")
        return original(nest, name, **options)

    monkeypatch.setattr(distribute, "distribute_loop", outer_too_costly)
    refused: list = []
    result = distribute_function(function, refused=refused)
    assert [name for name, _ in refused] == ["i"]
    assert "needs more than" in str(refused[0][1])
    (nest,) = result.body
    assert len(nest.body) == 3            # j split into S0's and S1's loops; j2 as it was
    polyir.testing.assert_equivalent(Module((function,)), Module((result,)))


def test_settled_loops_are_left_as_they_are_and_the_others_split() -> None:
    """``_distribute_nest``'s ``settled`` loops (a spill trial's unchanged ones)
    are not tried again; every other candidate still is (``i`` holds two loops,
    ``j`` a reduction beside an element-wise statement)."""
    from polyir.ir.names import names_in
    from polyir.tiling.distribute import mixed_reduction_loops
    function = polyir.parse(NEST).entry
    assert imperfect_loops(function) == ["i"] and mixed_reduction_loops(function) == ["j"]

    def distributed(settled: set[str]) -> Function:
        return distribute._distribute_nest(function, set(), names_in(function), [], frozenset(settled))
    assert distributed({"i", "j"}) == function
    only_j = distributed({"i"})      # j split in two, i left whole
    assert len(only_j.body) == 1 and mixed_reduction_loops(only_j) == []
    only_i = distributed({"j"})      # i split, j left whole
    assert len(only_i.body) > 1 and mixed_reduction_loops(only_i) == ["j"]
    assert len(distributed(set()).body) > 1 and mixed_reduction_loops(distributed(set())) == []
