"""Mean and variance in one traversal (``single-pass-moments``).

Oracles: torch eager (layer norm and group norm, with a large common offset
to exercise the rounding bound), the interpreter on the two-pass program
(random variants, some of which the rule refuses), and the remarks (the
policy leaves rows that fit in L1 alone and says so).
"""
from __future__ import annotations

import random

import pytest
import torch
import torch.nn as nn

import polyir
from polyir.context import PassContext
from polyir.passes import transform
from polyir.testing import assert_preserves_or_refuses
from tests.frontends.fx_support import Fn

ALWAYS = "fuse,online-reductions,single-pass-moments{min_bytes=0},shrink-buffers"


def _remarks(compiled) -> list[str]:
    return [r for r in compiled.summary()["remarks"] if "single-pass-moments" in r]


@pytest.mark.parametrize("target", ["cpu", "interpret"])
def test_layer_norm_in_one_pass_with_an_offset(target: str) -> None:
    torch.manual_seed(0)
    ln = nn.LayerNorm(300).eval()
    x = torch.randn(3, 300) * 0.5 + 100.0      # mean >> std: the shift keeps the variance
    compiled = polyir.compile(ln, (x,), target=target, pipeline=ALWAYS, fallback=False)
    with torch.no_grad():
        torch.testing.assert_close(compiled(x), ln(x), rtol=1e-3, atol=2e-3)
    assert any("applied" in r for r in _remarks(compiled)), _remarks(compiled)


def test_batch_norm_style_statistics_over_a_column() -> None:
    x = torch.randn(50, 3) * 2.0 - 5.0

    def normalise(t: torch.Tensor) -> torch.Tensor:
        return (t - t.mean(0)) * torch.rsqrt(t.var(0, unbiased=False) + 1e-5)
    compiled = polyir.compile(Fn(normalise), (x,), target="cpu", pipeline=ALWAYS, fallback=False)
    torch.testing.assert_close(compiled(x), normalise(x), rtol=1e-4, atol=1e-4)
    assert any("applied" in r for r in _remarks(compiled)), _remarks(compiled)


def test_rows_that_fit_in_l1_are_left_with_a_remark() -> None:
    ln = nn.LayerNorm(64).eval()
    x = torch.randn(2, 64)
    compiled = polyir.compile(ln, (x,), target="cpu", fallback=False)   # the default pipeline
    with torch.no_grad():
        torch.testing.assert_close(compiled(x), ln(x), rtol=1e-5, atol=1e-5)
    assert any("fits in" in r and "missed" in r for r in _remarks(compiled)), _remarks(compiled)


# ---------------------------------------------------- random programs, interpreter
def _program(rng: random.Random) -> str:
    x = rng.choice(["X[i, {j}]", "X[i, {j}] * 2.0 + W[{j}]"])
    finish = rng.choice(["    S2: a[] = a[] / 9.0", "    S2: a[] = a[] * 0.25 + 1.0", ""])
    centre = rng.choice(["a[]", "a[] + W[0]", "b[]", "X[i, {j}]"])
    init = rng.choice(["0.0", "0.0", "1.0"])
    lines = ["func f(X: f32[N, 9], W: f32[9], Y: f32[N]) {", "  for i = 0 to N {",
             "    local a: f32[]", "    local b: f32[]",
             "    S0: a[] = 0.0", "    for j = 0 to 9 {", f"      S1: a[] = a[] + ({x.format(j='j')})", "    }",
             finish, f"    S3: b[] = {init}", "    for j2 = 0 to 9 {",
             f"      S4: b[] = b[] + ({x.format(j='j2')} - ({centre.format(j='j2')})) * "
             f"({x.format(j='j2')} - ({centre.format(j='j2')}))",
             "    }", "    S5: Y[i] = b[] / 9.0 + a[]", "  }", "}"]
    return "\n".join(line for line in lines if line)


@pytest.mark.parametrize("seed", range(16))
def test_random_moments_preserved_or_left_alone(seed: int) -> None:
    rng = random.Random(seed)
    text = _program(rng)
    ctx = PassContext()
    result = assert_preserves_or_refuses(
        lambda m: transform(m, "single-pass-moments{min_bytes=0}", ctx=ctx), polyir.parse(text),
        rtol=1e-4, atol=1e-4, trials=2)
    applied = ctx.remarks_of("single-pass-moments", "applied")
    refusable = "b[] = 1.0" in text or "- (b[])" in text or "- (X[i, j2])" in text
    assert bool(applied) != refusable, (text, ctx.remarks)
    if refusable and "- (b[])" not in text:   # a summand reading b is no reduction at all
        assert ctx.remarks_of("single-pass-moments", "missed"), ctx.remarks
    if not applied:
        assert result is not None
