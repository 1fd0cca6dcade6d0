"""Native code keeps the IR's float semantics unless an option allows otherwise."""
from __future__ import annotations

import logging

import numpy as np
import pytest

import polyir
from polyir.cpu.jit import build_cpu
from polyir.target import cpu

VECTORIZED_SUM = """
func r(s: f32[1], a: f32[N]) {
  for k = 0 to N vectorize=8 {
    S0: s[0] = s[0] + a[k]
  }
}"""


def test_vectorize_hint_does_not_reorder_a_float_sum(caplog) -> None:
    a = np.random.default_rng(0).standard_normal(1001).astype(np.float32)
    with caplog.at_level(logging.WARNING, logger="polyir.llvm"):
        exact = build_cpu(polyir.parse(VECTORIZED_SUM), cpu(1), cache_dir=None)
    assert "not vectorised" in caplog.text
    s = np.zeros(1, np.float32)
    exact(s, a)
    assert s[0] == np.cumsum(a)[-1]                 # the sequential order, bit for bit
    fast = build_cpu(polyir.parse(VECTORIZED_SUM), cpu(1), cache_dir=None, fast_math=True)
    assert "llvm.loop.vectorize.enable" in fast.llvm_ir
    s = np.zeros(1, np.float32)
    fast(s, a)
    np.testing.assert_allclose(s[0], a.astype(np.float64).sum(), rtol=1e-4)


def test_vectorize_hint_kept_where_it_reorders_nothing() -> None:
    text = """
func f(C: f32[N], A: f32[N, M]) {
  for i = 0 to N vectorize=8 {
    for j = 0 to M {
      S0: C[i] = C[i] + A[i, j]
    }
  }
}"""
    assert "llvm.loop.vectorize.enable" in build_cpu(polyir.parse(text), cpu(1), cache_dir=None).llvm_ir


@pytest.mark.parametrize("fn", ["floor", "ceil"])
def test_floor_and_ceil_keep_the_sign_of_zero_in_interpreter_and_native(fn: str) -> None:
    """Differential: the interpreter and native code agree bit for bit on
    values whose result is a zero (issue 16's 1,393 sign-of-zero differences)."""
    text = f"func f(Y: f64[N], X: f64[N]) {{\n  for i = 0 to N {{\n    S0: Y[i] = {fn}(X[i])\n  }}\n}}\n"
    X = np.array([-0.0, 0.0, -0.5, 0.5, -0.999, 0.999, -1.5, 2.5, np.inf, -np.inf, 1e-300, -1e-300])
    interpreted, native = np.empty_like(X), np.empty_like(X)
    polyir.interpret(polyir.parse(text), interpreted, X)
    build_cpu(polyir.parse(text), cpu(1), cache_dir=None)(native, X)
    assert interpreted.tobytes() == native.tobytes()
    assert interpreted.tobytes() == getattr(np, fn)(X).tobytes()


@pytest.mark.parametrize("fn", ["max", "min"])
@pytest.mark.parametrize("dtype", ["f32", "f64"])
def test_max_min_of_signed_zeros_and_nans_agree_bit_for_bit(fn: str, dtype: str) -> None:
    text = (f"func f(Y: {dtype}[N], A: {dtype}[N], B: {dtype}[N]) {{\n  for i = 0 to N {{\n"
            f"    S0: Y[i] = {fn}(A[i], B[i])\n  }}\n}}\n")
    values = [0.0, -0.0, np.nan, 1.0, -1.0, np.inf, -np.inf]
    A = np.array([a for a in values for _ in values], dtype=dtype.replace("f", "float"))
    B = np.array([b for _ in values for b in values], dtype=A.dtype)
    interpreted, native = np.empty_like(A), np.empty_like(A)
    polyir.interpret(polyir.parse(text), interpreted, A, B)
    build_cpu(polyir.parse(text), cpu(1), cache_dir=None)(native, A, B)
    assert interpreted.tobytes() == native.tobytes()
    pick = (A > B) if fn == "max" else (A < B)
    np.testing.assert_array_equal(np.signbit(interpreted), np.signbit(np.where(pick | np.isnan(B), A, B)))


def test_f64_to_bf16_rounds_correctly_below_the_normal_range() -> None:
    """Differential: native f64 -> bf16 equals the interpreter's exact rounding
    bit for bit, on subnormal, normal, huge and special values."""
    text = "func f(Y: bf16[N], X: f64[N]) {\n  for i = 0 to N {\n    S0: Y[i] = cast<bf16>(X[i])\n  }\n}\n"
    rng = np.random.default_rng(0)
    X = np.concatenate([rng.standard_normal(3000) * 10.0 ** rng.integers(-46, 40, 3000),
                        [1e-40, -1e-40, 5e-45, 1e-39, 3.3895e38, 3.40e38, 1e39, -0.0, np.inf, np.nan]])
    interpreted, native = np.zeros(len(X), np.float32), np.zeros(len(X), np.float32)
    polyir.interpret(polyir.parse(text), interpreted, X)
    build_cpu(polyir.parse(text), cpu(1), cache_dir=None)(native, X)
    assert interpreted.tobytes() == native.tobytes()
    assert not (native.view(np.uint32) & 0xFFFF).any()         # every result is a bf16 value


def test_torch_float_division_family_matches_eager_on_edge_values() -> None:
    """Differential against eager: floor division, remainder, fmod and trunc
    division on signed zeros, infinities, NaN, tiny and inexact operands, bit
    for bit (NaNs as NaNs). Left out: |x / y| overflowing float, where eager's
    vectorised fmod gives NaN and polyir the exact C remainder."""
    torch = pytest.importorskip("torch")
    values = [0.0, -0.0, 1.0, -1.0, 2.5, -2.5, 7.0, -7.0, 1e-30, -1e-30, float("inf"),
              float("-inf"), float("nan"), 0.1, -0.1, 3.0, 1e3]
    a = torch.tensor([x for x in values for _ in values], dtype=torch.float32)
    b = torch.tensor([y for _ in values for y in values], dtype=torch.float32)
    ops = {"floor": lambda x, y: torch.div(x, y, rounding_mode="floor"),
           "trunc": lambda x, y: torch.div(x, y, rounding_mode="trunc"),
           "remainder": torch.remainder, "fmod": torch.fmod}

    class Model(torch.nn.Module):
        def forward(self, x, y):
            return tuple(op(x, y) for op in ops.values())

    with torch.no_grad():
        got = polyir.compile(Model(), [a, b])(a, b)     # the default, fast_math=True
        for name, result, op in zip(ops, got, ops.values(), strict=True):
            expected = op(a, b)
            same = (result.view(torch.int32) == expected.view(torch.int32)) \
                | (result.isnan() & expected.isnan())
            assert bool(same.all()), (name, a[~same], b[~same], result[~same])



SCALARS = (0.1, 1 / 3, 7.77, -1e4 - 0.3, 257)


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_reduced_precision_tensor_and_python_scalar_match_eager_bit_for_bit(dtype: str) -> None:
    # eager rounds the scalar to the tensor's dtype for add/sub/rsub/alpha/fmod/
    # remainder/pow, keeps it in f32 for mul/div, and computes in f32 either way
    # (``s / t`` is left out: eager rounds its reciprocal to f16 before the multiply)
    torch = pytest.importorskip("torch")
    reduced = getattr(torch, dtype)
    ops = {
        "add": lambda t, s: t + s, "sub": lambda t, s: t - s, "rsub": lambda t, s: s - t,
        "alpha": lambda t, s: torch.add(t, t, alpha=s), "mul": lambda t, s: t * s,
        "div": lambda t, s: t / s, "fmod": lambda t, s: torch.fmod(t, s),
        "remainder": lambda t, s: torch.remainder(t, s), "pow": lambda t, s: t.abs() ** (s / 1e4),
    }

    class Scalars(torch.nn.Module):
        def forward(self, t: torch.Tensor) -> list[torch.Tensor]:
            return [op(t, s) for op in ops.values() for s in SCALARS]

    x = (torch.randn(512, generator=torch.Generator().manual_seed(0)) * 5).to(reduced)
    model = Scalars()
    with torch.no_grad():
        got = polyir.compile(model, [x])(x)
        expected = model(x)
    for k, (g, e) in enumerate(zip(got, expected, strict=True)):
        same = (g.view(torch.int16) == e.view(torch.int16)) | (g.isnan() & e.isnan())
        op, s = list(ops)[k // len(SCALARS)], SCALARS[k % len(SCALARS)]
        assert bool(same.all()), f"{dtype} {op} {s}: {int((~same).sum())} of {same.numel()} differ"


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_reduced_precision_arithmetic_with_many_python_scalars_matches_eager(dtype: str) -> None:
    # differential: + - * / both ways round against eager for scalars across
    # 18 decades (below f16's subnormals to near its maximum), on tensor values
    # that include signed zeros, the extremes of the type and subnormals;
    # fast_math=False (fast math may drop the sign of a zero: docs/ir.md)
    torch = pytest.importorskip("torch")
    reduced = getattr(torch, dtype)
    rng = np.random.default_rng(16)
    scalars = [0.1, 1 / 3, -0.7, 1e-8, 2.5e-3, 65504.5, 12345.678, *rng.uniform(-100, 100, 12),
               *(rng.choice((-1, 1), 24) * 10 ** rng.uniform(-9, 4.6, 24))]
    ops = {"add": lambda t, s: t + s, "radd": lambda t, s: s + t, "sub": lambda t, s: t - s,
           "rsub": lambda t, s: s - t, "mul": lambda t, s: t * s, "rmul": lambda t, s: s * t,
           "div": lambda t, s: t / s, "rdiv": lambda t, s: s / t}

    class Scalars(torch.nn.Module):
        def forward(self, t: torch.Tensor) -> list[torch.Tensor]:
            return [op(t, float(s)) for op in ops.values() for s in scalars]

    x = (torch.randn(2048, generator=torch.Generator().manual_seed(1)) * 5).to(reduced)
    info = torch.finfo(reduced)
    x[:8] = torch.tensor([0.0, -0.0, info.max, -info.max, info.tiny, info.smallest_normal / 4, 1.0, 3.0])
    model = Scalars()
    with torch.no_grad():
        got = polyir.compile(model, [x], fast_math=False)(x)
        expected = model(x)
    wrong = []
    for k, (g, e) in enumerate(zip(got, expected, strict=True)):
        same = (g.view(torch.int16) == e.view(torch.int16)) | (g.isnan() & e.isnan())
        if not bool(same.all()):
            wrong.append((list(ops)[k // len(scalars)], float(scalars[k % len(scalars)]), int((~same).sum())))
    assert not wrong, f"{dtype}: (op, scalar, elements that differ): {wrong}"
