"""Element-wise rules against XLA, on odd shapes, in every dtype they take."""
from __future__ import annotations

import numpy as np
import pytest
from jax_support import check, jax, jnp, rand

lax = jax.lax
FLOATS = ["float32", "float16", "bfloat16"]
SHAPE = (2, 3, 5)

UNARY = {
    "exp": jnp.exp, "exp2": jnp.exp2, "log": lambda x: jnp.log(jnp.abs(x) + 0.1),
    "tanh": jnp.tanh, "logistic": jax.nn.sigmoid, "sin": jnp.sin, "cos": jnp.cos,
    "sqrt": lambda x: jnp.sqrt(jnp.abs(x)), "rsqrt": lambda x: lax.rsqrt(jnp.abs(x) + 0.5),
    "erf": jax.scipy.special.erf, "log1p": lambda x: jnp.log1p(jnp.abs(x) * 1e-3),
    "expm1": lambda x: jnp.expm1(x * 1e-3), "erfc": jax.scipy.special.erfc, "tan": lambda x: jnp.tan(x * 0.5),
    "cbrt": jnp.cbrt, "abs": jnp.abs, "neg": jnp.negative, "sign": jnp.sign, "floor": jnp.floor,
    "ceil": jnp.ceil, "round": lambda x: jnp.round(x * 3), "square": jnp.square,
    "integer_pow": lambda x: x ** 3, "is_finite": lambda x: jnp.isfinite(x / (x - x.reshape(-1)[0])),
}


@pytest.mark.parametrize("dtype", FLOATS)
def test_unary_float(dtype: str) -> None:
    """Every unary rule in one function (one compile), each output checked."""
    check(lambda x: {name: fn(x) for name, fn in UNARY.items()}, rand(SHAPE, dtype), ops=list(UNARY))


def test_round_half_away_and_to_even() -> None:
    x = np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 0.49999997, -0.3, 7.0], np.float32)
    check(lambda v: (lax.round(v), lax.round(v, lax.RoundingMethod.TO_NEAREST_EVEN)), x, ops=["round"])


def test_integer_pow_negative_and_zero() -> None:
    x = rand((4, 3), low=0.5, high=2.0)
    check(lambda v: (v ** -2, lax.integer_pow(v, 0), v ** 5), x, ops=["integer_pow"])


BINARY = {
    "add": jnp.add, "sub": jnp.subtract, "mul": jnp.multiply, "max": jnp.maximum,
    "min": jnp.minimum, "eq": jnp.equal, "ne": jnp.not_equal, "lt": jnp.less,
    "le": jnp.less_equal, "gt": jnp.greater, "ge": jnp.greater_equal,
}


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "int32"])
def test_binary(dtype: str) -> None:
    check(lambda x, y: {name: fn(x, y) for name, fn in BINARY.items()},
          rand(SHAPE, dtype, seed=1), rand(SHAPE, dtype, seed=2), ops=list(BINARY))


@pytest.mark.parametrize("dtype", ["float32", "float16", "int32"])
def test_div_and_rem_follow_c_truncation(dtype: str) -> None:
    a = rand((6, 5), dtype, seed=3, low=-9, high=9)
    b = rand((6, 5), dtype, seed=4, low=1, high=4) * np.where(rand((6, 5), "bool", seed=5), 1, -1).astype(dtype)
    check(lambda x, y: (lax.div(x, y), lax.rem(x, y)), a, b, ops=["div", "rem"])


def test_pow_and_broadcast_scalars() -> None:
    a, b = rand((2, 9), low=0.1, high=3.0), rand((2, 9), seed=9)
    check(lambda x, y: (x ** y, 2.0 * x - 1.0, jnp.maximum(x, 0.5)), a, b, ops=["pow", "mul", "max"])


def test_max_min_propagate_nan() -> None:
    x = np.array([1.0, np.nan, -2.0, 0.0], np.float32)
    y = np.array([np.nan, 3.0, -1.0, -0.5], np.float32)
    check(lambda a, b: (jnp.maximum(a, b), jnp.minimum(a, b), jax.nn.relu(a)), x, y, ops=["max", "min"])


def test_logic_on_bools() -> None:
    fns = {"and": jnp.logical_and, "or": jnp.logical_or, "xor": jnp.logical_xor,
           "not": lambda a, b: jnp.logical_not(a)}
    check(lambda a, b: {name: fn(a, b) for name, fn in fns.items()},
          rand((4, 6), "bool", seed=1), rand((4, 6), "bool", seed=2), ops=list(fns))


def test_bool_arithmetic_and_bool_max() -> None:
    a, b = rand((5, 3), "bool", seed=1), rand((5, 3), "bool", seed=2)
    check(lambda x, y: (jnp.maximum(x, y), jnp.minimum(x, y), x * y), a, b, ops=["max", "min"])


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "int32", "bool"])
def test_select_n_and_where(dtype: str) -> None:
    cond = rand((3, 4, 5), "bool", seed=7)
    a, b = rand((3, 4, 5), dtype, seed=1), rand((3, 4, 5), dtype, seed=2)
    check(lambda c, x, y: jnp.where(c, x, y), cond, a, b, ops=["select_n"])


def test_select_n_with_an_integer_chooser() -> None:
    which = rand((4, 7), "int32", low=0, high=2)
    cases = [rand((4, 7), seed=s) for s in range(3)]
    check(lambda w, a, b, c: lax.select_n(w, a, b, c), which, *cases, ops=["select_n"])


def test_clamp_with_scalars_and_arrays() -> None:
    x, lo, hi = rand((5, 6), seed=1), rand((5, 6), seed=2, high=0.0), rand((5, 6), seed=3, low=0.0)
    check(lambda v, a, b: (lax.clamp(-0.5, v, 0.75), lax.clamp(a, v, b), jnp.clip(v, -1, 1)),
          x, lo, hi, ops=["clamp"])


CASTS = [("float32", "int32"), ("float32", "bool"), ("int32", "float32"), ("bool", "float32"),
         ("float32", "float16"), ("float32", "bfloat16"), ("bfloat16", "float32"),
         ("float16", "int32"), ("int32", "bool"), ("bool", "int32"), ("int32", "int8")]


@pytest.mark.parametrize("source", sorted({s for s, _ in CASTS}))
def test_convert_element_type(source: str) -> None:
    x = rand((3, 7), source, seed=4, low=-5, high=5)
    targets = [d for s, d in CASTS if s == source]
    check(lambda v: [v.astype(d) for d in targets], x, ops=["convert_element_type"])


def test_identities_are_views() -> None:
    x = rand((4, 4))
    compiled = check(lambda v: jax.lax.stop_gradient(v) * 2 + jax.lax.optimization_barrier(v), x)
    assert compiled.summary()["ops"].get("stop_gradient") or compiled.summary()["ops"].get("optimization_barrier")


def test_f64_with_x64_enabled() -> None:
    with jax.enable_x64(True):
        x = rand((3, 5), np.float64)
        y = rand((3, 5), np.float64, seed=1)
        compiled = check(lambda a, b: (jnp.exp(a) * b + jnp.tanh(a - b), a @ b.T), x, y,
                         ops=["exp", "tanh", "dot_general"])
        ir = str(compiled.ir()[0])
        assert "f64[3, 5]" in ir
