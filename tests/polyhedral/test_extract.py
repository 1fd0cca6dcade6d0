"""IR -> isl: domains, context, accesses and schedules."""
from __future__ import annotations

import islpy as isl
import pytest

from polyir.polyhedral.bruteforce import instances, trace
from polyir.polyhedral.extract import NotPolyhedral, extract
from tests.polyhedral.helpers import function_of, kernel
from tests.polyhedral.test_dependences import FEATURES


def test_matmul_domains_accesses_schedule():
    scop = extract(kernel("matmul"))
    assert scop.params == ("N", "M", "K")
    assert scop.context.is_equal(isl.Set("[N, M, K] -> { : N >= 0 and M >= 0 and K >= 0 }"))
    s1 = scop.statements["S1"]
    assert s1.loop_vars == ("i", "j", "k")
    assert s1.domain.is_equal(isl.Set(
        "[N, M, K] -> { S1[i, j, k] : 0 <= i < N and 0 <= j < M and 0 <= k < K and N >= 1 and M >= 1 and K >= 1 }"))
    reads = {(a.buffer, a.exact) for a in s1.reads}
    assert reads == {("C", True), ("A", True), ("B", True)}
    (b_read,) = [a for a in s1.reads if a.buffer == "B"]
    assert b_read.relation.is_equal(isl.Map(
        "[N, M, K] -> { S1[i, j, k] -> B[k, j] : 0 <= i < N and 0 <= j < M and 0 <= k < K and M >= 1 and N >= 1 }"
    ).intersect_domain(s1.domain))
    sched = scop.schedule_map
    before = sched.lex_lt_union_map(sched)
    # S0(i, j) runs before S1(i, j, 0), which runs before S0(i, j + 1)
    assert not before.intersect(isl.UnionMap("[N, M, K] -> { S0[1, 2] -> S1[1, 2, 0] }")).is_empty()
    assert not before.intersect(isl.UnionMap("[N, M, K] -> { S1[1, 2, 5] -> S0[1, 3] }")).is_empty()
    assert before.intersect(isl.UnionMap("[N, M, K] -> { S1[1, 2, 0] -> S0[1, 2] }")).is_empty()
    assert isinstance(scop.schedule, isl.Schedule)


@pytest.mark.parametrize("sizes", [{"N": 1, "T": 1}, {"N": 6, "T": 3}, {"N": 7, "T": 0}])
def test_domains_equal_executed_instances(sizes):
    """Steps, max/min bounds, if/else (a union), floordiv and mod: the isl
    domains hold exactly the instances that run."""
    function = function_of(FEATURES)
    scop = extract(function)
    ran = {ev.instance for ev in trace(function, sizes)}
    assert instances(scop.domain, sizes) == ran


def test_gather_is_a_may_access_over_the_dimension():
    scop = extract(function_of(FEATURES))
    (gather,) = [a for a in scop.statements["S3"].writes]
    assert not gather.exact
    image = gather.relation.intersect_params(isl.Set("[N, T] -> { : N = 5 and T = 1 }")).range()
    assert image.is_equal(isl.Set("[N, T] -> { A[x] : 0 <= x < 5 and N = 5 and T = 1 }"))
    assert {a.buffer for a in scop.statements["S3"].reads} == {"idx", "t"}


def test_keyword_names_and_barriers():
    scop = extract(function_of("""\
func f(min: f64[N]) {
  for max = 0 to N {
    S0: min[max] = 1.0:f64
  }
}
"""))
    assert scop.statements["S0"].loop_vars == ("max",)
    assert instances(scop.domain, {"N": 3}) == {("S0", (0,)), ("S0", (1,)), ("S0", (2,))}
    with pytest.raises(NotPolyhedral, match="barrier"):
        extract(function_of("""\
func g(A: f32[N]) {
  for i = 0 to N {
    barrier
  }
}
"""))
