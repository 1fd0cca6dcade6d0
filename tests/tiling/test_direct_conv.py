"""Direct convolution plan of ``auto-tile``: a padded convolution nest (as
lowered from torch) gets the unit-stride order over the output width with the
output-channel loop unrolled and jammed; checked against torch eager for odd
shapes and against the interpreter, exactly, on the IR."""
from __future__ import annotations

import pytest
import torch

import polyir
from polyir.context import PassContext
from polyir.passes import transform
from polyir.testing import assert_equivalent
from tests.tiling.test_autotile import AVX2

PADDED = """func conv(O: f32[CO, H, W], I: f32[CI, H, W], F: f32[CO, CI, 3, 3]) {
  for co = 0 to CO {
    for h = 0 to H {
      for w = 0 to W {
        for ci = 0 to CI {
          for kh = 0 to 3 {
            for kw = 0 to 3 {
              if (h + kh - 1 >= 0, h + kh - 1 < H, w + kw - 1 >= 0, w + kw - 1 < W) {
                S0: O[co, h, w] = O[co, h, w] + F[co, ci, kh, kw] * I[ci, h + kh - 1, w + kw - 1]
              }
            }
          }
        }
      }
    }
  }
}"""


@pytest.mark.parametrize("co", [16, 5])
def test_padded_conv_nest_gets_the_direct_plan_and_stays_exact(co: int) -> None:
    module = polyir.parse(PADDED.replace("CO", str(co)))
    ctx = PassContext(AVX2)
    result = transform(module, "auto-tile", ctx=ctx)
    why = ctx.remarks_of("auto-tile", "applied")[0].why
    assert "loop w innermost" in why and "loop co unrolled by" in why and "unroll-jam{loops=co" in why
    # exact: every output element sums over ci, kh, kw in the original order
    assert_equivalent(module, result, trials=1, sizes={"CI": 3, "H": 7, "W": 9}, rtol=0, atol=0)


def _check(model: torch.nn.Module, x: torch.Tensor) -> list[str]:
    """Compare with eager; the auto-tile remarks of the compiled plan."""
    model = model.eval()
    with torch.no_grad():
        expected = model(x)
        compiled = polyir.compile(model, (x,))
        got = compiled(x)
    torch.testing.assert_close(got, expected, rtol=1e-4, atol=1e-4)
    return [r for r in compiled.summary()["remarks"] if r.startswith("auto-tile: applied")]


class _Block(torch.nn.Module):
    def __init__(self, cin: int, cout: int, k: int, stride: int, pad: int, dilation: int = 1,
                 groups: int = 1) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(cin, cout, k, stride, pad, dilation, groups, bias=True)
        self.bn = torch.nn.BatchNorm2d(cout)
        with torch.no_grad():
            self.bn.running_mean.uniform_(-0.5, 0.5)
            self.bn.running_var.uniform_(0.5, 1.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.bn(self.conv(x)))


@pytest.mark.parametrize(("cin", "cout", "k", "stride", "pad", "dilation", "groups", "batch", "size"), [
    (3, 11, 3, 2, 1, 1, 1, 1, 7),     # stride 2, C not a multiple of the vector width
    (5, 13, 3, 1, 1, 1, 1, 3, 7),     # batch 3, partial register tiles
    (8, 12, 1, 1, 0, 1, 1, 1, 9),     # 1x1
    (6, 6, 3, 1, 2, 2, 1, 1, 9),      # dilation 2
    (12, 12, 3, 1, 1, 1, 12, 3, 7),   # depthwise
    (8, 16, 3, 2, 1, 1, 2, 1, 11),    # groups
])
def test_conv_bn_relu_matches_eager(cin: int, cout: int, k: int, stride: int, pad: int,
                                    dilation: int, groups: int, batch: int, size: int) -> None:
    torch.manual_seed(0)
    model = _Block(cin, cout, k, stride, pad, dilation, groups)
    _check(model, torch.randn(batch, cin, size, size))


@pytest.mark.parametrize(("cin", "cout", "stride", "groups", "batch", "size"), [
    (3, 11, 2, 1, 1, 7), (5, 13, 1, 1, 3, 7), (12, 12, 1, 12, 3, 7), (8, 16, 2, 2, 1, 11)])
def test_plain_conv_jams_the_output_channels_and_matches_eager(
        cin: int, cout: int, stride: int, groups: int, batch: int, size: int) -> None:
    torch.manual_seed(1)
    model = torch.nn.Conv2d(cin, cout, 3, stride, 1, groups=groups, bias=False)
    applied = _check(model, torch.randn(batch, cin, size, size))
    jammed = [r for r in applied if "unrolled by" in r and "unroll-jam" in r]
    # the output-channel loop is jammed unless each group has one output channel
    # (depthwise: the input element moves with the channel, nothing to reuse);
    # with stride 2 the kernel-width loop stays innermost (the unit-stride
    # order prefers it to the output width): no direct plan, but the padded
    # nest (``polyir.compile`` pads) may get the jam of its row sums
    if stride == 1:
        assert bool(jammed) == (cout // groups > 1), applied
