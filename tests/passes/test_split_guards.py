"""``split-guards``: innermost loops split where their guards start and stop holding."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import polyir
from polyir.context import PassContext
from polyir.driver import compile_ir
from polyir.ir.nodes import For, If
from polyir.ir.walk import walk_nodes
from polyir.passes import transform
from polyir.testing import assert_preserves_or_refuses, programs
from tests.conftest import examples

PADDED = """
func f(y: f32[N], x: f32[N], w: f32[3]) {
  for r = 0 to 3 {
    for i = 0 to N {
      if (i + r - 1 >= 0, i + r - 1 < N) {
        S0: y[i] = y[i] + x[i + r - 1] * w[r]
      }
    }
  }
}
"""


def _loops(module: polyir.ir.nodes.Module) -> list[For]:
    return [n for n in walk_nodes(module.entry.body) if isinstance(n, For)]


def test_a_padded_width_loop_runs_unguarded_between_its_edges() -> None:
    module = polyir.parse(PADDED)
    ctx = PassContext()
    split = transform(module, "split-guards", ctx=ctx)
    polyir.verify(split)
    before, middle, after = _loops(split)[1:]
    assert not any(isinstance(n, If) for n in middle.body)       # the interior: no test of i
    assert all(isinstance(n, If) for n in (*before.body, *after.body))
    assert [r.kind for r in ctx.remarks_of("split-guards")] == ["applied"]
    rng = np.random.default_rng(1)
    for n in (0, 1, 2, 5):
        x, w = rng.standard_normal(n).astype(np.float32), rng.standard_normal(3).astype(np.float32)
        want, got = np.zeros(n, np.float32), np.zeros(n, np.float32)
        polyir.interpret(module, want, x, w)
        polyir.interpret(split, got, x, w)
        np.testing.assert_array_equal(got, want)


def test_the_split_loop_compiles_natively_to_the_same_values() -> None:
    module = polyir.parse(PADDED)
    rng = np.random.default_rng(2)
    x, w = rng.standard_normal(37).astype(np.float32), rng.standard_normal(3).astype(np.float32)
    want, got = np.zeros(37, np.float32), np.zeros(37, np.float32)
    polyir.interpret(module, want, x, w)
    compile_ir(module, "cpu", "split-guards")(got, x, w)
    np.testing.assert_array_equal(got, want)


REFUSED = {
    "its guards bound 'i' differently": """
func f(y: f32[N], x: f32[N]) {
  for i = 1 to N {
    if (i - 1 >= 0) { S0: y[i] = x[i - 1] }
    if (i - 2 >= 0) { S1: y[i] = y[i] + x[i - 2] }
  }
}""",
    "a coefficient other than 1 or -1": """
func f(y: f32[N], x: f32[N]) {
  for i = 0 to N {
    if (2*i < N) { S0: y[i] = x[2*i] }
  }
}""",
    "fewer than 16": """
func f(y: f32[N], x: f32[N], w: f32[3]) {
  for i = 0 to N {
    for r = 0 to 3 {
      if (i + r - 1 >= 0, i + r - 1 < N) { S0: y[i] = y[i] + x[i + r - 1] * w[r] }
    }
  }
}""",
    "two lower bounds": """
func f(y: f32[N], x: f32[N], M: index) {
  for i = 0 to N {
    if (i >= M, i >= 3) { S0: y[i] = x[i] }
  }
}""",
}


@pytest.mark.parametrize("why", list(REFUSED))
def test_loops_that_do_not_fit_are_left_with_a_reason(why: str) -> None:
    module = polyir.parse(REFUSED[why])
    ctx = PassContext()
    assert transform(module, "split-guards", ctx=ctx) is module
    (remark,) = ctx.remarks_of("split-guards")
    assert remark.kind == "missed" and why in remark.why, remark


@settings(max_examples=examples(40))
@given(st.integers(-3, 3), st.integers(-3, 3), st.sampled_from(["both", "lower", "upper"]),
       st.booleans(), st.booleans(), st.sampled_from(["0", "2", "j"]))
def test_split_guards_preserves_meaning_on_guarded_stencils(lo: int, hi: int, which: str,
                                                            extra: bool, parallel: bool,
                                                            start: str) -> None:
    conditions = {"both": [f"i + {lo} >= 0", f"i + {hi} < N"], "lower": [f"i + {lo} >= 0"],
                  "upper": [f"i + {hi} < N"]}[which]
    if extra:
        conditions.append("j < M - 1")
    guard = ", ".join(conditions)
    mark = " parallel" if parallel else ""
    text = f"""
func f(Y: f32[M, N], X: f32[M, N], s: f32[N]) {{
  for j = 0 to M {{
    for i = {start} to N{mark} {{
      S0: s[i] = s[i] + 1.0
      if ({guard}) {{
        S1: Y[j, i] = Y[j, i] + X[j, i] * 0.5
      }}
    }}
  }}
}}"""
    module = polyir.parse(text)
    for order in ("forward", "reverse", "shuffle"):
        assert_preserves_or_refuses(lambda m: transform(m, "split-guards{min_trip=0}"), module,
                                    parallel_order=order)


@settings(max_examples=examples(25))
@given(programs(mark_parallel=True))
def test_split_guards_preserves_or_refuses_on_random_programs(module) -> None:
    for order in ("forward", "reverse"):
        assert_preserves_or_refuses(lambda m: transform(m, "split-guards{min_trip=0}"), module,
                                    parallel_order=order)
