"""No hanging: the analyses are bounded and near-linear in the statements.

The dependence analysis runs per buffer over the statements that touch it
(``polyir.polyhedral.dependences.raw_relations``), on the compilation's own isl
context with an operation limit (``Analyses.max_operations``); a function past
it is kept as it is, with a remark, by ``mark-parallel``, ``reschedule`` and
``fuse``."""
from __future__ import annotations

import pytest

import polyir
from polyir.context import PassContext
from polyir.ir.nodes import For
from polyir.polyhedral.analysis import Analyses
from tests.polyhedral.test_dependences import assert_matches_oracle

TRIPLE = """func f(A: f32[N, N, N]) {
  for i = 1 to N step 2 {
    for j = 0 to N step 3 {
      for k = 2 to N step 5 {
        S0: A[i, j, k] = A[i - 1, j, k] + A[i, j, k - 2]
      }
    }
  }
}
"""

PAIR = """func f(A: f32[N], C: f32[N]) {
  local B: f32[N]
  for i = 0 to N {
    S0: B[i] = A[i] * 2.0
  }
  for i2 = 0 to N {
    S1: C[i2] = B[i2] + A[i2]
  }
}
"""


def independent_statements(n: int, shared_every: int = 0) -> polyir.ir.nodes.Module:
    """``n`` one-loop nests on buffers of their own (every ``shared_every``-th
    one also reading and writing the shared ``Z``)."""
    lines = ["func g(" + ", ".join([f"A{s}: f32[N]" for s in range(n)] + ["Z: f32[N]"]) + ") {"]
    for s in range(n):
        other = f" + Z[i{s}]" if shared_every and s % shared_every == 0 else ""
        lines += [f"  for i{s} = 0 to N {{", f"    S{s}: A{s}[i{s}] = A{s}[i{s}] + 1.0{other}", "  }"]
        if other:
            lines += [f"  for j{s} = 1 to N {{", f"    T{s}: Z[j{s}] = Z[j{s} - 1] + A{s}[j{s}]", "  }"]
    return polyir.parse("\n".join(lines + ["}"]) + "\n")


def test_per_buffer_dependences_match_brute_force() -> None:
    function = independent_statements(12, shared_every=4).entry
    for size in (1, 3):
        assert_matches_oracle(function, {"N": size})


def test_many_statements_stay_within_the_default_limit() -> None:
    module = independent_statements(200)
    for pipeline in ("mark-parallel", "reschedule,mark-parallel"):
        ctx = PassContext()
        result = polyir.transform(module, pipeline, ctx=ctx)
        assert not [r for r in ctx.remarks if "isl operations" in r.why], ctx.remarks[:2]
        loops = [n for n in result.entry.body if isinstance(n, For)]
        assert len(loops) == 200 and all(loop.parallel for loop in loops)


@pytest.mark.parametrize("pipeline,text", [("mark-parallel", TRIPLE), ("reschedule", TRIPLE),
                                           ("fuse", PAIR)])
def test_past_the_limit_the_function_is_kept_with_a_remark(pipeline: str, text: str,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    import polyir.fusion.passes as fusion_passes

    module = polyir.parse(text)
    ctx = PassContext(analyses=Analyses(max_operations=50))
    with monkeypatch.context() as patch:
        patch.setattr(fusion_passes, "FUSION_OPERATIONS", 50)
        assert polyir.transform(module, pipeline, ctx=ctx) is module
    assert [r for r in ctx.remarks if "needs more than 50 isl operations" in r.why], ctx.remarks
    # the same context is usable afterwards, and the default limit is ample
    ctx = PassContext()
    polyir.transform(module, pipeline, ctx=ctx)
    assert not [r for r in ctx.remarks if "isl operations" in r.why], ctx.remarks
