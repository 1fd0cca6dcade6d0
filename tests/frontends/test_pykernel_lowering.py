"""Lowering rules of ``@polyir.kernel``, checked against the plain Python run:
loop bounds and steps (negative steps included), affine and data-dependent
conditions, Python integer semantics, and numpy-style type promotion."""
from __future__ import annotations

import itertools
import linecache
import math
from collections.abc import Callable
from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import polyir
from polyir.ir.nodes import Assign, For, If, Module, Node
from polyir.ir.types import DType
from polyir.ir.verifier import expr_dtype
from tests.conftest import examples

_sources = itertools.count()


def kernel_from_source(source: str, name: str) -> Callable[..., Any]:
    """Define ``name`` from ``source`` with its text in linecache (for inspect)."""
    filename = f"<pykernel-generated-{next(_sources)}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    namespace: dict[str, Any] = {"math": math}
    exec(compile(source, filename, "exec"), namespace)
    return namespace[name]


def walk(nodes: tuple[Node, ...]) -> list[Node]:
    found: list[Node] = []
    for node in nodes:
        found.append(node)
        if isinstance(node, For):
            found += walk(node.body)
        elif isinstance(node, If):
            found += walk(node.then_body) + walk(node.else_body)
    return found


def statements(module: Module) -> list[Assign]:
    return [n for n in walk(module.entry.body) if isinstance(n, Assign)]


# ------------------------------------------------------------- loop bounds
def _bound(combine: str) -> st.SearchStrategy[str]:
    single = st.builds(lambda a, b: f"{a}*n + {b}" if a else str(b),
                       st.sampled_from([0, 1, 2, -1]), st.integers(-4, 4))
    return st.one_of(single, st.builds(lambda x, y: f"{combine}({x}, {y})", single, single))


@st.composite
def range_nests(draw: st.DrawFn) -> str:
    step = draw(st.sampled_from([-3, -2, -1, 1, 2, 3]))
    inner_step = draw(st.sampled_from([-2, -1, 1, 2]))
    start = draw(_bound("max" if step > 0 else "min"))
    stop = draw(_bound("min" if step > 0 else "max"))
    inner_start = draw(st.sampled_from(["i", "i + 1", "n - i", "0", "2*i - n"]))
    inner_stop = draw(st.sampled_from(["n", "i - 2", "-i", "n + 2", "i // 2"]))
    return (f"def visit(out, n):\n"
            f"    c = 0\n"
            f"    for i in range({start}, {stop}, {step}):\n"
            f"        for j in range({inner_start}, {inner_stop}, {inner_step}):\n"
            f"            out[c] = 1000 * i + j\n"
            f"            c += 1\n"
            f"    out[511] = c\n")


@settings(max_examples=examples(25))
@given(source=range_nests(), n=st.integers(0, 6))
def test_range_bounds_and_steps_visit_what_python_visits(source: str, n: int) -> None:
    func = kernel_from_source(source, "visit")
    expected = np.full(512, -7, np.int64)
    func(expected, n)
    got = np.full(512, -7, np.int64)
    compiled = polyir.kernel(func, target="interpret")
    compiled(got, n)
    np.testing.assert_array_equal(got, expected)
    assert all(loop.step > 0 for loop in walk(compiled.ir(got, n).entry.body) if isinstance(loop, For))


def test_negative_step_is_normalised_by_substitution() -> None:
    def countdown(x):
        for i in range(x.shape[0] - 1, -1, -1):
            x[i] = i
    text = str(polyir.kernel(countdown, target="interpret").ir(np.zeros(3)))
    assert "for i = -x_0 + 1 to 1 {" in text
    assert "x[-i] = cast<f64>(-i)" in text


# -------------------------------------------------------------- conditions
def _affine_atom() -> st.SearchStrategy[str]:
    term = st.sampled_from(["i", "j", "n", "i + j", "i - j", "2*i", "n - 1 - j", "(i + j) % 3",
                            "i // 2", "0", "1", "3"])
    op = st.sampled_from(["<", "<=", ">", ">=", "==", "!="])
    pair = st.builds(lambda a, o, b: f"{a} {o} {b}", term, op, term)
    chained = st.builds(lambda a, o, b, p, c: f"{a} {o} {b} {p} {c}", term, op, term, op, term)
    truth = st.sampled_from(["i - j", "(i + 1) % 3", "True", "0"])       # truth of integers
    return st.one_of(pair, chained, truth)


def _condition(allow_data: bool) -> st.SearchStrategy[str]:
    data = st.sampled_from(["A[i, j] > 0.0", "A[j, i] <= A[i, j]", "abs(A[i, j]) < 0.5",
                            "A[i, j] * (i - j)", "not A[j, i] > 0.3"])
    atom = st.one_of(_affine_atom(), data) if allow_data else _affine_atom()
    return st.recursive(atom, lambda inner: st.one_of(
        st.builds(lambda a, b: f"({a}) and ({b})", inner, inner),
        st.builds(lambda a, b: f"({a}) or ({b})", inner, inner),
        st.builds(lambda a: f"not ({a})", inner)), max_leaves=4)


@st.composite
def if_kernels(draw: st.DrawFn) -> str:
    data = draw(st.booleans())
    first, second = draw(_condition(data)), draw(_condition(data))
    return (f"def branch(A, out):\n"
            f"    n = A.shape[0]\n"
            f"    for i in range(n):\n"
            f"        for j in range(n):\n"
            f"            if {first}:\n"
            f"                out[i, j] = 1.0\n"
            f"            elif {second}:\n"
            f"                out[i, j] = 2.0 if {second} else 5.0\n"
            f"            else:\n"
            f"                out[i, j] = 3.0\n")


@settings(max_examples=examples(30))
@given(source=if_kernels(), seed=st.integers(0, 3))
def test_conditions_choose_what_python_chooses(source: str, seed: int) -> None:
    func = kernel_from_source(source, "branch")
    A = np.random.default_rng(seed).uniform(-1.0, 1.0, (5, 5))
    expected = np.zeros((5, 5))
    func(A, expected)
    got = np.zeros((5, 5))
    polyir.kernel(func, target="interpret")(A, got)
    np.testing.assert_array_equal(got, expected)


def test_affine_or_becomes_an_else_chain_and_data_if_a_select() -> None:
    def k(A, B):
        n = A.shape[0]
        for i in range(n):
            if i == 0 or i == n - 1:
                B[i] = 0.0
            if A[i] > 0.0:
                B[i] = A[i]
            else:
                B[i] = -A[i]
    module = polyir.kernel(k, target="interpret").ir(np.zeros(4), np.zeros(4))
    ifs = [n for n in walk(module.entry.body) if isinstance(n, If)]
    assert [str(c) for c in ifs[0].conditions] == ["i == 0"]
    assert [str(c) for c in ifs[1].conditions] == ["i == n - 1"] and ifs[0].else_body == (ifs[1],)
    assert "select(A[i] > 0.0:f64, A[i], -A[i])" in str(module)
    assert len(statements(module)) == 3


def test_mixed_condition_keeps_affine_part_as_if() -> None:
    def k(A, B):
        for i in range(A.shape[0]):
            if i >= 2 and A[i] > 0.5:
                B[i] = 1.0
                A[i] = 0.0
    module = polyir.kernel(k, target="interpret").ir(np.zeros(4), np.zeros(4))
    (guard,) = [n for n in walk(module.entry.body) if isinstance(n, If)]
    assert [str(c) for c in guard.conditions] == ["i >= 2"]
    # two stores under one data-dependent condition: the condition is computed once
    assert "cond[] = A[i] > 0.5:f64" in str(module)
    rng = np.random.default_rng(0)
    A, B = rng.uniform(size=6), np.zeros(6)
    A2, B2 = A.copy(), B.copy()
    k(A2, B2)
    polyir.kernel(k, target="interpret")(A, B)
    np.testing.assert_array_equal(A, A2)
    np.testing.assert_array_equal(B, B2)


# ---------------------------------------------------- integer semantics
def int_ops(a, b, q, r, m, d):
    for i in range(a.shape[0]):
        q[i] = a[i] // b[i]
        r[i] = a[i] % b[i]
        m[i] = (a[i] + 3 * i) % 4 + (i - 5) // 3 - (-i) % 3
        d[i] = a[i] / b[i]


@settings(max_examples=examples(20))
@given(values=st.lists(st.tuples(st.integers(-60, 60), st.integers(-9, 9).filter(bool)),
                       min_size=1, max_size=12),
       dtype=st.sampled_from([np.int32, np.int64]))
def test_floor_division_and_modulo_follow_python(values: list[tuple[int, int]], dtype: Any) -> None:
    a = np.array([v for v, _ in values], dtype)
    b = np.array([w for _, w in values], dtype)
    outs = [np.zeros(len(values), dtype) for _ in range(3)] + [np.zeros(len(values))]
    expected = [o.copy() for o in outs]
    int_ops(a, b, *expected)
    polyir.kernel(int_ops, target="interpret")(a, b, *outs)
    for got, want in zip(outs, expected, strict=True):
        np.testing.assert_array_equal(got, want)


# ------------------------------------------------------------ promotion
DTYPES = [np.int32, np.int64, np.float32, np.float64]
OPERANDS = ["a[i]", "b[i]", "2", "2.5", "(i + 1)", "s"]


@settings(max_examples=examples(40))
@given(da=st.sampled_from(DTYPES), db=st.sampled_from(DTYPES), op=st.sampled_from(["+", "-", "*", "/"]),
       left=st.sampled_from(OPERANDS), right=st.sampled_from(OPERANDS), scalar=st.sampled_from(["f", "i"]))
def test_promotion_follows_numpy(da: Any, db: Any, op: str, left: str, right: str, scalar: str) -> None:
    """The stored value's IR dtype is the dtype of Python's own result, and the
    values agree exactly."""
    source = (f"def promo(a, b, out, s):\n"
              f"    for i in range(a.shape[0]):\n"
              f"        out[i] = {left} {op} {right}\n")
    func = kernel_from_source(source, "promo")
    a = np.array([3, -2, 5], da)
    b = np.array([2, 7, -3], db)
    s = 0.75 if scalar == "f" else 3
    probe = {"a[i]": a[0], "b[i]": b[0], "2": 2, "2.5": 2.5, "(i + 1)": 1, "s": s}
    python_result = eval(f"x {op} y", {"x": probe[left], "y": probe[right]})
    result_dtype = np.asarray(python_result).dtype if isinstance(python_result, np.generic) \
        else np.dtype(np.float64 if isinstance(python_result, float) else np.int64)
    out = np.zeros(3, result_dtype)
    expected = out.copy()
    func(a, b, expected, s)
    compiled = polyir.kernel(func, target="interpret")
    module = compiled.ir(a, b, out, s)
    (store,) = statements(module)
    assert expr_dtype(store.value, module.entry.buffers) is DType.from_numpy(result_dtype), str(module)
    compiled(a, b, out, s)
    np.testing.assert_array_equal(out, expected)


def test_scalar_temporaries_take_the_type_of_their_values() -> None:
    def k(A, out, counts):
        total = 0.0
        hits = 0
        for i in range(A.shape[0]):
            total += A[i]
            if A[i] > 0.0:
                hits += 1
        out[0] = total
        counts[0] = hits
    A = np.random.default_rng(3).uniform(-1, 1, 7).astype(np.float32)
    out, counts = np.zeros(1, np.float32), np.zeros(1, np.int32)
    compiled = polyir.kernel(k, target="interpret")
    text = str(compiled.ir(A, out, counts))
    assert "local total: f32[] @local" in text     # 0.0 (weak) joined with f32 elements
    assert "local hits: i64[] @local" in text
    out2, counts2 = out.copy(), counts.copy()
    k(A, out2, counts2)
    compiled(A, out, counts)
    np.testing.assert_allclose(out, out2, rtol=1e-6)
    np.testing.assert_array_equal(counts, counts2)


def test_math_and_builtins() -> None:
    def k(A, B, n):
        for i in range(n):
            x = abs(A[i]) + 0.5
            B[i, 0] = math.sqrt(x) + math.exp(-x) + math.log(x) + math.pow(x, 1.5) + math.tanh(x)
            B[i, 1] = math.log(x, 2) + math.floor(x * 3) - math.ceil(-x) + math.fabs(-x) + math.pi
            B[i, 2] = min(A[i], 0.25, A[n - 1 - i]) + max(i, 2) + abs(i - 2) + float(i) / 3
            B[i, 3] = x ** 2 + x ** 0.5 + 2.0 ** i + i ** 2 + (x if A[i] > 0 else -x) + int(x * 10) % 3
            B[i, 4] = 7.5 // x + 7.5 % x + (not (A[i] > 0)) + (0.1 < x <= 0.9)
            B[i, 5] = A[len(A) - 1] + (i + 1) * 0.5 - i // 2
    rng = np.random.default_rng(4)
    A, B = rng.uniform(-1, 1, 6), np.zeros((6, 6))
    expected = B.copy()
    k(A, expected, 6)
    polyir.kernel(k, target="interpret")(A, B, 6)
    np.testing.assert_allclose(B, expected, rtol=1e-12)


def test_shapes_subscripts_and_aliases() -> None:
    def k(A, v, s):
        n, m = A.shape
        last = n - 1
        for i in range(n):
            k2 = i + 1
            for j in range(m):
                A[i][j] += v[j] * s[()] + k2
        A[-1, -1] = A[last, 0] + A.shape[1] + len(v)
        s[()] = A[0, 0]
    A = np.ones((3, 4), np.float32)
    v = np.arange(4, dtype=np.float32)
    s = np.array(2.0, np.float32)
    compiled = polyir.kernel(k, target="interpret")
    module = compiled.ir(A, v, s)
    text = str(module)
    assert text.startswith("func k(A: f32[n, m], v: f32[v_0], s: f32[]) {")
    assert "A[n - 1, m - 1] = A[n - 1, 0]" in text      # aliases and negative indices substituted
    assert "cast<f32>(i + 1)" in text
    A2, v2, s2 = A.copy(), v.copy(), s.copy()
    k(A2, v2, s2)
    compiled(A, v, s)
    np.testing.assert_allclose(A, A2)
    np.testing.assert_allclose(s, s2)


def test_tuple_swap_reads_before_writing() -> None:
    def k(X, Y):
        n, m = X.shape
        for i in range(n):
            for j in range(m):
                X[i, j], Y[i, j] = Y[i, j], X[i, j] + 1.0
    X, Y = np.arange(6.0).reshape(2, 3), -np.arange(6.0).reshape(2, 3)
    X2, Y2 = X.copy(), Y.copy()
    k(X2, Y2)
    polyir.kernel(k, target="interpret")(X, Y)
    np.testing.assert_array_equal(X, X2)
    np.testing.assert_array_equal(Y, Y2)


def test_value_used_after_its_block_is_kept_in_a_temporary() -> None:
    def k(A, out):
        for i in range(A.shape[0]):
            last = i * 2
            A[last // 2] = 1.0
        out[0] = last
    A, out = np.zeros(4), np.zeros(1)
    module = polyir.kernel(k, target="interpret").ir(A, out)
    assert "A[i] = 1.0:f64" in str(module)      # substituted inside the loop...
    assert "out[0] = cast<f64>(last[])" in str(module)   # ...and stored for the read after it
    polyir.interpret(module, A, out)
    assert out[0] == 6.0 and A.tolist() == [1.0] * 4


def test_trivial_and_empty_branches() -> None:
    def k(A, B, n):
        for i in range(A.shape[0]):
            if i < 2:
                pass
            else:
                A[i] = 1.0
            if True:
                B[i] += 1.0
            if n:
                B[i] += 10.0
            if A[i] > 5.0:
                pass
            if A[i] and not B[i] or i == 2:
                B[i] = 5.0
    module = polyir.kernel(k, target="interpret").ir(np.zeros(4), np.zeros(4), 0)
    text = str(module)
    assert "if (i >= 2) {" in text and "} else {" in text    # the else belongs to 'if n:'
    assert "B[i] = B[i] + 1.0:f64" in text and "select(true" not in text
    assert len(statements(module)) == 5
    for n in (0, 3):
        A, B = np.array([0.0, 1.0, 2.0, 0.0]), np.array([0.0, 0.0, 1.0, 3.0])
        A2, B2 = A.copy(), B.copy()
        k(A2, B2, n)
        polyir.kernel(k, target="interpret")(A, B, n)
        np.testing.assert_array_equal(A, A2)
        np.testing.assert_array_equal(B, B2)
