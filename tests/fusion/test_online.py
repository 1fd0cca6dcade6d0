"""Reduce-reduce fusion (``online-reductions``): online softmax and fused attention.

Oracles: the interpreter on the program before the rewrite (within a
tolerance: the rewrite changes rounding), torch eager for the frontend's
softmax / log-softmax / attention (F.scaled_dot_product_attention,
nn.MultiheadAttention, written out by hand), and random cascaded-reduction
programs that the pass must rewrite equivalently or leave alone with a remark.
"""
from __future__ import annotations

import random

import numpy as np
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import polyir
from polyir.context import PassContext
from polyir.fusion.online import online_reductions
from polyir.fusion.passes import auto_rows
from polyir.ir.nodes import Buffer, For
from polyir.ir.walk import walk_nodes
from polyir.passes import transform
from polyir.target import cpu
from polyir.testing import assert_equivalent, assert_preserves_or_refuses
from tests.frontends.fx_support import Fn

ONLINE = "online-reductions{tile=4}"

SOFTMAX_ROWS = """func f(X: f32[N, M], Y: f32[N, M]) {
  for i = 0 to N {
    local m: f32[]
    local l: f32[]
    S0: m[] = -inf
    for j = 0 to M {
      S1: m[] = max(m[], X[i, j])
    }
    S2: l[] = 0.0
    for j2 = 0 to M {
      S3: l[] = l[] + exp(X[i, j2] - m[])
    }
    for j3 = 0 to M {
      S4: Y[i, j3] = exp(X[i, j3] - m[]) / l[]
    }
  }
}"""


def _online(text: str, pipeline: str = ONLINE) -> tuple[polyir.ir.nodes.Module, polyir.ir.nodes.Module,
                                                       PassContext]:
    module = polyir.parse(text)
    ctx = PassContext()
    return module, transform(module, pipeline, ctx=ctx), ctx


def test_softmax_statistics_in_one_traversal() -> None:
    module, result, ctx = _online(SOFTMAX_ROWS)
    applied = ctx.remarks_of("online-reductions", "applied")
    assert len(applied) == 1 and "'m' with 'l'" in applied[0].why
    row = result.entry.body[0]
    assert isinstance(row, For)
    # init, init, the tile loop, the normalisation: two traversals instead of three
    assert [type(n).__name__ for n in row.body] == ["Assign", "Assign", "For", "For"]
    tiles = row.body[2]
    assert isinstance(tiles, For) and tiles.step == 4
    assert_equivalent(module, result, trials=3, rtol=1e-5, atol=1e-6)
    assert_equivalent(module, result, sizes={"N": 3, "M": 1})


def test_nothing_to_do_returns_the_same_module() -> None:
    module = polyir.parse("""func f(A: f32[N], B: f32[N]) {
  for i = 0 to N {
    S0: B[i] = A[i] * 2.0
  }
}""")
    assert transform(module, ONLINE) is module


@pytest.mark.parametrize("summand, why", [
    ("(X[i, j2] - m[]) * (X[i, j2] - m[])", "on both sides"),
    ("log(X[i, j2] - m[])", "no repair term"),
    ("exp(X[i, j2] * 2.0 - m[])", "not the value whose max is taken"),
    ("(exp(X[i, j2] - m[]) + 1.0)", "without the max"),
])
def test_refused_with_a_reason(summand: str, why: str) -> None:
    text = SOFTMAX_ROWS.replace("l[] + exp(X[i, j2] - m[])", f"l[] + {summand}")
    module, result, ctx = _online(text)
    assert result is module
    missed = [r.why for r in ctx.remarks_of("online-reductions", "missed")]
    assert missed and why in missed[0], missed


def test_nonzero_initial_value_refused() -> None:
    module, result, ctx = _online(SOFTMAX_ROWS.replace("S2: l[] = 0.0", "S2: l[] = 1.0"))
    assert result is module
    assert "initial value 0" in ctx.remarks_of("online-reductions", "missed")[0].why


@pytest.mark.parametrize("length, step", [(6, 6), (4, 4), (9, 4)])
def test_a_row_shorter_than_the_tile_is_one_tile_of_its_length(length: int, step: int) -> None:
    """Constant rows shorter than the tile get one tile of their length, so the
    loops over a tile have that constant extent (auto-tile's register tiles
    then fit them); longer rows keep the tile."""
    text = SOFTMAX_ROWS.replace("f32[N, M]", f"f32[5, {length}]").replace("to N", "to 5") \
        .replace("to M", f"to {length}")
    module, result, ctx = _online(text, "online-reductions{tile=8}" if length < 8 else ONLINE)
    applied = ctx.remarks_of("online-reductions", "applied")
    assert len(applied) == 1 and f"tiles of {step}" in applied[0].why, applied
    row = result.entry.body[0]
    assert isinstance(row, For)
    tiles = row.body[2]
    assert isinstance(tiles, For) and tiles.step == step
    for loop in walk_nodes(tiles.body):
        if isinstance(loop, For):
            assert len(loop.upper) == 2 and (loop.upper[1] - loop.lower[0]).constant == step
    assert_equivalent(module, result, trials=3, rtol=1e-5, atol=1e-6)


def test_tile_option_is_checked() -> None:
    with pytest.raises(ValueError, match="tile"):
        online_reductions(polyir.parse(SOFTMAX_ROWS).entry, tile=0)


# --------------------------------------------------- random cascaded reductions
_OPERANDS = ["X[i, {j}]", "X[i, {j}] * 0.5", "X[i, {j}] + W[{j}]"]
_SUMMANDS = ["exp({x} - m[])", "exp({x} - m[]) * W[{j}]", "W[{j}] * exp({x} - m[])",
             "exp({x} - m[]) / 3.0", "exp({x} - m[]) - exp({x} - m[]) * 0.25",
             "{x} - m[]", "exp({x} - m[]) + 1.0", "W[{j}] + 2.0", "max(exp({x} - m[]), 0.5)"]


def _random_program(rng: random.Random) -> str:
    operand = rng.choice(_OPERANDS)
    lines = ["func f(X: f32[N, M], W: f32[M], V: f32[M, K], Y: f32[N, K], Z: f32[N]) {",
             "  for i = 0 to N {", "    local m: f32[]", "    local l: f32[]",
             "    S0: m[] = " + rng.choice(["-inf", "-inf", "0.0"]),
             "    for j = 0 to M {", f"      S1: m[] = max(m[], {operand.format(j='j')})", "    }"]
    summand = rng.choice(_SUMMANDS)
    lines += [f"    S2: l[] = {rng.choice(['0.0', '0.0', '0.0', '1.0'])}", "    for j2 = 0 to M {",
              f"      S3: l[] = l[] + ({summand.format(x=operand.format(j='j2'), j='j2')})", "    }"]
    lines += ["    for k = 0 to K {", "      S4: Y[i, k] = 0.0", "      for j3 = 0 to M {"]
    weight = rng.choice(["exp({x} - m[]) / l[] * V[j3, k]", "V[j3, k] * exp({x} - m[])",
                         "select(m[] == -inf, 0.0, exp({x} - m[]) / l[]) * V[j3, k]",
                         "V[j3, k] * l[]"])
    lines += [f"        S5: Y[i, k] = Y[i, k] + ({weight.format(x=operand.format(j='j3'))})",
              "      }", "    }", "    S6: Z[i] = m[] + log(l[])", "  }", "}"]
    return "\n".join(lines)


@pytest.mark.parametrize("seed", range(24))
def test_random_cascades_preserved_or_left_alone(seed: int) -> None:
    rng = random.Random(seed)
    module = polyir.parse(_random_program(rng))
    ctx = PassContext()
    tile = rng.choice([1, 2, 3, 8])
    result = assert_preserves_or_refuses(
        lambda m: transform(m, f"online-reductions{{tile={tile}}}", ctx=ctx), module,
        rtol=2e-5, atol=2e-6, trials=2)
    assert ctx.remarks_of("online-reductions"), "no remark: the pass said nothing"
    if not ctx.remarks_of("online-reductions", "applied"):
        assert result is module


# ------------------------------------------------------------ torch frontend
def _compile(fn, *inputs, target: str = "cpu"):
    module = fn if isinstance(fn, nn.Module) else Fn(fn)
    compiled = polyir.compile(module, inputs, target=target, fallback=False)
    return module, compiled


def _final_locals(compiled) -> list[Buffer]:
    """The locals of the compiled code, except auto-tile's packed copies of the
    parameters (``<param>_<loop>``: panels of the keys and values, not scores)."""
    found: list[Buffer] = []
    for segment in compiled.last_plan.segments:
        function = segment.executable.ir.entry
        params = tuple(f"{p.name}_" for p in function.params)
        found += list(function.locals)
        found += [b for n in walk_nodes(function.body) if isinstance(n, For) for b in n.locals
                  if not b.name.startswith(params)]
    return found


def _elements(buffer: Buffer) -> int:
    count = 1
    for dim in buffer.shape:
        count *= dim.evaluate({})
    return count


def _check(fn, *inputs, target: str = "cpu", rtol: float = 2e-5, atol: float = 2e-5,
           max_local: int | None = None, applies: bool = True) -> None:
    module, compiled = _compile(fn, *inputs, target=target)
    got = compiled(*inputs)
    with torch.no_grad():
        want = module(*inputs)
    torch.testing.assert_close(got, want, rtol=rtol, atol=atol, equal_nan=True)
    remarks = compiled.summary()["remarks"]
    assert any("online-reductions: applied" in r for r in remarks) == applies, remarks
    if max_local is not None:
        sizes = {b.name: _elements(b) for b in _final_locals(compiled)}
        assert max(sizes.values(), default=0) <= max_local, sizes


@pytest.mark.parametrize("length, source, depth, causal", [
    (1, 1, 8, False), (7, 129, 8, False), (129, 129, 64, True),
    pytest.param(7, 7, 16, True, marks=pytest.mark.slow),
    pytest.param(129, 129, 128, False, marks=pytest.mark.slow)])
def test_sdpa_one_traversal_per_query(length: int, source: int, depth: int, causal: bool) -> None:
    torch.manual_seed(length + source)
    q = torch.randn(1, 2, length, depth)
    k, v = torch.randn(1, 2, source, depth), torch.randn(1, 2, source, depth)
    # nothing larger than one tile of scores (or a row of the output) is stored: a tile of
    # 256 keys for each row of a block (causal rows are blocked too)
    rows = min(length, auto_rows(cpu(), 256))
    _check(lambda a, b, c: F.scaled_dot_product_attention(a, b, c, is_causal=causal), q, k, v,
           max_local=rows * max(256, depth), applies=source > 1)  # one key: no loop to fuse


def test_sdpa_masks_including_rows_the_mask_empties() -> None:
    q, k, v = torch.randn(2, 2, 7, 8), torch.randn(2, 2, 11, 8), torch.randn(2, 2, 11, 8)
    boolean = torch.rand(2, 1, 7, 11) > 0.4
    boolean[1, ..., 6:] = False              # key padding
    boolean[0, 0, 3] = False                 # an empty row: eager gives 0
    additive = torch.randn(2, 1, 7, 11)
    additive[1, 0, 2] = float("-inf")        # an empty row through -inf
    _check(lambda a, b, c, m, n: (F.scaled_dot_product_attention(a, b, c, attn_mask=m),
                                  F.scaled_dot_product_attention(a, b, c, attn_mask=n, scale=0.3)),
           q, k, v, boolean, additive)


def test_softmax_and_log_softmax_rows() -> None:
    x = torch.randn(7, 129)
    x[2] = float("-inf")                     # eager: NaN for softmax over -inf
    _check(lambda a: (torch.softmax(a, -1), torch.log_softmax(a, -1)), x)


def test_hand_written_attention() -> None:
    q, k, v = torch.randn(2, 7, 16), torch.randn(2, 9, 16), torch.randn(2, 9, 16)
    _check(lambda a, b, c: torch.softmax(a @ b.transpose(-1, -2) * 0.25, dim=-1) @ c, q, k, v)


@pytest.mark.slow
def test_multihead_attention() -> None:
    mha = nn.MultiheadAttention(16, 2, batch_first=True).eval()
    x = torch.randn(1, 7, 16)
    _check(lambda a: mha(a, a, a, need_weights=False)[0], x)


@pytest.mark.parametrize("dtype", [torch.bfloat16, pytest.param(torch.float16, marks=pytest.mark.slow)])
def test_sdpa_half_precision(dtype: torch.dtype) -> None:
    q, k, v = (torch.randn(1, 2, 7, 16).to(dtype) for _ in range(3))
    _check(lambda a, b, c: F.scaled_dot_product_attention(a, b, c, is_causal=True), q, k, v,
           rtol=2e-2, atol=2e-2)


def test_interpreter_matches_the_unrewritten_program() -> None:
    q, k, v = torch.randn(1, 1, 7, 8), torch.randn(1, 1, 7, 8), torch.randn(1, 1, 7, 8)
    module, compiled = _compile(lambda a, b, c: F.scaled_dot_product_attention(a, b, c, is_causal=True),
                                q, k, v, target="interpret")
    lowered = compiled.ir()[0]
    before = transform(lowered, "fuse,shrink-buffers")
    after = transform(before, ONLINE)
    assert after is not before
    arrays = [t.numpy() for t in (q, k, v)]
    outs = [np.zeros((1, 1, 7, 8), np.float32) for _ in range(2)]
    polyir.interpret(before, *arrays, outs[0])
    polyir.interpret(after, *arrays, outs[1])
    np.testing.assert_allclose(outs[1], outs[0], rtol=1e-5, atol=1e-6)


def test_random_cascades_cover_both_outcomes() -> None:
    applied = 0
    for seed in range(24):
        ctx = PassContext()
        transform(polyir.parse(_random_program(random.Random(seed))), ONLINE, ctx=ctx)
        applied += bool(ctx.remarks_of("online-reductions", "applied"))
    assert 6 <= applied <= 18, applied   # both rewrites and refusals are exercised
