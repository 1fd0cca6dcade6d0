"""Spilling a fused matrix product's scalar accumulator (``polyir.tiling.spill``):
the product under a fused epilogue gets its tiling plan back, before and
beside the widening of convolutions; epilogue temporaries are substituted
first; the rewrites are exact against the interpreter; refusals say why."""
from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import polyir
from polyir.context import PassContext
from polyir.ir.nodes import For
from polyir.ir.printer import print_node
from polyir.ir.walk import walk_nodes
from polyir.passes import transform
from polyir.testing import assert_equivalent, assert_preserves_or_refuses, programs
from polyir.tiling.spill import SpillRefused, forward_substitute, spill_accumulator
from tests.conftest import examples
from tests.tiling.test_autotile import AVX2
from tests.tiling.test_widen import FUSED as FUSED_CONV

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


@pytest.mark.parametrize("term", ["X[i, k]", "(X[i, k] - m[i]) * (X[i, k] - m[i])"],
                         ids=["sum", "variance"])
def test_a_row_reduction_without_a_product_keeps_its_register(term: str) -> None:
    # layer-norm style: no product, so no tiling plan would follow; not a candidate
    text = """func f(out: f32[M], X: f32[M, K], m: f32[M]) {
  for i = 0 to M {
    local s: f32[]
    S0: s[] = 0.0
    for k = 0 to K {
      S1: s[] = s[] + TERM
    }
    S2: out[i] = s[] / 4.0
  }
}""".replace("TERM", term)
    module = polyir.parse(text)
    ctx = PassContext(AVX2)
    result = transform(module, "auto-tile", ctx=ctx)
    assert "s" in _locals(result)
    assert not any("accumulator 's'" in r.why for r in ctx.remarks), ctx.remarks


def _sized(text: str) -> polyir.Module:
    return polyir.parse(text.replace("M, K]", "40, 30]").replace("[M, N]", "[40, 60]")
                        .replace("W: f32[N, K]", "W: f32[60, 30]").replace("b: f32[N]", "b: f32[60]")
                        .replace("to M", "to 40").replace("to N", "to 60").replace("to K", "to 30"))


# relu(fc(x)) + r as fusion leaves it: the ReLU in a second scalar
TWO_SCALARS = FUSED.replace("local acc: f32[]", "local acc: f32[]\n      local t: f32[]").replace(
    "S2: out[i, j] = max(acc[] * 0.5 + R[i, j], 0.0)",
    "S2: t[] = max(acc[], 0.0)\n      S3: out[i, j] = t[] + R[i, j]")


def test_an_epilogue_temporary_is_substituted_and_the_product_spilled() -> None:
    module = _sized(TWO_SCALARS)
    ctx = PassContext(AVX2)
    result = transform(module, "auto-tile", ctx=ctx)
    applied = [r.why for r in ctx.remarks_of("auto-tile", "applied")]
    assert any("spilled into 'out' (epilogue temporaries t substituted)" in why for why in applied), applied
    assert not {"acc", "t"} & _locals(result)
    assert_equivalent(module, result, trials=2, rtol=0, atol=0)


def test_forward_substitution_follows_a_chain_of_temporaries() -> None:
    text = TWO_SCALARS.replace("local t: f32[]", "local t: f32[]\n      local u: f32[]").replace(
        "S3: out[i, j] = t[] + R[i, j]", "S3: u[] = t[] * 2.0\n      S4: out[i, j] = u[] + R[i, j]")
    module = polyir.parse(text)
    owner, substituted = forward_substitute(_owner(module))
    assert substituted == ("t", "u")
    assert [b.name for b in owner.locals] == ["acc"]
    assert print_node(owner.body[-1]) == "S4: out[i, j] = max(acc[], 0.0) * 2.0 + R[i, j]"
    result = transform(module, "auto-tile", ctx=PassContext(AVX2))
    assert_equivalent(module, result, trials=1, sizes={"M": 7, "N": 9, "K": 4}, rtol=0, atol=0)


@pytest.mark.parametrize(("change", "kept"), [
    # read twice: substituting would compute max(acc, 0) twice
    (lambda t: t.replace("t[] + R[i, j]", "t[] * t[] + R[i, j]"), "read twice"),
    # R changes between the store of t and its use
    (lambda t: t.replace("S3: out", "S5: R[i, j] = 1.0\n      S3: out").replace(
        "S2: t[] = max(acc[], 0.0)", "S2: t[] = max(acc[], R[i, j])"), "overwritten"),
    # stored twice
    (lambda t: t.replace("S3: out", "S5: t[] = 1.0\n      S3: out"), "stored twice"),
])
def test_temporaries_that_are_not_single_use_stay_and_the_spill_says_why(change, kept: str) -> None:  # noqa: ANN001
    module = polyir.parse(change(TWO_SCALARS))
    owner = _owner(module)
    assert forward_substitute(owner) == (owner, ()), kept
    ctx = PassContext(AVX2)
    result = transform(module, "auto-tile", ctx=ctx)
    missed = [r.why for r in ctx.remarks_of("auto-tile", "missed")]
    assert any("accumulator 'acc' kept in a register" in why for why in missed), missed
    assert_equivalent(module, result, trials=1, sizes={"M": 5, "N": 6, "K": 3}, rtol=0, atol=0)


# a Linear layer's product and a convolution in one function, as fusion leaves them
MIXED = FUSED_CONV.replace("LO", "0").replace("CO", "16").replace("H", "4").replace("W", "9") \
    .replace("f32[C" + "I", "f32[CI").replace("CI", "3").replace(
        "func conv(O: f32[16, 4, 9]",
        "func f(out: f32[40, 60], A: f32[40, 30], Wt: f32[60, 30], b: f32[60], O: f32[16, 4, 9]") \
    .replace("\n}", """
  for i = 0 to 40 {
    for j = 0 to 60 {
      local a: f32[]
      S4: a[] = b[j]
      for k = 0 to 30 {
        S5: a[] = a[] + A[i, k] * Wt[j, k]
      }
      S6: out[i, j] = max(a[], 0.0)
    }
  }
}""")


def test_a_product_is_spilled_and_a_convolution_widened_in_one_function() -> None:
    module = polyir.parse(MIXED)
    ctx = PassContext(AVX2)
    result = transform(module, "auto-tile", ctx=ctx)
    applied = [r.why for r in ctx.remarks_of("auto-tile", "applied")]
    assert any("accumulator 'a' spilled into 'out'" in why for why in applied), applied
    assert any("scalar accumulators of loop 'w' widened" in why for why in applied), applied
    assert not any("'acc'" in r.why and "spill" in r.why for r in ctx.remarks), ctx.remarks
    assert_equivalent(module, result, trials=1, rtol=0, atol=0)


def test_spill_false_leaves_the_product_to_widening() -> None:
    module = _sized(FUSED)
    ctx = PassContext(AVX2)
    result = transform(module, "auto-tile{spill=false}", ctx=ctx)
    assert not any("spilled" in r.why for r in ctx.remarks)
    assert any("widened to a tile (one row" in r.why for r in ctx.remarks_of("auto-tile", "applied"))
    assert_equivalent(module, result, trials=1, rtol=0, atol=0)


class _LinearEpilogue(torch.nn.Module):
    def __init__(self, epilogue: str) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(96, 200)
        self.epilogue = epilogue

    def forward(self, x: torch.Tensor, r: torch.Tensor) -> torch.Tensor:
        if self.epilogue == "residual":
            return self.fc(x) + r
        if self.epilogue == "gelu":
            return torch.nn.functional.gelu(self.fc(x))
        return torch.relu(self.fc(x)) + r


@pytest.mark.parametrize("epilogue", ["residual", "gelu", "relu_residual"])
@pytest.mark.parametrize("shape", [(1, 37, 96), (2, 5, 96)])
def test_linear_with_epilogue_on_3d_input_is_tiled_and_matches_eager(shape: tuple[int, ...],
                                                                     epilogue: str) -> None:
    torch.manual_seed(0)
    model = _LinearEpilogue(epilogue).eval()
    x, r = torch.randn(*shape), torch.randn(*shape[:-1], 200)
    with torch.no_grad():
        compiled = polyir.compile(model, (x, r))
        torch.testing.assert_close(compiled(x, r), model(x, r), rtol=1e-4, atol=1e-4)
    remarks = compiled.summary()["remarks"]
    assert any("spilled into" in remark for remark in remarks), remarks
    assert not any("widened" in remark for remark in remarks), remarks
    assert any(remark.startswith("auto-tile: applied") and ("matrix product" in remark
               or "register tile" in remark) for remark in remarks)


@settings(max_examples=30, deadline=None)
@given(programs(max_depth=3, max_statements=3))
def test_auto_tile_with_spills_preserves_or_refuses_random_programs(module: polyir.Module) -> None:
    assert_preserves_or_refuses(lambda m: transform(m, "auto-tile", ctx=PassContext(AVX2)), module)


@settings(max_examples=examples(10), deadline=None)
@given(programs(max_depth=3, max_statements=3))
def test_spills_preserve_or_refuse_on_random_fused_programs(module: polyir.Module) -> None:
    # fusion and shrinking make the scalar accumulators; no size threshold, so small nests spill
    for order in ("forward", "shuffle"):
        assert_preserves_or_refuses(
            lambda m: transform(m, "fuse,shrink-buffers,auto-tile{gemm_work=0 register_work=0}",
                                ctx=PassContext(AVX2)), module, parallel_order=order)


STORES = ["out[i, j]", "out[i, 0]", "out[0, j]", "A[i, 0]", "W[j, 0]"]
TERMS = ["R[i, j]", "out[i, j]", "A[i, j]", "W[0, i]", "1.0"]


@settings(max_examples=examples(15), deadline=None)
@given(st.integers(1, 6), st.integers(1, 7), st.integers(1, 4), st.sampled_from(STORES),
       st.sampled_from(TERMS), st.sampled_from(["b[j]", "out[i, j]", "A[i, 0]"]), st.booleans())
def test_spills_preserve_or_refuse_on_fused_product_variants(m: int, n: int, k: int, store: str,
                                                             term: str, init: str,
                                                             twice: bool) -> None:
    """Fused products whose epilogue stores where later sums read, or to a
    cell other iterations store to, reads the output, or reads its
    temporary twice: each is spilled and exact, or left as it was."""
    text = TWO_SCALARS.replace("S3: out[i, j] = t[] + R[i, j]", f"S3: {store} = t[] + {term}") \
        .replace("S0: acc[] = b[j]", f"S0: acc[] = {init}")
    if twice:
        text = text.replace("t[] + ", "t[] * t[] + ")
    size = max(m, n, k)
    text = text.replace("A: f32[M, K]", "A: f32[S, S]").replace("W: f32[N, K]", "W: f32[S, S]") \
        .replace("out: f32[M, N]", "out: f32[S, S]").replace("R: f32[M, N]", "R: f32[S, S]")
    text = text.replace("to M", f"to {m}").replace("to N", f"to {n}").replace("to K", f"to {k}") \
        .replace("S]", f"{size}]").replace("S,", f"{size},").replace("f32[N]", f"f32[{size}]")
    module = polyir.parse(text)
    for order in ("forward", "shuffle"):
        assert_preserves_or_refuses(
            lambda mod: transform(mod, "auto-tile{gemm_work=0 register_work=0}", ctx=PassContext(AVX2)),
            module, parallel_order=order)


TWO_PRODUCTS = """func f(x: f32[4, 24, 32], W1: f32[48, 32], b1: f32[48], W2: f32[32, 48], b2: f32[32],
       out: f32[4, 24, 32]) {
  for b = 0 to 4 {
    local h: f32[24, 48]
    for t = 0 to 24 {
      for n = 0 to 48 {
        local a1: f32[]
        S0: a1[] = b1[n]
        for k = 0 to 32 {
          S1: a1[] = a1[] + x[b, t, k] * W1[n, k]
        }
        S2: h[t, n] = max(a1[], 0.0)
      }
    }
    for t2 = 0 to 24 {
      for m = 0 to 32 {
        local a2: f32[]
        S3: a2[] = b2[m]
        for k2 = 0 to 48 {
          S4: a2[] = a2[] + h[t2, k2] * W2[m, k2]
        }
        S5: out[b, t2, m] = a2[] + x[b, t2, m]
      }
    }
  }
}"""


def test_every_product_of_a_nest_is_spilled_after_the_first() -> None:
    """A feed-forward block fused per image: the first spill rebuilds the nest,
    and the second product's loop is found again in the rebuilt one (it was
    looked up by identity in the nest before the first spill, missed, and its
    product left as matrix-vector rows)."""
    module = polyir.parse(TWO_PRODUCTS)
    ctx = PassContext(AVX2)
    result = transform(module, "auto-tile", ctx=ctx)
    applied = [r.why for r in ctx.remarks_of("auto-tile", "applied")]
    assert any("accumulator 'a1' spilled into 'h'" in why for why in applied), ctx.remarks
    assert any("accumulator 'a2' spilled into 'out'" in why for why in applied), ctx.remarks
    assert not any("widened to a tile (one row" in why for why in applied), applied
    assert not {"a1", "a2"} & _locals(result)
    assert_equivalent(module, result, trials=2, rtol=0, atol=0)
