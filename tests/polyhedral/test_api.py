"""The public analysis API (``polyir.polyhedral``): names, inputs, iteration,
short reprs and readable text, checked against the brute-force oracle."""
from __future__ import annotations

import importlib.util

import pytest

import polyir
import polyir.polyhedral as api
from polyir.polyhedral import (
    Dependences,
    Footprints,
    Legality,
    Scop,
    accesses,
    apply_schedule,
    check_fusion,
    check_parallel,
    check_permutable,
    check_permutation,
    check_rewrite,
    check_schedule,
    dependences,
    domains,
    footprints,
    instances,
    loop_footprints,
    schedules,
    scop,
)
from polyir.polyhedral.bruteforce import brute_force_dependences, trace
from polyir.polyhedral.report import REPR_LIMIT
from polyir.testing import assert_equivalent
from polyir.testing.corpus import CORPUS, corpus_kernel

MATMUL = polyir.parse("""
func matmul(C: f32[M, N], A: f32[M, K], B: f32[K, N]) {
  for i = 0 to M {
    for j = 0 to N {
      S0: C[i, j] = 0.0
      for k = 0 to K {
        S1: C[i, j] = C[i, j] + A[i, k] * B[k, j]
      }
    }
  }
}""")

TWO_NESTS = polyir.parse("""
func two(A: f32[N], B: f32[N], C: f32[N]) {
  for i = 0 to N {
    S0: B[i] = A[i] * 2.0
  }
  for i_1 = 1 to N {
    S1: C[i_1] = B[i_1 - 1] + E[i_1]
  }
}""".replace(" + E[i_1]", ""))


def test_every_public_name_is_there_and_documented() -> None:
    for name in api.__all__:
        value = getattr(api, name)
        if callable(value):
            assert (value.__doc__ or "").strip(), name


def test_the_slices_hook_names_the_fusion_work() -> None:
    if importlib.util.find_spec("polyir.polyhedral.slices") is not None:
        assert api.slices.__name__ == "polyir.polyhedral.slices"
    else:
        with pytest.raises(AttributeError, match="issue 12"):
            _ = api.slices
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        _ = api.nothing


def test_modules_functions_and_scops_are_accepted() -> None:
    view = scop(MATMUL)
    assert scop(view) is view and scop(MATMUL.entry).function is MATMUL.entry
    assert len(dependences(MATMUL)) == len(dependences(MATMUL.entry)) == len(dependences(view)) == 7
    assert not check_parallel(MATMUL, "k") and check_parallel(MATMUL.entry, "i")
    with pytest.raises(TypeError, match="not str"):
        scop("func f() {}")


def test_the_scop_prints_domains_accesses_and_schedules() -> None:
    view = scop(MATMUL)
    assert isinstance(view, Scop) and [s.name for s in view] == ["S0", "S1"] and len(view) == 2
    text = str(view)
    assert "S1[i, j, k] : 0 <= i < M and 0 <= j < N and 0 <= k < K" in text
    assert "reads A[i, k]" in text and "reads B[k, j]" in text
    assert "schedule [0, i, 0, j, 1, k, 0]  (reduction on C with +)" in text
    assert repr(view) == "<Scop of matmul: 2 statements, 3 loops, symbols M, N, K>"
    assert "| `S1[i, j, k]` |" in view._repr_markdown_()
    assert str(accesses(MATMUL)).splitlines() == [
        "S0 writes C[i, j]", "S1 writes C[i, j]", "S1 reads C[i, j]", "S1 reads A[i, k]", "S1 reads B[k, j]"]
    assert [(a.statement, a.kind) for a in accesses(MATMUL, buffer="A")] == [("S1", "read")]
    assert repr(accesses(MATMUL)) == "<Accesses of matmul: 2 writes, 3 reads>"
    assert set(domains(MATMUL)) == {"S0", "S1"}
    assert str(schedules(MATMUL)["S0"]).startswith("[M, N, K] -> { S0[i, j] -> [0, i, 0, j, 0]")


def test_gathers_print_as_may_accesses() -> None:
    gather = polyir.parse("""
func g(E: f32[V, D], idx: i64[N], out: f32[N, D]) {
  for i = 0 to N {
    for j = 0 to D {
      S0: out[i, j] = E[idx[i], j]
    }
  }
}""")
    lines = str(accesses(gather)).splitlines()
    assert "S0 reads idx[i]" in lines and "S0 writes out[i, j]" in lines
    (may,) = [line for line in lines if "may read" in line]
    assert may.startswith("S0 may read S0[i, j] -> E[") and "j" in may


def _corpus_ir(name: str) -> polyir.ir.nodes.Module:
    import numpy as np
    kernel = corpus_kernel(name)
    return polyir.kernel(kernel.func).ir(*kernel.make_args(kernel.sizes, np.random.default_rng(0)))


@pytest.mark.parametrize("kernel", ["gemm", "jacobi-1d", "trisolv", "seidel-2d"])
def test_dependence_pairs_and_instances_match_the_brute_force_oracle(kernel) -> None:
    module = _corpus_ir(kernel)
    function = module.entry
    sizes = {s: 3 for s in function.symbols}
    oracle = brute_force_dependences(function, sizes)
    deps = dependences(module)
    for kind in ("raw", "war", "waw", "flow"):
        assert deps.filter(kind).pairs(sizes) == oracle[kind], kind
    assert [(i.statement, i.point) for i in instances(module, sizes)] == [e.instance for e in trace(function, sizes)]
    with pytest.raises(KeyError, match="no value for symbol"):
        instances(module, {})


def test_dependences_iterate_filter_and_print_briefly() -> None:
    deps = dependences(MATMUL)
    assert isinstance(deps, Dependences) and list(deps) == list(deps.items) and deps[0] is deps.items[0]
    assert len(deps.filter("flow")) == 2 and len(deps.filter("memory")) == 5
    assert len(deps.filter(["raw", "war"])) == 3 and len(deps.filter(buffer="A")) == 0
    assert [d.kind for d in deps.filter(carried_by="k")] == ["raw", "war", "waw", "flow"]
    assert len(deps.filter(carried_by="k", accept_reassociation=True)) == 1
    assert len(deps.filter(statement="S0")) == 3 and len(dependences(MATMUL, "flow")) == 2
    with pytest.raises(ValueError, match="unknown dependence kind 'rar'"):
        deps.filter("rar")
    assert repr(deps) == "<Dependences of matmul: 7 (raw=2, war=1, waw=2, flow=2)>"
    assert repr(deps[0]) == "<Dependence RAW S0 -> S1 on C: carried at levels [0] distance (0, 0)>"
    table = deps._repr_markdown_()
    assert "| FLOW | S1 → S1 | C | k | distance (0, 0, 1) |  |" in table
    assert "| RAW | S0 → S1 | C | loop-independent | distance (0, 0) |  |" in table


def test_legality_answers_iterate_their_violations_and_witnesses_unpack() -> None:
    answer = check_parallel(MATMUL, "k")
    assert isinstance(answer, Legality) and not answer
    assert [d.kind for d in answer] == ["raw", "war", "waw"]
    source, sink = answer.witness
    assert (str(source), str(sink)) == ("S1(i=0, j=0, k=0)", "S1(i=0, j=0, k=1)")
    assert repr(answer.witness) == "<Witness S1(i=0, j=0, k=0) -> S1(i=0, j=0, k=1) on C[0, 0]>"
    assert repr(source) == "<Instance S1(i=0, j=0, k=0)>"
    assert repr(answer).startswith("<Legality: illegal: loop k carries RAW S1 -> S1 on C")
    markdown = answer._repr_markdown_()
    assert markdown.startswith("**illegal**") and "`S1(i=0, j=0, k=0)` writes `C[0, 0]`" in markdown
    legal = check_parallel(MATMUL, "i")
    assert repr(legal) == "<Legality: legal>" and list(legal) == [] and legal._repr_markdown_() == "**legal**"
    assert check_permutable(MATMUL, ["i", "j"])
    assert check_permutation(polyir.transform(MATMUL, "distribute"), ["i_1", "j_2", "k_2"], [2, 0, 1])
    assert check_fusion(TWO_NESTS, 0, 1, 1)
    assert not check_schedule(MATMUL, "[M, N, K] -> { S0[i, j] -> [i, j, 1, 0]; S1[i, j, k] -> [i, j, 0, k] }")


def test_apply_schedule_returns_ir_of_the_same_kind_and_refuses_illegal_orders() -> None:
    fused = apply_schedule(TWO_NESTS, "[N] -> { S0[i] -> [i, 0]; S1[i] -> [i, 1] }")
    assert isinstance(fused, polyir.ir.nodes.Module) and len(fused.entry.body) == 1
    assert_equivalent(TWO_NESTS, fused)
    assert check_rewrite(TWO_NESTS, fused)
    assert isinstance(apply_schedule(TWO_NESTS.entry, "[N] -> { S0[i] -> [i, 0]; S1[i] -> [i, 1] }"),
                      polyir.ir.nodes.Function)
    with pytest.raises(polyir.IllegalTransform, match="witness: S0"):
        apply_schedule(TWO_NESTS, "[N] -> { S0[i] -> [i, 1]; S1[i] -> [i - 2, 0] }")


def test_footprints_are_a_dict_with_a_table() -> None:
    found = footprints(MATMUL, 0, 1)
    assert isinstance(found, Footprints) and isinstance(found, dict) and list(found) == ["C", "A", "B"]
    assert str(found).splitlines() == [
        "Footprints below loops (i): C, A, B",
        "  C[i..i, 0..N - 1]  (reads and writes; 1 x N elements)",
        "  A[i..i, 0..K - 1]  (reads; 1 x K elements)",
        "  B[0..K - 1, 0..N - 1]  (reads; K x N elements)"]
    assert repr(found) == "<Footprints below loops (i): C, A, B>"
    assert repr(found["A"]) == "<Footprint A[i..i, 0..K - 1]>"
    assert "| `B` | reads | `B[0..K - 1, 0..N - 1]` | `K x N` | yes |" in found._repr_markdown_()
    assert str(loop_footprints(MATMUL, "k")["A"]) == "A[i..i, k..k]"


@pytest.mark.parametrize("name", [k.name for k in CORPUS])
def test_reprs_stay_short_on_the_corpus(name) -> None:
    view = scop(_corpus_ir(name))
    deps = dependences(view)
    records = [view, deps, accesses(view), footprints(view, 0, 0), *list(deps)[:3], *list(view)[:2],
               *list(accesses(view))[:2]]
    for loop in list(view.loops.values())[:3]:
        answer = check_parallel(deps, loop.var)
        records.append(answer)
        if answer.witness is not None:
            records += [answer.witness, answer.witness.source]
    for record in records:
        assert len(repr(record)) <= REPR_LIMIT, repr(record)
        assert "\n" not in repr(record)
    for record in (view, deps, footprints(view, 0, 0)):
        assert len(record._repr_markdown_()) < 20_000


def test_pairs_work_on_a_compilation_s_own_isl_context() -> None:
    from polyir.polyhedral.analysis import Analyses
    deps = Analyses().dependences(MATMUL.entry)
    assert deps.scop.ctx is not __import__("islpy").DEFAULT_CONTEXT
    sizes = {"M": 2, "N": 2, "K": 3}
    assert deps.filter("flow").pairs(sizes) == brute_force_dependences(MATMUL.entry, sizes)["flow"]
