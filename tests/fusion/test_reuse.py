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
from polyir.target import CacheLevel, Target
from polyir.testing import assert_equivalent
from polyir.tiling.sizes import register_tile


def _product(rows: int, order: str = "i,j") -> str:
    """The nest of ``Y = X W^T`` (``X`` has ``rows`` rows, 32 columns), its
    loops in ``order``."""
    outer, inner = order.split(",")
    bounds = {"i": rows, "j": 32}
    return f"""  for {outer} = 0 to {bounds[outer]} {{
    for {inner} = 0 to {bounds[inner]} {{
      S0: Y[i, j] = 0.0
      for k = 0 to 32 {{
        S1: Y[i, j] = Y[i, j] + X[i, k] * W[j, k]
      }}
    }}
  }}"""


def _matmul_then_row_sum(rows: int, order: str = "i,j") -> str:
    """``Y = X W^T`` then a sum over each row of ``Y`` (the producer's loops in ``order``)."""
    return f"""func f(X: f32[{rows}, 32], W: f32[32, 32], S: f32[{rows}]) {{
  local Y: f32[{rows}, 32]
{_product(rows, order)}
  for a = 0 to {rows} {{
    S2: S[a] = 0.0
    for b = 0 to 32 {{
      S3: S[a] = S[a] + Y[a, b]
    }}
  }}
}}"""


SMALL_L2 = Target("cpu", vector_bits=256, vector_registers=16,
                  caches=(CacheLevel(1024, 64, 4), CacheLevel(2048, 64, 4), CacheLevel(8192, 64, 8)),
                  cache_bytes=(1024, 2048, 8192))
"""A 2 KiB L2: a 32 x 32 f32 weight matrix (4 KiB) does not stay in it."""


def _fuse(text: str, target: Target | None = None, pipeline: str = "fuse"
          ) -> tuple[Module, Module, PassContext]:
    module = polyir.parse(text)
    ctx = PassContext(target or polyir.target.cpu(1))
    return module, transform(module, pipeline, ctx=ctx), ctx


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
    text = f"""func f(X: f32[16, 32], W: f32[32, 32], B: f32[32], Z: f32[16, 32]) {{
  local Y: f32[16, 32]
{_product(16)}
  for a = 0 to 16 {{
    for b = 0 to 32 {{
      S2: Z[a, b] = max(Y[a, b] + B[b], 0.0)
    }}
  }}
}}"""
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


PER_IMAGE = f"""func f(X: f32[8, 32], W: f32[32, 32], S: f32[4, 2]) {{
  local Y: f32[8, 32]
{_product(8)}
  for a = 0 to 4 {{
    for c = 0 to 2 {{
      S2: S[a, c] = 0.0
      for d = 0 to 32 {{
        S3: S[a, c] = S[a, c] + Y[2*a + c, d]
      }}
    }}
  }}
}}"""
"""A product over the rows of 4 images of 2 rows each (a Linear layer on a
flattened batch), then a sum per row, fused per image (``max_depth=1``)."""


def test_weights_larger_than_the_cache_are_not_read_once_per_image() -> None:
    """A product fused per image into the sum that reads it, in blocks of rows:
    W does not move with the image loop, so fused it is read once per image. With a 2 KiB L2
    its 4 KiB come from beyond the cache each time (3 x 4096 bytes more
    against 2048 saved): refused, with the figures. With this machine's L2
    it stays in cache and the fusion is kept."""
    module, fused, ctx = _fuse(PER_IMAGE, SMALL_L2, "fuse{max_depth=1}")
    assert sum(isinstance(n, For) for n in fused.entry.body) == 2
    why = " ".join(r.why for r in ctx.remarks_of("fuse", "missed"))
    assert "4096 bytes of W read again from beyond the cache for each of the 4 iterations" in why, why
    assert "12288 bytes more loaded, 2048 bytes of traffic saved" in why, why
    module, fused, ctx = _fuse(PER_IMAGE, None, "fuse{max_depth=1}")
    assert sum(isinstance(n, For) for n in fused.entry.body) == 1, fused
    assert_equivalent(module, fused)


def test_an_epilogue_per_image_keeps_the_producers_loop_order() -> None:
    """The same product with its own image loop outermost, fused at it: the
    fused loop is the producer's, whose order fusion keeps, so nothing counts
    as read again even with the small cache."""
    text = PER_IMAGE.replace("X: f32[8, 32]", "X: f32[4, 2, 32]").replace("local Y: f32[8, 32]",
                                                                          "local Y: f32[4, 2, 32]")
    text = text.replace(_product(8), """  for b = 0 to 4 {
    for t = 0 to 2 {
      for n = 0 to 32 {
        S0: Y[b, t, n] = 0.0
        for k = 0 to 32 {
          S1: Y[b, t, n] = Y[b, t, n] + X[b, t, k] * W[n, k]
        }
      }
    }
  }""").replace("Y[2*a + c, d]", "Y[a, c, d]")
    module, fused, ctx = _fuse(text, SMALL_L2, "fuse{max_depth=1}")
    assert sum(isinstance(n, For) for n in fused.entry.body) == 1, fused
    assert not any("read again" in r.why for r in ctx.remarks_of("fuse", "missed"))
    assert_equivalent(module, fused)
