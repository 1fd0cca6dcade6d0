"""Bugs found by ``scripts/fuzz.py``, each with its regression test."""
from __future__ import annotations

import polyir
from polyir.ir.nodes import For, If
from polyir.testing import assert_equivalent

LOCAL_UNDER_IF = """func f(A: f64[N], B: f64[N]) {
  local t: f64[]
  if (N >= 2) {
    for i = 0 to N {
      S0: t[] = A[i] * 2.0:f64
      S1: B[i] = t[] + 1.0:f64
    }
  }
}
"""


def test_shrink_buffers_on_a_nest_under_a_top_level_if() -> None:
    # the nest holding every access to t sits under an if: shrink-buffers
    # looked for it among the top-level nodes only (StopIteration)
    module = polyir.parse(LOCAL_UNDER_IF)
    result = polyir.transform(module, "shrink-buffers")
    assert not result.entry.locals
    guard = result.entry.body[0]
    assert isinstance(guard, If) and isinstance(guard.then_body[0], For)
    assert [b.name for b in guard.then_body[0].locals] == ["t"]
    assert_equivalent(module, result)
