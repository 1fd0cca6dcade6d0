"""Verifier: each check refuses what it should, says why, and names the function and statement."""
from __future__ import annotations

import pytest

import polyir
from polyir import VerifyError
from polyir.ir.affine import Aff
from polyir.ir.builder import buf, expr, func, loop, module, stmt, sym
from polyir.ir.nodes import (
    Assign,
    BinOp,
    Buffer,
    Call,
    Const,
    For,
    FragmentLoad,
    Function,
    Launch,
    Module,
    Var,
)
from polyir.ir.parser import parse
from polyir.ir.types import DType, MemorySpace
from polyir.ir.verifier import expr_dtype, verify

HEADER = ("func f(A: f32[N, M], B: f64[N], I: i32[N], P: bool[N], H: f16[N], G: bf16[N], "
          "L: i64[N], n: index) {\n  local t: f32[] @local\n")

KERNEL = """
kernel k(A: f16[M, K], C: f32[M, N]) {
  local fa: f16[16, 16] @fragment
  local fb: f16[16, 16] @fragment
  local fc: f32[16, 16] @fragment
  local fx: f32[16, 8] @fragment
  local sh: f16[16, 16] @shared
  for b = 0 to M // 16 gpu=block.x {
    for t = 0 to 32 gpu=thread.x {
%s
    }
  }
}
"""


def host(body: str) -> str:
    return HEADER + body + "\n}\n"


def kernel_with(body: str) -> str:
    return "func h(A: f16[M, K], C: f32[M, N], m: index) {\n}\n" + KERNEL % body


VALID = [
    host("  for i = 0 to N {\n    S0: A[i, 0] = A[i, 1] * 2.0 + cast<f32>(B[i])\n  }"),
    host("  for i = 0 to N {\n    S0: H[i] = H[i] * 2.0:f16\n    S1: G[i] = cast<bf16>(A[i, 0])\n  }"),
    host("  for i = 0 to N {\n    S0: P[i] = P[i] and not (A[i, 0] < 1.0) or i < n\n  }"),
    host("  for i = 0 to N {\n    S0: I[i] = I[i] % 3:i32 / 2:i32\n    S1: A[i, 0] = A[i, 0] % 2.0 / 3.0\n  }"),
    host("  for i = 0 to N {\n    S0: A[I[i], cast<i64>(I[i]) * 2] = exp(A[i, 0]) + pow(A[i, 1], 2.0)\n  }"),
    host("  for i = 0 to N {\n    S0: t[] = select(P[i], abs(A[i, 0]), max(A[i, 0], -1.0))\n  }"),
    kernel_with("      F0: fc = fragment_fill(0.0)\n"
                "      F1: fa = fragment_load<a, m16n16k16.f16.f32, row>(A[16*b, 0])\n"
                "      F2: fb = fragment_load<b, m16n16k16.f16.f32, col>(sh[0, 0])\n"
                "      F3: fc = fragment_mma<m16n16k16.f16.f32>(fa, fb, fc)\n"
                "      barrier\n"
                "      F4: fragment_store<m16n16k16.f16.f32, row>(C[16*b, 0], fc)"),
]


@pytest.mark.parametrize("text", VALID, ids=[f"valid{k}" for k in range(len(VALID))])
def test_valid_modules_pass(text: str) -> None:
    verify(parse(text))
    polyir.verify(parse(text))


INVALID = [
    # (text, message fragment, where fragment)
    (host("  S0: Z[0] = 1.0"), "undefined buffer 'Z'", "statement 'S0' at 3:3"),
    (host("  S0: A[0, 0] = Z[0]"), "undefined buffer 'Z'", "statement 'S0'"),
    (host("  S0: A[i, 0] = 1.0"), "undefined variable 'i'", "statement 'S0'"),
    (host("  for i = 0 to N {\n  }\n  S0: B[0] = cast<f64>(i)"), "undefined variable 'i'", "statement 'S0'"),
    (host("  for i = 0 to K {\n  }"), "uses undefined variable 'K'", "loop 'i' at 3:3"),
    (host("  for i = 0 to i {\n  }"), "uses undefined variable 'i'", "loop 'i'"),
    (host("  for i = 0 to N {\n    for i = 0 to N {\n    }\n  }"), "shadows an enclosing loop variable",
     "loop 'i' at 4:5"),
    (host("  for n = 0 to N {\n  }"), "shadows a size symbol", "loop 'n'"),
    (host("  for t = 0 to N {\n  }"), "has the name of a buffer", "loop 't'"),
    (host("  for i = 0 to A {\n  }"), "uses buffer 'A' as a variable", "loop 'i'"),
    (host("  for i = 0 to N {\n    if (i < B) {\n    }\n  }"), "uses buffer 'B' as a variable", "if at 4:5"),
    (host("  S0: B[B] = 1.0:f64"), "uses buffer 'B' as a variable", "statement 'S0'"),
    (host("  S0: B[0] = cast<f64>(B)"), "buffer 'B' used as a variable", "statement 'S0'"),
    (host("  S0: A[0] = 1.0"), "rank 2 but is subscripted with 1", "statement 'S0'"),
    (host("  S0: t[] = A[0, 0, 0]"), "rank 2 but is subscripted with 3", "statement 'S0'"),
    (host("  S0: A[0, 0] = A[0, 0] + B[0]"), "dtype mismatch in '+': f32 and f64", "statement 'S0'"),
    (host("  S0: A[0, 0] = A[0, 0] + 1"), "dtype mismatch in '+': f32 and i64", "statement 'S0'"),
    (host("  S0: P[0] = A[0, 0] < B[0]"), "dtype mismatch in comparison '<'", "statement 'S0'"),
    (host("  S0: A[0, 0] = select(P[0], A[0, 0], B[0])"), "dtype mismatch in select branches",
     "statement 'S0'"),
    (host("  S0: A[0, 0] = select(A[0, 0], 1.0, 2.0)"), "select condition must be bool", "statement 'S0'"),
    (host("  S0: A[0, 0] = B[0]"), "stores a f64 value into f32 buffer 'A'", "statement 'S0'"),
    (host("  S0: H[0] = A[0, 0]"), "stores a f32 value into f16 buffer 'H'", "statement 'S0'"),
    (host("  S0: G[0] = 1.0"), "stores a f32 value into bf16 buffer 'G'", "statement 'S0'"),
    (host("  S0: P[0] = A[0, 0] and P[0]"), "dtype mismatch in 'and'", "statement 'S0'"),
    (host("  S0: I[0] = I[0] and I[0]"), "'and' needs bool operands, found i32", "statement 'S0'"),
    (host("  S0: P[0] = not L[0]"), "'not' needs a bool operand, found i64", "statement 'S0'"),
    (host("  S0: P[0] = P[0] + P[0]"), "arithmetic '+' on bool operands", "statement 'S0'"),
    (host("  S0: I[0] = exp(I[0])"), "exp needs floating-point operands, found i32", "statement 'S0'"),
    (host("  S0: A[0, 0] = pow(A[0, 0], 2)"), "dtype mismatch in pow", "statement 'S0'"),
    (host("  S0: A[0, 0] = A[1.5, 0]"), "subscript of 'A' must be an integer, found f32", "statement 'S0'"),
    (host("  S0: A[0, 0] = A[P[0], 0]"), "subscript of 'A' must be an integer, found bool", "statement 'S0'"),
    (host("  S0: A[0, 0] = 1.0\n  S0: A[1, 0] = 2.0"), "duplicate statement name 'S0'", "statement 'S0' at 4:3"),
    (host("  for i = 0 to N step 2 gpu=warp.x {\n  }"), "unknown GPU mapping 'warp.x'", "loop 'i'"),
    (host("  barrier"), "barrier outside a kernel function", "barrier at 3:3"),
    (host("  launch nope grid(1, 1, 1) block(1, 1, 1) ()"), "launch of unknown kernel 'nope'",
     "launch of 'nope' at 3:3"),
    (host("  S0: A[0, 0] = cast<f32>(I[0] + 1:i64)"), "dtype mismatch in '+': i32 and i64", "statement 'S0'"),
    (host("  S0: I[0] = 1.5:i32"), "constant 1.5 does not fit dtype i32", "statement 'S0'"),
    (host("  S0: P[0] = 1:bool"), "constant 1 does not fit dtype bool", "statement 'S0'"),
    (host("  S0: I[0] = cast<i32>(128:i8)"), "constant 128 does not fit dtype i8", "statement 'S0'"),
    (host("  S0: I[0] = 2147483648:i32"), "constant 2147483648 does not fit dtype i32", "statement 'S0'"),
    (host("  S0: L[0] = 9223372036854775808"), "does not fit dtype i64", "statement 'S0'"),
    ("func f(A: f32[N], A: f64[N]) {\n}\n", "duplicate parameter name 'A'", "parameter 'A' at 1:19"),
    ("func f(A: f32[N]) {\n  local A: f32[4]\n}\n", "duplicate buffer name 'A'", "local 'A' at 2:9"),
    ("func f(N: f32[N]) {\n}\n", "'N' is both a buffer and a size symbol", "function 'f'"),
    ("func f(A: f32[N]) {\n  local T: f32[K]\n}\n", "uses undefined variable 'K'", "local 'T'"),
    ("func f() {\n}\nfunc f() {\n}\n", "duplicate function name 'f'", "function 'f' at 3:1"),
    ("func f(A: f32[N]) {\n  local x: f32[4] @fragment\n}\n", "needs a constant 2-d shape", "local 'x'"),
    ("func f(A: f32[N]) {\n  local x: f32[4, 4] @fragment\n  S0: A[0] = x[0, 0]\n}\n",
     "an ordinary statement loads from fragment 'x'", "statement 'S0'"),
    ("func f(A: f32[N]) {\n  local x: f32[4, 4] @fragment\n  S0: x[0, 0] = 1.0\n}\n",
     "an ordinary statement stores to fragment 'x'", "statement 'S0'"),
    (kernel_with("      F1: sh = fragment_load<a, m16n16k16.f16.f32, row>(A[0, 0])"),
     "'sh' is not in fragment space (it is @shared)", "statement 'F1'"),
    (kernel_with("      F1: fa = fragment_load<b, m16n16k8.tf32.f32, row>(A[0, 0])"),
     "fragment 'fa' has shape [16, 16] but role 'b' of m16n16k8.tf32.f32 needs [8, 16]", "statement 'F1'"),
    (kernel_with("      F1: fc = fragment_load<a, m16n16k16.bf16.f32, row>(A[0, 0])"),
     "fragment 'fc' has dtype f32 but role 'a' of m16n16k16.bf16.f32 needs bf16", "statement 'F1'"),
    (kernel_with("      F1: fc = fragment_load<acc, m16n16k16.f16.f32, row>(A[0, 0])"),
     "tile buffer 'A' has dtype f16, fragment needs f32", "statement 'F1'"),
    (kernel_with("      F1: fa = fragment_load<a, m16n16k16.f16.f32, row>(A[0, 0, 0])"),
     "rank 2 but is subscripted with 3", "statement 'F1'"),
    (kernel_with("      F3: fc = fragment_mma<m16n16k16.f16.f32>(fb, fa, fx)"),
     "fragment 'fx' has shape [16, 8]", "statement 'F3'"),
    (kernel_with("      F3: fc = fragment_mma<m16n16k16.f16.f32>(fa, fb, fa)"),
     "fragment 'fa' has dtype f16 but role 'acc'", "statement 'F3'"),
    (kernel_with("      F4: fragment_store<m16n16k16.f16.f32, row>(C[0, 0], fa)"),
     "fragment 'fa' has dtype f16 but role 'acc'", "statement 'F4'"),
    (kernel_with("      F4: fragment_store<m16n16k16.f16.f32, row>(fc[0, 0], fc)"),
     "an ordinary statement tiles fragment 'fc'", "statement 'F4'"),
    (kernel_with("      F0: fc = fragment_fill(0.0:f16)"), "fills f32 fragment 'fc' with a f16 value",
     "statement 'F0'"),
    (kernel_with("      F0: nope = fragment_fill(0.0)"), "undefined fragment 'nope'", "statement 'F0'"),
    (kernel_with("      launch k grid(1, 1, 1) block(1, 1, 1) (A, C)"), "launch inside a kernel function",
     "launch of 'k'"),
    ("func h(A: f16[M, K], C: f32[M, N]) {\n  launch k grid(1, 1, 1) block(32, 1, 1) (A)\n}\n" + KERNEL % "",
     "kernel 'k' takes 2 argument(s), launch passes 1", "function 'h', launch of 'k' at 2:3"),
    ("func h(A: f16[M, K], C: f32[M, N]) {\n  launch k grid(1, 1, 1) block(32, 1, 1) (C, A)\n}\n" + KERNEL % "",
     "argument 'C' (f32, rank 2) does not match 'A' (f16, rank 2)", "launch of 'k'"),
    ("func h(A: f16[M, K], C: f32[M, N]) {\n  launch k grid(Q, 1, 1) block(32, 1, 1) (A, C)\n}\n" + KERNEL % "",
     "a grid size uses undefined variable 'Q'", "launch of 'k'"),
    ("func h(A: f16[M, K], C: f32[M, N]) {\n  launch h grid(1, 1, 1) block(32, 1, 1) (A, C)\n}\n",
     "launch of unknown kernel 'h'", "launch of 'h'"),
    ("func h(A: f16[M, K], C: f32[M, N]) {\n  launch k grid(1, 1, 1) block(0, 1, 1) (A, C)\n}\n" + KERNEL % "",
     "block sizes must be integers >= 1", "launch of 'k'"),
]


@pytest.mark.parametrize("text, message, where", INVALID, ids=[f"invalid{k}" for k in range(len(INVALID))])
def test_invalid_modules_are_refused(text: str, message: str, where: str) -> None:
    m = parse(text)
    with pytest.raises(VerifyError) as info:
        verify(m)
    assert message in info.value.message
    assert where in info.value.where
    assert info.value.where.startswith("function '")


def _with_body(*nodes) -> Module:  # type: ignore[no-untyped-def]
    return module(func("f", [buf("A", "f32", "N"), buf("X", "i64", "N")], list(nodes)))


def test_checks_only_reachable_by_construction() -> None:
    i = Aff.var("i")
    cases = [
        (For("i", (), (Aff.var("N"),), ()), "empty lower bound"),
        (For("i", (Aff.const(0),), (), ()), "empty upper bound"),
        (For("i", (Aff.const(0),), (Aff.var("N"),), (), step=0), "loop step must be an integer >= 1"),
        (For("i", (Aff.const(0),), (Aff.var("N"),), (), unroll=-1), "unroll factor must be an integer >= 0"),
        (loop("i", 0, "N", [Assign("S0", "A", (Var("i"),), Const(1.0, DType.F32))]),
         "subscript of 'A' is affine but not an Aff: write it as Aff 'i'"),
        (loop("i", 0, "N", [Assign("S0", "A", (BinOp("%", Var("i"), Const(4, DType.I64)),),
                                   Const(1.0, DType.F32))]), "is affine but not an Aff"),
        (loop("i", 0, "N", [Assign("S0", "A", (i,), Call("erf", (Const(1.0, DType.F32),
                                                                 Const(1.0, DType.F32))))]),
         "erf takes 1 argument(s), found 2"),
        (loop("i", 0, "N", [Assign("S0", "A", (i,), Call("gamma", (Const(1.0, DType.F32),)))]),
         "unknown function 'gamma'"),
        (loop("i", 0, "N", [Assign("S0", "A", (i,), BinOp("**", Const(1.0, DType.F32),
                                                          Const(1.0, DType.F32)))]),
         "unknown binary operator '**'"),
        (loop("i", 0, "N", [FragmentLoad("F0", "A", "a", "m1n1k1", "A", (i,))]), "unknown MMA shape 'm1n1k1'"),
        (loop("cast", 0, "N", []), "loop variable 'cast' is a reserved word"),
        (loop("i j", 0, "N", []), "loop variable 'i j' is not an identifier"),
        (Assign("and", "A", (Aff.const(0),), Const(0.0, DType.F32)), "statement name 'and' is a reserved word"),
        (Launch("k", (Aff.const(1),) * 3, (1, 1, 1), (), -4), "launch of unknown kernel 'k'"),
    ]
    for node, message in cases:
        with pytest.raises(VerifyError) as info:
            verify(_with_body(node))
        assert message in info.value.message, (message, info.value)
        assert info.value.where.startswith("function 'f'")


def test_kernel_kind_and_parameters() -> None:
    bad_kind = Module((Function("f", (), (), kind="device"),))
    with pytest.raises(VerifyError, match="kind must be 'host' or 'kernel'"):
        verify(bad_kind)
    bad_param = Module((Function("f", (buf("A", "f32", "N"), sym("n"), sym("n")), ()),))
    with pytest.raises(VerifyError, match="duplicate parameter name 'n'"):
        verify(bad_param)


def test_where_without_location() -> None:
    m = _with_body(loop("i", 0, "N", [stmt("S7: A[i] = 1")]))
    with pytest.raises(VerifyError) as info:
        verify(m)
    assert info.value.where == "function 'f', statement 'S7'"
    assert str(info.value) == "function 'f', statement 'S7': stores a i64 value into f32 buffer 'A' (use cast)"


def test_expr_dtype() -> None:
    buffers = {"A": Buffer("A", DType.F16, (Aff.var("N"),)), "P": Buffer("P", DType.BOOL, ())}
    assert expr_dtype(expr("A[i] * 2.0:f16"), buffers) is DType.F16
    assert expr_dtype(expr("i + N"), buffers) is DType.I64
    assert expr_dtype(expr("A[i] < A[0]"), buffers) is DType.BOOL
    assert expr_dtype(expr("select(P[], cast<f32>(A[i]), 1.0)"), buffers) is DType.F32
    assert expr_dtype(expr("cast<i8>(A[i]) % 3:i8"), buffers) is DType.I8
    with pytest.raises(VerifyError, match="undefined buffer 'B'"):
        expr_dtype(expr("B[0]"), buffers)
    with pytest.raises(VerifyError, match="dtype mismatch in '\\*': f16 and f32"):
        expr_dtype(expr("A[i] * 2.0"), buffers)
    # fragments and scopes are the verifier's business, not the typing rule's
    frag = {"F": Buffer("F", DType.F32, (Aff.const(16), Aff.const(16)), MemorySpace.FRAGMENT)}
    assert expr_dtype(expr("F[0, 0] + F[1, 1]"), frag) is DType.F32


def test_barrier_inside_thread_mapped_loop_of_host_function_is_valid() -> None:
    # GPU-mapped IR before outlining keeps its barriers in the host function.
    text = """func f(A: f32[64]) {
  local s: f32[32] @shared
  for b = 0 to 2 gpu=block.x {
    for t = 0 to 32 gpu=thread.x {
      S0: s[t] = A[32*b + t]
      barrier
      S1: A[32*b + t] = s[31 - t]
    }
  }
}
"""
    polyir.verify(polyir.parse(text))
    unmapped = text.replace(" gpu=thread.x", "")
    with pytest.raises(polyir.VerifyError, match="outside any thread-mapped loop"):
        polyir.verify(polyir.parse(unmapped))
