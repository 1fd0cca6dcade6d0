"""``polyir.ir.walk``: the shared traversals, checked against the printer (program
order), the interpreter (values) and ``Aff.evaluate`` (affine arithmetic)."""
from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from polyir.ir.affine import Aff
from polyir.ir.interpreter import interpret
from polyir.ir.nodes import Assign, Buffer, For, Function, Load, Module, Node, Symbol, Var
from polyir.ir.parser import parse, parse_expr
from polyir.ir.printer import print_expr, print_module
from polyir.ir.types import DType
from polyir.ir.walk import (
    aff_to_expr,
    buffer_accesses,
    leaf_nodes,
    loads,
    map_loops,
    statements,
    substitute,
    substitute_expr,
    walk_expr,
    walk_nodes,
)
from polyir.testing import programs, random_arguments, symbol_values
from tests.conftest import examples

GOLDEN = Path(__file__).parent / "golden"

BAND = parse("""
func band(A: f32[N, N], B: f32[N], n: index) {
  local t: f32[] @local
  for i = 0 to N {
    S0: B[i] = 0.0
    for j = 0 to N {
      if (i >= j) {
        S1: t[] = A[i, j]
      } else {
        barrier
        S2: t[] = A[j, i]
      }
      S3: B[i] = B[i] + t[]
    }
  }
  for k = 0 to n {
    S4: B[k] = B[k] * 2.0
  }
}
""")


def _label(node: Node) -> str:
    if isinstance(node, For):
        return f"for {node.var}"
    return getattr(node, "name", type(node).__name__)


def test_walk_nodes_is_pre_order_into_loops_and_both_branches() -> None:
    labels = [_label(n) for n in walk_nodes(BAND.entry.body)]
    assert labels == ["for i", "S0", "for j", "If", "S1", "Barrier", "S2", "S3", "for k", "S4"]


def test_leaf_nodes_and_statements() -> None:
    assert [_label(n) for n in leaf_nodes(BAND.entry.body)] == ["S0", "S1", "Barrier", "S2", "S3", "S4"]
    assert [s.name for s in statements(BAND.entry.body)] == ["S0", "S1", "S2", "S3", "S4"]


def test_walk_expr_is_pre_order_and_enters_gather_subscripts_only() -> None:
    expr = parse_expr("E[cast<i64>(idx[t]), d] + exp(E[pos[t], 0] * -x[])")
    texts = [print_expr(e) for e in walk_expr(expr) if not isinstance(e, Aff)]
    assert texts == [
        "E[cast<i64>(idx[t]), d] + exp(E[pos[t], 0] * -x[])",
        "E[cast<i64>(idx[t]), d]", "cast<i64>(idx[t])", "idx[t]",
        "exp(E[pos[t], 0] * -x[])", "E[pos[t], 0] * -x[]", "E[pos[t], 0]", "pos[t]",
        "-x[]", "x[]",
    ]
    assert [load.buffer for load in loads(expr)] == ["E", "idx", "E", "pos", "x"]
    # an affine subscript is yielded whole, never entered
    assert list(walk_expr(Aff.var("i") + 1)) == [Aff.var("i") + 1]


def test_buffer_accesses_count_gathers_fragments_and_launches() -> None:
    gather = parse("""
func g(out: f32[T], E: f32[V], idx: i64[T]) {
  for t = 0 to T {
    S0: out[idx[t]] = E[t]
  }
}
""")
    assert buffer_accesses(gather.entry.body) == ({"E", "idx"}, {"out"})
    kernel = parse((GOLDEN / "kernel.ir").read_text())
    assert buffer_accesses(kernel.function("mm").body) == ({"A", "B", "fa", "fb", "fc"}, {"fa", "fb", "fc", "C"})
    assert buffer_accesses(kernel.function("host").body) == ({"A", "B", "C"}, {"A", "B", "C"})


def test_map_loops_calls_innermost_first_and_rebuilds_ifs() -> None:
    seen: list[str] = []

    def mark(loop: For) -> For:
        seen.append(loop.var)
        return replace(loop, parallel=loop.var != "j")

    body = map_loops(BAND.entry.body, mark)
    assert seen == ["j", "i", "k"]
    assert [(n.var, n.parallel) for n in walk_nodes(body) if isinstance(n, For)] == \
        [("i", True), ("j", False), ("k", True)]
    assert map_loops(BAND.entry.body, lambda loop: loop) == BAND.entry.body


def test_substitute_shadows_rebound_loop_variables() -> None:
    body = parse("""
func f(A: f32[N]) {
  for i = 0 to N {
    S0: A[i] = cast<f32>(i)
  }
  S1: A[i] = cast<f32>(i + 1)
}
""").entry.body
    loop, outer = substitute(body, {"i": Aff.const(3)})
    assert loop == body[0]           # ``i`` is bound by the loop: untouched inside
    assert isinstance(outer, Assign)
    assert outer.indices == (Aff.const(3),)
    assert set(walk_expr(outer.value)) & {Var("i")} == set()


def test_substitute_expr_reaches_gather_subscripts() -> None:
    expr = parse_expr("E[pos[t + 1], t]")
    out = substitute_expr(expr, {"t": Aff.var("u") * 2})
    assert isinstance(out, Load)
    assert out.indices[1] == Aff.var("u") * 2
    gather = out.indices[0]
    assert not isinstance(gather, Aff) and print_expr(gather) == "pos[2*u + 1]"


# ------------------------------------------------ aff_to_expr against Aff.evaluate
def _evaluate_i64(expr_aff: Aff, env: dict[str, int]) -> int:
    """The interpreter's value of ``aff_to_expr(expr_aff)`` with ``env`` as symbols."""
    names = sorted(env)
    out = Buffer("out", DType.I64, ())
    body = (Assign("S0", "out", (), aff_to_expr(expr_aff)),)
    module = Module((Function("f", (out, *(Symbol(n) for n in names)), body),))
    result = np.zeros((), dtype=np.int64)
    interpret(module, result, *(env[n] for n in names))
    return int(result)


_SMALL = st.integers(-9, 9)


@st.composite
def _affs(draw: st.DrawFn) -> Aff:
    a = draw(_SMALL) * Aff.var("x") + draw(_SMALL) * Aff.var("y") + draw(_SMALL)
    if draw(st.booleans()):
        a = a + draw(_SMALL) * (a // draw(st.integers(1, 5)))
    if draw(st.booleans()):
        a = a + draw(_SMALL) * (a % draw(st.integers(1, 5)))
    return a


@settings(max_examples=examples(30))
@given(_affs(), _SMALL, _SMALL)
def test_aff_to_expr_keeps_floor_semantics(a: Aff, x: int, y: int) -> None:
    env = {"x": x, "y": y}
    assert _evaluate_i64(a, env) == a.evaluate(env)


# ------------------------------------------------ properties on generated programs
_STATEMENT_LINE = re.compile(r"^\s*(\w+): ", re.MULTILINE)
_LOOP_LINE = re.compile(r"^\s*for (\w+) = ", re.MULTILINE)


@settings(max_examples=examples(30))
@given(programs())
def test_walkers_follow_the_printed_program_order(module: Module) -> None:
    text = print_module(module)
    body = module.entry.body
    names = [s.name for s in statements(body)]
    assert names == _STATEMENT_LINE.findall(text)
    assert len(set(names)) == len(names)        # every statement exactly once
    assert [n.var for n in walk_nodes(body) if isinstance(n, For)] == _LOOP_LINE.findall(text)


@settings(max_examples=examples(30))
@given(programs())
def test_substituting_loop_variables_by_themselves_is_the_identity(module: Module) -> None:
    body = module.entry.body
    loop_vars = {n.var: Aff.var(n.var) for n in walk_nodes(body) if isinstance(n, For)}
    assert substitute(body, loop_vars) == body
    assert map_loops(body, lambda loop: loop) == body


@settings(max_examples=examples(20))
@given(programs())
def test_substituting_size_symbols_by_their_values_keeps_results(module: Module) -> None:
    function = module.entry
    sizes = symbol_values(function)
    fixed = replace(function, body=substitute(function.body, {s: Aff.const(v) for s, v in sizes.items()}))
    args = random_arguments(function, 0)
    expected = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    interpret(module, *expected)
    interpret(Module((fixed,)), *args)
    for want, got in zip(expected, args, strict=True):
        np.testing.assert_array_equal(got, want)
