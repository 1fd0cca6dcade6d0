"""Parser: what it builds, where it says it built it, and how it refuses bad text."""
from __future__ import annotations

import math
import random
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import polyir
from polyir import ParseError
from polyir.ir.affine import Aff
from polyir.ir.lexer import MAX_NESTING, tokenize
from polyir.ir.nodes import (
    Assign,
    BinOp,
    Buffer,
    Call,
    Cast,
    Const,
    For,
    FragmentLoad,
    If,
    Launch,
    Load,
    SourceLoc,
    Symbol,
    Var,
)
from polyir.ir.parser import parse, parse_affine, parse_expr, parse_statement
from polyir.ir.types import DType, MemorySpace
from tests.conftest import examples

GOLDEN = Path(__file__).parent / "golden"


def test_builds_expected_nodes_and_locations() -> None:
    text = ("# comment line\n"
            "func f(A: f32[N, 4] @shared, n: index) {\n"
            "  local t: f64[] @local\n"
            "  for i = 0 to N step 2 {\n"
            "    if (i < n) {\n"
            "      S0: A[i, 3] = cast<f32>(t[]) * -A[i, i // 2]  # trailing comment\n"
            "    }\n"
            "  }\n"
            "}\n")
    m = parse(text)
    (f,) = m.functions
    assert f.loc == SourceLoc(2, 1) and f.kind == "host"
    a, n = f.params
    assert a == Buffer("A", DType.F32, (Aff.var("N"), Aff.const(4)), MemorySpace.SHARED)
    assert a.loc == SourceLoc(2, 8)
    assert n == Symbol("n") and n.loc == SourceLoc(2, 30)
    assert f.locals[0] == Buffer("t", DType.F64, (), MemorySpace.LOCAL) and f.locals[0].loc == SourceLoc(3, 9)
    loop = f.body[0]
    assert isinstance(loop, For) and loop.step == 2 and loop.loc == SourceLoc(4, 3)
    cond = loop.body[0]
    assert isinstance(cond, If) and cond.loc == SourceLoc(5, 5)
    s0 = cond.then_body[0]
    assert isinstance(s0, Assign) and s0.loc == SourceLoc(6, 7)
    i = Aff.var("i")
    assert s0.indices == (i, Aff.const(3))
    assert s0.value == BinOp("*", Cast(DType.F32, Load("t", ())),
                             Call("neg", (Load("A", (i, i // 2)),)))
    assert str(s0.loc) == "6:7"


def test_subscripts_are_aff_when_affine_else_exprs() -> None:
    value = parse_expr("E[2*i + j - 1, (i + 3) // 4, i % 4, idx[i], idx[i] + i, i * j, -i]")
    assert isinstance(value, Load)
    i, j = Aff.var("i"), Aff.var("j")
    assert value.indices[:3] == (2 * i + j - 1, (i + 3) // 4, i % 4)
    assert value.indices[3] == Load("idx", (i,))
    assert value.indices[4] == BinOp("+", Load("idx", (i,)), Var("i"))
    assert value.indices[5] == BinOp("*", Var("i"), Var("j"))
    assert value.indices[6] == -i
    # in value position the same text stays a value expression
    assert parse_expr("i + 1") == BinOp("+", Var("i"), Const(1, DType.I64))


def test_literals() -> None:
    assert parse_expr("-2.0") == Const(-2.0, DType.F32)
    assert parse_expr("-(2.0)") == Call("neg", (Const(2.0, DType.F32),))
    assert parse_expr("- 3:i8") == Const(-3, DType.I8)
    assert parse_expr("1e3") == Const(1000.0, DType.F32)
    assert parse_expr("true:i32") == Const(True, DType.I32)
    assert parse_expr("-inf:f64") == Const(-math.inf, DType.F64)
    nan = parse_expr("nan")
    assert isinstance(nan, Const) and math.isnan(nan.value)


def test_optional_syntax() -> None:
    load = parse_statement("F: f = fragment_load<acc, m16n16k8.tf32.f32>(C[0, 0])")
    assert isinstance(load, FragmentLoad) and load.layout == "row" and load.role == "acc"
    launch = parse_statement("launch k grid(N, 1, 1) block(1, 1, 1) ()")
    assert isinstance(launch, Launch) and launch.shared_bytes == 0 and launch.args == ()
    loop = parse_statement("for i = max(0) to min(N) unroll=2 parallel step 1 { }")
    assert isinstance(loop, For) and loop.lower == (Aff.const(0),) and loop.unroll == 2 and loop.parallel
    assert parse("") == polyir.ir.nodes.Module(())
    assert parse("  # nothing\n\n") == polyir.ir.nodes.Module(())


def test_names_that_look_like_keywords() -> None:
    m = parse("func for(to: f32[step], local: index) {\n  for: to[0] = 1.0\n"
              "  for max = 0 to step step 2 {\n    local: to[max] = 2.0\n  }\n}\n")
    f = m.functions[0]
    assert f.name == "for" and f.params[1] == Symbol("local")
    assert isinstance(f.body[0], Assign) and f.body[0].name == "for"
    assert isinstance(f.body[1], For) and f.body[1].var == "max" and f.body[1].step == 2
    assert parse(str(m)) == m


def test_public_entry_point_names_the_source() -> None:
    with pytest.raises(ParseError) as info:
        polyir.parse("func f( {\n}", source_name="bad.ir")
    assert info.value.source_name == "bad.ir"
    assert str(info.value).startswith("bad.ir:1:9: ")


H = "func f(A: f32[N, M], x: i32[N], n: index) {\n"
ERROR_CASES = [
    (H + "  S0: A[i, j = 1.0\n}\n", 2, 14, "expected ']' after subscripts, found '='"),
    (H + "  S0: A[0, 0] = A[0, 0 for\n}\n", 2, 24, "expected ']' after subscripts, found 'for'"),
    (H + "  for i = 0 to N {\n    S1: A[i, 0] = 2.0\n", 4, 1,
     "expected '}' to close the block opened at line 2, found end of input"),
    (H + "  S0: A[0, 0] = 1.0 +\n}\n", 3, 1, "expected an expression, found '}'"),
    ("func f(A: f33[N]) {\n}\n", 1, 11, "unknown dtype 'f33'"),
    (H + "  S0: A[0, 0] = foo(1.0)\n}\n", 2, 17, "unknown function 'foo'"),
    (H + "  S0: A[0, 0] = exp(1.0, 2.0)\n}\n", 2, 17, "exp takes 1 argument, found 2"),
    (H + "  S0: A[0, 0] = pow(1.0)\n}\n", 2, 17, "pow takes 2 arguments, found 1"),
    (H + "  S0: A[0, 0] = 1.5:f31\n}\n", 2, 21, "unknown dtype 'f31'"),
    (H + "  for i = 0 to N // n {\n  }\n}\n", 2, 21, "'//' needs a positive integer constant divisor, found 'n'"),
    (H + "  for i = 0 to N % 0 {\n  }\n}\n", 2, 20, "'%' needs a positive integer constant divisor, found '0'"),
    (H + "  for i = 0 to N * n {\n  }\n}\n", 2, 18, "product of two non-constant affine terms"),
    (H + "  for i = 0 to N step 2 step 3 {\n  }\n}\n", 2, 25, "duplicate loop attribute 'step'"),
    (H + "  for i = 0 to N parallel parallel {\n  }\n}\n", 2, 27, "duplicate loop attribute 'parallel'"),
    (H + "  for i = 0 to N unroll=x {\n  }\n}\n", 2, 25, "expected an integer factor after 'unroll=', found 'x'"),
    (H + "  for i = 0 to N tile=4 {\n  }\n}\n", 2, 18, "expected a loop attribute"),
    (H + "  F0: fa = fragment_load<a, m8n8k4.f16.f32, row>(A[0, 0])\n}\n", 2, 29,
     "unknown MMA shape 'm8n8k4.f16.f32'"),
    (H + "  F0: fa = fragment_load<x, m16n16k16.f16.f32, row>(A[0, 0])\n}\n", 2, 26,
     "expected a fragment role (a or b or acc), found 'x'"),
    (H + "  F0: fa = fragment_load<a, m16n16k16.f16.f32, diag>(A[0, 0])\n}\n", 2, 48,
     "expected a layout (row or col), found 'diag'"),
    (H + "  F0: fc = fragment_mma<m16n16k16.f16.f32>(fa, fb)\n}\n", 2, 50,
     "fragment_mma takes 3 fragments (a, b, acc), found 2"),
    (H + "  F0: fc = fragment_copy(fa)\n}\n", 2, 12, "expected fragment_fill, fragment_load or fragment_mma"),
    (H + "  S0: A[0, 0] = 1 < 2 < 3\n}\n", 2, 23, "comparisons do not chain"),
    (H + "  S0: A[0, 0] = $\n}\n", 2, 17, "unexpected character '$'"),
    (H + "  S0: A[0, 0] = 1" + "0" * 5000 + "\n}\n", 2, 17, "integer literal too long"),
    (H + "  S0: A[0, 0] = x[0] // 2\n}\n", 2, 22, "'//' is only allowed in affine subscripts and bounds"),
    (H + "  S0: A[x[0] // 2, 0] = 1.0\n}\n", 2, 14, "'//' needs an affine left operand"),
    (H + "  if (i != 0) {\n  }\n}\n", 2, 9, "expected a comparison (<, <=, >, >=, ==) in the condition, found '!='"),
    (H + "  for i = min(0, 1) to N {\n  }\n}\n", 2, 11, "a lower bound combines with max(...), not min(...)"),
    (H + "  for i = 0 to max(N, 1) {\n  }\n}\n", 2, 16, "an upper bound combines with min(...), not max(...)"),
    (H + "  for i = max() to N {\n  }\n}\n", 2, 15, "max() needs at least one bound"),
    (H + "  launch k grid(1, 1) block(1, 1, 1) ()\n}\n", 2, 21, "grid(...) takes 3 sizes, found 2"),
    (H + "  launch k grid(1, 1, 1) block(1, 1, 1)\n}\n", 3, 1,
     "expected '(' before the launch arguments, found '}'"),
    ("func f() {\n  local t: index\n}\n", 2, 12, "a local must be a buffer"),
    ("func f() {\n  S0: t[] = 1.0\n  local t: f32[]\n}\n", 3, 3, "local declarations must come first"),
    ("fun f() {\n}\n", 1, 1, "expected 'func' or 'kernel', found 'fun'"),
    ("func f(A: f32[N] @global2) {\n}\n", 1, 19, "unknown memory space 'global2'"),
    (H + "  S0: A[0, 0] = select(true, 1.0)\n}\n", 2, 17, "select takes 3 arguments (cond, a, b), found 2"),
    (H + "  S0: A[0, 0] = cast<f32 (1)\n}\n", 2, 26, "expected '>' after the cast dtype, found '('"),
    (H + "  S0: A[0, 0] = 1.0 + not x[0]\n}\n", 2, 23, "'not' needs parentheses here"),
    (H + "  S0: A[0, 0] = " + "(" * 300 + "1.0" + ")" * 300 + "\n}\n", 2, 116,
     f"nesting deeper than {MAX_NESTING} levels"),
    (H + "  for i = 0 to N gpu=block.x {\n  ", 3, 3, "expected '}' to close the block opened at line 2"),
    (H + "  S0: A[0, 0] = 1.0\n}\nfunc g(", 4, 8, "expected a parameter name, found end of input"),
    (H + "  S0: fa == 1.0\n}\n", 2, 10, "expected '[' or '=' after 'fa', found '=='"),
    (H + "  S0: A[0, 0] = 1.0:\n}\n", 3, 1, "expected a dtype after ':', found '}'"),
    (H + "  S0: A[0, 0] = 1.0 +* 2.0\n}\n", 2, 22, "expected an expression, found '*'"),
    ("func f(A: f32[1.5]) {\n}\n", 1, 15, "expected an affine expression (integer, variable or '('), found '1.5'"),
    (H + "  for i = 0 to {\n  }\n}\n", 2, 16, "expected an affine expression"),
    (H + "  S0: A[0, 0] = 1.0\n  S0 A[0, 0] = 1.0\n}\n", 3, 3, "expected a statement"),
    (H + "  S0: A[0, 0] = and\n}\n", 2, 17, "expected an expression, found 'and'"),
    (H + "  S0: A[0, 0] = block.x\n}\n", 2, 17, "expected an expression, found 'block.x'"),
    ("func f(A: f32[N]) {\n}\n}\n", 3, 1, "expected 'func' or 'kernel', found '}'"),
    ("func f(A: f32[N],) {\n}\n", 1, 18, "expected a parameter name, found ')'"),
    ("func f(A f32[N]) {\n}\n", 1, 10, "expected ':' after the parameter name, found 'f32'"),
    (H + "  launch k grid(1, 1, 1) block(32, 1, x) ()\n}\n", 2, 39, "expected an integer block size, found 'x'"),
]


@pytest.mark.parametrize("text, line, column, message", ERROR_CASES,
                         ids=[f"case{k}" for k in range(len(ERROR_CASES))])
def test_error_messages(text: str, line: int, column: int, message: str) -> None:
    with pytest.raises(ParseError) as info:
        parse(text, "case.ir")
    error = info.value
    assert (error.line, error.column) == (line, column), error
    assert message in error.message
    assert str(error).startswith(f"case.ir:{line}:{column}: ")


def test_enough_error_cases() -> None:
    assert len(ERROR_CASES) >= 25


def test_deep_block_nesting_is_a_parse_error() -> None:
    depth = 300
    text = "func f() {\n" + "for i = 0 to 1 {\n" * depth + "}\n" * (depth + 1)
    with pytest.raises(ParseError, match="nesting deeper"):
        parse(text)


def test_affine_piece_parser() -> None:
    assert parse_affine("2*i + (j + 1) // 4 - 3*(k % 2)") == (
        2 * Aff.var("i") + (Aff.var("j") + 1) // 4 - 3 * (Aff.var("k") % 2))
    with pytest.raises(ParseError, match="expected end of input after an affine expression, found 'x'"):
        parse_affine("i x")


# ------------------------------------------------------------------------- fuzzing
def _seed_texts() -> list[str]:
    return [(GOLDEN / f"{name}.out").read_text() for name in sorted(p.stem for p in GOLDEN.glob("*.ir"))]


SEEDS = _seed_texts()
FRAGMENTS = ["(", ")", "[", "]", "{", "}", ",", ":", "=", "==", "<", ">", "//", "%", "-", "*", "+",
             "for", "if", "else", "max(", "min(", "step", "parallel", "gpu=", "launch", "barrier",
             "1.5", "0", "-1", "99999999999999999999", "1e", "nan", "inf", "true", "cast<", "select(",
             "not", "and", "or", "\n", " ", "#", "@", "@fragment", ":f16", ":q", "local", "func",
             "kernel", "index", "fragment_load<", "m16n16k16.f16.f32", "S0:", "A[", "x", "$", "\"", "."]


@st.composite
def mutated_texts(draw: st.DrawFn) -> str:
    text = draw(st.sampled_from(SEEDS))
    for _ in range(draw(st.integers(1, 4))):
        position = draw(st.integers(0, len(text)))
        action = draw(st.sampled_from(["delete", "insert", "replace", "token"]))
        width = draw(st.integers(1, 12))
        if action == "delete":
            text = text[:position] + text[position + width:]
        elif action == "insert":
            text = text[:position] + draw(st.text(max_size=4)) + text[position:]
        elif action == "replace":
            text = text[:position] + draw(st.text(min_size=1, max_size=3)) + text[position + 1:]
        else:
            text = text[:position] + draw(st.sampled_from(FRAGMENTS)) + text[position:]
    return text


def _parse_only_parse_errors(text: str) -> None:
    try:
        module = parse(text)
    except ParseError as error:
        assert error.line >= 1 and error.column >= 1
        assert error.line <= text.count("\n") + 1
        assert error.message
        return
    # a successful parse prints to text that parses to the same module
    again = parse(str(module))
    assert again == module


@settings(max_examples=examples(300, 5000))
@given(mutated_texts())
def test_fuzz_mutations_raise_only_parse_errors(text: str) -> None:
    _parse_only_parse_errors(text)


def test_fuzz_token_shuffles_raise_only_parse_errors() -> None:
    rng = random.Random(1234)
    for seed in SEEDS:
        tokens = [t.text for t in tokenize(seed)[:-1]]
        for _ in range(examples(40, 400)):
            mutated = list(tokens)
            for _ in range(rng.randint(1, 3)):
                k = rng.randrange(len(mutated))
                choice = rng.random()
                if choice < 0.4:
                    del mutated[k]
                elif choice < 0.7:
                    mutated.insert(k, rng.choice(FRAGMENTS + tokens))
                else:
                    j = rng.randrange(len(mutated))
                    mutated[k], mutated[j] = mutated[j], mutated[k]
            _parse_only_parse_errors(" ".join(mutated))


@settings(max_examples=examples(100, 2000))
@given(st.text(max_size=80))
def test_fuzz_arbitrary_text(text: str) -> None:
    _parse_only_parse_errors(text)


# ------------------------------------------------------------------ a large module
def test_hundred_statement_module_round_trips() -> None:
    # Speed is measured in bench/, not asserted here (shared machines are noisy).
    body = "\n".join(f"    S{k}: C[i, {k % 7}] = C[i, {k % 7}] * 0.5 + exp(A[i, i % 3 + {k}]) - {k}.0"
                     for k in range(100))
    text = f"func big(C: f32[N, 7], A: f32[N, 200]) {{\n  for i = 0 to N {{\n{body}\n  }}\n}}\n"
    module = parse(text)
    assert parse(str(module)) == module
