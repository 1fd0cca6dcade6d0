"""Round trips: hand-written modules and random expression / affine trees."""
from __future__ import annotations

import functools
import math

from hypothesis import given, settings
from hypothesis import strategies as st

from polyir.ir.affine import Aff, Constraint
from polyir.ir.builder import aff, buf, expr, fresh_name, func, if_, kernel, loop, module, names_in, stmt, sym
from polyir.ir.nodes import (
    Assign,
    Barrier,
    BinOp,
    Call,
    Cast,
    Compare,
    Const,
    Expr,
    For,
    FragmentFill,
    FragmentLoad,
    FragmentMMA,
    FragmentStore,
    If,
    Launch,
    Load,
    Module,
    Select,
    Var,
)
from polyir.ir.parser import index_to_aff, parse, parse_affine, parse_expr
from polyir.ir.printer import print_expr, print_index, print_module
from polyir.ir.types import DType, MemorySpace
from polyir.ir.verifier import verify
from tests.conftest import examples


def _round_trip(m: Module) -> None:
    verify(m)
    text = print_module(m)
    parsed = parse(text)
    assert parsed == m
    assert print_module(parsed) == text


def test_matmul_built_by_hand() -> None:
    _round_trip(module(func("gemm", [buf("C", "f32", "N", "M"), buf("A", "f32", "N", "K"),
                                     buf("B", "f32", "K", "M")], [
        loop("i", 0, "N", [
            loop("j", 0, "M", [
                loop("k", 0, "K", [stmt("S0: C[i, j] = C[i, j] + A[i, k] * B[k, j]")]),
            ], parallel=True),
        ]),
    ])))


def test_every_node_kind() -> None:
    key = "m16n16k16.bf16.f32"
    mm = kernel("mm", [buf("A", "bf16", "M", "K"), buf("B", "bf16", "K", "N"), buf("C", "f32", "M", "N"),
                       sym("m")], [
        loop("b", 0, "M // 16", [
            loop("t", 0, 32, [
                FragmentFill("F0", "fc", Const(0.0, DType.F32)),
                loop("k", 0, "K", [
                    FragmentLoad("F1", "fa", "a", key, "A", (16 * Aff.var("b"), Aff.var("k")), "col"),
                    FragmentLoad("F2", "fb", "b", key, "B", (Aff.var("k"), Aff.const(0))),
                    FragmentMMA("F3", "fc", "fa", "fb", "fc", key),
                    Barrier(),
                ], step=16),
                FragmentStore("F4", "C", (16 * Aff.var("b"), Aff.const(0)), "fc", key),
            ], mapping="thread.x"),
        ], mapping="block.x", parallel=True),
    ], locals=[buf("fa", "bf16", 16, 16, space="fragment"), buf("fb", "bf16", 16, 16, space="fragment"),
               buf("fc", "f32", 16, 16, space="fragment")])
    host = func("host", ["A: bf16[M, K]", "B: bf16[K, N]", "C: f32[M, N]", "m: index"], [
        Launch("mm", (Aff.var("M") // 16, Aff.const(1), Aff.const(1)), (32, 1, 1), ("A", "B", "C", "m"), 512),
        if_(["m > 0", "M == 16*m"], [stmt("launch mm grid(1, 1, 1) block(32, 1, 1) (A, B, C, m)")]),
    ])
    _round_trip(module(host, mm))


def test_triangular_and_step_loops() -> None:
    body = [loop("j", ["0", "i - 3", Aff.var("i") * 2 - Aff.var("N")], ["i", "n + 1"], [
        stmt("S0: b[i] = b[i] - L[i, j] * x[j]"),
    ], step=3, unroll=2, vectorize=4)]
    _round_trip(module(func("tri", [buf("L", "f64", "N", "N"), buf("x", "f64", "N"), buf("b", "f64", "N"),
                                    sym("n")], [loop("i", 0, "N", body)])))


def test_constants_of_every_dtype() -> None:
    statements = []
    params = []
    values = {"f16": [0.0, -1.5, 65504.0], "bf16": [1e-3, -3.0], "f32": [math.inf, -math.inf, 1e20, 0.1],
              "f64": [1e-300, -0.5, 2.0], "i8": [-128, 127], "i32": [0, -5, 2**31 - 1],
              "i64": [-(2**63), 2**63 - 1, 7], "bool": [True, False]}
    for name, constants in values.items():
        params.append(buf(f"v_{name}", name))
        for k, value in enumerate(constants):
            statements.append(Assign(f"S_{name}_{k}", f"v_{name}", (), Const(value, DType(name))))
    _round_trip(module(func("consts", params, statements)))


def test_nan_constant_round_trips() -> None:
    m = module(func("f", [buf("x", "f32")], [stmt("S0: x[] = nan + -nan")]))
    assert parse(print_module(m)) == m


def test_builder_pieces() -> None:
    assert print_expr(expr("A[i, k] * B[k, j]")) == "A[i, k] * B[k, j]"
    assert print_index(parse_affine("2*i + j")) == "2*i + j"
    loop_node = loop("i", 0, "N", [], parallel=True, mapping="block.x")
    assert isinstance(loop_node, For) and loop_node.upper == (Aff.var("N"),)
    assert buf("A", DType.F32, 4, space=MemorySpace.SHARED).space is MemorySpace.SHARED
    assert isinstance(if_(["i < 4"], []), If)
    assert aff("2*i + j") == 2 * Aff.var("i") + Aff.var("j") and aff(3) == Aff.const(3)
    assert stmt("S0: A[i] = 1.0").loc is None  # pieces are not from a file


def test_fresh_names() -> None:
    f = func("f", ["A: f32[N]", "n: index"], [loop("i", 0, "N", [stmt("S0: A[i] = 1.0")])],
             locals=[buf("t", "f32")])
    taken = names_in(f)
    assert taken == {"f", "A", "N", "n", "t", "i", "S0"}
    assert fresh_name("i", taken) == "i_1"
    assert fresh_name("i", taken | {"i_1", "i_2"}) == "i_3"
    assert fresh_name("k", taken) == "k"


# ------------------------------------------------------------ random trees
NAMES = ("i", "j", "N", "_x1")


def affines(depth: int = 3) -> st.SearchStrategy[Aff]:
    leaves = st.one_of(st.sampled_from(NAMES).map(Aff.var), st.integers(-20, 20).map(Aff.const))

    def extend(inner: st.SearchStrategy[Aff]) -> st.SearchStrategy[Aff]:
        return st.one_of(
            st.tuples(inner, inner).map(lambda p: p[0] + p[1]),
            st.tuples(inner, inner).map(lambda p: p[0] - p[1]),
            st.tuples(inner, st.integers(-5, 5)).map(lambda p: p[0] * p[1]),
            st.tuples(inner, st.integers(1, 9)).map(lambda p: p[0] // p[1]),
            st.tuples(inner, st.integers(1, 9)).map(lambda p: p[0] % p[1]),
            inner.map(lambda a: -a),
        )

    return st.recursive(leaves, extend, max_leaves=8)


@st.composite
def constants(draw: st.DrawFn, dtype: DType) -> Const:
    if dtype is DType.BOOL:
        return Const(draw(st.booleans()), dtype)
    if dtype.is_int:
        return Const(draw(st.integers(-(2**40), 2**40)), dtype)
    return Const(draw(st.floats(allow_nan=False, width=32 if dtype is DType.F32 else 64)), dtype)


@functools.cache
def value_exprs(dtype: DType, depth: int) -> st.SearchStrategy[Expr]:
    """Typed value expressions of ``dtype`` (loads from 'X' of any dtype, 1-d)."""
    leaves: list[st.SearchStrategy[Expr]] = [constants(dtype),
                                             affines().map(lambda a: Load(f"X_{dtype}", (a,)))]
    if dtype is DType.I64:
        leaves.append(st.sampled_from(NAMES).map(Var))
    if depth == 0:
        return st.one_of(*leaves)
    sub = value_exprs(dtype, depth - 1)
    options = list(leaves)
    if dtype is DType.BOOL:
        options += [
            st.tuples(st.sampled_from(["and", "or"]), sub, sub).map(lambda t: BinOp(*t)),
            sub.map(lambda e: Call("not", (e,))),
            *(st.tuples(st.sampled_from(["<", "<=", ">", ">=", "==", "!="]),
                        value_exprs(d, depth - 1), value_exprs(d, depth - 1)).map(lambda t: Compare(*t))
              for d in (DType.F32, DType.I64)),
        ]
    else:
        options += [
            st.tuples(st.sampled_from(["+", "-", "*", "/", "%"]), sub, sub).map(lambda t: BinOp(*t)),
            sub.map(lambda e: Call("neg", (e,))),
            st.tuples(st.sampled_from(["max", "min"]), sub, sub).map(lambda t: Call(t[0], (t[1], t[2]))),
            st.tuples(value_exprs(DType.BOOL, depth - 1), sub, sub).map(lambda t: Select(*t)),
            value_exprs(DType.I32 if dtype is not DType.I32 else DType.F64, depth - 1).map(
                lambda e: Cast(dtype, e)),
            value_exprs(DType.I64, depth - 1).filter(lambda e: index_to_aff(e) is None)
            .map(lambda e: Load(f"X_{dtype}", (e,))),
        ]
        if dtype.is_float:
            options.append(st.tuples(st.sampled_from(["exp", "tanh", "sqrt"]), sub)
                           .map(lambda t: Call(t[0], (t[1],))))
    return st.one_of(*options)


@settings(max_examples=examples(300, 5000))
@given(affines())
def test_random_affines_round_trip(a: Aff) -> None:
    assert parse_affine(str(a)) == a


@settings(max_examples=examples(300, 5000))
@given(st.one_of(*(value_exprs(d, 3) for d in (DType.F32, DType.F64, DType.I32, DType.I64, DType.BOOL))))
def test_random_expressions_round_trip(e: Expr) -> None:
    text = print_expr(e)
    assert parse_expr(text) == e, text
    assert print_expr(parse_expr(text)) == text


@settings(max_examples=examples(100, 2000))
@given(st.lists(st.tuples(affines(), st.sampled_from(["<", "<=", ">", ">=", "=="]), affines()),
                max_size=3),
       st.integers(1, 4), st.booleans(), st.sampled_from([None, "block.y", "thread.z"]),
       st.integers(0, 8), st.integers(0, 8))
def test_random_loops_and_ifs_round_trip(conds, step, parallel, mapping, unroll, vectorize) -> None:
    inner = If(tuple(Constraint(*c) for c in conds), (stmt("S0: X[i] = 1.0"),), (Barrier(),))
    node = For("i", (Aff.const(0), Aff.var("N") - 4), (Aff.var("N"),), (inner,), step, parallel, mapping,
               unroll, vectorize)
    m = module(func("f", [buf("X", "f32", "N")], [node], kind="kernel"))
    assert parse(print_module(m)) == m
