"""Query blocking of the online traversal (``online-reductions{rows=B}``).

Oracles: torch eager (SDPA with causal, boolean and additive masks, rows a
mask empties, odd sizes, bf16), the interpreter on the unblocked program
(random cascades with a shared operand), and the refusal remark when rows
are not independent.
"""
from __future__ import annotations

import random

import pytest
import torch
import torch.nn.functional as F

import polyir
from polyir.context import PassContext
from polyir.fusion.online import CAUSAL_MIN_ROWS, online_reductions
from polyir.fusion.passes import auto_rows
from polyir.ir.nodes import Assign, For
from polyir.ir.walk import loads, statements, walk_nodes
from polyir.passes import PipelineError, transform
from polyir.target import cpu
from polyir.testing import assert_equivalent, assert_preserves_or_refuses
from tests.frontends.fx_support import Fn

BLOCKED = "fuse,online-reductions{tile=4 rows=3},shrink-buffers,distribute,auto-tile"


def _check(fn, *inputs, rtol: float = 2e-5, atol: float = 2e-5, blocked: bool = True) -> None:
    module = Fn(fn)
    compiled = polyir.compile(module, inputs, target="cpu", pipeline=BLOCKED, fallback=False)
    got = compiled(*inputs)
    with torch.no_grad():
        want = module(*inputs)
    torch.testing.assert_close(got, want, rtol=rtol, atol=atol, equal_nan=True)
    remarks = compiled.summary()["remarks"]
    assert any("in blocks of 3 against each key tile" in r for r in remarks) == blocked, remarks
    depth = inputs[0].shape[-1]     # scores: one block x one tile; packed keys: one tile x depth
    for segment in compiled.last_plan.segments:
        entry = segment.executable.ir.entry
        inputs_size = {p.name: _elements(p) for p in entry.params if hasattr(p, "shape")}
        for node in walk_nodes(entry.body):
            if isinstance(node, For):
                for b in node.locals:
                    count = _elements(b)
                    # larger only as auto-tile's packed copy or register tile of a parameter (at most its size)
                    packed = any(b.name.startswith(f"{name}_") and b.name.endswith(("_c", "_r")) and count <= size
                                 for name, size in inputs_size.items())
                    assert count <= max(3 * 4, 4 * depth) or packed, (b.name, count)


def _elements(buffer) -> int:  # noqa: ANN001
    count = 1
    for dim in buffer.shape:
        count *= dim.evaluate({})
    return count


@pytest.mark.parametrize("length, source, depth, causal", [(7, 11, 8, True), (5, 9, 16, False)])
def test_sdpa_in_blocks_of_rows(length: int, source: int, depth: int, causal: bool) -> None:
    torch.manual_seed(length)
    q = torch.randn(1, 2, length, depth)
    k, v = torch.randn(1, 2, source, depth), torch.randn(1, 2, source, depth)
    _check(lambda a, b, c: F.scaled_dot_product_attention(a, b, c, is_causal=causal), q, k, v)


@pytest.mark.parametrize("length, depth", [(257, 8), (100, 64)])
def test_causal_sdpa_in_blocks_with_the_default_pipeline(length: int, depth: int) -> None:
    """The default CPU pipeline blocks causal rows too (blocks of ``auto_rows``: whole
    blocks, a partial last one, key tiles on and below the diagonal) from
    ``CAUSAL_MIN_ROWS`` rows up; fewer rows stay one at a time, with the reason."""
    torch.manual_seed(length)
    q, k, v = (torch.randn(1, 2, length, depth) for _ in range(3))
    module = Fn(lambda a, b, c: F.scaled_dot_product_attention(a, b, c, is_causal=True))
    compiled = polyir.compile(module, (q, k, v), target=cpu(1), fallback=False)
    with torch.no_grad():
        want = module(q, k, v)
    torch.testing.assert_close(compiled(q, k, v), want, rtol=2e-5, atol=2e-5)
    rows = auto_rows(cpu(1), 256)
    remarks = compiled.summary()["remarks"]
    blocked = any(f"in blocks of {rows} against each key tile" in r for r in remarks)
    assert blocked == (length >= CAUSAL_MIN_ROWS), remarks
    if not blocked:
        assert any(f"{length} < {CAUSAL_MIN_ROWS} rows, too few" in r for r in remarks), remarks


def test_blocks_with_masks_that_empty_rows_and_bf16() -> None:
    q, k, v = torch.randn(1, 1, 7, 8), torch.randn(1, 1, 10, 8), torch.randn(1, 1, 10, 8)
    boolean = torch.rand(1, 1, 7, 10) > 0.4
    boolean[0, 0, 4] = False                  # an empty row: eager gives 0
    _check(lambda a, b, c, m: F.scaled_dot_product_attention(a, b, c, attn_mask=m), q, k, v, boolean)
    half = [t.to(torch.bfloat16) for t in (q, k, v)]
    # bf16: the casts around P.V keep it out of the traversal (only the
    # statistics are online), so no key operand is shared and rows stay apart
    _check(lambda a, b, c: F.scaled_dot_product_attention(a, b, c, is_causal=True), *half,
           rtol=2e-2, atol=2e-2, blocked=False)


# ------------------------------------------------ random row programs, interpreter
def _rows_program(rng: random.Random) -> str:
    """A row loop with a max cascade over keys shared by every row; the
    written subscripts are sometimes not per row (then blocking is refused)."""
    shared = rng.choice(["K[j, r]", "K[j, r] * 0.5"])
    out = rng.choice(["Y[i, d]", "Y[i, d]", "Y[0, d]"])
    lower = rng.choice(["0", "0", "i - 2"])      # a sliding window: a bound that varies by row
    return _rows_text(shared, out, lower)


def _rows_text(shared: str, out: str, lower: str) -> str:
    return "\n".join([
        "func f(Q: f32[N, R], K: f32[M, R], V: f32[M, D], Y: f32[N, D]) {",
        "  for i = 0 to N {",
        "    local s: f32[M]", "    local m: f32[]", "    local l: f32[]",
        f"    for j = max(0, {lower}) to M {{", "      S0: s[j] = 0.0", "      for r = 0 to R {",
        f"        S1: s[j] = s[j] + Q[i, r] * {shared}", "      }", "    }",
        "    S2: m[] = -inf", f"    for j1 = max(0, {lower}) to M {{", "      S3: m[] = max(m[], s[j1])", "    }",
        "    S4: l[] = 0.0", f"    for j2 = max(0, {lower}) to M {{", "      S5: l[] = l[] + exp(s[j2] - m[])", "    }",
        "    for d = 0 to D {", f"      S6: {out} = 0.0", f"      for j3 = max(0, {lower}) to M {{",
        f"        S7: {out} = {out} + exp(s[j3] - m[]) / l[] * V[j3, d]", "      }", "    }",
        "  }", "}"])


@pytest.mark.parametrize("seed", range(8))
def test_random_rows_preserved_or_left_alone(seed: int) -> None:
    rng = random.Random(seed)
    text = _rows_program(rng)
    module = polyir.parse(text)
    ctx = PassContext()
    rows, tile = rng.choice([2, 3]), rng.choice([2, 3])
    assert_preserves_or_refuses(
        lambda m: transform(m, f"online-reductions{{tile={tile} rows={rows}}}", ctx=ctx), module,
        rtol=2e-5, atol=2e-6, trials=2)
    blocked = ctx.remarks_of("online-reductions", "applied")
    if "Y[0, d]" in text:
        assert not any("blocks of" in str(r) for r in blocked)
        assert any("rows not blocked" in str(r) for r in ctx.remarks_of("online-reductions", "missed"))
    else:
        assert any("blocks of" in str(r) for r in blocked), ctx.remarks


def test_rows_option_is_checked() -> None:
    with pytest.raises(PipelineError, match="rows must be >= 0"):
        transform(polyir.parse(_rows_program(random.Random(0))), "online-reductions{rows=-1}")


def test_rows_from_the_target_block_rectangular_and_row_varying_ranges() -> None:
    """``rows=0`` (the default): blocks of :func:`auto_rows` rows, whether the key range
    is the same for every row or varies by row (a causal mask or a sliding window: the
    keys every row of the block has form a rectangle, the rest stays per row)."""
    rows = auto_rows(cpu(1), 256)
    for lower in ("0", "i - 2"):
        module = polyir.parse(_rows_text("K[j, r]", "Y[i, d]", lower))
        ctx = PassContext(target=cpu(1))
        blocked = transform(module, "online-reductions", ctx=ctx)
        assert rows > 1 and any(f"blocks of {rows}" in r.why
                                for r in ctx.remarks_of("online-reductions", "applied")), lower
        assert_equivalent(module, blocked, trials=2, rtol=1e-4, atol=1e-5)
    # the rectangular_only policy of online_reductions keeps a varying range per row
    causal = polyir.parse(_rows_text("K[j, r]", "Y[i, d]", "i - 2"))
    kept = online_reductions(causal.entry, 256, rows, rectangular_only=True)
    assert any("depends on row" in why for _, why, kind in kept.notes if kind == "missed")


def test_a_row_varying_key_range_splits_into_a_rectangle_and_the_rest() -> None:
    """With a sliding window (a lower key bound ``i - 2``), each per-row loop of a key
    tile becomes the keys every row of the block has (a rectangle, no row variable
    in its bounds) and the few that only some rows have; meaning is kept."""
    window = polyir.parse(_rows_text("K[j, r]", "Y[i, d]", "i - 2"))
    ctx = PassContext(target=cpu(1))
    blocked = transform(window, "online-reductions{tile=4 rows=3}", ctx=ctx)
    assert any("blocks of 3" in r.why for r in ctx.remarks_of("online-reductions", "applied"))
    products = [s for s in statements(blocked.entry.body)
                if isinstance(s, Assign) and any(load.buffer == "Q" for load in loads(s.value))]
    assert len(products) == 2, [s.name for s in products]   # the rectangle's copy and the rest's
    assert_equivalent(window, blocked, trials=3, rtol=1e-4, atol=1e-5)
    assert_equivalent(window, blocked, sizes={"N": 5, "M": 3, "R": 2, "D": 2})
