"""Reuse lost by row fusion (polyir.fusion.reuse): a matrix product cut into
matrix-vector products per row is refused when the weights it would load
again outweigh the traffic saved; epilogues, one row and softmax rows are not
affected. Every fused result is compared with the original in the
interpreter."""
from __future__ import annotations

import pytest

import polyir
from polyir.context import PassContext
from polyir.fusion.reuse import reuse_lost
from polyir.ir.nodes import For, Module
from polyir.passes import transform
from polyir.polyhedral.extract import extract
from polyir.polyhedral.slices import compute_slice
from polyir.testing import assert_equivalent
from polyir.tiling.sizes import register_tile


def _matmul_then_row_sum(rows: int, order: str = "i,j") -> str:
    """``Y = X W^T`` then a sum over each row of ``Y`` (the producer's loops in ``order``)."""
    outer, inner = order.split(",")
    bounds = {"i": rows, "j": 32}
    return f"""func f(X: f32[{rows}, 32], W: f32[32, 32], S: f32[{rows}]) {{
  local Y: f32[{rows}, 32]
  for {outer} = 0 to {bounds[outer]} {{
    for {inner} = 0 to {bounds[inner]} {{
      S0: Y[i, j] = 0.0
      for k = 0 to 32 {{
        S1: Y[i, j] = Y[i, j] + X[i, k] * W[j, k]
      }}
    }}
  }}
  for a = 0 to {rows} {{
    S2: S[a] = 0.0
    for b = 0 to 32 {{
      S3: S[a] = S[a] + Y[a, b]
    }}
  }}
}}"""


def _fuse(text: str) -> tuple[Module, Module, PassContext]:
    module = polyir.parse(text)
    ctx = PassContext(polyir.target.cpu(1))
    return module, transform(module, "fuse", ctx=ctx), ctx


def _loops(module: Module) -> int:
    return sum(isinstance(node, For) for node in module.entry.body)


@pytest.mark.parametrize("order", ["i,j", "j,i"])
def test_a_matrix_product_is_not_cut_into_rows(order: str) -> None:
    """16 rows: fused per row, W (4 KiB) would be loaded 16 times instead of
    once per register tile of rows; the 2 KiB of Y saved do not pay for it.
    With the product's loops in either order (the slice says which producer
    loop one row fixes)."""
    module, fused, ctx = _fuse(_matmul_then_row_sum(16, order))
    assert _loops(fused) == 2
    why = " ".join(r.why for r in ctx.remarks_of("fuse", "missed"))
    assert "would run as matrix-vector products" in why and "W loaded 16 times" in why, why
    assert "4096 bytes of traffic saved" in why, why


def test_one_row_is_fused() -> None:
    """One row: nothing to reuse across rows, so the row is fused as before."""
    module, fused, ctx = _fuse(_matmul_then_row_sum(1))
    assert _loops(fused) == 1, fused
    assert not ctx.remarks_of("fuse", "missed")
    assert_equivalent(module, fused)


def test_the_estimate_counts_the_rows_a_register_tile_would_share() -> None:
    """The bytes: W's footprint per row (32 x 32 x 4) times the loads the
    fusion adds (rows minus rows per register tile)."""
    module = polyir.parse(_matmul_then_row_sum(64))
    function = module.entry
    scop = extract(function)
    piece = compute_slice(scop, 0, 1, 1)
    target = polyir.target.cpu(1)
    lost, why = reuse_lost(function, 0, 1, 1, piece, target, {}, "cpu")
    mr = register_tile(target, 4, rows=64).mr
    assert lost == 32 * 32 * 4 * (64 - -(-64 // mr))
    assert f"instead of {-(-64 // mr)}" in why
    assert reuse_lost(function, 0, 1, 1, piece, target, {}, "cuda") == (0, "")


def test_an_epilogue_is_still_fused_into_the_product() -> None:
    """A bias and ReLU per element fuse at the full depth: every output loop
    of the product is fused, so its register tile is not cut."""
    text = """func f(X: f32[16, 32], W: f32[32, 32], B: f32[32], Z: f32[16, 32]) {
  local Y: f32[16, 32]
  for i = 0 to 16 {
    for j = 0 to 32 {
      S0: Y[i, j] = 0.0
      for k = 0 to 32 {
        S1: Y[i, j] = Y[i, j] + X[i, k] * W[j, k]
      }
    }
  }
  for a = 0 to 16 {
    for b = 0 to 32 {
      S2: Z[a, b] = max(Y[a, b] + B[b], 0.0)
    }
  }
}"""
    module, fused, ctx = _fuse(text)
    assert _loops(fused) == 1 and not ctx.remarks_of("fuse", "missed")
    assert_equivalent(module, fused)


def test_the_consumer_product_is_not_cut_either() -> None:
    """A row-wise producer (a scaled copy of X) fused per row into the product
    that reads it would also turn the product into matrix-vector products."""
    text = """func f(X: f32[16, 32], W: f32[32, 32], Y: f32[16, 32]) {
  local G: f32[16, 32]
  for a = 0 to 16 {
    for b = 0 to 32 {
      S0: G[a, b] = X[a, b] * 0.5
    }
  }
  for i = 0 to 16 {
    for j = 0 to 32 {
      S1: Y[i, j] = 0.0
      for k = 0 to 32 {
        S2: Y[i, j] = Y[i, j] + G[i, k] * W[j, k]
      }
    }
  }
}"""
    module, fused, ctx = _fuse(text)
    assert _loops(fused) == 2
    why = " ".join(r.why for r in ctx.remarks_of("fuse", "missed"))
    assert "Y += ... W ... would run as matrix-vector products" in why, why


def test_softmax_rows_of_scores_are_fused_for_the_online_traversal() -> None:
    """Scores then a row max and exp-sum: the window holds a max reduction,
    so the rows are fused (online-reductions blocks them again)."""
    text = """func f(Q: f32[16, 32], K: f32[64, 32], M: f32[16]) {
  local S: f32[16, 64]
  for i = 0 to 16 {
    for j = 0 to 64 {
      S0: S[i, j] = 0.0
      for d = 0 to 32 {
        S1: S[i, j] = S[i, j] + Q[i, d] * K[j, d]
      }
    }
  }
  for a = 0 to 16 {
    S2: M[a] = -inf
    for b = 0 to 64 {
      S3: M[a] = max(M[a], S[a, b])
    }
  }
}"""
    module, fused, ctx = _fuse(text)
    assert _loops(fused) == 1, fused
    assert_equivalent(module, fused)
