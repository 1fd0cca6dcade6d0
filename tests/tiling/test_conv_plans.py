"""The convolution register tile's choices (``auto-tile``'s window plan):
weight panels of many channels packed in blocks of input channels, the
packing's copy loops reading the weights in runs, the tile within
``WINDOW_REGISTERS`` vector registers, and 1x1 convolutions with short sums
left to the matrix-product plans. Each checked for exactness against the
interpreter (the sums keep their order) or against torch eager."""
from __future__ import annotations

import re
from dataclasses import replace

import pytest
import torch

import polyir
from polyir.context import PassContext
from polyir.ir.affine import Aff
from polyir.ir.nodes import Assign, For
from polyir.ir.walk import walk_nodes
from polyir.passes import transform
from polyir.target import CacheLevel, cpu
from polyir.testing import assert_equivalent
from polyir.tiling.autotile import WINDOW_REGISTERS
from tests.tiling.test_autotile import AVX2, AVX512
from tests.tiling.test_hoist import _enclosing

CONV = """func conv(O: f32[1, 32, 6, 6], I: f32[1, CI, 8, 8], F: f32[32, CI, 3, 3]) {
  for n = 0 to 1 {
    for co = 0 to 32 {
      for h = 0 to 6 {
        for w = 0 to 6 {
          for ci = 0 to CI {
            for kh = 0 to 3 {
              for kw = 0 to 3 {
                S0: O[n, co, h, w] = O[n, co, h, w] + I[n, ci, h + kh, w + kw] * F[co, ci, kh, kw]
              }
            }
          }
        }
      }
    }
  }
}"""

SMALL_L2 = replace(AVX512, caches=(AVX512.caches[0], CacheLevel(64 * 1024, 64, 16), AVX512.caches[2]),
                   cache_bytes=(48 * 1024, 64 * 1024, 32 * 1024 * 1024))
"""AVX-512 with a 64 KiB L2: a panel of 40 channels x 3x3 x 32 (45 KiB) exceeds a quarter."""


def _tile(module: polyir.Module, target: object) -> tuple[polyir.Module, str]:
    ctx = PassContext(target)  # type: ignore[arg-type]
    result = transform(module, "auto-tile{register_work=0}", ctx=ctx)
    (why,) = [r.why for r in ctx.remarks_of("auto-tile", "applied")]
    return result, why


@pytest.mark.parametrize("channels", [40, 7])
def test_weight_panel_is_packed_in_blocks_of_input_channels_only_when_it_exceeds_l2(
        channels: int) -> None:
    module = polyir.parse(CONV.replace("CI", str(channels)))
    result, why = _tile(module, SMALL_L2)
    assert "convolution register tile" in why
    if channels == 40:
        # 45 KiB over 16 KiB: three blocks at least; four of 10 channels divide
        # the 40 (three of 14 would leave a partial one), the panel packed per block
        assert "tile{loops=ci sizes=10 names=ci_c}" in why and "pack{at=ci_c buffer=F" in why
    else:
        assert "ci_c" not in why and "pack{at=co_r buffer=F" in why
    # exact: every output element still sums over ci, kh, kw in order
    assert_equivalent(module, result, trials=2, rtol=0, atol=0)


def test_weight_packing_reads_runs_of_the_kernel_window() -> None:
    """``F[co, ci, kh, kw]`` packed as ``[ci, kh, kw, co]``: the copy loops run
    ``ci, co, kh, kw`` (runs of 9 contiguous reads, the writes within one
    ``ci`` slab), not in the panel's layout order (a read per row of F)."""
    module = polyir.parse(CONV.replace("CI", "40"))
    result, _ = _tile(module, SMALL_L2)
    copy = next(node for node in walk_nodes(result.functions[0].body)
                if isinstance(node, Assign) and node.buffer.startswith("F_"))
    order = _enclosing(result, copy.name)
    assert order[-4:] == ["F_ci_c_1", "F_ci_c_0", "F_ci_c_2", "F_ci_c_3"], order


def test_matrix_transpose_packing_keeps_the_layout_order() -> None:
    """A 2-D panel (``A[j, k]`` as ``[k, j]``) has no short run to move inside:
    its copy keeps the layout order, contiguous writes (``mvt``'s case)."""
    from polyir.tiling.transpack import _loop_order
    def loops(*extents: int) -> list[For]:
        return [For(f"x{d}", (Aff.const(0),), (Aff.const(n),), 1, ()) for d, n in enumerate(extents)]
    assert _loop_order(loops(64, 1000), (1, 0)) == (1, 0)
    assert _loop_order(loops(64, 512, 3, 3), (1, 2, 3, 0)) == (1, 0, 2, 3)
    assert _loop_order(loops(64, 512, 3, 30), (1, 2, 3, 0)) == (1, 2, 0, 3)  # 3 x 30 > 64
    assert _loop_order(loops(64, 4, 3, 3), (1, 2, 3, 0)) == (1, 2, 3, 0)  # the whole row is short


@pytest.mark.parametrize("target", [AVX512, AVX2], ids=["avx512", "avx2"])
def test_convolution_register_tile_fits_the_register_cap(target: object) -> None:
    module = polyir.parse(CONV.replace("CI", "8").replace("32", "64"))
    _, why = _tile(module, target)
    match = re.search(r"Mr x Nr = (\d+)x(\d+)", why)
    assert match is not None, why
    mr, nr = int(match.group(1)), int(match.group(2))
    lanes = target.vector_bits // 32  # type: ignore[attr-defined]
    registers = min(WINDOW_REGISTERS, target.vector_registers)  # type: ignore[attr-defined]
    assert mr * (nr // lanes) + nr // lanes + 1 <= registers
    if target is AVX512:  # 6x32 (15 registers) or wider, not 6x64 (29)
        assert nr >= 2 * lanes


def test_pointwise_convolution_with_short_sums_gets_a_matrix_product_plan() -> None:
    """A 1x1 convolution from 16 channels at 40x40 (the output rows two vectors
    long): the channels-vectorised tile would move each accumulator twice per
    one vector FMA; a plan over the output's own layout runs instead. From 64
    channels the convolution tile stays."""
    def plans(cin: int, size: int) -> list[str]:
        torch.manual_seed(0)
        model = torch.nn.Conv2d(cin, 48, 1).eval()
        x = torch.randn(1, cin, size, size)
        with torch.no_grad():
            compiled = polyir.compile(model, (x,), target=cpu(1))
            torch.testing.assert_close(compiled(x), model(x), rtol=1e-4, atol=1e-4)
        return [r for r in compiled.summary()["remarks"] if r.startswith("auto-tile: applied")]

    short = plans(16, 40)
    assert short and not any("convolution register tile" in r for r in short), short
    assert any("convolution register tile" in r for r in plans(64, 40))
    # a narrow output (9 wide) keeps the channels vectorised even with short sums
    assert any("convolution register tile" in r for r in plans(16, 9))
