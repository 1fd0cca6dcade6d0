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
