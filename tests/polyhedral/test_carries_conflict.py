"""``carries_conflict``: the emptiness test ``mark-parallel{outermost=true}``
asks of candidate loops agrees with the full dependence analysis on every loop
of random programs, and the outermost choice built on it is the same."""
from __future__ import annotations

from hypothesis import given, settings

import polyir
from polyir.ir.nodes import Module
from polyir.polyhedral.dependences import MEMORY_KINDS, compute_dependences
from polyir.polyhedral.extract import NotPolyhedral, extract
from polyir.polyhedral.passes import _outermost_free, carries_conflict, outermost_parallel_loops
from polyir.testing import programs
from tests.conftest import examples


@settings(max_examples=examples(60, 1000))
@given(programs(max_depth=3, max_statements=6))
def test_conflict_test_agrees_with_dependences(module: Module) -> None:
    try:
        scop = extract(module.entry)
    except NotPolyhedral:
        return
    carrying = compute_dependences(scop, MEMORY_KINDS).carrying_loops(False)
    for ident, info in scop.loops.items():
        assert carries_conflict(scop, ident) == (ident in carrying), \
            f"loop {info.var} (id {ident}): dependences say {ident in carrying}\n{module}"
    deps = compute_dependences(scop, MEMORY_KINDS)
    assert _outermost_free(scop, 2, lambda i: carries_conflict(scop, i)) == \
        outermost_parallel_loops(deps, 2)


TILED = """func f(A: f32[N, 64], B: f32[64, 32], C: f32[N, 32], s: f32[N]) {
  local pack: f32[64, 32]
  for j = 0 to 32 {
    for k = 0 to 64 {
      S0: pack[k, j] = B[k, j]
    }
  }
  for i = 0 to N {
    S1: s[i] = 0.0
    for j2 = 0 to 32 {
      S2: C[i, j2] = 0.0
      for k2 = 0 to 64 {
        S3: C[i, j2] = C[i, j2] + A[i, k2] * pack[k2, j2]
      }
      S4: s[i] = s[i] + C[i, j2]
    }
  }
  for t = 1 to N {
    S5: s[t] = s[t] + s[t - 1]
  }
}
"""


def test_named_loops() -> None:
    scop = extract(polyir.parse(TILED).entry)
    by_var = {info.var: ident for ident, info in scop.loops.items()}
    expected = {"j": False, "k": False, "i": False, "j2": True, "k2": True, "t": True}
    assert {var: carries_conflict(scop, by_var[var]) for var in expected} == expected
