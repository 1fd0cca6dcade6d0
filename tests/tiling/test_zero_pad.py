"""Zero-padded operands (``polyir.tiling.zero_pad``, ``auto-tile{zero_pad=true}``) and
the convolution register tile they enable (``levels.window_register_plan``):
padded, strided and symbolic convolution nests keep their meaning in the
interpreter (exactly), refusals leave the program as it was, random programs
keep their meaning, and torch convolutions match eager."""
from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings

import polyir
from polyir.context import PassContext
from polyir.ir.nodes import If, Module
from polyir.ir.walk import walk_nodes
from polyir.passes import transform
from polyir.testing import assert_equivalent, assert_preserves_or_refuses, programs
from tests.conftest import examples
from tests.tiling.test_autotile import AVX2, AVX512, TINY

CONV = """func conv(O: f32[CO, OH, OW], I: f32[CI, H, W], F: f32[CO, CI, 3, 3]) {
  for co = 0 to CO {
    for h = 0 to OH {
      for w = 0 to OW {
        for ci = 0 to CI {
          for kh = 0 to 3 {
            for kw = 0 to 3 {
              if (S * h + kh - 1 >= 0, S * h + kh - 1 < H, S * w + kw - 1 >= 0, S * w + kw - 1 < W) {
                S0: O[co, h, w] = O[co, h, w] + F[co, ci, kh, kw] * I[ci, S * h + kh - 1, S * w + kw - 1]
              }
            }
          }
        }
      }
    }
  }
}"""


def _conv(stride: int, template: str = CONV, **sizes: int) -> Module:
    """``template`` (a convolution) at ``stride``, with ``sizes`` filled in."""
    text = template.replace("S * ", f"{stride} * ")
    if stride == 1 and "OH" not in sizes:  # "same" padding: the output has the input's size
        text = text.replace("OH", "H").replace("OW", "W")
    for name, value in sorted(sizes.items(), key=lambda item: -len(item[0])):
        text = text.replace(name, str(value))
    return polyir.parse(text)


def _guards(module: Module) -> list[If]:
    return [n for n in walk_nodes(module.entry.body) if isinstance(n, If) and not n.else_body]


@pytest.mark.parametrize(("stride", "sizes", "free"), [
    (1, {"CO": 5, "CI": 3}, {"H": 7, "W": 9}),                        # symbolic spatial sizes
    (1, {}, {"CO": 5, "CI": 3, "H": 7, "W": 9}),                      # all symbolic
    (2, {"CO": 7, "CI": 2, "H": 9, "W": 11, "OH": 5, "OW": 6}, {}),  # stride 2, odd sizes
])
def test_padding_drops_the_guard_and_keeps_the_meaning(stride: int, sizes: dict[str, int],
                                                        free: dict[str, int]) -> None:
    module = _conv(stride, **sizes)
    ctx = PassContext(AVX2)
    result = transform(module, "auto-tile{zero_pad=true widen=false}", ctx=ctx)
    assert any("zero-padded copy" in r.why for r in ctx.remarks_of("auto-tile", "applied"))
    # the convolution's guard is gone (the fill nest keeps an if/else)
    assert not _guards(result)
    assert_equivalent(module, result, trials=2, sizes=free, rtol=0, atol=0)


DEPTHWISE = """func dw(O: f32[1, C, OH, OW], I: f32[1, C, H, W], F: f32[C, 1, 3, 3]) {
  for c = 0 to C {
    for h = 0 to OH {
      for w = 0 to OW {
        for kh = 0 to 3 {
          for kw = 0 to 3 {
            if (S * h + kh - 1 >= 0, S * h + kh - 1 < H, S * w + kw - 1 >= 0, S * w + kw - 1 < W) {
              S0: O[0, c, h, w] = O[0, c, h, w] + F[c, 0, kh, kw] * I[0, c, S * h + kh - 1, S * w + kw - 1]
            }
          }
        }
      }
    }
  }
}"""


@pytest.mark.parametrize(("stride", "sizes"), [(1, {"C": 5, "H": 7, "W": 9, "OH": 7, "OW": 9}),
                                               (2, {"C": 3, "H": 9, "W": 12, "OH": 5, "OW": 6}),
                                               (1, {})])
def test_a_depthwise_convolution_pads_one_channel_at_a_time(stride: int, sizes: dict[str, int]) -> None:
    # the channel loop reads only its channel: the padded copy is that slice,
    # a local of the channel loop filled at the start of each iteration
    module = _conv(stride, DEPTHWISE, **sizes)   # no sizes: symbolic, "same" padding
    ctx = PassContext(AVX2)
    result = transform(module, "auto-tile{zero_pad=true widen=false}", ctx=ctx, verify_each=True)
    assert any("zero-padded copy" in r.why for r in ctx.remarks_of("auto-tile", "applied"))
    channel = result.entry.body[-1]
    assert channel.var == "c" and [b.name for b in channel.locals] == ["I_pad"]  # type: ignore[union-attr]
    shape = [str(e) for e in channel.locals[0].shape]  # type: ignore[union-attr]
    assert shape[:2] == ["1", "1"], shape
    free = {} if sizes else {"C": 4, "H": 6, "W": 5}
    assert_equivalent(module, result, trials=2, sizes=free or None, rtol=0, atol=0)


def test_a_convolution_over_input_channels_pads_its_input_once() -> None:
    # the input channel is a reduction under the output channels: a slice per
    # channel would be filled again for every output channel, so the copy is whole
    module = _conv(1, CO=5, CI=3, H=7, W=9)
    result = transform(module, "auto-tile{zero_pad=true widen=false}", ctx=PassContext(AVX2))
    assert [b.name for b in result.entry.locals] == ["I_pad"]
    assert [str(e) for e in result.entry.locals[0].shape] == ["3", "9", "11"]


def test_padding_is_off_by_default() -> None:
    module = _conv(1, CO=5, CI=3, H=7, W=9)
    ctx = PassContext(AVX2)
    result = transform(module, "auto-tile", ctx=ctx)
    assert not any("zero-padded" in r.why for r in ctx.remarks)
    assert _guards(result)


@pytest.mark.parametrize("target", [AVX512, AVX2, TINY], ids=["avx512", "avx2", "tiny"])
@pytest.mark.parametrize("stride", [1, 2])
def test_padded_convolution_gets_the_window_register_tile(target, stride: int) -> None:  # type: ignore[no-untyped-def]
    module = _conv(stride, CO=37, CI=3, H=13, W=15, OH=(13 - 1) // stride + 1,
                   OW=(15 - 1) // stride + 1)
    ctx = PassContext(target)
    result = transform(module, "auto-tile{zero_pad=true register_work=0}", ctx=ctx)
    applied = [r.why for r in ctx.remarks_of("auto-tile", "applied")]
    assert any("convolution register tile" in why for why in applied), applied
    if target is AVX512:  # 37 channels in 16-lane vectors: 3 column tiles, 2 of them full
        assert any("columns co" in why and "F packed with co last" in why for why in applied), applied
    assert_equivalent(module, result, trials=1, rtol=0, atol=0)


GUARDED_SUMS = """func f(O: f32[N], I: f32[N], J: f32[N]) {
  for i = 0 to N {
    if (i - 1 >= 0) {
      S0: O[i] = O[i] + exp(I[i - 1])
    }
  }
  for i2 = 0 to N {
    if (i2 - 1 >= 0) {
      S1: O[i2 - 1] = O[i2 - 1] + J[i2 - 1] * I[i2]
    }
  }
  for i3 = 0 to N {
    if (i3 - 1 >= 0) {
      S2: J[i3] = J[i3] + J[i3 - 1] * I[i3]
    }
  }
}"""


def test_padding_refuses_what_it_cannot_prove() -> None:
    """``exp(0) != 0``; a condition that also guards the written element; a
    buffer the nest writes: each stays guarded."""
    module = polyir.parse(GUARDED_SUMS)
    ctx = PassContext(AVX2)
    result = transform(module, "auto-tile{zero_pad=true}", ctx=ctx)
    assert not any("zero-padded" in r.why for r in ctx.remarks_of("auto-tile", "applied"))
    assert len(_guards(result)) == 3
    assert_equivalent(module, result, trials=1, sizes={"N": 9}, rtol=0, atol=0)


@settings(max_examples=examples(10), deadline=None)
@given(programs(max_depth=3, max_statements=3))
def test_padding_preserves_or_refuses_on_random_programs(module: Module) -> None:
    for order in ("forward", "shuffle"):
        assert_preserves_or_refuses(
            lambda m: transform(m, "distribute,auto-tile{zero_pad=true gemm_work=0 register_work=0}",
                                ctx=PassContext(TINY)), module, parallel_order=order)


@pytest.mark.parametrize(("cin", "cout", "k", "stride", "pad", "batch", "size"), [
    (3, 37, 3, 1, 1, 2, 9),     # odd channels, batch 2
    (5, 35, 3, 2, 1, 1, 17),    # stride 2, odd size
    (8, 40, 1, 2, 0, 1, 31),    # 1x1 stride 2 (a ResNet downsample)
    (16, 48, 1, 1, 0, 2, 9),    # 1x1 (channels first: the output channels vectorised)
    (6, 33, 5, 2, 2, 1, 13),    # 5x5, padding 2
    (4, 36, 3, 1, 0, 1, 12),    # no padding
])
def test_torch_convolutions_match_eager(cin: int, cout: int, k: int, stride: int, pad: int,
                                        batch: int, size: int) -> None:
    torch.manual_seed(0)
    model = torch.nn.Conv2d(cin, cout, k, stride, pad, bias=True).eval()
    x = torch.randn(batch, cin, size, size)
    with torch.no_grad():
        expected = model(x)
        compiled = polyir.compile(model, (x,))
        got = compiled(x)
    torch.testing.assert_close(got, expected, rtol=1e-4, atol=1e-4)
    # each one more than auto-tile's register_work, two vectors of channels or more
    remarks = compiled.summary()["remarks"]
    assert any("convolution register tile" in r for r in remarks), remarks


def test_fused_padded_conv_widens_to_vector_blocks_and_packs_once_per_block() -> None:
    """conv + scale + ReLU fused at full depth, padded: the accumulators widen
    to a block of output channels that fills register-tile columns (two
    16-lane vectors or more), the register tile vectorises the channels and
    the weights are packed once per channel block, not once per output row."""
    from tests.tiling.test_widen import _fused
    module = _fused(64, 5, 9)
    ctx = PassContext(AVX512)
    result = transform(module, "auto-tile{zero_pad=true}", ctx=ctx)
    applied = [r.why for r in ctx.remarks_of("auto-tile", "applied")]
    assert any("zero-padded copy" in why for why in applied), applied
    tile = [why for why in applied if "convolution register tile" in why]
    assert tile and "columns co_r" in tile[0] and "per iteration of loop co_t" in tile[0], applied
    assert_equivalent(module, result, trials=1, sizes={"CI": 3}, rtol=1e-6, atol=1e-6)


IN_NEST = """func f(O: f32[N, 4, H, W], X: f32[N, 3, H, W], F: f32[4, 3, 3, 3]) {
  for n = 0 to N {
    local t: f32[3, H, W]
    for c = 0 to 3 {
      for h = 0 to H {
        for w = 0 to W {
          S0: t[c, h, w] = X[n, c, h, w] * 2.0 + 1.0
        }
      }
    }
    for co = 0 to 4 {
      for h2 = 0 to H {
        for w2 = 0 to W {
          for ci = 0 to 3 {
            for kh = 0 to 3 {
              for kw = 0 to 3 {
                if (h2 + kh - 1 >= 0, h2 + kh - 1 < H, w2 + kw - 1 >= 0, w2 + kw - 1 < W) {
                  S1: O[n, co, h2, w2] = O[n, co, h2, w2] + F[co, ci, kh, kw] * t[ci, h2 + kh - 1, w2 + kw - 1]
                }
              }
            }
          }
        }
      }
    }
  }
}"""


def test_a_local_written_earlier_in_the_nest_is_padded_inside_its_loop() -> None:
    """The input of the second convolution of a residual block is a local of
    the batch loop, written by the first one: the padded copy is filled in that
    loop, just before the convolution that reads it."""
    from polyir.ir.nodes import For
    module = polyir.parse(IN_NEST)
    ctx = PassContext(AVX512)
    result = transform(module, "auto-tile{zero_pad=true}", ctx=ctx)
    assert any("t_pad" in r.why for r in ctx.remarks_of("auto-tile", "applied")), ctx.remarks
    batch = result.entry.body[0]
    assert isinstance(batch, For) and any(b.name == "t_pad" for b in batch.locals)
    assert not _guards(result)
    assert_equivalent(module, result, trials=2, sizes={"N": 2, "H": 5, "W": 7}, rtol=0, atol=0)
