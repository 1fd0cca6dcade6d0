"""Printer: golden files (input -> parse -> print == expected) and exact text of small nodes."""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from polyir.ir.affine import Aff, Constraint
from polyir.ir.builder import buf, expr, func, if_, loop, module, stmt, sym
from polyir.ir.nodes import (
    Barrier,
    BinOp,
    Call,
    Compare,
    Const,
    For,
    Launch,
    Load,
    Module,
    Var,
)
from polyir.ir.parser import parse
from polyir.ir.printer import print_expr, print_function, print_index, print_module, print_node
from polyir.ir.types import DType
from polyir.ir.verifier import verify

GOLDEN = Path(__file__).parent / "golden"
GOLDEN_NAMES = sorted(p.stem for p in GOLDEN.glob("*.ir"))


def test_golden_files_present() -> None:
    assert {"matmul", "triangular", "ifelse", "kernel", "gather", "constants", "precedence"} <= set(GOLDEN_NAMES)


@pytest.mark.parametrize("name", GOLDEN_NAMES)
def test_golden(name: str) -> None:
    source = (GOLDEN / f"{name}.ir").read_text()
    expected = (GOLDEN / f"{name}.out").read_text()
    parsed = parse(source, f"{name}.ir")
    assert print_module(parsed) == expected
    assert str(parsed) == expected
    # the expected text is a fixed point and denotes the same module
    assert parse(expected) == parsed
    assert print_module(parse(expected)) == expected
    verify(parsed)


I, J, N = Aff.var("i"), Aff.var("j"), Aff.var("N")  # noqa: E741


@pytest.mark.parametrize("const, text", [
    (Const(1.5, DType.F32), "1.5"),
    (Const(1.5, DType.F64), "1.5:f64"),
    (Const(0.0, DType.F16), "0.0:f16"),
    (Const(-2.0, DType.BF16), "-2.0:bf16"),
    (Const(3, DType.I64), "3"),
    (Const(3, DType.I32), "3:i32"),
    (Const(-7, DType.I8), "-7:i8"),
    (Const(True, DType.BOOL), "true"),
    (Const(False, DType.BOOL), "false"),
    (Const(1, DType.BOOL), "1:bool"),
    (Const(1, DType.F32), "1:f32"),
    (Const(math.inf, DType.F32), "inf"),
    (Const(-math.inf, DType.F64), "-inf:f64"),
    (Const(math.nan, DType.F32), "nan"),
    (Const(1e20, DType.F32), "1e+20"),
    (Const(1.5e-5, DType.F32), "1.5e-05"),
    (Const(np.float32(0.1), DType.F32), repr(float(np.float32(0.1)))),
    (Const(np.int32(4), DType.I32), "4:i32"),
    (Const(np.bool_(True), DType.BOOL), "true"),
])
def test_constants(const: Const, text: str) -> None:
    assert print_expr(const) == text


A = lambda *ix: Load("A", tuple(ix))  # noqa: E731
x, y, z = Var("x"), Var("y"), Var("z")


@pytest.mark.parametrize("tree, text", [
    (BinOp("+", BinOp("+", x, y), z), "x + y + z"),
    (BinOp("+", x, BinOp("+", y, z)), "x + (y + z)"),
    (BinOp("-", x, BinOp("-", y, z)), "x - (y - z)"),
    (BinOp("*", BinOp("+", x, y), z), "(x + y) * z"),
    (BinOp("+", x, BinOp("*", y, z)), "x + y * z"),
    (BinOp("/", x, BinOp("*", y, z)), "x / (y * z)"),
    (BinOp("%", BinOp("/", x, y), z), "x / y % z"),
    (Call("neg", (x,)), "-x"),
    (Call("neg", (BinOp("+", x, y),)), "-(x + y)"),
    (Call("neg", (Const(2.0, DType.F32),)), "-(2.0)"),
    (Call("neg", (Const(-2.0, DType.F32),)), "-(-2.0)"),
    (Call("neg", (Call("neg", (x,)),)), "-(-x)"),
    (BinOp("*", Call("neg", (x,)), y), "-x * y"),
    (BinOp("-", x, Const(-2, DType.I64)), "x - -2"),
    (Compare("<", x, BinOp("+", y, z)), "x < y + z"),
    (Compare("==", Compare("<", x, y), Compare("<", y, z)), "(x < y) == (y < z)"),
    (BinOp("and", Compare("<", x, y), Call("not", (Var("p"),))), "x < y and not p"),
    (Call("not", (BinOp("or", Var("p"), Var("q")),)), "not (p or q)"),
    (Call("not", (Call("not", (Var("p"),)),)), "not not p"),
    (BinOp("or", BinOp("and", Var("p"), Var("q")), Var("r")), "p and q or r"),
    (BinOp("and", BinOp("or", Var("p"), Var("q")), Var("r")), "(p or q) and r"),
    (BinOp("*", Call("not", (Var("p"),)), x), "(not p) * x"),
    (A(I + 1, J * 2), "A[i + 1, 2*j]"),
    (Load("s", ()), "s[]"),
    (A(Load("idx", (I,)),), "A[idx[i]]"),
    (Call("max", (x, Call("exp", (y,)))), "max(x, exp(y))"),
])
def test_minimal_parentheses(tree, text: str) -> None:
    assert print_expr(tree) == text
    assert expr(text) == tree


def test_affine_indices() -> None:
    assert print_index((I + 3) // 4) == "(i + 3) // 4"
    assert print_index(-(I // 4) + N) == "N - i // 4"
    assert print_index(-(I // 4)) == "-(i // 4)"
    assert print_index(I % 4 * 3 - 1) == "3*(i % 4) - 1"


def test_loop_attributes_in_fixed_order() -> None:
    node = For("i", (Aff.const(0), I - J), (N,), (), step=2, parallel=True, mapping="thread.x",
               unroll=4, vectorize=8)
    assert print_node(node) == ("for i = max(0, i - j) to N step 2 parallel unroll=4 vectorize=8 "
                                "gpu=thread.x {\n}")
    default = For("i", (Aff.const(0),), (N, J), ())
    assert print_node(default, indent=2) == "    for i = 0 to min(N, j) {\n    }"


def test_if_else_and_indentation() -> None:
    node = if_(["i < N", "i >= 0"], [stmt("S0: A[i] = 1.0")], [Barrier()])
    assert print_node(node, 1) == ("  if (i < N, i >= 0) {\n    S0: A[i] = 1.0\n  } else {\n"
                                   "    barrier\n  }")
    assert print_node(if_([], [])) == "if () {\n}"
    assert str(Constraint(I, "==", J + 1)) == "i == j + 1"


def test_launch_omits_zero_shared() -> None:
    node = Launch("k", (N // 16, Aff.const(1), Aff.const(1)), (32, 4, 1), ("A", "n"))
    assert print_node(node) == "launch k grid(N // 16, 1, 1) block(32, 4, 1) (A, n)"
    node = Launch("k", (Aff.const(1),) * 3, (1, 1, 1), (), 4096)
    assert print_node(node) == "launch k grid(1, 1, 1) block(1, 1, 1) shared 4096 ()"


def test_functions_and_module() -> None:
    f = func("f", [buf("A", "f32", "N", 4), sym("n"), buf("s", "f16", space="shared")],
             [loop("i", 0, "N", [stmt("S0: A[i, 0] = 0.0")])],
             locals=[buf("t", "i32", 2, space="local"), buf("g", "f64", "N")])
    g = func("g", [], [], kind="kernel")
    assert print_function(f) == (
        "func f(A: f32[N, 4], n: index, s: f16[] @shared) {\n"
        "  local t: i32[2] @local\n"
        "  local g: f64[N]\n"
        "  for i = 0 to N {\n"
        "    S0: A[i, 0] = 0.0\n"
        "  }\n"
        "}\n")
    text = print_module(module(f, g))
    assert text == print_function(f) + "\n" + "kernel g() {\n}\n"
    assert print_module(Module(())) == ""


def test_print_node_rejects_non_nodes() -> None:
    with pytest.raises(TypeError, match="not an IR node"):
        print_node("S0")  # type: ignore[arg-type]
