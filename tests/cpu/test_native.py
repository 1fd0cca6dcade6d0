"""Native CPU code against numpy oracles, construct by construct."""
from __future__ import annotations

import math

import numpy as np
import pytest

import polyir
from polyir.ir.types import DType, round_to_dtype

RNG = np.random.default_rng(7)


@pytest.mark.parametrize("dtype", ["f16", "bf16", "f32", "f64"])
def test_float_arithmetic_rounds_on_store(native, dtype):
    ex = native(f"""
func f(y: {dtype}[N], x: {dtype}[N], a: {dtype}[]) {{
  for i = 0 to N {{
    S0: y[i] = x[i] * a[] + y[i] / 3.0:{dtype} - 0.1:{dtype}
  }}
}}""")
    d = DType(dtype)
    compute = np.float64 if d is DType.F64 else np.float32
    x = round_to_dtype(RNG.uniform(-4, 4, 1000), d)
    y = round_to_dtype(RNG.uniform(-4, 4, 1000), d)
    a = 1.7
    const = lambda v: compute(round_to_dtype(np.array(v), d))  # noqa: E731
    expected = round_to_dtype(x.astype(compute) * const(a) + y.astype(compute) / const(3.0)
                              - const(0.1), d)
    ex(y, x, a)
    assert y.dtype == d.numpy
    np.testing.assert_array_equal(y, expected)


def test_bf16_round_to_nearest_even_bit_patterns(native):
    ex = native("""
func f(y: bf16[N], x: f32[N]) {
  for i = 0 to N {
    S0: y[i] = cast<bf16>(x[i])
  }
}""")
    bits = np.array([0x3F808000, 0x3F818000, 0x3F808001, 0x3F80FFFF, 0x7F7FFFFF, 0xFF7FFFFF,
                     0x7FC00001, 0x00000001, 0x80008000], dtype=np.uint32)
    x = np.concatenate([bits.view(np.float32), RNG.standard_normal(100).astype(np.float32)])
    y = np.zeros_like(x)
    ex(y, x)
    expected = round_to_dtype(x, DType.BF16)
    np.testing.assert_array_equal(y.view(np.uint32)[~np.isnan(x)],
                                  expected.view(np.uint32)[~np.isnan(x)])
    assert np.isnan(y[np.isnan(x)]).all()


def _c_div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    q = np.abs(a.astype(np.int64)) // np.abs(b.astype(np.int64))
    return np.where((a < 0) == (b < 0), q, -q)


@pytest.mark.parametrize("dtype", ["i8", "i32", "i64"])
def test_integer_division_truncates_and_wraps(native, dtype):
    ex = native(f"""
func f(q: {dtype}[N], r: {dtype}[N], s: {dtype}[N], a: {dtype}[N], b: {dtype}[N]) {{
  for i = 0 to N {{
    S0: q[i] = a[i] / b[i]
    S1: r[i] = a[i] % b[i]
    S2: s[i] = a[i] * b[i] + a[i]
  }}
}}""")
    npt = DType(dtype).numpy
    a = RNG.integers(-100, 100, 500).astype(npt)
    b = RNG.integers(1, 9, 500).astype(npt) * RNG.choice(np.array([-1, 1], dtype=npt), 500)
    q, r, s = (np.zeros(500, npt) for _ in range(3))
    ex(q, r, s, a, b)
    expected_q = _c_div(a, b)
    np.testing.assert_array_equal(q, expected_q.astype(npt))
    np.testing.assert_array_equal(r, (a.astype(np.int64) - b * expected_q).astype(npt))
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(s, (a * b + a).astype(npt))


def test_integer_division_by_zero_and_overflow_do_not_trap(native):
    ex = native("""
func f(q: i32[N], r: i32[N], a: i32[N], b: i32[N]) {
  for i = 0 to N {
    S0: q[i] = a[i] / b[i]
    S1: r[i] = a[i] % b[i]
  }
}""")
    a = np.array([7, -2**31, -2**31, 5], dtype=np.int32)
    b = np.array([0, -1, 1, -1], dtype=np.int32)
    q, r = np.ones(4, np.int32), np.ones(4, np.int32)
    ex(q, r, a, b)
    assert q.tolist() == [0, -2**31, -2**31, -5]
    assert r.tolist() == [0, 0, 0, 0]


def test_affine_floordiv_mod_on_negative_values(native):
    ex = native("""
func f(q: i64[18], m: i64[18], c: i64[18], A: i64[8]) {
  for i = -9 to 9 {
    S0: q[i + 9] = A[i // 4 + 3]
    S1: m[i + 9] = A[i % 4]
    for j = 0 to (i + 11) // 3 {
      S2: c[i + 9] = c[i + 9] + 1
    }
  }
}""")
    q, m, c = (np.zeros(18, np.int64) for _ in range(3))
    A = np.arange(8, dtype=np.int64) * 10
    ex(q, m, c, A)
    ivals = np.arange(-9, 9)
    np.testing.assert_array_equal(q, A[ivals // 4 + 3])
    np.testing.assert_array_equal(m, A[ivals % 4])
    np.testing.assert_array_equal(c, np.maximum(0, (ivals + 11) // 3))


def test_gathered_subscripts_fold_into_one_offset(native):
    """``w[n, k // 9, (k // 3) % 3, k % 3]`` of a constant-shape buffer is
    addressed as ``9*C*n + k`` (``polyir.llvm.lower._flat_offset``); with a
    shift that puts ``k`` below zero the digits still fold exactly."""
    ex = native("""
func f(y: f32[4, 45], z: f32[4, 45], w: f32[4, 5, 3, 3]) {
  for n = 0 to 4 {
    for k = 0 to 45 {
      S0: y[n, k] = w[n, k // 9, (k // 3) % 3, k % 3]
      if (k >= 7) {
        S1: z[n, k] = w[n, (k - 7) // 9, ((k - 7) // 3) % 3, (k - 7) % 3]
      }
    }
  }
}""")
    w = RNG.standard_normal((4, 5, 3, 3)).astype(np.float32)
    y, z = np.zeros((4, 45), np.float32), np.zeros((4, 45), np.float32)
    ex(y, z, w)
    np.testing.assert_array_equal(y, w.reshape(4, 45))
    np.testing.assert_array_equal(z[:, 7:], w.reshape(4, 45)[:, :38])


@pytest.mark.parametrize("n", [1, 4, 9, 20])
def test_max_min_bounds_steps_and_ifs(native, n):
    ex = native("""
func f(A: f64[N, N]) {
  for i = max(0, N - 12) to min(N, 17) step 3 {
    for j = max(i - 2, 1) to min(N, i + 5) step 2 {
      if (i + j >= 4, 2 * j < N + 3) {
        S0: A[i, j] = A[i, j] + 1.0:f64
      } else {
        S1: A[i, j] = A[i, j] - 2.0:f64
      }
      if (i % 2 == 0) {
        S2: A[i, j] = A[i, j] * 3.0:f64
      }
    }
  }
}""")
    A = RNG.standard_normal((n, n))
    expected = A.copy()
    for i in range(max(0, n - 12), min(n, 17), 3):
        for j in range(max(i - 2, 1), min(n, i + 5), 2):
            expected[i, j] += 1.0 if (i + j >= 4 and 2 * j < n + 3) else -2.0
            if i % 2 == 0:
                expected[i, j] *= 3.0
    ex(A)
    np.testing.assert_array_equal(A, expected)


UNARY = {
    "exp": np.exp, "exp2": np.exp2, "log": np.log, "log2": np.log2, "sqrt": np.sqrt,
    "rsqrt": lambda x: 1 / np.sqrt(x), "tanh": np.tanh, "sin": np.sin, "cos": np.cos,
    "floor": np.floor, "ceil": np.ceil, "abs": np.abs, "neg": np.negative,
    "sigmoid": lambda x: 1 / (1 + np.exp(-x)), "erf": np.vectorize(math.erf),
}


@pytest.mark.parametrize("dtype", ["f32", "f64", "f16"])
@pytest.mark.parametrize("fn", sorted(UNARY))
def test_math_functions(native, fn, dtype):
    call = "-x[i]" if fn == "neg" else f"{fn}(x[i])"
    ex = native(f"""
func f(y: {dtype}[N], x: {dtype}[N]) {{
  for i = 0 to N {{
    S0: y[i] = {call}
  }}
}}""")
    d = DType(dtype)
    positive = fn in ("log", "log2", "sqrt", "rsqrt")
    x = round_to_dtype(RNG.uniform(0.01 if positive else -5, 5, 300), d)
    y = np.zeros_like(x)
    ex(y, x)
    expected = round_to_dtype(UNARY[fn](x.astype(np.float64)), d)
    tolerance = {"f16": 1e-3, "f32": 3e-7, "f64": 1e-15}[dtype]
    np.testing.assert_allclose(y, expected, rtol=tolerance, atol=tolerance)


def test_binary_math_nan_and_select(native):
    ex = native("""
func f(mx: f32[N], mn: f32[N], p: f64[N], s: f32[N], a: f32[N], b: f32[N]) {
  for i = 0 to N {
    S0: mx[i] = max(a[i], b[i])
    S1: mn[i] = min(a[i], b[i])
    S2: p[i] = pow(abs(cast<f64>(a[i])), cast<f64>(b[i]))
    S3: s[i] = select(a[i] > b[i] and not (a[i] == 0.0), a[i] - b[i], b[i] % 0.75)
  }
}""")
    a = RNG.uniform(-3, 3, 200).astype(np.float32)
    b = RNG.uniform(-3, 3, 200).astype(np.float32)
    a[:5] = np.nan
    b[3:8] = np.nan
    out = [np.zeros(200, np.float32), np.zeros(200, np.float32), np.zeros(200, np.float64),
           np.zeros(200, np.float32)]
    ex(*out, a, b)
    np.testing.assert_array_equal(out[0], np.fmax(a, b))
    np.testing.assert_array_equal(out[1], np.fmin(a, b))
    np.testing.assert_allclose(out[2], np.abs(a.astype(np.float64)) ** b.astype(np.float64),
                               rtol=1e-14)
    expected = np.where((a > b) & ~(a == 0), a - b, np.fmod(b, np.float32(0.75)))
    np.testing.assert_array_equal(out[3], expected)


def test_casts(native):
    ex = native("""
func f(i: i32[N], j: i8[N], k: i64[N], g: f32[N], h: f16[N], t: bool[N], x: f32[N], n: i64[N]) {
  for q = 0 to N {
    S0: i[q] = cast<i32>(x[q])
    S1: j[q] = cast<i8>(n[q])
    S2: k[q] = cast<i64>(x[q] > 0.0) + cast<i64>(t[q])
    S3: g[q] = cast<f32>(n[q]) + cast<f32>(cast<f16>(x[q]))
    S4: h[q] = cast<f16>(cast<f64>(x[q]) * 2.0:f64)
    S5: t[q] = cast<bool>(x[q]) or cast<bool>(n[q])
  }
}""")
    x = np.array([1.7, -1.7, 3e9, -3e9, np.nan, 0.0, 70000.0, 2.5], dtype=np.float32)
    n = np.array([300, -129, 5, 0, 2**40 + 3, 7, -1, 0], dtype=np.int64)
    t0 = np.array([True, False] * 4)
    out = [np.zeros(8, np.int32), np.zeros(8, np.int8), np.zeros(8, np.int64),
           np.zeros(8, np.float32), np.zeros(8, np.float16), t0.copy()]
    ex(*out, x, n)
    assert out[0].tolist() == [1, -1, 2**31 - 1, -2**31, 0, 0, 70000, 2]
    assert out[1].tolist() == n.astype(np.int8).tolist()
    assert out[2].tolist() == ((x > 0).astype(np.int64) + t0).tolist()
    with np.errstate(over="ignore"):
        expected_g = n.astype(np.float32) + x.astype(np.float16).astype(np.float32)
        expected_h = (x.astype(np.float64) * 2).astype(np.float16)
    np.testing.assert_array_equal(out[3], expected_g)
    np.testing.assert_array_equal(out[4], expected_h)
    assert out[5].tolist() == ((x != 0) | (n != 0)).tolist()


def test_integer_ops(native):
    ex = native("""
func f(p: i32[N], m: i64[N], a: i32[N], b: i32[N]) {
  for i = 0 to N {
    S0: p[i] = pow(a[i], b[i])
    S1: m[i] = max(cast<i64>(abs(a[i])), -cast<i64>(b[i])) + min(i, 3)
  }
}""")
    a = np.array([2, -3, 1, -1, -1, 5, 0, 7], dtype=np.int32)
    b = np.array([10, 3, -5, -3, -4, -1, 0, 20], dtype=np.int32)
    p, m = np.zeros(8, np.int32), np.zeros(8, np.int64)
    ex(p, m, a, b)
    expected = [(int(x) ** int(y)) if y >= 0 else (1 if x == 1 else (-1 if y % 2 else 1)
                                                   if x == -1 else 0) for x, y in zip(a, b, strict=True)]
    assert p.tolist() == [((v + 2**31) % 2**32) - 2**31 for v in expected]
    assert m.tolist() == [max(abs(int(x)), -int(y)) + min(i, 3)
                          for i, (x, y) in enumerate(zip(a, b, strict=True))]


def test_locals_stack_heap_and_symbolic(native):
    ex = native("""
func f(y: f32[N], x: f32[N]) {
  local t: f32[] @local
  local small: f32[8] @local
  local big: f64[5000] @local
  local sym: f32[N, 2] @global
  for i = 0 to N {
    S0: t[] = x[i] * 2.0
    S1: sym[i, 1] = t[] + small[i % 8]
    S2: big[i] = big[i + 1] + 1.0:f64
  }
  for i2 = 0 to N {
    S3: y[i2] = sym[i2, 1] + sym[i2, 0] + cast<f32>(big[i2])
  }
}""")
    x = RNG.standard_normal(37).astype(np.float32)
    y = np.zeros(37, np.float32)
    ex(y, x)
    np.testing.assert_array_equal(y, x * 2 + 1)


def test_gather_and_bool_buffers(native):
    ex = native("""
func f(out: f32[N, D], E: f32[V, D], idx: i32[N], keep: bool[N]) {
  for i = 0 to N {
    for j = 0 to D {
      S0: out[i, j] = select(keep[i], E[cast<i64>(idx[i]), j], -1.0)
    }
  }
}""")
    E = RNG.standard_normal((10, 4)).astype(np.float32)
    idx = RNG.integers(0, 10, 6).astype(np.int32)
    keep = RNG.integers(0, 2, 6).astype(bool)
    out = np.zeros((6, 4), np.float32)
    ex(out, E, idx, keep)
    np.testing.assert_array_equal(out, np.where(keep[:, None], E[idx], -1.0))


def test_explicit_symbols_and_scalars(native):
    ex = native("""
func f(y: f32[N], alpha: f32[], n: index, k: i64[]) {
  for i = 0 to min(N, n) {
    S0: y[i] = y[i] * alpha[] + cast<f32>(k[] + i)
  }
}""")
    y = np.ones(10, np.float32)
    ex(y, 2.0, 6, 100)
    np.testing.assert_array_equal(y, np.where(np.arange(10) < 6, 2.0 + 100 + np.arange(10), 1.0))
    alpha = np.array(3.0, np.float32)
    ex(y, alpha, 0, np.int64(1))
    np.testing.assert_array_equal(y, np.where(np.arange(10) < 6, 2.0 + 100 + np.arange(10), 1.0))


def test_zero_size_arrays(native):
    ex = native("""
func f(y: f32[N, M], x: f32[N, M]) {
  for i = 0 to N {
    for j = 0 to M {
      S0: y[i, j] = x[i, j] + 1.0
    }
  }
}""")
    y, x = np.zeros((0, 5), np.float32), np.zeros((0, 5), np.float32)
    ex(y, x)
    assert y.shape == (0, 5)


def test_casts_to_half_precision_round_once(native):
    """f64 and integer sources round directly to f16/bf16 (no double rounding
    through float32): checked against the interpreter's exact rounding."""
    from polyir.ir.interpreter import interpret
    text = """
func f(h: f16[N], b: bf16[N], hi: f16[N], bi: bf16[N], x: f64[N], n: i64[N]) {
  for q = 0 to N {
    S0: h[q] = cast<f16>(x[q])
    S1: b[q] = cast<bf16>(x[q])
    S2: hi[q] = cast<f16>(n[q])
    S3: bi[q] = cast<bf16>(n[q])
  }
}"""
    ex = native(text)
    # halfway cases of f16 / bf16 nudged by less than float32 resolution
    x = np.array([1 + 2**-11 + 2**-40, 1 + 2**-8 + 2**-40, 1 + 2**-8 - 2**-40, -3.0000001,
                  1e-3, 65519.0, 65520.0, 3.3895e38, 1e300, np.nan, -np.inf, 0.1])
    n = np.array([2049, 2051, 257, 259, -(2**24 + 1), 2**40 + 2**32, 65521, -3, 0, 7, 1, 2],
                 dtype=np.int64)
    outs = [np.zeros(12, np.float16), np.zeros(12, np.float32), np.zeros(12, np.float16),
            np.zeros(12, np.float32)]
    expected = [o.copy() for o in outs]
    ex(*outs, x, n)
    interpret(polyir.parse(text), *expected, x, n)
    for got, want in zip(outs, expected, strict=True):
        np.testing.assert_array_equal(got, want)
    assert outs[1][0] == 1.0 and outs[1][1] == 1 + 2**-7 and outs[1][2] == 1.0
