"""``hoist-copy`` (``polyir.tiling.hoist``): a read-only copy made once before
the loops that do not move it, and ``auto-tile``'s use of it (fused
attention's transposed key panels out of the query-block loop).

Oracles: the interpreter (hand-written nests, random programs through
``copies``/``pack`` then ``hoist-copy``), torch eager (SDPA at odd sizes),
the refusals' reasons."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

import polyir
from polyir.context import PassContext
from polyir.errors import PolyirError
from polyir.ir.nodes import Assign, For, Load, Module
from polyir.ir.walk import walk_nodes
from polyir.passes import PassError, transform
from polyir.polyhedral.extract import expr_loads
from polyir.target import cpu
from polyir.testing import assert_equivalent, assert_preserves_or_refuses, programs
from tests.conftest import examples
from tests.frontends.fx_support import Fn
from tests.tiling.test_autotile import AVX512, TINY

# rows in blocks of 3 (ib), keys in tiles of 4 (jt): the panel of B for a key
# tile is the same for every block of rows
BLOCKED = """func f(C: f32[N, M], A: f32[N, K], B: f32[M, K]) {
  for ib = 0 to N step 3 {
    for jt = 0 to M step 4 {
      for i = ib to min(N, ib + 3) {
        for j = jt to min(M, jt + 4) {
          for k = 0 to K {
            S0: C[i, j] = C[i, j] + A[i, k] * B[j, k]
          }
        }
      }
    }
  }
}"""

PACK = "pack{at=jt buffer=B along=j order=1,0 name=Bp}"


def _enclosing(module: Module, statement: str) -> list[str]:
    """The loop variables around ``statement``, outermost first."""
    def visit(nodes, path):  # noqa: ANN001, ANN202
        for node in nodes:
            if isinstance(node, Assign) and node.name == statement:
                return path
            if isinstance(node, For):
                found = visit(node.body, path + [node.var])
                if found is not None:
                    return found
            for branch in ("then_body", "else_body"):
                if hasattr(node, branch):
                    found = visit(getattr(node, branch), path)
                    if found is not None:
                        return found
        return None
    return visit(module.entry.body, []) or []


def _copy_into(module: Module, local: str) -> Assign:
    return next(n for n in walk_nodes(module.entry.body) if isinstance(n, Assign) and n.buffer == local)


# ------------------------------------------------------------------ the mechanism
def test_the_panel_is_made_once_before_the_row_blocks() -> None:
    module = polyir.parse(BLOCKED)
    packed = transform(module, PACK)
    hoisted = transform(packed, "hoist-copy{local=Bp loop=ib}")
    copy = _copy_into(hoisted, "Bp")
    around = _enclosing(hoisted, copy.name)
    assert "ib" not in around and "jt" not in around and len(around) == 3  # jt_h, then the copy loops
    local = next(b for b in hoisted.entry.locals if b.name == "Bp")
    assert len(local.shape) == 3 and str(local.shape[1]) == "K" and str(local.shape[2]) == "4"
    # every read of the panel names its block
    reads = [ld for n in walk_nodes(hoisted.entry.body) if isinstance(n, Assign)
             for ld in expr_loads(n.value) if ld.buffer == "Bp"]
    assert reads and all("jt" in str(ld.indices[0]) for ld in reads)
    for sizes in ({"N": 7, "M": 9, "K": 5}, {"N": 1, "M": 4, "K": 1}, {"N": 3, "M": 13, "K": 2}):
        assert_equivalent(module, hoisted, sizes=sizes)


def test_a_causal_panel_keeps_its_tile_block() -> None:
    """Keys up to the row (``j <= i``): the panel of a key tile depends on the
    row block only through an upper bound, so it is hoisted with the union
    over the blocks (the whole tile)."""
    causal = BLOCKED.replace("for jt = 0 to M step 4", "for jt = 0 to min(M, ib + 3) step 4") \
                    .replace("for j = jt to min(M, jt + 4)", "for j = jt to min(M, jt + 4, i + 1)")
    module = polyir.parse(causal)
    hoisted = transform(module, PACK + ",hoist-copy{local=Bp loop=ib}")
    assert "ib" not in _enclosing(hoisted, _copy_into(hoisted, "Bp").name)
    for sizes in ({"N": 7, "M": 9, "K": 5}, {"N": 10, "M": 10, "K": 3}, {"N": 2, "M": 1, "K": 2}):
        assert_equivalent(module, hoisted, sizes=sizes)


def test_refused_when_the_source_is_written_inside() -> None:
    module = polyir.parse(BLOCKED.replace("for ib = 0 to N step 3 {",
                                          "for ib = 0 to N step 3 {\n    S9: B[0, 0] = 1.0"))
    packed = transform(module, PACK)
    with pytest.raises(PassError, match="written inside loop 'ib'"):
        transform(packed, "hoist-copy{local=Bp loop=ib}")


def test_refused_when_the_copy_moves_with_the_loop() -> None:
    packed = transform(polyir.parse(BLOCKED), PACK)
    with pytest.raises(PassError, match="moves with it"):
        transform(packed, "hoist-copy{local=Bp loop=jt}")
    with pytest.raises(PassError, match="not a loop-scoped local"):
        transform(packed, "hoist-copy{local=B loop=ib}")


# ------------------------------------------------------------------ the policy
# row blocks of 24 around key tiles of 32 whose body is not one band (S9), so
# that auto-tile plans the product inside: B's transposed panel per column tile
POLICY = """func f(C: f32[48, 64], A: f32[48, 32], B: f32[64, 32]) {
  for ib = 0 to 48 step 24 {
    for jt = 0 to 64 step 32 {
      for i0 = ib to ib + 24 {
        S9: C[i0, jt] = C[i0, jt] * 0.5
      }
      for i = ib to ib + 24 {
        for j = jt to jt + 32 {
          for k = 0 to 32 {
            S0: C[i, j] = C[i, j] + A[i, k] * B[j, k]
          }
        }
      }
    }
  }
}"""


def test_auto_tile_hoists_a_repeated_panel_within_the_budget() -> None:
    module = polyir.parse(POLICY)
    ctx = PassContext(AVX512)
    tiled = transform(module, "auto-tile{register_work=0}", ctx=ctx)
    applied = [r.why for r in ctx.remarks if r.kind == "applied"]
    assert any("made once before loop 'ib' (8192 bytes" in why and "instead of 2 times" in why
               for why in applied), applied
    assert any(why.endswith("hoist-copy{local=B_j_r loop=ib}") for why in applied), applied
    copy = _copy_into(tiled, "B_j_r")
    assert _enclosing(tiled, copy.name)[0] != "ib"
    assert_equivalent(module, tiled)
    # the plan's pipeline replays it
    plan = next(why for why in applied if "register tile" in why)
    assert transform(module, plan.split(": ", 1)[1].split(": ", 1)[1]) == tiled


def test_auto_tile_says_why_a_copy_too_large_stays() -> None:
    """TINY's last cache level is 8 KiB: the whole of B (8 KiB) is more than half."""
    ctx = PassContext(TINY)
    tiled = transform(polyir.parse(POLICY), "auto-tile{register_work=0}", ctx=ctx)
    missed = [r.why for r in ctx.remarks if r.kind == "missed"]
    assert any("not hoisted: not out of loop 'ib': the hoisted copy would hold 8192 bytes, more "
               "than half the last cache level (4096)" in why for why in missed), missed
    assert "ib" in _enclosing(tiled, next(n.name for n in walk_nodes(tiled.entry.body)
                                         if isinstance(n, Assign) and isinstance(n.value, Load)
                                         and n.value.buffer == "B"))


# ------------------------------------------------------------------ random programs
@settings(max_examples=examples(25), deadline=None)
@given(programs(max_depth=3, max_statements=3), st.data())
def test_hoist_preserves_or_refuses_on_random_programs(module: Module, data: st.DataObject) -> None:
    chains = [(outer, inner) for outer in walk_nodes(module.entry.body) if isinstance(outer, For)
              for inner in walk_nodes((outer,)) if isinstance(inner, For)]
    if not chains:
        return
    outer, inner = data.draw(st.sampled_from(chains))
    stmts = [s for s in walk_nodes(inner.body) if isinstance(s, Assign)]
    written = {s.buffer for s in walk_nodes(outer.body) if isinstance(s, Assign)}
    # mostly buffers read only inside the hoisted loop (a written one is refused; a few are drawn)
    reads = sorted({ld.buffer for s in stmts for ld in expr_loads(s.value)
                    if ld.indices and (ld.buffer not in written or data.draw(st.booleans()))})
    if not reads:
        return
    buffer = data.draw(st.sampled_from(reads))
    rank = module.entry.buffers[buffer].rank
    order = ",".join(str(d) for d in data.draw(st.permutations(range(rank))))
    copy = f"copies{{at={inner.var} buffers={buffer} order={order} names=H_copy}}"
    pipeline = f"{copy},hoist-copy{{local=H_copy loop={outer.var}}}"
    for order_name in ("forward", "reverse"):
        result = assert_preserves_or_refuses(lambda m: transform(m, pipeline), module,
                                             parallel_order=order_name)
    if not isinstance(result, PolyirError):
        assert any(isinstance(n, Assign) and n.buffer == "H_copy"
                   for n in walk_nodes(result.entry.body))


# ------------------------------------------------------------------ fused attention
class _Attention(torch.nn.Module):
    def __init__(self, causal: bool):
        super().__init__()
        self.causal = causal

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return F.scaled_dot_product_attention(q, k, v, is_causal=self.causal)


def test_the_attention_key_pack_is_outside_the_query_block_loop() -> None:
    torch.manual_seed(0)
    q, k, v = (torch.randn(1, 1, 129, 64) for _ in range(3))
    model = _Attention(False).eval()
    compiled = polyir.compile(model, (q, k, v), target=cpu(1), fallback=False)
    torch.testing.assert_close(compiled(q, k, v), model(q, k, v), rtol=2e-5, atol=2e-5)
    remarks = compiled.summary()["remarks"]
    assert any("hoist-copy{" in r and "made once before loop" in r for r in remarks), remarks
    module = compiled.last_plan.segments[0].executable.ir
    key = next(p.name for p in module.entry.params if p.name == "arg1_1")
    copies = [n for n in walk_nodes(module.entry.body) if isinstance(n, Assign)
              and isinstance(n.value, Load) and n.value.buffer == key]
    rows = [n.var for n in walk_nodes(module.entry.body) if isinstance(n, For) and n.var.endswith("_rows")]
    assert copies and rows
    for copy in copies:
        assert not set(rows) & set(_enclosing(module, copy.name)), copy.name


@pytest.mark.parametrize("length, depth, causal", [(1, 64, False), (7, 64, True), (129, 64, False),
                                                   (129, 128, True), (7, 8, False)])
def test_attention_matches_eager_at_odd_sizes(length: int, depth: int, causal: bool) -> None:
    torch.manual_seed(length)
    q, k, v = (torch.randn(1, 2, length, depth) for _ in range(3))
    model = Fn(lambda a, b, c: F.scaled_dot_product_attention(a, b, c, is_causal=causal))
    compiled = polyir.compile(model, (q, k, v), target=cpu(1), fallback=False)
    with torch.no_grad():
        want = model(q, k, v)
    torch.testing.assert_close(compiled(q, k, v), want, rtol=2e-5, atol=2e-5)
