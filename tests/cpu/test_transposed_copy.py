"""Copies that transpose, lowered as blocks transposed in registers
(``polyir.llvm.transposed_copy``): what the matcher accepts and refuses, bit-equal
results against the ordinary lowering and the interpreter on random
transposing copies (both element types, block sizes, offsets, outer loops,
unit dimensions, extents that are not multiples of a block), and the
shuffles in place of scatters in a convolution's accumulator copies."""
from __future__ import annotations

import copy
import dataclasses
import re

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import polyir
from polyir.cpu.jit import build_cpu
from polyir.ir.nodes import For, Module
from polyir.ir.types import DType
from polyir.llvm.transposed_copy import match_transposed_copy
from polyir.target import cpu
from polyir.testing import random_arguments
from tests.conftest import examples


def _match(source: str, lanes: int = 8):  # type: ignore[no-untyped-def]
    module = polyir.parse(source)
    polyir.verify(module)
    function = module.entry
    loop = function.body[0]
    assert isinstance(loop, For)
    return match_transposed_copy(loop, function.buffers.get, lambda dtype: lanes)


TILE_OUT = """func f(t: {t}[1, 1, 8, 32], out: {t}[1, 256, 56, 56], c0: index, w0: index) {{
  for a = 0 to 1 {{
    for c = c0 to c0 + 32 {{
      for h = 3 to 4 {{
        for w = w0 to w0 + 8 {{
          S0: out[a, c, h, w] = {value}
        }}
      }}
    }}
  }}
}}"""


def test_matcher_accepts_a_convolution_tiles_copy_out() -> None:
    copy_ = _match(TILE_OUT.format(t="f32", value="t[a, h - 3, w - w0, c - c0]"))
    assert copy_ is not None and (copy_.p, copy_.q, copy_.block) == ("w", ("c",), 8)
    # 4 lanes: blocks of 4; a 64-bit element with 8 lanes: 8
    assert _match(TILE_OUT.format(t="f32", value="t[a, h - 3, w - w0, c - c0]"), 4).block == 4
    assert _match(TILE_OUT.format(t="f64", value="t[a, h - 3, w - w0, c - c0]"), 8).block == 8


def test_matcher_accepts_a_weight_pack_past_unit_dimensions() -> None:
    source = """func f(W: f32[256, 64, 1, 1], P: f32[64, 1, 1, 32], o: index) {
      for ci = 0 to 64 {
        for kh = 0 to 1 {
          for kw = 0 to 1 {
            for co = o to o + 32 {
              S0: P[ci, kh, kw, co - o] = W[co, ci, kh, kw]
            }
          }
        }
      }
    }"""
    found = _match(source, 16)
    assert found is not None and (found.p, found.q, found.block) == ("co", ("ci",), 16)


def test_matcher_flattens_a_kernel_window_into_the_run_it_reads() -> None:
    # a 3x3 convolution's weight pack: W[co, ci, kh, kw] is one run of
    # 128 * 9 elements along (ci, kh, kw) for each co
    source = """func f(W: f32[256, 256, 3, 3], P: f32[128, 3, 3, 32], o: index, r: index) {
      for ci = r to r + 128 {
        for co = o to o + 32 {
          for kh = 0 to 3 {
            for kw = 0 to 3 {
              S0: P[ci - r, kh, kw, co - o] = W[co, ci, kh, kw]
            }
          }
        }
      }
    }"""
    found = _match(source, 16)
    assert found is not None and (found.p, found.q, found.q_trips, found.block) == \
        ("co", ("kw", "kh", "ci"), (3, 3, 128), 16)
    # a window of 3 alone along a symbolic extent: no run to flatten
    assert _match(source.replace("W: f32[256, 256, 3, 3]", "W: f32[N, 256, 3, 3]"), 16) is None


@pytest.mark.parametrize("value, why", [
    ("t[a, h - 3, 0, c - c0]", "a broadcast along w: not a transpose"),
    ("t[a, h - 3, w - w0, c - c0] * 2.0", "not a plain copy"),
    ("t[a, h - 3, c - c0, w - w0]", "t read along w: no transpose (LLVM's own vectors)"),
])
def test_matcher_refuses_what_is_not_a_transposing_copy(value: str, why: str) -> None:
    source = TILE_OUT.format(t="f32", value=value).replace("t: f32[1, 1, 8, 32]", "t: f32[1, 1, 32, 32]")
    assert _match(source) is None, why


def test_matcher_refuses_other_types_counts_and_writes() -> None:
    value = "t[a, h - 3, w - w0, c - c0]"
    assert _match(TILE_OUT.format(t="f32", value=value), 0) is None           # lanes off
    assert _match(TILE_OUT.format(t="f16", value=value)) is None              # 16-bit
    odd = TILE_OUT.format(t="f32", value=value).replace("w0 + 8", "w0 + 6")
    assert _match(odd) is None                                                # 6 is no multiple of 4
    symbolic = TILE_OUT.format(t="f32", value=value).replace("c0 + 32", "min(256, c0 + 32)")
    assert _match(symbolic) is None                                           # no constant trip count
    same = """func f(A: f32[16, 16]) {
      for i = 0 to 8 { for j = 8 to 16 { S0: A[i, j] = A[j, i] } }
    }"""
    assert _match(same) is None                                               # its own source
    twice = """func f(A: f32[16, 16], B: f32[16]) {
      for i = 0 to 8 { for j = 0 to 8 { S0: B[j] = A[j, i] } }
    }"""
    assert _match(twice) is None                                              # i writes no element of its own


# ------------------------------------------------------------------ random copies
@st.composite
def transposing_copies(draw: st.DrawFn) -> tuple[Module, dict[str, int], int]:
    """``dst[.., q, p] = src[.., p, q]`` with random extents, offsets, loop
    order, an outer loop and trailing unit dimensions."""
    dtype = draw(st.sampled_from(["f32", "f64"]))
    p_extent = draw(st.sampled_from([4, 8, 12, 16, 32, 5, 7]))
    q_extent = draw(st.sampled_from([4, 8, 16, 24, 64, 6]))
    p_off, q_off = draw(st.integers(0, 3)), draw(st.integers(0, 3))
    outer = draw(st.booleans())
    unit = draw(st.booleans())
    p_first = draw(st.booleans())
    a_loop = "for a = 0 to 2 {" if outer else "for a = 1 to 2 {"
    pl = f"for p = {p_off} to {p_off} + {p_extent} {{"
    ql = f"for q = S + {q_off} to S + {q_off} + {q_extent} {{"
    first, second = (pl, ql) if p_first else (ql, pl)
    tail_d = ", 0" if unit else ""
    tail_s = ", 1" if unit else ""
    source = f"""func t(src: {dtype}[2, {p_off + p_extent + 2}, S + {q_off + q_extent + 1}],
                      dst: {dtype}[2, S + {q_off + q_extent + 3}, {p_off + p_extent + 1}{tail_s}], S: index) {{
      {a_loop}
        {first}
          {second}
            S0: dst[a, q + 2, p + 1{tail_d}] = src[a, p, q]
          }}
        }}
      }}
    }}"""
    module = polyir.parse(source)
    polyir.verify(module)
    bits = draw(st.sampled_from([128, 256, 512]))
    return module, {"S": draw(st.integers(1, 5))}, bits


@settings(max_examples=examples(30), deadline=None)
@given(transposing_copies())
def test_random_transposing_copies_bit_equal(case: tuple[Module, dict[str, int], int]) -> None:
    module, sizes, bits = case
    function = module.entry
    loop = function.body[0]
    assert isinstance(loop, For)
    inner = loop.body[0]
    assert isinstance(inner, For)
    trips = {}
    for node in (inner, inner.body[0]):
        assert isinstance(node, For)
        trips[node.var] = int(str(node.upper[0] - node.lower[0]))
    element = 4 if "f32" in str(function.params[0].dtype) else 8
    lanes = bits // (8 * element)
    matched = match_transposed_copy(loop, function.buffers.get,
                                    lambda dtype: lanes if dtype in (DType.F32, DType.F64) else 0)
    expect = lanes >= 4 and trips["p"] % 4 == 0 and trips["q"] % 4 == 0
    assert (matched is not None) == expect, (trips, lanes)
    target = dataclasses.replace(cpu(1), vector_bits=bits)
    vector = build_cpu(module, target, cache_dir=None)
    ordinary = build_cpu(module, dataclasses.replace(target, vector_bits=32), cache_dir=None)
    if expect:
        assert "shufflevector" in vector.llvm_ir and "shufflevector" not in ordinary.llvm_ir
    args = random_arguments(module, np.random.default_rng(0), sizes)
    want, got, interpreted = copy.deepcopy(args), copy.deepcopy(args), copy.deepcopy(args)
    ordinary(*want)
    vector(*got)
    polyir.interpret(module, *interpreted)
    for a, b, c in zip(got, want, interpreted, strict=True):
        if isinstance(b, np.ndarray):
            assert np.array_equal(a, b) and np.array_equal(a, c), str(module)


@st.composite
def window_packs(draw: st.DrawFn) -> tuple[Module, int, bool]:
    """``dst[.., hi, lo, p] = src[.., p, hi, lo]``: ``src`` one run along
    ``(hi, lo)``, the three loops in a random order."""
    dtype = draw(st.sampled_from(["f32", "f64"]))
    p_extent = draw(st.sampled_from([4, 8, 16, 32, 6]))
    hi, lo = draw(st.sampled_from([2, 4, 8, 16, 5])), draw(st.sampled_from([1, 2, 3, 4]))
    p_off = draw(st.integers(0, 2))
    loops = {"p": f"for p = {p_off} to {p_off} + {p_extent} {{",
             "h": f"for h = 0 to {hi} {{", "l": f"for l = 0 to {lo} {{"}
    order = draw(st.permutations(["p", "h", "l"]))
    source = f"""func w(src: {dtype}[2, {p_off + p_extent}, {hi}, {lo}], dst: {dtype}[2, {hi}, {lo}, {p_extent}]) {{
      for a = 0 to 2 {{
        {loops[order[0]]}
          {loops[order[1]]}
            {loops[order[2]]}
              S0: dst[a, h, l, p - {p_off}] = src[a, p, h, l]
            }}
          }}
        }}
      }}
    }}"""
    module = polyir.parse(source)
    polyir.verify(module)
    bits = draw(st.sampled_from([128, 256, 512]))
    lanes = bits // (32 if dtype == "f32" else 64)
    run = hi * lo
    return module, bits, lanes >= 4 and p_extent % 4 == 0 and run % 4 == 0


@settings(max_examples=examples(30), deadline=None)
@given(window_packs())
def test_random_window_packs_bit_equal(case: tuple[Module, int, bool]) -> None:
    module, bits, expect = case
    loop = module.entry.body[0]
    assert isinstance(loop, For)
    lanes = bits // (32 if "f32" in str(module) else 64)
    matched = match_transposed_copy(loop, module.entry.buffers.get, lambda dtype: lanes)
    assert (matched is not None) == expect, str(module)
    target = dataclasses.replace(cpu(1), vector_bits=bits)
    vector = build_cpu(module, target, cache_dir=None)
    ordinary = build_cpu(module, dataclasses.replace(target, vector_bits=32), cache_dir=None)
    assert ("shufflevector" in vector.llvm_ir) == expect
    args = random_arguments(module, np.random.default_rng(1), {})
    want, got, interpreted = copy.deepcopy(args), copy.deepcopy(args), copy.deepcopy(args)
    ordinary(*want)
    vector(*got)
    polyir.interpret(module, *interpreted)
    for a, b, c in zip(got, want, interpreted, strict=True):
        assert np.array_equal(a, b) and np.array_equal(a, c), str(module)


def test_a_convolution_tile_copies_with_shuffles_not_scatters() -> None:
    target = cpu(1)
    if target.vector_bits < 256:
        pytest.skip("the host has no 256-bit vectors")
    torch.manual_seed(0)
    model = torch.nn.Conv2d(64, 256, 1).eval()
    x = torch.randn(1, 64, 56, 56)
    with torch.no_grad():
        compiled = polyir.compile(model, (x,), target=target)
        torch.testing.assert_close(compiled(x), model(x), rtol=1e-4, atol=1e-4)
    executable = compiled.last_plan.segments[0].executable
    assert any("convolution register tile" in r.why for r in executable.remarks)
    assert re.search(r"shufflevector <8 x float>", executable.llvm_ir)
    assert not re.search(r"\bv(p)?scatter", executable.asm)
