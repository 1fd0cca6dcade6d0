"""Bugs found by ``scripts/fuzz.py``, each with its regression test."""
from __future__ import annotations

import polyir
from polyir.ir.nodes import For, If
from polyir.passes import PassContext, transform
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


# isl's AST guards a body with a disjunction: codegen repeated the same body
# (same statement names, same loop variables) in each branch of the else-chain
DISJUNCTIVE_GUARD = """func f(N: index, A: f32[M + P + 2, 2*M + 2*P + 3], B: f32[M, P]) {
  local W0: f32[M, P + 1]
  local W1: f32[P]
  if (N == 2) {
    for i = 0 to M {
      for j = i to P step 2 {
        for k = max(0, j - 1) to P step 2 {
          S0: W0[i, k + 1] = A[i, 2*i]
          if (i + k >= M) {
            S1: A[i + k, k] = 0.25 * A[i + k + 1, k] + 0.25 * A[i + k + 1, k] + 0.25 * A[i + k + 1, k] + 0.25 * A[i + k, k + 1]
            S2: W1[k] = (min(B[i, k], A[k, k]) + A[k + 1, 1]) * 0.5
            if (2 >= 0) {
              S3: A[i, 2*k + 1] = select(not B[i, k] <= 0.0, A[i, 2*k + 1], A[i + 1, j] / (1.0 + abs(A[i + 1, j])))
            }
          }
          for l = max(1, k + 1) to 0 step 2 {
            S4: A[i, P - j - 1] = min(A[i, P - j - 1], select(l != 3, 0.5 * A[i, P - k] + 0.25 * A[i + 1, j + 1] + 0.25 * A[i + 1, j + 1], exp(-abs(cast<f32>(l)))))
          }
        }
      }
    }
  }
}
"""

DISJUNCTIVE_GUARD_LOOPS = """func f(A: f64[M + 1], M: index, B: f64[M + N + 2, 2*N + 1], C: i32[4, N], D: f64[M + 2*N + 2]) {
  local b0: bool[]
  local W0: i32[]
  local t0: f64[]
  for i = 1 to N {
    for j = max(1, i - 1) to min(6, N) step 3 {
      for k = 0 to 4 {
        S0: D[i + 1] = max(cast<f64>(C[k, i]) / (1.0:f64 + abs(cast<f64>(C[k, i]))), D[2*i - 1] / (2.0:f64 + abs(D[i])))
        S1: b0[] = i < k
        S2: W0[] = select(b0[], cast<i32>(B[i, j + 1] * 4.0:f64) - 1:i32, max(cast<i32>(B[1, N - i - 1] * 4.0:f64), cast<i32>(B[i + 2, j] * 4.0:f64)))
      }
    }
  }
  for i_1 = 1 to min(5, M) {
    for j_1 = 0 to N step 2 {
      for k_1 = max(0, j_1 - 1) to M {
        for l = 0 to min(M, k_1 + 1) {
          S3: t0[] = 0.5:f64 * B[i_1, 2*j_1 + 1] + 0.5:f64 * (D[l + 1] * D[i_1])
          S4: D[i_1 + 2] = 0.5:f64 * max(sigmoid(D[abs(cast<i64>(B[i_1, j_1] * 4.0:f64)) % M]), tanh(A[l + 1])) + 0.5:f64 * t0[]
        }
      }
    }
  }
}
"""


def test_reschedule_repeats_a_guarded_body_under_fresh_names() -> None:
    from polyir.ir.nodes import Module
    from polyir.testing import assert_preserves_or_refuses
    for text in (DISJUNCTIVE_GUARD, DISJUNCTIVE_GUARD_LOOPS):
        module = polyir.parse(text)
        result = assert_preserves_or_refuses(lambda m: polyir.transform(m, "reschedule"), module)
        assert isinstance(result, Module)   # verified and equivalent, not refused


# widen's dependence analysis of this nest (after distribute) ran isl's
# dataflow for minutes: every isl problem of the analyses is now bounded on its own
# (polyir.polyhedral.memo.PROBLEM_OPERATIONS) and a problem past the bound is a
# refusal with a remark, not a hang
HEAVY_DATAFLOW = """func f(A: f64[2*M + 2, 2*M + 2], B: f64[M], C: f64[M, M], G: i32[N, N]) {
  local t0: f64[]
  local t1: f64[]
  for i = 0 to M step 3 {
    for j = max(1, 1) to M - 2 step 2 {
      S0: t0[] = 0.75:f64 * sqrt(abs(C[i, j])) + 0.25:f64 * A[i, 2*j + 1]
      S1: A[2*j, i] = 0.5:f64 * (0.5:f64 * A[2*j, i + 1] + 0.5:f64 * A[2*j, i + 1]) + 0.5:f64 * t0[]
      for k = 0 to M {
        S2: t1[] = sigmoid(A[i + 2, 2*k])
        S3: A[M - i - 1, j + 2] = 0.5:f64 * (select(i != j, A[i + 1, k + 1] / (1.0:f64 + abs(A[i + 1, k + 1])), A[2*j - 1, k + 1]) * exp(-abs(t1[]))) + 0.5:f64 * (t1[] / (1.0:f64 + abs(t1[])))
        if (k > j) {
          S4: A[i, k] = 0.5:f64 * A[i, k] + 0.5:f64 * (A[k, 2*k] / (2.0:f64 + abs(A[M - i - 1, M - j - 1])) / sqrt(abs(B[k]) + 1.0:f64))
        }
      }
    }
  }
}
"""


def test_a_heavy_dataflow_problem_is_bounded_and_refused_with_a_remark(monkeypatch) -> None:
    import time

    from polyir.polyhedral import memo
    # isl's compute_flow needed more than 10M operations for this program's memory
    # dependences; built a pair of accesses at a time they take a few tens of
    # thousands: the bound is set below them, so that one problem runs past it
    monkeypatch.setattr(memo, "PROBLEM_OPERATIONS", 20_000)

    import numpy as np

    from polyir.driver import compile_ir
    from polyir.testing import random_arguments
    module = polyir.parse(HEAVY_DATAFLOW)
    start = time.perf_counter()
    distributed = polyir.transform(module, "fuse,shrink-buffers,distribute")
    ctx = PassContext()
    tiled = transform(distributed, "auto-tile", ctx=ctx)
    assert time.perf_counter() - start < 120        # minutes before the bound
    remarks = [str(r) for r in ctx.remarks_of("auto-tile")]
    assert any("isl gave up" in r for r in remarks), remarks
    assert_equivalent(module, tiled)
    executable = compile_ir(module, "cpu", cache_dir=None)
    expected = random_arguments(module, 3)
    got = [a.copy() for a in expected]
    polyir.interpret(module, *expected)
    executable(*got)
    for e, g in zip(expected, got, strict=True):
        np.testing.assert_allclose(g, e, rtol=1e-9, atol=1e-12)
