"""The per-pair execution order (``polyir.polyhedral.order``) and the last writers
built on it (``read_sources``, ``final_writers``) against the brute-force trace."""
from __future__ import annotations

from hypothesis import given, settings

from polyir.polyhedral.bruteforce import instance_pairs, trace
from polyir.polyhedral.equivalence import final_writers, read_sources
from polyir.polyhedral.extract import extract
from polyir.polyhedral.order import precedence, precedence_disjuncts
from polyir.testing import programs, symbol_values
from tests.conftest import examples
from tests.polyhedral.helpers import function_of

TWO_NESTS = """\
func f(A: f64[N], B: f64[N]) {
  for i = 0 to N {
    S0: A[i] = 0.0:f64
    for j = 0 to N {
      S1: A[i] = A[i] + B[j]
    }
  }
  for k = 0 to N step 2 {
    S2: B[k] = A[k]
  }
}
"""


def test_disjuncts_stop_at_the_first_differing_position():
    # same loop, then S0 (position 0) before the inner loop (position 1): i <= i'
    assert precedence_disjuncts([0, "i", 0], [0, "i2", 1, "j", 0]) == [
        [("i", "<", "i2")], [("i", "=", "i2")]]
    # different top-level nests: decided by the first position, no loop compared
    assert precedence_disjuncts([0, "i", 1, "j", 0], [1, "k", 0]) == [[]]
    assert precedence_disjuncts([1, "k", 0], [0, "i", 0]) == []
    # one statement against itself: strictly earlier on some loop
    assert precedence_disjuncts([0, "i", 1, "j", 0], [0, "i2", 1, "j2", 0]) == [
        [("i", "<", "i2")], [("i", "=", "i2"), ("j", "<", "j2")]]


def test_precedence_of_the_example_pairs():
    scop = extract(function_of(TWO_NESTS))
    params = {"N": 3}
    s1_s0 = instance_pairs(precedence(scop, "S1", "S0").intersect_domain(scop.statements["S1"].domain)
                           .intersect_range(scop.statements["S0"].domain), params)
    assert s1_s0 == {(("S1", (i, j)), ("S0", (i2,))) for i in range(3) for j in range(3)
                     for i2 in range(3) if i < i2}
    assert precedence(scop, "S2", "S1").is_empty()
    assert precedence(scop, "S0", "S2").is_equal(precedence(scop, "S0", "S2").universe(
        precedence(scop, "S0", "S2").get_space()))


def expected_sources(function, params):
    """buffer -> (reader, writer) instance pairs of the last exact write before each read,
    and buffer -> (element, last writer) pairs, from the trace."""
    sources: dict[str, set] = {}
    finals: dict[str, dict] = {}
    for event in trace(function, params):
        for buffer, element, _ in event.reads:
            writer = finals.get(buffer, {}).get(element)
            sources.setdefault(buffer, set())
            if writer is not None:
                sources[buffer].add((event.instance, writer))
        for buffer, element, _ in event.writes:
            finals.setdefault(buffer, {})[element] = event.instance
    return sources, finals


def check_against_trace(function, params):
    scop = extract(function)
    if any(not a.exact for s in scop for a in s.accesses if a.kind == "write"):
        return   # a gather write may or may not kill: not what these functions model
    sources, finals = expected_sources(function, params)
    for buffer in {a.buffer for s in scop for a in s.accesses}:
        found, _ = read_sources(scop, buffer)
        assert instance_pairs(found.domain_factor_domain(), params) == sources.get(buffer, set()), buffer
        last = final_writers(scop, buffer)
        wanted = {((buffer, element), writer) for element, writer in finals.get(buffer, {}).items()}
        assert instance_pairs(last, params, {buffer: buffer}) == wanted, buffer


def test_last_writers_of_the_example_match_the_trace():
    function = function_of(TWO_NESTS)
    for n in (1, 2, 5):
        check_against_trace(function, {"N": n})


@settings(max_examples=examples(40))
@given(programs())
def test_last_writers_of_random_programs_match_the_trace(module):
    function = module.entry
    for variant in range(2):
        check_against_trace(function, symbol_values(function, None, variant))
