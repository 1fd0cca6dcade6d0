"""Footprints and their bounding boxes against the brute-force trace."""
from __future__ import annotations

import islpy as isl
from hypothesis import given, settings

from polyir.polyhedral.bruteforce import trace
from polyir.polyhedral.extract import extract
from polyir.polyhedral.footprint import footprints, loop_footprints
from polyir.testing import programs, symbol_values
from tests.conftest import examples
from tests.polyhedral.helpers import function_of, kernel


def test_matmul_boxes():
    function = kernel("matmul")
    whole = footprints(function, 0, 0)
    assert str(whole["A"]) == "A[0..N - 1, 0..K - 1]"
    row = footprints(function, 0, 1)
    assert str(row["A"]) == "A[i..i, 0..K - 1]"
    assert str(row["B"]) == "B[0..K - 1, 0..M - 1]"
    assert str(row["C"]) == "C[i..i, 0..M - 1]"
    point = footprints(function, 0, 2)
    assert str(point["B"]) == "B[0..K - 1, j..j]"
    assert row["A"].outer == ("i",)


def test_stencil_boxes():
    function = kernel("jacobi1d")
    sweep = footprints(function, 0, 1)
    assert str(sweep["A"]) == "A[0..N - 1]" and str(sweep["B"]) == "B[1..N - 2]"
    point = loop_footprints(function, extract(function).loops[1].id)
    assert str(point["A"]) == "A[i - 1..i + 1]" and str(point["B"]) == "B[i..i]"
    assert point["A"].outer == ("t", "i")


def test_clamped_window_uses_max_min():
    function = function_of("""\
func window(A: f64[N], B: f64[N]) {
  for i = 0 to N {
    for j = max(0, i - 1) to min(N, i + 2) {
      S0: B[i] = B[i] + A[j]
    }
  }
}
""")
    (lower, upper), = footprints(function, 0, 1)["A"].box
    assert lower.kind == "max" and set(map(str, lower.exprs)) == {"0", "i - 1"}
    assert upper.kind == "min" and set(map(str, upper.exprs)) == {"N - 1", "i + 1"}
    assert lower.exact and upper.exact


def _brute_footprints(function, params, names, depth):
    """(outer values) -> buffer -> elements touched by statements ``names``."""
    found: dict = {}
    for ev in trace(function, params):
        if ev.instance[0] not in names:
            continue
        slot = found.setdefault(ev.instance[1][:depth], {})
        for buffer, element, _ in ev.reads + ev.writes:
            slot.setdefault(buffer, set()).add(element)
    return found


@settings(max_examples=examples(20))
@given(programs())
def test_footprints_match_brute_force(module):
    function = module.entry
    scop = extract(function)
    for variant in range(2):
        params = symbol_values(function, None, variant)
        for loop in scop.loops.values():
            if loop.depth > 2:
                continue
            result = loop_footprints(scop, loop.id)
            names = {s.name for s in scop.statements_in(loop.id)}
            outer_vars = scop.statements_in(loop.id)[0].loop_vars[:loop.depth] if names else ()
            for outer, per_buffer in _brute_footprints(function, params, names, loop.depth).items():
                env = dict(params, **dict(zip(outer_vars, outer, strict=False)))
                for buffer, elements in per_buffer.items():
                    fp = result[buffer]
                    assert _image(fp.relation, outer, params) == elements, f"{buffer} at {outer}"
                    for k, (lower, upper) in enumerate(fp.box):
                        values = [e[k] for e in elements]
                        lo, hi = lower.evaluate(env), upper.evaluate(env)
                        assert lo <= min(values) and max(values) <= hi, f"{buffer} dim {k} at {env}"
                        if lower.exact:
                            assert lo == min(values)
                        if upper.exact:
                            assert hi == max(values)


def _image(relation: isl.Map, outer, params) -> set:
    names = [relation.get_dim_name(isl.dim_type.param, k) for k in range(relation.dim(isl.dim_type.param))]
    fixed = " and ".join(f"{n} = {params[n]}" for n in names) or "true"
    dims = ", ".join(f"x{k}" for k in range(len(outer)))
    cons = " and ".join([f"x{k} = {v}" for k, v in enumerate(outer)] + [fixed])
    point = isl.Set(f"[{', '.join(names)}] -> {{ [{dims}] : {cons} }}")
    image = relation.intersect_domain(point).range()
    found: set = set()
    n = image.dim(isl.dim_type.set)
    image.foreach_point(lambda p: found.add(tuple(
        int(p.get_coordinate_val(isl.dim_type.set, k).to_python()) for k in range(n))))
    return found
