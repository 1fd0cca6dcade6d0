"""Legality queries and their witnesses, checked against the brute-force trace."""
from __future__ import annotations

import islpy as isl
import pytest
from hypothesis import given, settings

from polyir.errors import IllegalTransform
from polyir.ir.nodes import Module
from polyir.polyhedral.bruteforce import trace
from polyir.polyhedral.codegen import apply_schedule
from polyir.polyhedral.dependences import compute_dependences
from polyir.polyhedral.extract import extract
from polyir.polyhedral.legality import (
    Witness,
    as_schedule_map,
    check_fusion,
    check_parallel,
    check_permutable,
    check_permutation,
    check_schedule,
)
from polyir.testing import assert_equivalent, programs
from tests.conftest import examples
from tests.polyhedral.helpers import kernel


def assert_real_witness(function, witness: Witness) -> list[int]:
    """The two instances exist, touch the element as claimed, and run source first.
    Returns the positions of source and sink in the original execution order."""
    params = dict(witness.params)
    events = trace(function, params)
    position = {ev.instance: n for n, ev in enumerate(events)}
    src = (witness.source.statement, witness.source.point)
    snk = (witness.sink.statement, witness.sink.point)
    assert src in position and snk in position, f"{witness}: an instance does not exist"
    assert position[src] < position[snk], f"{witness}: source does not run first"

    def touches(instance, access):
        ev = events[position[instance]]
        accesses = ev.writes if access == "writes" else ev.reads
        return any(b == witness.buffer and e == witness.element for b, e, _ in accesses)

    assert touches(src, witness.source_access) and touches(snk, witness.sink_access), \
        f"{witness}: the instances do not both access {witness.buffer}{list(witness.element)}"
    return [position[src], position[snk]]


def _time(schedule: isl.UnionMap, name: str, point: tuple[int, ...], params) -> tuple[int, ...]:
    fixed = " and ".join(f"{k} = {v}" for k, v in params) or "true"
    dims = ", ".join(f"x{k}" for k in range(len(point)))
    cons = " and ".join([f"x{k} = {v}" for k, v in enumerate(point)] + [fixed])
    names = ", ".join(k for k, _ in params)
    inst = isl.UnionSet(f"[{names}] -> {{ {name}[{dims}] : {cons} }}")
    image = inst.apply(schedule)
    found: list[tuple[int, ...]] = []
    image.foreach_point(lambda p: found.append(tuple(
        int(p.get_coordinate_val(isl.dim_type.set, k).to_python())
        for k in range(p.get_space().dim(isl.dim_type.set)))))
    assert len(found) == 1
    return found[0]


@settings(max_examples=examples(20))
@given(programs())
def test_parallel_witnesses_are_real(module):
    function = module.entry
    deps = compute_dependences(function)
    for loop in deps.scop.loops.values():
        result = check_parallel(deps, loop.id)
        if result.legal:
            continue
        w = result.witness
        assert_real_witness(function, w)
        # same values of the enclosing loops, an earlier iteration of this loop
        depth = loop.depth
        assert w.source.point[:depth - 1] == w.sink.point[:depth - 1]
        assert w.source.point[depth - 1] < w.sink.point[depth - 1]
        assert f"running loop {loop.var} in parallel" in str(w)


@settings(max_examples=examples(20))
@given(programs())
def test_band_permutations_legal_or_witnessed(module):
    function = module.entry
    scop = extract(function)
    deps = compute_dependences(scop)
    for loop in scop.loops.values():
        inner = [x for x in scop.loops.values() if x.parent == loop.id]
        if len(inner) != 1 or {s.name for s in scop.statements_in(loop.id)} != \
                {s.name for s in scop.statements_in(inner[0].id)}:
            continue
        band = [loop.id, inner[0].id]
        result = check_permutation(deps, band, [1, 0])
        if result.legal:
            vectors = scop.schedule_vectors()
            for stmt in scop.statements_in(loop.id):
                vec = vectors[stmt.name]
                d = loop.depth
                vec[2 * d - 1], vec[2 * d + 1] = vec[2 * d + 1], vec[2 * d - 1]
            swapped = apply_schedule(function, scop.schedule_from_vectors(vectors))
            assert_equivalent(module, Module((swapped,)), trials=1)
        else:
            assert_real_witness(function, result.witness)
        permutable = check_permutable(deps, band)
        if not permutable.legal:
            assert_real_witness(function, permutable.witness)


def test_schedule_witness_names_the_reversal():
    function = kernel("seidel2d")
    bad = "[N, T] -> { S0[t, i, j] -> [t, -i, j] }"
    result = check_schedule(function, bad)
    assert not result.legal
    w = result.witness
    assert_real_witness(function, w)
    sched = as_schedule_map(extract(function), bad)
    params = tuple((k, v) for k, v in w.params)
    assert _time(sched, "S0", w.sink.point, params) < _time(sched, "S0", w.source.point, params)
    text = str(w)
    assert text.startswith(f"{w.source} writes A[") or text.startswith(f"{w.source} reads A[")
    assert f"the new schedule runs {w.sink} first" in text
    with pytest.raises(IllegalTransform) as caught:
        apply_schedule(function, bad)
    assert caught.value.witness is not None and caught.value.dependence is not None
    assert check_schedule(function, "[N, T] -> { S0[t, i, j] -> [t, i, j] }").legal


def test_matmul_queries():
    function = kernel("matmul")
    assert check_parallel(function, "i").legal and check_parallel(function, "j").legal
    k = check_parallel(function, "k")
    assert not k.legal and k.dependence.buffer == "C"
    assert check_parallel(function, "k", accept_reassociation=True).legal
    assert check_permutable(function, ["i", "j"]).legal
    assert check_permutation(function, ["i", "j"], [1, 0]).legal


def test_fusion_two_mm():
    function = kernel("two_mm")
    assert check_fusion(function, 0, 1, 1).legal
    result = check_fusion(function, 0, 1, 2)
    assert not result.legal
    assert result.dependence.buffer == "local_t"
    positions = assert_real_witness(function, result.witness)
    assert positions[0] < positions[1]
    w = result.witness
    # fused at depth 2 the sink runs at (i, j) before the source's (i, j')
    assert w.sink.point[:2] < w.source.point[:2]
    assert "fusing nests 0 and 1 at depth 2" in str(w)


def test_lu_and_seidel_bands():
    lu = kernel("lu")
    assert not check_parallel(lu, "k").legal
    seidel = kernel("seidel2d")
    result = check_permutable(seidel, ["t", "i", "j"])
    assert not result.legal
    assert_real_witness(seidel, result.witness)
    with pytest.raises(IllegalTransform):
        result.require()
