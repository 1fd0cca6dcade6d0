"""Spilling a fused reduction's scalar accumulator (``polyir.tiling.spill``):
the matrix product / convolution under a fused epilogue gets its tiling plan
back; the rewrite is exact against the interpreter; refusals say why."""
from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings

import polyir
from polyir.context import PassContext
from polyir.ir.nodes import For
from polyir.ir.walk import walk_nodes
from polyir.passes import transform
from polyir.testing import assert_equivalent, assert_preserves_or_refuses, programs
from polyir.tiling.spill import SpillRefused, spill_accumulator
from tests.tiling.test_autotile import AVX2

FUSED = """func f(out: f32[M, N], A: f32[M, K], W: f32[N, K], b: f32[N], R: f32[M, N]) {
  for i = 0 to M {
    for j = 0 to N {
      local acc: f32[]
      S0: acc[] = b[j]
      for k = 0 to K {
        S1: acc[] = acc[] + A[i, k] * W[j, k]
      }
      S2: out[i, j] = max(acc[] * 0.5 + R[i, j], 0.0)
    }
  }
}"""


def _locals(module: polyir.Module) -> set[str]:
    return {b.name for node in walk_nodes(module.entry.body) if isinstance(node, For) for b in node.locals}


def test_fused_matmul_epilogue_is_spilled_and_gets_the_gemm_plan() -> None:
    module = polyir.parse(FUSED.replace("M, K]", "100, 300]").replace("[M, N]", "[100, 200]")
                          .replace("W: f32[N, K]", "W: f32[200, 300]").replace("b: f32[N]", "b: f32[200]")
                          .replace("to M", "to 100").replace("to N", "to 200").replace("to K", "to 300"))
    ctx = PassContext(AVX2)
    result = transform(module, "auto-tile", ctx=ctx)
    applied = [r.why for r in ctx.remarks_of("auto-tile", "applied")]
    assert any("accumulator 'acc' spilled into 'out'" in why and "gemm plan" in why for why in applied)
    assert any(why.startswith("matrix product") for why in applied)
    assert "acc" not in _locals(result)
    # init, product and epilogue are three nests now; each output's sum keeps its order
    assert len(result.entry.body) >= 3
    assert_equivalent(module, result, trials=1, rtol=0, atol=0)


@pytest.mark.parametrize("sizes", [{"M": 9, "N": 37, "K": 5}, {"M": 1, "N": 1, "K": 1},
                                   {"M": 20, "N": 3, "K": 17}])
def test_symbolic_fused_matmul_stays_exact(sizes: dict[str, int]) -> None:
    module = polyir.parse(FUSED)
    ctx = PassContext(AVX2)
    result = transform(module, "auto-tile", ctx=ctx)
    assert_equivalent(module, result, trials=1, sizes=sizes, rtol=0, atol=0)


def _owner(module: polyir.Module) -> For:
    return next(n for n in walk_nodes(module.entry.body) if isinstance(n, For) and n.locals)


@pytest.mark.parametrize(("change", "reason"), [
    (lambda t: t.replace("out: f32[M, N]", "out: f64[M, N]"), "'out' is f64, the accumulator f32"),
    (lambda t: t.replace("+ R[i, j], 0.0)", "+ out[i, j], 0.0)"), "reads 'out'"),
    (lambda t: t.replace("S0: acc[] = b[j]", "S0: acc[] = b[j] + out[i, 0]"), "used elsewhere"),
    (lambda t: t.replace("local acc: f32[]", "local acc: f16[]").replace("A: f32", "A: f16")
     .replace("W: f32", "W: f16").replace("b: f32", "b: f16").replace("out: f32", "out: f16")
     .replace("R: f32", "R: f16"), "16-bit"),
    (lambda t: t.replace("for j = 0 to N {", "for j = 0 to N parallel {"), "parallel"),
])
def test_refusals_name_the_reason(change, reason: str) -> None:  # noqa: ANN001
    module = polyir.parse(change(FUSED))
    owner = _owner(module)
    around = [n for n in walk_nodes(module.entry.body) if isinstance(n, For) and n.var == "i"]
    with pytest.raises(SpillRefused, match=reason):
        spill_accumulator(module.entry, owner, "acc", enclosing=around)


def test_a_row_reduction_without_a_product_keeps_its_register() -> None:
    # layer-norm style: no product, so no tiling plan would follow; not spilled
    text = """func f(out: f32[M], X: f32[M, K]) {
  for i = 0 to M {
    local s: f32[]
    S0: s[] = 0.0
    for k = 0 to K {
      S1: s[] = s[] + X[i, k]
    }
    S2: out[i] = s[] / 4.0
  }
}"""
    module = polyir.parse(text)
    result = transform(module, "auto-tile", ctx=PassContext(AVX2))
    assert "s" in _locals(result)


class _LinearRelu(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(96, 200)

    def forward(self, x: torch.Tensor, r: torch.Tensor) -> torch.Tensor:
        return self.fc(x) + r


@pytest.mark.parametrize("shape", [(1, 37, 96), (2, 5, 96)])
def test_linear_with_epilogue_on_3d_input_is_tiled_and_matches_eager(shape: tuple[int, ...]) -> None:
    torch.manual_seed(0)
    model = _LinearRelu().eval()
    x, r = torch.randn(*shape), torch.randn(*shape[:-1], 200)
    with torch.no_grad():
        compiled = polyir.compile(model, (x, r))
        torch.testing.assert_close(compiled(x, r), model(x, r), rtol=1e-4, atol=1e-4)
    remarks = compiled.summary()["remarks"]
    assert any("spilled into" in remark for remark in remarks)
    assert any(remark.startswith("auto-tile: applied") and ("matrix product" in remark
               or "register tile" in remark) for remark in remarks)


@settings(max_examples=30, deadline=None)
@given(programs(max_depth=3, max_statements=3))
def test_auto_tile_with_spills_preserves_or_refuses_random_programs(module: polyir.Module) -> None:
    assert_preserves_or_refuses(lambda m: transform(m, "auto-tile", ctx=PassContext(AVX2)), module)
