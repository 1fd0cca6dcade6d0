"""The isl memo (``polyir.polyhedral.memo``): hits answer what a fresh computation would."""
from __future__ import annotations

import islpy as isl
import pytest
from hypothesis import given, settings

import polyir
from polyir.driver import default_pipeline
from polyir.ir.parser import parse
from polyir.polyhedral import memo as memo_module
from polyir.polyhedral.analysis import AnalysisLimit
from polyir.polyhedral.dependences import Dependences, compute_dependences
from polyir.polyhedral.extract import NotPolyhedral, Scop, extract
from polyir.polyhedral.memo import ISL_MEMO, IslMemo
from polyir.testing import programs
from tests.conftest import examples
from tests.polyhedral.helpers import kernel
from tests.polyhedral.kernels import KERNELS

UNBOUNDED_LIMIT = 1 << 60
"""An isl operation limit no test reaches: a context with it set bypasses the memo."""


def fresh_context() -> isl.Context:
    """A context on which every isl problem is computed afresh (it has a limit)."""
    ctx = isl.Context()
    ctx.set_max_operations(UNBOUNDED_LIMIT)
    return ctx


def analysed(function, ctx: isl.Context) -> tuple[Scop, Dependences]:
    scop = extract(function, ctx)
    return scop, compute_dependences(scop)


def as_text(scop: Scop, deps: Dependences) -> list[str]:
    """Every domain, access and dependence (description and relation), as text."""
    return [str(s.domain) for s in scop] + [str(a.relation) for s in scop for a in s.accesses] + \
        [f"{dep} {dep.relation}" for dep in deps]


def assert_same_sets(memoised: tuple[Scop, Dependences], fresh: tuple[Scop, Dependences]) -> None:
    """The same domains, accesses and dependences (descriptions as text, sets by isl)."""
    (scop, deps), (fresh_scop, fresh_deps) = memoised, fresh
    for s, f in zip(scop, fresh_scop, strict=True):
        assert str(s.domain.get_space()) == str(f.domain.get_space())
        assert isl.Set(str(s.domain), context=f.domain.get_ctx()).is_equal(f.domain)
        for a, b in zip(s.accesses, f.accesses, strict=True):
            assert (a.buffer, a.kind, a.exact) == (b.buffer, b.kind, b.exact)
            assert isl.Map(str(a.relation), context=b.relation.get_ctx()).is_equal(b.relation)
    assert [str(d) for d in deps] == [str(d) for d in fresh_deps]
    for d, f in zip(deps, fresh_deps, strict=True):
        assert isl.Map(str(d.relation), context=f.relation.get_ctx()).is_equal(f.relation)


def test_counts_hits_misses_and_bypasses():
    memo = IslMemo()
    ctx = isl.Context()
    a = isl.UnionMap("[N] -> { S[i] -> A[i] : 0 <= i < N }", context=ctx)
    calls: list[int] = []

    def compute() -> isl.UnionMap:
        calls.append(1)
        return a.reverse()

    first = memo.answer("reverse", ctx, (a,), compute, isl.UnionMap)
    again = memo.answer("reverse", ctx, (str(a),), compute, isl.UnionMap)
    assert len(calls) == 1 and str(again) == str(first) and first.is_equal(a.reverse())
    assert (memo.hits["reverse"], memo.misses["reverse"]) == (1, 1)
    other = isl.Context()
    on_other = memo.answer("reverse", other, (str(a),), compute, isl.UnionMap)
    assert len(calls) == 1 and on_other.get_ctx() == other, "the answer is parsed on the asking context"
    bounded = fresh_context()
    memo.answer("reverse", bounded, (a,), compute, isl.UnionMap)
    memo.answer("reverse", bounded, (a,), compute, isl.UnionMap)
    assert len(calls) == 3 and memo.bypassed["reverse"] == 2, "a context with a limit is never memoised"
    memo.clear()
    assert len(memo) == 0 and not memo.hits and not memo.misses and not memo.bypassed


def test_is_bounded_and_keeps_no_failure():
    memo = IslMemo(capacity=3 * len("{ [0] }"))
    ctx = isl.Context()

    def point(k: int) -> isl.Set:
        return isl.Set(f"{{ [{k}] }}", context=ctx)

    for k in range(10):
        memo.answer("point", ctx, (str(k),), lambda k=k: point(k), isl.Set)
    assert len(memo) == 3
    assert str(memo.answer("point", ctx, ("9",), lambda: point(-1), isl.Set)) == str(point(9))
    assert str(memo.answer("point", ctx, ("0",), lambda: point(-1), isl.Set)) == str(point(-1)), \
        "the oldest answers were evicted"

    def fail() -> isl.Set:
        raise isl.Error("out of operations")

    with pytest.raises(AnalysisLimit, match="isl gave up on a point problem"):
        memo.answer("point", ctx, ("failing",), fail, isl.Set)
    assert ctx.get_max_operations() == 0, "the per-problem bound is lifted after the problem"
    assert str(memo.answer("point", ctx, ("failing",), lambda: point(7), isl.Set)) == str(point(7))
    with pytest.raises(ValueError):
        IslMemo(capacity=0)


def test_each_problem_is_bounded_on_its_own(monkeypatch: pytest.MonkeyPatch) -> None:
    """A problem past PROBLEM_OPERATIONS is refused whatever ran before it on
    the context, and one within it succeeds however much ran before."""
    ctx = isl.Context()
    heavy = "[n] -> { [i, j, k] -> [i2, j2, k2] : 0 <= i, i2 < n and 0 <= j < i and 0 <= j2 < i2 " \
            "and 0 <= k <= j and 0 <= k2 <= j2 and (i + 2*j + 3*k) mod 5 = (i2 + j2 + k2) mod 7 }"

    def work() -> isl.Map:
        relation = isl.Map(heavy, context=ctx)
        return relation.apply_range(relation).apply_range(relation).coalesce()

    monkeypatch.setattr(memo_module, "PROBLEM_OPERATIONS", 2_000)
    with pytest.raises(AnalysisLimit, match="within its bound of 2000 operations"):
        IslMemo().answer("heavy", ctx, ("heavy",), work, isl.Map)
    monkeypatch.setattr(memo_module, "PROBLEM_OPERATIONS", 10**12)
    fresh = IslMemo()
    for k in range(3):   # earlier problems' operations do not count against the next one
        fresh.answer("heavy", ctx, (f"heavy{k}",), work, isl.Map)
    assert ctx.get_max_operations() == 0


@settings(max_examples=examples(30), deadline=None)
@given(programs())
def test_random_programs_memoised_equal_fresh(module):
    """Extraction and dependences through the memo equal a computation without
    it, and a warm memo prints exactly what a cold one does."""
    function = module.entry
    try:
        fresh = analysed(function, fresh_context())
    except NotPolyhedral:
        return
    ISL_MEMO.clear()
    cold = analysed(function, isl.Context())
    assert_same_sets(cold, fresh)
    warm = analysed(function, isl.Context())
    assert as_text(*warm) == as_text(*cold)
    assert sum(ISL_MEMO.hits.values()) > 0


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_kernels_memoised_equal_fresh(name):
    function = kernel(name)
    fresh = analysed(function, fresh_context())
    ISL_MEMO.clear()
    cold = analysed(function, isl.Context())
    warm = analysed(function, isl.Context())
    assert_same_sets(cold, fresh)
    assert as_text(*warm) == as_text(*cold)
    assert ISL_MEMO.hits["last_writers"] == ISL_MEMO.misses["last_writers"] > 0


SIZED = {"matmul": {"N": "96", "M": "80", "K": "128"}, "two_mm": {"N": "64"},
         "jacobi1d": {"N": "256"}, "seidel2d": {"N": "40"}, "trsm": {"N": "64", "M": "48"},
         "lu": {"N": "48"}}
"""Kernels with concrete sizes, so that the cost models choose plans."""


def sized_kernel(name: str) -> polyir.ir.nodes.Module:
    text = KERNELS[name]
    for symbol, size in SIZED[name].items():
        text = text.replace(f"{symbol}]", f"{size}]").replace(f"{symbol},", f"{size},") \
                   .replace(f"to {symbol}", f"to {size}").replace(f"{symbol} -", f"{size} -")
    return parse(text)


@pytest.mark.parametrize("name", sorted(SIZED))
def test_pipeline_output_unchanged_by_memo(name, monkeypatch):
    """The CPU pipeline prints the same IR and remarks with the memo as without."""
    module = sized_kernel(name)
    pipeline = default_pipeline("cpu")
    ISL_MEMO.clear()
    ctx = polyir.context.make_context("cpu")
    with_memo = polyir.transform(module, pipeline, ctx=ctx)
    again = polyir.transform(module, pipeline, target="cpu")  # warm: answers from the memo
    if name in ("matmul", "two_mm"):  # auto-tile's analyses (the others' run under limits)
        assert ISL_MEMO.hits["domain"] > 0
    with monkeypatch.context() as patch:
        patch.setattr(ISL_MEMO, "answer", lambda kind, ctx, inputs, compute, result: compute())
        fresh_ctx = polyir.context.make_context("cpu")
        fresh = polyir.transform(module, pipeline, ctx=fresh_ctx)
    assert str(with_memo) == str(fresh) == str(again)
    assert [str(r) for r in ctx.remarks] == [str(r) for r in fresh_ctx.remarks]
