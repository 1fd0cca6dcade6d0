"""``simplify-subscripts``: goldens, the interpreter on the reshape case and a
brute-force check of every rewritten floor division and remainder on random
loop ranges (the value at every iteration the loops run)."""
from __future__ import annotations

import itertools

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import polyir
from polyir.context import PassContext
from polyir.ir.affine import Aff
from polyir.ir.nodes import Assign, Const, For, Function, Module, Symbol
from polyir.ir.types import DType
from polyir.passes import transform
from polyir.testing import assert_equivalent, assert_preserves_or_refuses, programs
from polyir.transforms.simplify_subscripts import loop_range, simplify_subscripts
from tests.conftest import examples

RESHAPE = """\
func f(X: f32[8, 32, 64], Y: f32[8, 32, 64]) {
  for b = 0 to 8 {
    for i = 32*b to 32*b + 32 {
      for r = 0 to 64 {
        S0: Y[i // 32, i % 32, r] = X[(32*b + i - 32*b) // 32, i % 32, r] * 2.0
      }
    }
  }
}
"""


def _run(pipeline: str, text: str, ctx: PassContext | None = None) -> str:
    return str(transform(polyir.parse(text), pipeline, verify_each=True, ctx=ctx)).rstrip()


def test_a_sliced_reshape_becomes_affine() -> None:
    ctx = PassContext()
    assert _run("simplify-subscripts", RESHAPE, ctx) == str(polyir.parse("""\
func f(X: f32[8, 32, 64], Y: f32[8, 32, 64]) {
  for b = 0 to 8 {
    for i = 32*b to 32*b + 32 {
      for r = 0 to 64 {
        S0: Y[b, i - 32*b, r] = X[b, i - 32*b, r] * 2.0
      }
    }
  }
}
""")).rstrip()
    (remark,) = ctx.remarks_of("simplify-subscripts")
    assert remark.kind == "applied" and "4 of 4" in remark.why
    module = polyir.parse(RESHAPE)
    assert_equivalent(module, transform(module, "simplify-subscripts"))


def test_ranges_that_span_a_multiple_are_kept_with_a_remark() -> None:
    source = """\
func f(A: f32[N, 4], B: f32[64]) {
  for i = 0 to 64 {
    S0: B[i] = A[i // 4 + 0, i % 4]
  }
  for t = 0 to 60 step 4 {
    for j = t + 1 to t + 5 {
      S1: B[j] = A[j // 4, j % 4] + 1.0
    }
  }
}
"""
    ctx = PassContext()
    assert _run("simplify-subscripts", source, ctx) == str(polyir.parse(source)).rstrip()
    (remark,) = ctx.remarks_of("simplify-subscripts")
    assert remark.kind == "missed" and "none of 4" in remark.why


def test_offsets_negative_coefficients_symbolic_bounds_and_guards() -> None:
    source = """\
func f(A: f32[16, 16], B: f32[16, 8], n: index) {
  for t = 0 to 4 {
    for i = 4*t to min(4*t + 4, n) {
      if (i // 4 >= 1) {
        S0: B[(i + 8) // 4 - 2, (3 - i) % 4] = A[15 - i, (2*i + 1) % 16]
      }
    }
  }
}
"""
    result = transform(polyir.parse(source), "simplify-subscripts", verify_each=True)
    text = str(result)
    assert "(3 - i) % 4" not in text and "i // 4 >=" not in text and "(i + 8) // 4" not in text
    assert "(2*i + 1) % 16" in text          # 8*t + 2*(0..3) + 1 spans 16: kept
    for n in (1, 5, 16):
        assert_equivalent(polyir.parse(source), result, sizes={"n": n}, trials=1)


def test_loop_range_takes_the_tightest_constant_pair() -> None:
    i, n = Aff.var("i"), Aff.var("N")
    loop = For("j", (i, Aff.const(0)), (n, i + 8, i + 5), ())
    assert loop_range(loop) == (i, 5)
    assert loop_range(For("j", (Aff.const(0),), (n,), ())) is None


@st.composite
def _nests(draw: st.DrawFn) -> tuple[Module, list[tuple[Aff, ...]]]:
    """A nest of 1-3 loops with random affine lower bounds over the loops
    outside, random extents and steps (and sometimes a symbolic upper term),
    around statements whose subscripts are random floor divisions and
    remainders (one of them nested)."""
    depth = draw(st.integers(1, 3))
    names = [f"i{k}" for k in range(depth)]
    small = st.integers(-3, 3)
    loops: list[tuple[str, tuple[Aff, ...], tuple[Aff, ...], int]] = []
    for k, name in enumerate(names):
        lower = Aff.const(draw(st.integers(-5, 5)))
        for outer in names[:k]:
            lower = lower + Aff.var(outer) * draw(small)
        extent = draw(st.integers(0, 7))
        upper: tuple[Aff, ...] = (lower + extent,)
        if draw(st.booleans()):
            upper += (Aff.var("N") + draw(st.integers(-4, 4)),)
        loops.append((name, (lower,), upper, draw(st.integers(1, 3))))
    subscripts: list[Aff] = []
    for _ in range(draw(st.integers(1, 4))):
        expr = Aff.const(draw(st.integers(-9, 9)))
        for name in names:
            expr = expr + Aff.var(name) * draw(st.integers(-6, 6))
        divisor = draw(st.integers(1, 8))
        atom = expr // divisor if draw(st.booleans()) else expr % divisor
        if draw(st.booleans()):
            atom = (atom * draw(small) + Aff.var(names[-1])) // draw(st.integers(1, 5))
        subscripts.append(atom)
    statement = Assign("S0", "A", tuple(subscripts), Const(0.0, DType.F32))
    body: tuple = (statement,)
    for name, lower, upper, step in reversed(loops):
        body = (For(name, lower, upper, body, step=step),)
    function = Function("f", (Symbol("N"),), body)
    return Module((function,)), [tuple(subscripts)]


def _points(nodes: tuple, env: dict[str, int]):
    for node in nodes:
        if isinstance(node, For):
            low = max(a.evaluate(env) for a in node.lower)
            high = min(a.evaluate(env) for a in node.upper)
            for value in range(low, high, node.step):
                yield from _points(node.body, {**env, node.var: value})
        else:
            yield node, env


@settings(max_examples=examples(200, 3000), deadline=None)
@given(nest=_nests(), symbol=st.integers(-2, 9))
def test_every_rewrite_has_the_same_value_at_every_iteration(nest, symbol: int) -> None:
    module, _ = nest
    result = simplify_subscripts(module)
    before = list(_points(module.entry.body, {"N": symbol}))
    after = list(_points(result.entry.body, {"N": symbol}))
    assert len(before) == len(after)
    for (old, env), (new, env2) in zip(before, after, strict=True):
        assert env == env2
        for a, b in zip(old.indices, new.indices, strict=True):
            assert a.evaluate(env) == b.evaluate(env), (str(a), str(b), env)


def test_the_brute_force_check_sees_rewrites() -> None:
    """The random nests do get rewritten (the property above is not vacuous)."""
    rewritten = 0
    rng = np.random.default_rng(0)
    for _ in range(200):
        b, e = int(rng.integers(1, 5)), int(rng.integers(-3, 4))
        i = Aff.var("i")
        loop = For("i", (Aff.var("t") * b + e,), (Aff.var("t") * b + e + b,),
                   (Assign("S0", "A", ((i - e) // b, (i - e) % b), Const(0.0, DType.F32)),))
        outer = For("t", (Aff.const(0),), (Aff.const(4),), (loop,))
        module = Module((Function("f", (), (outer,)),))
        result = simplify_subscripts(module)
        (inner,) = result.entry.body[0].body
        rewritten += all(index.is_linear for index in inner.body[0].indices)
        for t, k in itertools.product(range(4), range(b)):
            env = {"t": t, "i": t * b + e + k}
            assert [x.evaluate(env) for x in inner.body[0].indices] == [t, k]
    assert rewritten == 200


@settings(max_examples=examples(25, 500))
@given(module=programs())
def test_random_programs_keep_their_meaning(module: Module) -> None:
    result = assert_preserves_or_refuses(lambda m: transform(m, "simplify-subscripts", verify_each=True),
                                         module)
    assert isinstance(result, Module), result
