"""isl's dependences against the brute-force oracle, and their descriptions."""
from __future__ import annotations

import pytest
from hypothesis import given, settings

from polyir.polyhedral.bruteforce import brute_force_dependences, instance_pairs
from polyir.polyhedral.dependences import ALL_KINDS, compute_dependences, raw_relations
from polyir.polyhedral.extract import extract
from polyir.testing import programs, symbol_values
from tests.conftest import examples
from tests.polyhedral.helpers import function_of, kernel
from tests.polyhedral.kernels import KERNELS

FEATURES = """\
func features(A: f64[N], B: f64[N, N], idx: i64[N], T: index) {
  local t: f64[]
  for i = 0 to N step 2 {
    for j = max(0, i - 1) to min(N, i + 3) {
      if (i + j < N, j >= 1) {
        S0: A[j] = A[(i + j) // 2] + B[i, j]
      } else {
        S1: B[j, i] = A[j % 3] * 2.0:f64
      }
      S2: t[] = A[cast<i64>(idx[j])] + t[]
      S3: A[cast<i64>(idx[i])] = t[]
    }
  }
  for k = 0 to T {
    S4: B[k % N, 0] = B[0, k % N] + 1.0:f64
  }
}
"""


def assert_matches_oracle(function, params: dict[str, int]) -> None:
    relations = raw_relations(extract(function))
    oracle = brute_force_dependences(function, params)
    for kind in ALL_KINDS:
        found = set()
        for umap in relations[kind].values():
            found |= instance_pairs(umap, params)
        assert found == oracle[kind], (
            f"{kind} dependences differ at {params}: isl only {sorted(found - oracle[kind])[:4]}, "
            f"brute force only {sorted(oracle[kind] - found)[:4]}")


@settings(max_examples=examples(30))
@given(programs())
def test_random_programs_match_brute_force(module):
    function = module.entry
    for variant in range(2):
        assert_matches_oracle(function, symbol_values(function, None, variant))


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_kernels_match_brute_force(name):
    function = kernel(name)
    for size in (1, 2, 4):
        assert_matches_oracle(function, {s: size + k for k, s in enumerate(function.symbols)})


@pytest.mark.parametrize("sizes", [{"N": 1, "T": 1}, {"N": 5, "T": 3}, {"N": 6, "T": 7}])
def test_gathers_ifs_steps_floordiv_match_brute_force(sizes):
    assert_matches_oracle(function_of(FEATURES), sizes)


def test_matmul_dependences_and_levels():
    deps = compute_dependences(kernel("matmul"))
    described = {(d.kind, d.source, d.sink): d for d in deps.items}
    flow = described[("flow", "S1", "S1")]
    assert flow.distance == (0, 0, 1)
    assert flow.carried == (3,)
    assert [deps.scop.loops[x].var for x in flow.carried_loops()] == ["k"]
    init = described[("flow", "S0", "S1")]
    assert init.carried == (0,) and init.distance == (0, 0)
    # memory-based RAW S1 -> S1 relates every earlier k: not uniform
    raw = described[("raw", "S1", "S1")]
    assert raw.distance is None and raw.direction == ("=", "=", "<")
    assert raw.reduction and not init.reduction
    assert deps.scop.statements["S1"].reduction == ("C", "+")
    assert set(deps.carrying_loops()) == {deps.scop.loop("k").id}
    assert deps.carrying_loops(accept_reassociation=True) == {}


def test_seidel_direction_vectors():
    deps = compute_dependences(kernel("seidel2d"))
    (flow,) = deps.of_kind("flow")
    # reads of A[i-1, j], A[i, j-1] (this sweep) and A[i+1, j], A[i, j+1], A[i, j]
    # (previous sweep): t never decreases, i and j go both ways across sweeps
    assert flow.direction == ("<=", "*", "*")
    assert flow.carried == (1, 2, 3)
    assert flow.distance is None


def test_graphs():
    deps = compute_dependences(kernel("two_mm"))
    graph = deps.graph()
    assert set(graph.nodes) == {"S0", "S1", "S2", "S3"}
    edges = {(a, b, data["kind"], data["buffer"]) for a, b, data in graph.edges(data=True)}
    assert ("S1", "S3", "flow", "local_t") in edges
    assert ("S1", "S1", "raw", "local_t") in edges
    k_carried = [data["carried"] for a, b, data in graph.edges(data=True)
                 if (a, b, data["kind"]) == ("S1", "S1", "flow")]
    assert k_carried == [("k",)]
    nests = deps.nest_graph()
    assert set(nests.nodes) == {0, 1}
    assert {(a, b, d["kind"], d["buffer"]) for a, b, d in nests.edges(data=True)} == {
        (0, 1, "raw", "local_t"), (0, 1, "flow", "local_t")}


def test_reduction_recognition():
    text = """\
func r(X: f64[N], Y: f64[N], s: f64[]) {
  for i = 0 to N {
    S0: s[] = max(s[], X[i])
    S1: Y[i] = Y[i] * X[i]
    S2: X[i] = X[i] - Y[i]
    S3: s[] = s[] + s[]
    S4: Y[0] = X[i] + Y[0]
  }
}
"""
    scop = extract(function_of(text))
    kinds = {name: s.reduction for name, s in scop.statements.items()}
    assert kinds == {"S0": ("s", "max"), "S1": ("Y", "*"), "S2": None, "S3": None,
                     "S4": ("Y", "+")}


@settings(max_examples=examples(30))
@given(programs())
def test_levels_and_directions_follow_their_definitions(module):
    """``describe`` reads carried levels, directions and distances off the distance set;
    each must agree with its definition on the instance pairs (``level_relation`` and
    sign probes of the distances)."""
    from polyir.polyhedral.dependences import common_deltas, level_relation
    deps = compute_dependences(module)
    scop = deps.scop
    for dep in deps:
        carried = tuple(level for level in range(len(dep.common) + 1)
                        if not dep.relation.intersect(
                            level_relation(scop, dep.source, dep.sink, level)).is_empty())
        assert dep.carried == carried, dep
        deltas = common_deltas(dep.relation, len(dep.common))
        names = ", ".join(f"d{m}" for m in range(len(dep.common)))
        for k, direction in enumerate(dep.direction):
            signs = {sign for sign, op in (("+", ">"), ("0", "="), ("-", "<"))
                     if not deltas.intersect(scop.isl_set(
                         f"{scop.param_space} -> {{ [{names}] : d{k} {op} 0 }}")).is_empty()}
            assert direction == {frozenset("+"): "<", frozenset("0"): "=", frozenset("-"): ">",
                                 frozenset("+0"): "<=", frozenset("0-"): ">=",
                                 frozenset("+-"): "!=", frozenset("+0-"): "*",
                                 frozenset(): "."}[frozenset(signs)], dep
        if dep.distance is not None:
            point = scop.isl_set(f"{scop.param_space} -> {{ [{names}] : " + " and ".join(
                f"d{k} = {v}" for k, v in enumerate(dep.distance)) + " }")
            assert deltas.is_subset(point) and not deltas.is_empty(), dep
