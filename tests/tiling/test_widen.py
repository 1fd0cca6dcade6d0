"""``auto-tile`` widening a fused reduction's scalar accumulator back to a tile
(``polyir.tiling.widen``): a convolution fused with its epilogue at full depth
gets the direct-convolution plan (a tile of accumulators, the output-channel
block unrolled and jammed, the output width innermost), stays exact, and
matches torch eager; a band whose dependences forbid the distribution is left
as it was, with a reason."""
from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import polyir
import polyir.target
from polyir.context import PassContext
from polyir.ir.nodes import Assign, For, Module
from polyir.ir.walk import walk_nodes
from polyir.passes import transform
from polyir.testing import assert_equivalent, assert_preserves_or_refuses, programs
from tests.conftest import examples
from tests.tiling.test_autotile import AVX2, TINY

# conv + batch-norm-like scale and shift + ReLU, as fusion and shrink-buffers leave it
FUSED = """func conv(O: f32[CO, H, W], I: f32[CI, H, W], F: f32[CO, CI, 3, 3], G: f32[CO]) {
  for co = LO to CO {
    for h = 0 to H {
      for w = 0 to W {
        local acc: f32[]
        local bn: f32[]
        S0: acc[] = 0.0
        for ci = 0 to CI {
          for kh = 0 to 3 {
            for kw = 0 to 3 {
              if (h + kh - 1 >= 0, h + kh - 1 < H, w + kw - 1 >= 0, w + kw - 1 < W) {
                S1: acc[] = acc[] + I[ci, h + kh - 1, w + kw - 1] * F[co, ci, kh, kw]
              }
            }
          }
        }
        S2: bn[] = acc[] * G[co] + 0.5
        S3: O[co, h, w] = select(bn[] < 0.0, 0.0, bn[])
      }
    }
  }
}"""


def _fused(co: int, h: int, w: int, lo: int = 0) -> Module:
    text = FUSED.replace("LO", str(lo)).replace("CO", str(co)).replace("H", str(h)).replace("W", str(w))
    return polyir.parse(text.replace("f32[C" + "I", "f32[CI"))


def _loops(module: Module) -> list[For]:
    return [n for n in walk_nodes(module.entry.body) if isinstance(n, For)]


@pytest.mark.parametrize(("co", "h", "w", "lo"), [(16, 5, 9, 0), (12, 3, 7, 2), (6, 4, 5, 0)])
def test_fused_conv_epilogue_is_widened_and_gets_the_direct_plan(co: int, h: int, w: int, lo: int) -> None:
    module = _fused(co, h, w, lo)
    ctx = PassContext(AVX2)
    result = transform(module, "auto-tile", ctx=ctx)
    applied = [r.why for r in ctx.remarks_of("auto-tile", "applied")]
    assert any("widened to a tile" in why for why in applied), applied
    assert any("unroll-jam{loops=co_r" in why and "loop w_" in why for why in applied), applied
    # a tile of accumulators, a loop-scoped local of the row loop
    (h_loop,) = [loop for loop in _loops(result) if loop.var == "h"]
    tiles = [b for b in h_loop.locals if b.name == "acc"]
    assert tiles and tiles[0].shape[1].constant == w and tiles[0].shape[0].constant in (2, 4, 8)
    block = tiles[0].shape[0].constant
    # the reduction's innermost loop is the output width, with one statement per jammed channel
    sums = [n for n in walk_nodes(result.entry.body) if isinstance(n, Assign) and n.name.startswith("S1")]
    assert len(sums) == block
    innermost = [loop for loop in _loops(result)
                 if any(s in walk_nodes(loop.body) for s in sums) and not any(
                     isinstance(n, For) for n in walk_nodes(loop.body))]
    assert innermost and all(loop.var.startswith("w") for loop in innermost)
    # exact: each sum in its original order
    assert_equivalent(module, result, trials=2, rtol=0, atol=0)


def test_an_odd_channel_count_widens_one_row_of_accumulators() -> None:
    module = _fused(5, 3, 12)
    ctx = PassContext(AVX2)
    result = transform(module, "auto-tile", ctx=ctx)
    applied = [r.why for r in ctx.remarks_of("auto-tile", "applied")]
    assert any("widened to a tile" in why for why in applied), applied
    assert any("loop w_" in why and "innermost" in why for why in applied), applied
    (h_loop,) = [loop for loop in _loops(result) if loop.var == "h"]
    assert [(b.name, [d.constant for d in b.shape]) for b in h_loop.locals] == [("acc", [12])]
    assert_equivalent(module, result, trials=2, rtol=0, atol=0)


def test_widen_false_leaves_the_scalar_accumulator() -> None:
    module = _fused(16, 4, 8)
    ctx = PassContext(AVX2)
    result = transform(module, "auto-tile{widen=false}", ctx=ctx)
    assert not any("widened" in r.why for r in ctx.remarks)
    assert result == module


def test_widening_a_band_whose_epilogue_feeds_the_reduction_is_refused() -> None:
    # the epilogue writes I, which later output channels' sums read: blocking
    # the channels would run those sums before the writes they depend on
    text = FUSED.replace("S3: O[co, h, w]", "S3: I[0, h, w]").replace("LO", "0") \
        .replace("CO", "8").replace("H", "4").replace("W", "8")
    module = polyir.parse(text.replace("f32[C" + "I", "f32[CI").replace("CI", "2"))
    ctx = PassContext(AVX2)
    result = transform(module, "auto-tile", ctx=ctx)
    missed = [r.why for r in ctx.remarks_of("auto-tile", "missed")]
    assert any("accumulators not widened" in why and "violates" in why for why in missed), missed
    assert not any("widened to a tile" in r.why for r in ctx.remarks_of("auto-tile", "applied"))
    assert_equivalent(module, result, trials=2, rtol=0, atol=0)


class _ConvBnRelu(torch.nn.Module):
    def __init__(self, channels: int, residual: bool) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn = torch.nn.BatchNorm2d(channels)
        self.residual = residual
        with torch.no_grad():
            self.bn.running_mean.uniform_(-1, 1)
            self.bn.running_var.uniform_(0.5, 2)
            self.bn.weight.uniform_(0.5, 2)
            self.bn.bias.uniform_(-1, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.bn(self.conv(x))
        return torch.relu(x + y if self.residual else y)


@pytest.mark.parametrize("residual", [False, True], ids=["conv_bn_relu", "conv_bn_add_relu"])
@pytest.mark.parametrize("batch", [1, 2])
def test_torch_conv_with_fused_epilogue_gets_the_tiled_plan_and_matches_eager(residual: bool,
                                                                              batch: int) -> None:
    torch.manual_seed(0)
    model = _ConvBnRelu(16, residual).eval()
    x = torch.randn(batch, 16, 6, 10)
    with torch.no_grad():
        expected = model(x)
        compiled = polyir.compile(model, (x,), target=polyir.target.cpu(1))
        got = compiled(x)
    torch.testing.assert_close(got, expected, rtol=1e-4, atol=1e-4)
    remarks = compiled.summary()["remarks"]
    assert any(r.startswith("fuse: applied") for r in remarks), remarks
    assert any("widened to a tile" in r for r in remarks), remarks
    assert any(r.startswith("auto-tile: applied") and "unroll-jam{loops=" in r and "_r" in r
               for r in remarks), remarks


@settings(max_examples=examples(10), deadline=None)
@given(programs(max_depth=3, max_statements=3))
def test_widening_preserves_or_refuses_on_random_fused_programs(module: Module) -> None:
    for order in ("forward", "shuffle"):
        assert_preserves_or_refuses(
            lambda m: transform(m, "fuse,shrink-buffers,auto-tile{gemm_work=0 register_work=0}",
                                ctx=PassContext(TINY)), module, parallel_order=order)


EPILOGUES = ["O[co, h, w]", "O[0, h, w]", "I[0, h, w]", "O[co, 0, w]", "I[ci_last, h, 0]"]
READS = ["I[ci, h + kh - 1, w + kw - 1]", "O[ci, h + kh - 1, w + kw - 1]", "I[ci, h, w]"]


@settings(max_examples=examples(12), deadline=None)
@given(st.integers(1, 9), st.integers(0, 2), st.integers(1, 3), st.integers(1, 6),
       st.sampled_from(EPILOGUES), st.sampled_from(READS), st.booleans())
def test_widening_preserves_or_refuses_on_fused_reduction_variants(co: int, lo: int, h: int, w: int,
                                                                   epilogue: str, read: str,
                                                                   start_from_output: bool) -> None:
    """Fused reductions whose epilogue may write what later sums read, or what
    other channels write: each is widened and exact, or left as it was."""
    text = FUSED.replace("S3: O[co, h, w]", f"S3: {epilogue}") \
        .replace("I[ci, h + kh - 1, w + kw - 1]", read).replace("ci_last", "CI - 1")
    if start_from_output:
        text = text.replace("S0: acc[] = 0.0", "S0: acc[] = O[co, h, w]")
    channels = max(co + lo, 2)
    text = text.replace("func conv(O: f32[CO, H, W], I: f32[CI, H, W]",
                        "func conv(O: f32[NO, H, W], I: f32[NO, H, W]")
    text = text.replace("LO", str(lo)).replace("CO", str(co + lo)).replace("NO", str(channels)) \
        .replace("CI", "2").replace("H", str(h)).replace("W", str(w))
    module = polyir.parse(text)
    for order in ("forward", "shuffle"):
        assert_preserves_or_refuses(lambda m: transform(m, "auto-tile", ctx=PassContext(AVX2)), module,
                                    parallel_order=order)


def test_torch_depthwise_conv_with_fused_epilogue_widens_one_row_and_matches_eager() -> None:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(8, 8, 3, padding=1, groups=8, bias=False),
                                torch.nn.SiLU()).eval()
    x = torch.randn(1, 8, 6, 20)
    with torch.no_grad():
        expected = model(x)
        compiled = polyir.compile(model, (x,), target=polyir.target.cpu(1))
        got = compiled(x)
    torch.testing.assert_close(got, expected, rtol=1e-4, atol=1e-4)
    remarks = compiled.summary()["remarks"]
    assert any("widened to a tile (one row" in r for r in remarks), remarks
