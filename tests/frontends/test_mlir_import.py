"""Importing hand-written affine MLIR: each program runs in polyir's interpreter
and is checked against numpy or the plain Python loop nest it spells; refusals
name the operation and where it is."""
from __future__ import annotations

import math

import numpy as np
import pytest

pytest.importorskip("xdsl", reason="the MLIR importer needs xDSL (pip install -e '.[mlir]')")

import polyir  # noqa: E402
from polyir.errors import ParseError, UnsupportedMLIR  # noqa: E402
from polyir.frontends.mlir import export_mlir, import_mlir  # noqa: E402
from polyir.frontends.mlir.tools import mlir_opt, run_mlir_opt  # noqa: E402
from polyir.ir.nodes import Buffer, For, Module, Symbol  # noqa: E402
from polyir.ir.types import DType  # noqa: E402
from polyir.testing import assert_equivalent, random_arguments  # noqa: E402

RNG = np.random.default_rng(7)

MATMUL = """
func.func @matmul(%A: memref<?x?xf32>, %B: memref<?x?xf32>, %C: memref<?x?xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %M = memref.dim %A, %c0 : memref<?x?xf32>
  %K = memref.dim %A, %c1 : memref<?x?xf32>
  %N = memref.dim %B, %c1 : memref<?x?xf32>
  affine.for %i = 0 to %M {
    affine.for %j = 0 to %N {
      %init = affine.load %C[%i, %j] : memref<?x?xf32>
      %sum = affine.for %k = 0 to %K iter_args(%acc = %init) -> (f32) {
        %a = affine.load %A[%i, %k] : memref<?x?xf32>
        %b = affine.load %B[%k, %j] : memref<?x?xf32>
        %p = arith.mulf %a, %b : f32
        %s = arith.addf %acc, %p : f32
        affine.yield %s : f32
      }
      affine.store %sum, %C[%i, %j] : memref<?x?xf32>
    }
  }
  return
}
"""

CONV = """
#window = affine_map<(d0, d1) -> (d0 + d1 * 2)>
func.func @conv(%X: memref<?x13xf64>, %W: memref<3x3xf64>, %Y: memref<?x5xf64>, %bias: f64) {
  %c0 = arith.constant 0 : index
  %H = memref.dim %Y, %c0 : memref<?x5xf64>
  affine.for %y = 0 to %H {
    affine.for %x = 0 to 5 {
      %s = affine.for %ky = 0 to 3 iter_args(%outer = %bias) -> (f64) {
        %t = affine.for %kx = 0 to 3 iter_args(%inner = %outer) -> (f64) {
          %row = affine.apply affine_map<(d0, d1) -> (d0 + d1)>(%y, %ky)
          %col = affine.apply #window(%kx, %x)
          %v = affine.load %X[%row, %col] : memref<?x13xf64>
          %w = affine.load %W[%ky, %kx] : memref<3x3xf64>
          %p = arith.mulf %v, %w : f64
          %n = arith.addf %inner, %p : f64
          affine.yield %n : f64
        }
        affine.yield %t : f64
      }
      affine.store %s, %Y[%y, %x] : memref<?x5xf64>
    }
  }
  return
}
"""

TRIANGULAR = """
func.func @tri(%L: memref<?x?xf32>, %out: memref<?xf32>, %n: index) {
  affine.for %i = 0 to %n {
    affine.for %j = max affine_map<(d0) -> (0, d0 - 2)>(%i) to min affine_map<(d0)[s0] -> (d0 + 1, s0)>(%i)[%n] step 2 {
      %a = affine.load %L[%i, %j] : memref<?x?xf32>
      %o = affine.load %out[%i] : memref<?xf32>
      %s = arith.addf %o, %a : f32
      affine.store %s, %out[%i] : memref<?xf32>
    }
  }
  %ub = affine.min affine_map<()[s0] -> (s0, 3)>()[%n]
  affine.for %t = 0 to %ub {
    %v = affine.load %out[%t] : memref<?xf32>
    %d = arith.mulf %v, %v : f32
    affine.store %d, %out[%t] : memref<?xf32>
  }
  return
}
"""

CONDITIONS = """
func.func @cond(%A: memref<?xf32>, %B: memref<?xf32>) {
  %c0 = arith.constant 0 : index
  %N = memref.dim %A, %c0 : memref<?xf32>
  affine.for %i = 0 to %N {
    affine.if affine_set<(d0)[s0] : (d0 mod 2 == 0, s0 - d0 - 2 >= 0)>(%i)[%N] {
      %a = affine.load %A[%i + 1] : memref<?xf32>
      affine.store %a, %B[%i] : memref<?xf32>
    } else {
      %z = arith.constant -1.0 : f32
      affine.store %z, %B[%i] : memref<?xf32>
    }
    %v = affine.if affine_set<(d0) : (d0 - 3 >= 0)>(%i) -> f32 {
      %one = arith.constant 1.0 : f32
      affine.yield %one : f32
    } else {
      %two = arith.constant 2.0 : f32
      affine.yield %two : f32
    }
    %b = affine.load %B[%i] : memref<?xf32>
    %s = arith.addf %b, %v : f32
    affine.store %s, %B[%i] : memref<?xf32>
  }
  return
}
"""

DYNAMIC = """
func.func @scratch(%A: memref<?x?xf32>, %out: memref<?xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %rows = memref.dim %A, %c0 : memref<?x?xf32>
  %cols = memref.dim %A, %c1 : memref<?x?xf32>
  %t = memref.alloc(%cols) : memref<?xf32>
  %acc = memref.alloca() : memref<f32>
  affine.for %i = 0 to %rows {
    affine.for %j = 0 to %cols {
      %a = affine.load %A[%i, %j] : memref<?x?xf32>
      %e = math.exp %a : f32
      affine.store %e, %t[%j] : memref<?xf32>
    }
    %zero = arith.constant 0.0 : f32
    affine.store %zero, %acc[] : memref<f32>
    affine.for %j = 0 to %cols {
      %e = affine.load %t[%j] : memref<?xf32>
      %s = affine.load %acc[] : memref<f32>
      %n = arith.addf %s, %e : f32
      affine.store %n, %acc[] : memref<f32>
    }
    %total = affine.load %acc[] : memref<f32>
    affine.store %total, %out[%i] : memref<?xf32>
  }
  memref.dealloc %t : memref<?xf32>
  return
}
"""


def _f32(*shape: int) -> np.ndarray:
    return RNG.uniform(-1, 1, size=shape).astype(np.float32)


def test_matmul_with_iter_args_accumulates_in_a_scalar() -> None:
    module = import_mlir(MATMUL, "matmul.mlir")
    function = module.entry
    assert [p.name for p in function.params] == ["A", "B", "C"]
    assert isinstance(function.params[0], Buffer) and function.params[0].dtype is DType.F32
    assert [str(d) for d in function.params[0].shape] == ["M", "K"]
    assert any(b.rank == 0 for b in function.locals), "iter_args become a 0-d local"
    A, B, C = _f32(4, 3), _f32(3, 5), _f32(4, 5)
    expected = C + A @ B
    polyir.interpret(module, A, B, C)
    np.testing.assert_allclose(C, expected, rtol=1e-5, atol=1e-6)


def test_conv_with_affine_apply_and_scalar_argument() -> None:
    module = import_mlir(CONV, "conv.mlir")
    X, W, Y = RNG.uniform(-1, 1, (6, 13)), RNG.uniform(-1, 1, (3, 3)), np.zeros((4, 5))
    polyir.interpret(module, X, W, Y, 0.25)
    expected = np.array([[0.25 + sum(X[y + ky, 2 * x + kx] * W[ky, kx] for ky in range(3) for kx in range(3))
                          for x in range(5)] for y in range(4)])
    np.testing.assert_allclose(Y, expected, rtol=1e-12)


def test_triangular_bounds_with_min_max_steps_and_affine_min() -> None:
    module = import_mlir(TRIANGULAR, "tri.mlir")
    assert isinstance(module.entry.params[2], Symbol)
    loops = [n for n in module.entry.body if isinstance(n, For)]
    assert [str(a) for a in loops[1].upper] == ["n", "3"], "affine.min result expands into a min bound"
    for n in (1, 2, 5):
        L, out = _f32(n, n), _f32(n)
        expected = out.astype(np.float64).copy()
        for i in range(n):
            for j in range(max(0, i - 2), min(i + 1, n), 2):
                expected[i] = np.float32(expected[i] + L[i, j])
        for t in range(min(n, 3)):
            expected[t] = np.float32(expected[t] * expected[t])
        polyir.interpret(module, L, out, n)
        np.testing.assert_allclose(out, expected, rtol=1e-6)


def test_affine_if_with_integer_sets_else_and_results() -> None:
    module = import_mlir(CONDITIONS, "cond.mlir")
    A, B = _f32(7), _f32(7)
    expected = B.copy()
    for i in range(7):
        expected[i] = A[i + 1] if i % 2 == 0 and 7 - i - 2 >= 0 else -1.0
        expected[i] += 1.0 if i >= 3 else 2.0
    polyir.interpret(module, A, B)
    np.testing.assert_allclose(B, expected, rtol=1e-6)


def test_dynamic_alloc_alloca_dim_and_dealloc() -> None:
    module = import_mlir(DYNAMIC, "scratch.mlir")
    locals_ = {b.name: b for b in module.entry.locals}
    assert [str(d) for d in locals_["t"].shape] == ["cols"] and locals_["acc"].rank == 0
    A, out = _f32(3, 4), _f32(3)
    polyir.interpret(module, A, out)
    np.testing.assert_allclose(out, np.exp(A.astype(np.float64)).sum(axis=1), rtol=1e-5)


def test_loaded_values_keep_their_ssa_meaning_across_stores() -> None:
    """``%old`` is read before the store that overwrites A[0]; polyir must not
    re-read A[0] after it (the importer saves the value in a temporary)."""
    text = """
    func.func @f(%A: memref<4xf32>, %B: memref<4xf32>) {
      %old = affine.load %A[0] : memref<4xf32>
      %two = arith.constant 2.0 : f32
      %new = arith.mulf %old, %two : f32
      affine.store %new, %A[0] : memref<4xf32>
      affine.for %i = 0 to 4 {
        affine.store %old, %B[%i] : memref<4xf32>
        affine.store %new, %A[%i] : memref<4xf32>
      }
      return
    }"""
    module = import_mlir(text)
    A, B = np.array([3.0, 1, 1, 1], np.float32), np.zeros(4, np.float32)
    polyir.interpret(module, A, B)
    np.testing.assert_array_equal(B, [3.0] * 4)
    np.testing.assert_array_equal(A, [6.0] * 4)


def test_a_store_through_an_alias_made_inside_a_loop_saves_live_values_first() -> None:
    text = """
    func.func @f(%A: memref<4xf32>, %B: memref<4xf32>) {
      %old = affine.load %A[0] : memref<4xf32>
      affine.for %i = 0 to 4 {
        %alias = memref.cast %A : memref<4xf32> to memref<?xf32>
        %one = arith.constant 1.0 : f32
        affine.store %one, %alias[%i] : memref<?xf32>
        affine.store %old, %B[%i] : memref<4xf32>
      }
      return
    }"""
    A, B = np.full(4, 5.0, np.float32), np.zeros(4, np.float32)
    polyir.interpret(import_mlir(text), A, B)
    np.testing.assert_array_equal(B, [5.0] * 4)
    np.testing.assert_array_equal(A, [1.0] * 4)


def test_iter_args_swap_is_a_parallel_assignment() -> None:
    text = """
    func.func @f(%out: memref<2xi32>) {
      %a0 = arith.constant 1 : i32
      %b0 = arith.constant 2 : i32
      %r:2 = affine.for %i = 0 to 3 iter_args(%a = %a0, %b = %b0) -> (i32, i32) {
        affine.yield %b, %a : i32, i32
      }
      affine.store %r#0, %out[0] : memref<2xi32>
      affine.store %r#1, %out[1] : memref<2xi32>
      return
    }"""
    out = np.zeros(2, np.int32)
    polyir.interpret(import_mlir(text), out)
    np.testing.assert_array_equal(out, [2, 1])


def _run_scalar_op(body: str, in_type: str, out_type: str, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    text = f"""
    func.func @op(%A: memref<?x{in_type}>, %B: memref<?x{in_type}>, %R: memref<?x{out_type}>) {{
      %c0 = arith.constant 0 : index
      %n = memref.dim %A, %c0 : memref<?x{in_type}>
      affine.for %i = 0 to %n {{
        %a = affine.load %A[%i] : memref<?x{in_type}>
        %b = affine.load %B[%i] : memref<?x{in_type}>
        {body}
        affine.store %r, %R[%i] : memref<?x{out_type}>
      }}
      return
    }}"""
    out = np.zeros(a.shape, dtype={"i1": bool, "f32": np.float32, "i32": np.int32, "i64": np.int64,
                                   "f64": np.float64, "f16": np.float16}[out_type])
    polyir.interpret(import_mlir(text), a, b, out)
    return out


FLOATS = np.array([1.0, -2.0, np.nan, 0.5, np.inf, -0.0], np.float32)
OTHERS = np.array([1.0, 3.0, 1.0, np.nan, -np.inf, 0.0], np.float32)


@pytest.mark.parametrize("predicate, oracle", [
    ("olt", lambda a, b: a < b), ("ule", lambda a, b: ~(a > b)), ("one", lambda a, b: (a < b) | (a > b)),
    ("ueq", lambda a, b: ~((a < b) | (a > b))), ("ord", lambda a, b: ~np.isnan(a) & ~np.isnan(b)),
    ("uno", lambda a, b: np.isnan(a) | np.isnan(b)), ("une", lambda a, b: a != b),
    ("uge", lambda a, b: ~(a < b)), ("true", lambda a, b: np.ones_like(a, bool)),
])
def test_cmpf_predicates_follow_ieee_ordering(predicate, oracle) -> None:
    got = _run_scalar_op(f"%r = arith.cmpf {predicate}, %a, %b : f32", "f32", "i1", FLOATS, OTHERS)
    np.testing.assert_array_equal(got, oracle(FLOATS, OTHERS))


INTS = np.array([7, -7, 7, -7, 0, -2147483648, 5], np.int32)
DIVISORS = np.array([2, 2, -2, -2, 3, 1, -1], np.int32)


@pytest.mark.parametrize("op, oracle", [
    ("floordivsi", lambda a, b: a // b),
    ("ceildivsi", lambda a, b: -(-a // b)),
    ("remsi", lambda a, b: np.fmod(a, b)),
    ("divsi", lambda a, b: np.trunc(a / b).astype(np.int64)),
    ("maxsi", np.maximum),
])
def test_integer_division_family(op, oracle) -> None:
    a, b = INTS[:5] if op != "maxsi" else INTS, DIVISORS[:5] if op != "maxsi" else DIVISORS
    got = _run_scalar_op(f"%r = arith.{op} %a, %b : i32", "i32", "i32", a, b)
    np.testing.assert_array_equal(got, oracle(a.astype(np.int64), b.astype(np.int64)).astype(np.int32))


@pytest.mark.parametrize("predicate", ["ult", "uge"])
def test_unsigned_integer_compares(predicate) -> None:
    got = _run_scalar_op(f"%r = arith.cmpi {predicate}, %a, %b : i32", "i32", "i1", INTS, DIVISORS)
    ua, ub = INTS.view(np.uint32), DIVISORS.view(np.uint32)
    np.testing.assert_array_equal(got, ua < ub if predicate == "ult" else ua >= ub)


def test_extui_and_uitofp_treat_bits_as_unsigned() -> None:
    got = _run_scalar_op("%r = arith.extui %a : i32 to i64", "i32", "i64", INTS, DIVISORS)
    np.testing.assert_array_equal(got, INTS.view(np.uint32).astype(np.int64))
    got = _run_scalar_op("%r = arith.uitofp %a : i32 to f64", "i32", "f64", INTS, DIVISORS)
    np.testing.assert_array_equal(got, INTS.view(np.uint32).astype(np.float64))


def test_maximumf_propagates_nan_but_maxnumf_does_not() -> None:
    got = _run_scalar_op("%r = arith.maximumf %a, %b : f32", "f32", "f32", FLOATS, OTHERS)
    np.testing.assert_array_equal(got, np.maximum(FLOATS, OTHERS))
    got = _run_scalar_op("%r = arith.maxnumf %a, %b : f32", "f32", "f32", FLOATS, OTHERS)
    np.testing.assert_array_equal(got, np.fmax(FLOATS, OTHERS))


def test_f16_arithmetic_rounds_every_operation() -> None:
    """MLIR rounds each f16 op; polyir computes f16 in f32, so the importer rounds explicitly."""
    a = np.array([1.0, 1000.0, 0.1], np.float16)
    b = np.array([2.0 ** -11, 0.3, 3.0], np.float16)
    body = "%s = arith.addf %a, %b : f16\n %r = arith.subf %s, %a : f16"
    got = _run_scalar_op(body, "f16", "f16", a, b)
    np.testing.assert_array_equal(got, (a + b) - a)   # numpy float16 rounds each op too


def test_math_functions() -> None:
    x = np.array([0.25, 0.5, 2.0], np.float64)
    body = ("%e = math.exp %a : f64\n %l = math.log %b : f64\n %t = math.tanh %e : f64\n"
            "%q = math.rsqrt %b : f64\n %p = math.powf %t, %q : f64\n %s = arith.addf %p, %l : f64\n"
            "%r = math.erf %s : f64")
    got = _run_scalar_op(body, "f64", "f64", x, x + 1)
    expected = [math.erf(math.tanh(math.exp(v)) ** (1 / math.sqrt(v + 1)) + math.log(v + 1)) for v in x]
    np.testing.assert_allclose(got, expected, rtol=1e-12)


@pytest.mark.parametrize("text, op, line, column", [
    ("func.func @f() {\n  scf.execute_region {\n    scf.yield\n  }\n  return\n}", "scf.execute_region", 2, 3),
    ("func.func @f(%A: memref<4xf32>) {\n  affine.parallel (%i) = (0) to (4) {\n  }\n  return\n}",
     "affine.parallel", 2, 3),
    ("func.func @g()\nfunc.func @f() {\n  func.call @g() : () -> ()\n  return\n}", "func.call", 3, 3),
    ("func.func @f(%A: memref<4xf32>) -> f32 {\n  %0 = arith.constant 1.0 : f32\n  return %0 : f32\n}",
     "func.func", 1, 1),
    ("func.func @f(%A: memref<4xvector<2xf32>>) {\n  return\n}", "func.func", 1, 1),
    ("func.func @f(%A: memref<4xf32>) {\n  %x = affine.load %A[0] : memref<4xf32>\n"
     "  %i = arith.fptosi %x : f32 to i32\n  %j = arith.index_cast %i : i32 to index\n"
     "  affine.for %k = 0 to %j {\n  }\n  return\n}", "affine.for", 5, 3),
    ("func.func @f(%a: i32) {\n  %0 = arith.shli %a, %a : i32\n  return\n}", "arith.shli", 2, 3),
    ("func.func @f() {\n  %0 = foo.bar() : () -> i32\n  return\n}", "foo.bar", 2, 8),
    ("func.func @f(%n: index) {\n  %c = arith.constant 3 : index\n"
     "  %0 = affine.apply affine_map<(d0)[s0] -> (d0 floordiv s0)>(%c)[%n]\n  return\n}", "affine.apply", 3, 3),
])
def test_unsupported_operations_are_named_with_their_position(text, op, line, column) -> None:
    with pytest.raises(UnsupportedMLIR) as info:
        import_mlir(text, "bad.mlir")
    error = info.value
    assert (error.op, error.line, error.column) == (op, line, column)
    assert str(error).startswith(f"bad.mlir:{line}:{column}: unsupported MLIR operation '{op}'")
    assert isinstance(error, polyir.UnsupportedOp)


def test_malformed_text_is_a_parse_error_with_position() -> None:
    with pytest.raises(ParseError) as info:
        import_mlir("func.func @f() {\n  %0 = arith.constant : f32\n}", "x.mlir")
    assert info.value.line == 2 and info.value.column > 1


SIZES = {"X_d0": 6, "H": 4}
"""Sizes for the hand-written programs: 4 for every symbol, the convolution's input taller."""


def _sizes(module: Module) -> dict[str, int]:
    return {name: SIZES.get(name, 4) for name in module.entry.symbols}


@pytest.mark.parametrize("text", [MATMUL, CONV, TRIANGULAR, CONDITIONS, DYNAMIC])
def test_import_export_import_round_trip(text) -> None:
    module = import_mlir(text)
    again = import_mlir(export_mlir(module))
    assert_equivalent(module, again, trials=2, sizes=_sizes(module))


@pytest.mark.skipif(mlir_opt() is None, reason="mlir-opt is not installed (apt-get install mlir-22-tools)")
@pytest.mark.parametrize("text", [MATMUL, CONV, TRIANGULAR, CONDITIONS, DYNAMIC])
def test_mlir_opt_accepts_the_inputs_and_its_output_imports_to_the_same_meaning(text) -> None:
    printed = run_mlir_opt(text, ["-canonicalize"])   # renames values, adds #map aliases, folds
    assert "%arg0" in printed
    _assert_same_results(import_mlir(text), import_mlir(printed))


def _assert_same_results(a: Module, b: Module) -> None:
    """Both programs on the same random arguments (positionally: mlir-opt renames them)."""
    for seed in range(2):
        args = random_arguments(a, seed, sizes=_sizes(a))
        args = [x if not isinstance(p, Buffer) or p.rank else float(x) for p, x in zip(a.entry.params, args, strict=True)]
        copies = [x.copy() if isinstance(x, np.ndarray) else x for x in args]
        polyir.interpret(a, *args)
        polyir.interpret(b, *copies)
        for x, y in zip(args, copies, strict=True):
            if isinstance(x, np.ndarray):
                np.testing.assert_allclose(x, y, rtol=1e-6, atol=1e-7)
