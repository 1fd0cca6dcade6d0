"""ResNet's awkward parts through the default pipeline: the stem (a strided
7x7 convolution, batch norm, ReLU, then a 3x3 max pool) and a downsampling
block (a stride-2 3x3 convolution, and a 1x1 stride-2 shortcut fused with
the second 3x3 convolution into one sum). Each matches torch eager, and
each 3x3 convolution gets the convolution register tile (before: the stem's
convolution was fused into the pool one channel at a time, the block's
stride-2 and two-convolution nests ran as scalar sums, 3x and 17x eager's
time at full size)."""
from __future__ import annotations

import torch
from torch import nn

import polyir
from polyir.context import PassContext
from polyir.passes import transform
from polyir.testing import assert_equivalent
from tests.tiling.test_autotile import AVX512


class Downsample(nn.Module):
    def __init__(self, cin: int, cout: int) -> None:
        super().__init__()
        self.c1, self.b1 = nn.Conv2d(cin, cout, 3, 2, 1, bias=False), nn.BatchNorm2d(cout)
        self.c2, self.b2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False), nn.BatchNorm2d(cout)
        self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, 2, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.b1(self.c1(x)))
        return torch.relu(self.b2(self.c2(y)) + self.down(x))


def _randomise(model: nn.Module) -> nn.Module:
    torch.manual_seed(0)
    for module in model.modules():
        if isinstance(module, nn.BatchNorm2d):
            module.running_mean.uniform_(-0.2, 0.2)
            module.running_var.uniform_(0.5, 1.5)
    return model.eval()


def _compile(model: nn.Module, x: torch.Tensor) -> list[str]:
    with torch.no_grad():
        expected = model(x)
        compiled = polyir.compile(model, (x,))
        torch.testing.assert_close(compiled(x), expected, rtol=1e-4, atol=1e-4)
    return compiled.summary()["remarks"]


def test_stem_convolution_is_not_fused_into_the_pool_one_channel_at_a_time() -> None:
    torch.manual_seed(0)
    stem = _randomise(nn.Sequential(nn.Conv2d(3, 32, 7, 2, 3, bias=False), nn.BatchNorm2d(32),
                                    nn.ReLU(), nn.MaxPool2d(3, 2, 1)))
    remarks = _compile(stem, torch.randn(1, 3, 40, 40))
    fused = [r for r in remarks if r.startswith("fuse: applied")]
    # batch norm and ReLU at full depth (4 loops: batch, channel, row, column); the pool not
    assert fused and all("depth=4" in r or "depth=3" in r for r in fused), fused
    missed = [r for r in remarks if r.startswith("fuse: missed") and "output channels would run one at a time" in r]
    assert missed, remarks
    assert any("convolution register tile" in r for r in remarks), remarks


def test_downsampling_block_widens_both_sums_and_tiles_every_convolution() -> None:
    torch.manual_seed(0)
    block = _randomise(Downsample(16, 32))
    remarks = _compile(block, torch.randn(1, 16, 18, 18))
    widened = [r for r in remarks if "widened to a tile (loop" in r and "blocked" in r]
    assert len(widened) == 2, remarks   # the stride-2 nest, and the two-convolution nest
    tiles = [r for r in remarks if "convolution register tile" in r]
    assert len(tiles) == 2, remarks   # the 3x3s; the 1x1 shortcut (16 channels) is too small


TWO_SUMS = """func block(O: f32[32, 6, 8], X: f32[8, 8, 10], W: f32[32, 8, 3, 3], V: f32[32, 8]) {
  for co = 0 to 32 {
    for h = 0 to 6 {
      for w = 0 to 8 {
        local a: f32[]
        local b: f32[]
        S0: a[] = 0.0
        for ci = 0 to 8 {
          for kh = 0 to 3 {
            for kw = 0 to 3 {
              S1: a[] = a[] + X[ci, h + kh, w + kw] * W[co, ci, kh, kw]
            }
          }
        }
        S2: b[] = 0.0
        for cj = 0 to 8 {
          S3: b[] = b[] + X[cj, h, w] * V[co, cj]
        }
        S4: O[co, h, w] = max(a[] + b[], 0.0)
      }
    }
  }
}"""


def test_two_sums_in_one_body_are_widened_exactly() -> None:
    module = polyir.parse(TWO_SUMS)
    ctx = PassContext(AVX512)
    result = transform(module, "auto-tile{register_work=0}", ctx=ctx)
    applied = [r.why for r in ctx.remarks_of("auto-tile", "applied")]
    assert any("widened to a tile (loop co blocked)" in why for why in applied), applied
    assert_equivalent(module, result, trials=2, rtol=0, atol=0)
