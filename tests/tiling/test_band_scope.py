"""``auto-tile`` proves a band's plan on the band's scope (the band and the
loops around it, ``bands.band_scope``) when the plan changed nothing around
the band, and on the whole nest otherwise."""
from __future__ import annotations

import pytest

import polyir
from polyir.context import PassContext
from polyir.ir.names import find_loop
from polyir.ir.nodes import Function, Module
from polyir.passes import transform
from polyir.testing import assert_equivalent
from polyir.tiling import autotile
from polyir.tiling.bands import band_path, band_scope, band_surroundings, without_statements
from tests.tiling.test_autotile import AVX512

FUSED = """\
func f(X: f32[4, 24, 32], W: f32[32, 48], C: f32[4, 24, 48], Y: f32[4, 24]) {
  for b = 0 to 4 {
    for s = 0 to 24 {
      for t = 0 to 32 {
        S0: X[b, s, t] = X[b, s, t] * 0.5
      }
    }
    for i = 0 to 24 {
      for j = 0 to 48 {
        for k = 0 to 32 {
          S1: C[b, i, j] = C[b, i, j] + X[b, i, k] * W[k, j]
        }
      }
    }
    for i2 = 0 to 24 {
      S2: Y[b, i2] = C[b, i2, 0] + C[b, i2, 47]
    }
  }
}
"""


def test_the_path_the_scope_and_the_surroundings() -> None:
    function = polyir.parse(FUSED).entry
    path = band_path(function, find_loop(function, "i"))
    assert path == (0, ((0, 1),), 3)
    scope = str(Module((band_scope(function, path),)))
    assert "S1" in scope and "S0" not in scope and "S2" not in scope
    around = str(Module((band_surroundings(function, path),)))
    assert "S0" in around and "S2" in around and "S1" not in around
    assert without_statements(function, {"S0"}).body[0].body[0] is function.body[0].body[1]


def test_a_plan_inside_the_band_is_proven_on_its_scope(monkeypatch: pytest.MonkeyPatch) -> None:
    module = polyir.parse(FUSED)
    proofs: list[str] = []
    original = autotile.check_rewrite

    def spy(deps, rewritten: Function, **options):
        proofs.append(str(Module((rewritten,))))
        return original(deps, rewritten, **options)

    monkeypatch.setattr(autotile, "check_rewrite", spy)
    ctx = PassContext(AVX512)
    result = transform(module, "auto-tile{gemm_work=0 register_work=0}", ctx=ctx)
    assert ctx.remarks_of("auto-tile", "applied"), [str(r) for r in ctx.remarks]
    assert proofs and all("S0" not in text and "S2" not in text for text in proofs)
    assert_equivalent(module, result, trials=1)


def test_an_illegal_order_inside_a_fused_nest_is_still_refused() -> None:
    """The scope keeps the band's own dependences: a recurrence along ``j``
    inside the band forbids moving ``k`` outside it."""
    text = FUSED.replace("S1: C[b, i, j] = C[b, i, j] + X[b, i, k] * W[k, j]",
                         "S1: C[b, i, j + 1] = C[b, i, j] + X[b, i, k] * W[k, j]") \
        .replace("C: f32[4, 24, 48]", "C: f32[4, 24, 49]")
    module = polyir.parse(text)
    ctx = PassContext(AVX512)
    tiled = transform(module, "auto-tile{gemm_work=0 register_work=0}", ctx=ctx)
    assert any("violates RAW S1 -> S1" in r.why for r in ctx.remarks_of("auto-tile", "missed")), \
        [str(r) for r in ctx.remarks]
    assert_equivalent(module, tiled, trials=2)
