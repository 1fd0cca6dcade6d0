"""Sibling fusion refuses nests that walk a shared buffer in different orders
(``polyir.fusion.policy.sibling_traversal_conflict``)."""
from __future__ import annotations

import numpy as np

import polyir
from polyir.context import PassContext
from polyir.passes import transform
from polyir.testing import assert_equivalent
from polyir.testing.corpus import corpus_kernel

SIBLINGS = """func f(x1: f32[n], x2: f32[n], y1: f32[n], y2: f32[n], A: f32[n, n]) {{
  for i = 0 to n {{
    for j = 0 to n {{
      S0: x1[i] = x1[i] + A[i, j] * y1[j]
    }}
  }}
  for i_1 = 0 to n {{
    for j_1 = 0 to n {{
      S1: x2[i_1] = x2[i_1] + {second} * y2[j_1]
    }}
  }}
}}"""


def test_row_and_column_walks_of_one_matrix_are_not_fused() -> None:
    module = polyir.parse(SIBLINGS.format(second="A[j_1, i_1]"))
    ctx = PassContext()
    result = transform(module, "fuse", ctx=ctx)
    assert len(result.entry.body) == 2
    assert any("walk A in different orders" in r.why for r in ctx.remarks), ctx.remarks


def test_walks_in_the_same_order_are_still_fused() -> None:
    module = polyir.parse(SIBLINGS.format(second="A[i_1, j_1]"))
    ctx = PassContext()
    result = transform(module, "fuse", ctx=ctx)
    assert len(result.entry.body) == 1
    assert_equivalent(module, result)


def test_mvt_matches_python() -> None:
    kernel = corpus_kernel("mvt")
    args = kernel.make_args(kernel.sizes, np.random.default_rng(5), dtype=np.float32)
    want = [a.copy() for a in args]
    kernel.func(*want)
    got = [a.copy() for a in args]
    polyir.kernel(kernel.func)(*got)
    for have, expected in zip(got, want, strict=True):
        np.testing.assert_allclose(have, expected, rtol=2e-3, atol=2e-3)
