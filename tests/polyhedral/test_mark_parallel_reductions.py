"""Regression: reductions after an initialising statement (an imperfect nest)
must not be marked parallel unless reassociation is accepted."""
from __future__ import annotations

import numpy as np

import polyir
from polyir.ir.nodes import For

REDUCTIONS = """func f(A: f32[8, 4], s: f32[8], t: f32[]) {
  for i = 0 to 8 {
    S0: s[i] = 0.0
    for r = 0 to 4 {
      S1: s[i] = s[i] + A[i, r]
    }
  }
  S2: t[] = 0.0
  for q = 0 to 8 {
    S3: t[] = t[] + s[q]
  }
}
"""


def _parallel_loops(nodes) -> set[str]:
    found: set[str] = set()
    for node in nodes:
        if isinstance(node, For):
            if node.parallel:
                found.add(node.var)
            found |= _parallel_loops(node.body)
    return found


def test_initialised_reductions_are_not_parallel() -> None:
    marked = polyir.transform(polyir.parse(REDUCTIONS), "mark-parallel")
    assert _parallel_loops(marked.entry.body) == {"i"}


def test_marked_loops_survive_reversed_and_shuffled_order() -> None:
    marked = polyir.transform(polyir.parse(REDUCTIONS), "mark-parallel")
    rng = np.random.default_rng(0)
    A = rng.standard_normal((8, 4)).astype(np.float32)
    results = []
    for order in ("forward", "reverse", "shuffle"):
        s, t = np.zeros(8, np.float32), np.zeros((), np.float32)
        polyir.interpret(marked, A, s, t, parallel_order=order)
        results.append((s.copy(), float(t)))
    for s, t in results[1:]:
        np.testing.assert_array_equal(s, results[0][0])
        assert t == results[0][1]
