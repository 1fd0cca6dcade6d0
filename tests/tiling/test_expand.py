"""Scalar expansion of loop-scoped temporaries, so that distribution can split
the loop that declares them (``polyir/tiling/expand.py``), and the split of
loops that mix reductions with element-wise updates (``polyir/tiling/distribute.py``)."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import polyir
from polyir.context import PassContext
from polyir.errors import IllegalTransform, PassError
from polyir.ir.nodes import Assign, For
from polyir.ir.walk import walk_nodes
from polyir.passes import transform
from polyir.testing import assert_equivalent, assert_preserves_or_refuses, programs
from polyir.testing.corpus import corpus_kernel
from polyir.tiling.distribute import mixed_reduction_loops
from tests.conftest import examples

ATAX = """func atax(A: f32[m, n], x: f32[n], y: f32[n]) {
  for i = 0 to m {
    local t: f32[] @local
    S1: t[] = 0.0
    for j = 0 to n {
      S2: t[] = t[] + A[i, j] * x[j]
    }
    for k = 0 to n {
      S3: y[k] = y[k] + A[i, k] * t[]
    }
  }
}"""


def test_a_shared_scalar_is_expanded_and_the_loop_distributed() -> None:
    module = polyir.parse(ATAX)
    result = transform(module, "distribute")
    function = result.entry
    assert [str(b.shape[0]) for b in function.locals if b.name == "t"] == ["m"]
    nests = function.body
    assert len(nests) == 3 and all(isinstance(n, For) and not n.locals for n in nests)
    assert "t[i] = 0.0" in str(result)
    assert_equivalent(module, result)


def test_a_local_used_by_one_part_stays_loop_scoped() -> None:
    text = """func f(A: f32[m, n], y: f32[m], z: f32[m]) {
  for i = 0 to m {
    local t: f32[] @local
    S0: z[i] = 1.0
    for j = 0 to n {
      S1: y[i] = y[i] + A[i, j]
    }
    for k = 0 to 2 {
      S2: t[] = y[i] * 2.0
      S3: z[i] = z[i] + t[]
    }
  }
}"""
    module = polyir.parse(text)
    result = transform(module, "distribute")
    assert not result.entry.locals
    assert [b.name for n in result.entry.body for b in n.locals] == ["t"]
    assert_equivalent(module, result)


@pytest.mark.parametrize("bounds, why", [
    ("for i = 0 to m step 2", "step 2"),
    ("for i = 1 to m", None),
    ("for i = p to m", "nonnegative constant"),
])
def test_expansion_refuses_loops_without_a_known_extent(bounds: str, why: str | None) -> None:
    text = f"""func f(A: f32[m, n], y: f32[n], p: index) {{
  {bounds} {{
    local t: f32[] @local
    S1: t[] = 0.0
    for j = 0 to n {{
      S2: t[] = t[] + A[i, j]
    }}
    for k = 0 to n {{
      S3: y[k] = y[k] + t[]
    }}
  }}
}}"""
    module = polyir.parse(text)
    if why is None:  # a positive constant lower bound only wastes the first elements
        assert_equivalent(module, transform(module, "distribute"))
        return
    ctx = PassContext()
    assert transform(module, "distribute", ctx=ctx) is module
    assert any(why in r.why and "cannot be expanded" in r.why for r in ctx.remarks), ctx.remarks
    with pytest.raises(PassError) as info:
        transform(module, "distribute{loops=i}")
    assert isinstance(info.value.cause, IllegalTransform)


def test_expansion_refuses_a_non_scalar_local() -> None:
    text = """func f(A: f32[m, n], y: f32[n]) {
  for i = 0 to m {
    local row: f32[n] @local
    for j = 0 to n {
      S1: row[j] = A[i, j] * 2.0
    }
    for k = 0 to n {
      S2: y[k] = y[k] + row[k]
    }
  }
}"""
    module = polyir.parse(text)
    ctx = PassContext()
    assert transform(module, "distribute", ctx=ctx) is module
    assert any("not a scalar" in r.why for r in ctx.remarks), ctx.remarks


@settings(max_examples=examples(20))
@given(programs())
def test_shrink_then_distribute_preserves_or_refuses_on_random_programs(module) -> None:
    # shrink-buffers makes scalar temporaries loop-scoped; distribute then expands them
    for order in ("forward", "reverse"):
        assert_preserves_or_refuses(lambda m: transform(m, "shrink-buffers,distribute"), module,
                                    parallel_order=order)


@pytest.mark.parametrize("name", ["atax", "bicg", "conv2d-pad", "row-norms", "softmax-rows"])
def test_kernels_with_expanded_temporaries_match_python(name: str) -> None:
    kernel = corpus_kernel(name)
    args = kernel.make_args(kernel.sizes, np.random.default_rng(3), dtype=np.float32)
    want = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    kernel.func(*want)
    compiled = polyir.kernel(kernel.func)
    got = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    compiled(*got)
    for have, expected in zip(got, want, strict=True):
        if isinstance(expected, np.ndarray):
            np.testing.assert_allclose(have, expected, rtol=2e-3, atol=2e-3)


BICG = """func bicg(A: f32[n, m], s: f32[m], q: f32[n], p: f32[m], r: f32[n]) {
  for i = 0 to n {
    S1: q[i] = 0.0
    for j = 0 to m {
      S2: s[j] = s[j] + r[i] * A[i, j]
      S3: q[i] = q[i] + A[i, j] * p[j]
    }
  }
}"""


def test_a_reduction_and_an_element_wise_update_are_split_apart() -> None:
    module = polyir.parse(BICG)
    assert mixed_reduction_loops(module.entry) == ["j"]
    result = transform(module, "distribute")
    statements = [[s.name for s in walk_nodes((nest,)) if isinstance(s, Assign)]
                  for nest in result.entry.body]
    assert statements == [["S1"], ["S2"], ["S3"]]
    assert_equivalent(module, result)


def test_a_loop_of_reductions_only_is_not_a_candidate() -> None:
    module = polyir.parse(BICG.replace("S2: s[j] = s[j] + r[i] * A[i, j]",
                                       "S2: r[i] = r[i] + A[i, j]"))
    assert mixed_reduction_loops(module.entry) == []


TEMPLATE = """func f(A: f32[m, n], y: f32[n], z: f32[m]) {{
  for o = 0 to 2 {{
    for i = {lower} to {upper} step {step} {{
      local t: f32[] @local
      S1: t[] = {init}
      for j = 0 to n {{
        S2: t[] = t[] {op} A[i, j]
      }}
      {use}
    }}
  }}
}}"""
USES = ("for k = 0 to n {\n        S3: y[k] = y[k] + A[i, k] * t[]\n      }",
        "S3: z[i] = t[] * 2.0",
        "S3: z[i] = z[i] + t[]\n      S4: y[0] = y[0] + t[]")


@settings(max_examples=examples(30))
@given(st.sampled_from(("0", "1", "o")), st.sampled_from(("m", "m - 1", "min(m, 4)")),
       st.sampled_from((1, 2)), st.sampled_from(("0.0", "z[i]", "A[i, 0]")),
       st.sampled_from(("+", "*")), st.sampled_from(USES))
def test_distribute_with_expansion_preserves_or_refuses(lower: str, upper: str, step: int, init: str,
                                                         op: str, use: str) -> None:
    text = TEMPLATE.format(lower=lower, upper=upper, step=step, init=init, op=op, use=use)
    module = polyir.parse(text)
    for pipeline in ("distribute", "distribute{loops=i}"):
        for order in ("forward", "reverse"):
            assert_preserves_or_refuses(lambda m, p=pipeline: transform(m, p), module,
                                        parallel_order=order)


def test_constant_bound_accumulators_are_left_to_auto_tile() -> None:
    text = """func f(A: f32[8, n], z: f32[8]) {
  for i = 0 to 8 {
    local t: f32[] @local
    S1: t[] = 0.0
    for j = 0 to n {
      S2: t[] = t[] + A[i, j]
    }
    S3: z[i] = t[] * 2.0
  }
}"""
    module = polyir.parse(text)
    ctx = PassContext()
    assert transform(module, "distribute", ctx=ctx) is module
    assert any("auto-tile widens or spills" in r.why for r in ctx.remarks), ctx.remarks
    named = transform(module, "distribute{loops=i}")  # asked for by name: expanded
    assert [str(b.shape[0]) for b in named.entry.locals] == ["8"]
    assert_equivalent(module, named)
