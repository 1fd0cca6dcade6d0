"""``programs()``: rich dependences with bounded values, perfect nests, correct parallel marks."""
from __future__ import annotations

import copy

import numpy as np
import pytest
from hypothesis import given, settings

from polyir.ir.interpreter import interpret
from polyir.ir.nodes import Assign, Buffer, Call, For, If, Module, Node
from polyir.ir.types import DType
from polyir.polyhedral.bruteforce import trace
from polyir.testing import programs, random_arguments, symbol_values
from polyir.testing._marks import carries_no_dependence
from tests.conftest import examples
from tests.testing.program_features import program_features
from tests.testing.test_testing_strategies import _depth, _sample


def _loops(nodes: tuple[Node, ...], depth: int = 0):
    """``(loop, depth)`` for every loop, outermost first."""
    for node in nodes:
        if isinstance(node, For):
            yield node, depth
            yield from _loops(node.body, depth + 1)
        elif isinstance(node, If):
            yield from _loops(node.then_body + node.else_body, depth)


def _statement_names(nodes: tuple[Node, ...]) -> set[str]:
    names: set[str] = set()
    for node in nodes:
        if isinstance(node, Assign):
            names.add(node.name)
        elif isinstance(node, For):
            names |= _statement_names(node.body)
        elif isinstance(node, If):
            names |= _statement_names(node.then_body + node.else_body)
    return names


def _carried_conflict(module: Module, loop: For, depth: int, sizes: dict[str, int]) -> str | None:
    """A pair of accesses to one element, one a write, from different iterations
    of one execution of ``loop`` (brute force over the trace), or None."""
    inside = _statement_names(loop.body)
    touched: dict[tuple, list[tuple[tuple[int, ...], bool, str]]] = {}
    for event in trace(module.entry, sizes):
        name, values = event.instance
        if name not in inside:
            continue
        for buffer, element, _ in event.reads:
            touched.setdefault((values[:depth], buffer, element), []).append((values, False, name))
        for buffer, element, _ in event.writes:
            touched.setdefault((values[:depth], buffer, element), []).append((values, True, name))
    for (_, buffer, element), accesses in touched.items():
        for values_a, write_a, name_a in accesses:
            for values_b, write_b, name_b in accesses:
                if (write_a or write_b) and values_a[depth] != values_b[depth]:
                    return (f"{name_a}{values_a} and {name_b}{values_b} both touch {buffer}{list(element)} "
                            f"in loop {loop.var}")
    return None


@settings(max_examples=examples(40, 600))
@given(programs(mark_parallel=True, max_depth=3, max_statements=6))
def test_parallel_marks_are_correct_by_brute_force(module: Module) -> None:
    for sizes in (symbol_values(module), symbol_values(module, 2)):
        for loop, depth in _loops(module.entry.body):
            if loop.parallel:
                conflict = _carried_conflict(module, loop, depth, sizes)
                assert conflict is None, f"{conflict} at sizes {sizes}, but it is marked parallel:\n{module}"


@settings(max_examples=examples(40, 600))
@given(programs(mark_parallel=True))
def test_parallel_marks_make_every_order_agree(module: Module) -> None:
    args = random_arguments(module, 3)
    results = []
    for order in ("forward", "reverse", "shuffle"):
        copied = copy.deepcopy(args)
        interpret(module, *copied, parallel_order=order, seed=5)
        results.append(copied)
    for other in results[1:]:
        for param, a, b in zip(module.entry.params, results[0], other, strict=True):
            if isinstance(param, Buffer):
                assert np.array_equal(a, b, equal_nan=True), f"{param.name} depends on the order:\n{module}"


def test_parallel_marks_appear_only_when_asked() -> None:
    marked = _sample(programs(mark_parallel=True), 150)
    assert sum("parallel_mark" in program_features(m) for m in marked) >= 15
    assert not any("parallel" in str(m) for m in _sample(programs(), 150))


def test_mark_analysis_refuses_carried_dependences() -> None:
    import polyir

    module = polyir.parse("""
func f(A: f32[N, M], B: f32[N, M], C: f32[N]) {
  local t0: f32[]
  for i = 1 to N {
    for j = 0 to M {
      S0: A[i, j] = 0.5 * A[i - 1, j] + 0.5 * B[i, j]
      S1: t0[] = B[i, j]
      S2: C[i] = C[i] + t0[]
    }
  }
  for i_1 = 0 to N {
    for j_1 = 0 to M {
      S3: B[i_1, j_1] = B[i_1, j_1] * A[i_1, abs(cast<i64>(B[i_1, 0] * 4.0)) % M]
    }
  }
}
""")
    first, second = module.entry.body
    assert not carries_no_dependence(first)          # A[i - 1, j] is read one i later
    assert not carries_no_dependence(first.body[0])  # t0 and C[i] are shared by every j
    assert carries_no_dependence(second)             # each i touches row i of B only
    assert not carries_no_dependence(second.body[0])  # B[i, 0] is read by every j, written by j = 0


@pytest.mark.parametrize("sizes", [1, None, 12])
@settings(max_examples=examples(30, 600))
@given(module=programs(bounded=True, max_statements=7))
def test_bounded_programs_stay_in_the_unit_range_for_any_size(module: Module, sizes: object) -> None:
    args = random_arguments(module, np.random.default_rng(2), sizes)  # type: ignore[arg-type]
    interpret(module, *args)
    for param, value in zip(module.entry.params, args, strict=True):
        if isinstance(param, Buffer) and param.dtype.is_float:
            assert np.all(np.abs(value) <= 1.0), f"{param.name} left [-1, 1] at sizes {sizes}:\n{module}"
        elif isinstance(param, Buffer) and param.dtype.is_int:
            assert np.all(np.abs(value) <= 4), f"{param.name} left [-4, 4] at sizes {sizes}:\n{module}"


def _reversed_everywhere(module: Module) -> bool:
    """Whether running every loop backwards changes a result (a dependence is observable)."""
    from dataclasses import replace

    def mark(nodes: tuple[Node, ...]) -> tuple[Node, ...]:
        out: list[Node] = []
        for node in nodes:
            if isinstance(node, For):
                node = replace(node, parallel=True, body=mark(node.body))
            elif isinstance(node, If):
                node = replace(node, then_body=mark(node.then_body), else_body=mark(node.else_body))
            out.append(node)
        return tuple(out)

    reversed_module = Module((replace(module.entry, body=mark(module.entry.body)),))
    args = random_arguments(module, 4)
    forward, backward = copy.deepcopy(args), copy.deepcopy(args)
    interpret(module, *forward)
    interpret(reversed_module, *backward, parallel_order="reverse")
    return any(isinstance(a, np.ndarray) and not np.array_equal(a, b, equal_nan=True)
               for a, b in zip(forward, backward, strict=True))


def test_dependences_are_observable_in_many_programs() -> None:
    """A wrong reordering must show: in at least a fifth of the programs with
    loops, running every loop backwards changes some result (about a
    quarter do; programs with empty loops, unsatisfiable ``if``s or only
    commutative updates such as ``max`` reductions do not)."""
    batch = [m for m in _sample(programs(max_depth=3), 200) if _depth(m.entry.body) >= 1]
    changed = sum(_reversed_everywhere(m) for m in batch)
    assert changed >= len(batch) // 5, f"only {changed} of {len(batch)} programs depend on loop order"


def test_perfect_option() -> None:
    for module in _sample(programs(perfect=True, max_depth=3), 60):
        for node in module.entry.body:
            assert isinstance(node, For)
            while len(node.body) == 1 and isinstance(node.body[0], For):
                node = node.body[0]
            assert all(isinstance(n, Assign) for n in node.body), str(module)
    deep = [m for m in _sample(programs(perfect=True), 60) if "perfect_nest" in program_features(m)]
    assert len(deep) >= 40


def _calls(expr: object) -> set[str]:
    found = {expr.fn} if isinstance(expr, Call) else set()
    for child in getattr(expr, "__dict__", {}).values():
        for item in child if isinstance(child, tuple) else (child,):
            if type(item).__module__ == "polyir.ir.nodes":
                found |= _calls(item)
    return found


def _all_calls(nodes: tuple[Node, ...]) -> set[str]:
    found: set[str] = set()
    for node in nodes:
        if isinstance(node, Assign):
            found |= _calls(node.value)
            for index in node.indices:
                found |= _calls(index)
        elif isinstance(node, For):
            found |= _all_calls(node.body)
        elif isinstance(node, If):
            found |= _all_calls(node.then_body + node.else_body)
    return found


def test_approximate_functions_only_without_half_precision() -> None:
    approximate = {"exp", "tanh", "sigmoid"}
    seen = 0
    for module in _sample(programs(dtypes=("f16", "bf16", "f32")), 200):
        function = module.entry
        calls = _all_calls(function.body)
        halves = {b.dtype for b in function.buffers.values()} & {DType.F16, DType.BF16}
        if calls & approximate:
            seen += 1
            assert not halves, f"approximate math in a half-precision program:\n{module}"
    assert seen >= 10
    for module in _sample(programs(math=False), 100):
        assert not _all_calls(module.entry.body) & approximate


def test_bool_and_gather_options_switch_off() -> None:
    for module in _sample(programs(bools=False, gathers=False), 100):
        features = program_features(module)
        assert not features & {"bool_buffer", "bool_temporary", "gather"}, str(module)
    ints_off = [program_features(m) for m in _sample(programs(ints=False), 100)]
    assert not any({"bool_buffer", "int_buffer"} & f for f in ints_off)
    assert any("gather" in f for f in ints_off)  # gathers then index with float inputs
