"""Reductions, scans, products and convolutions against XLA."""
from __future__ import annotations

import numpy as np
import pytest
from jax_support import check, jax, jnp, rand

lax = jax.lax


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "int32"])
def test_reductions(dtype: str) -> None:
    x = rand((2, 5, 3), dtype, low=-3, high=3)

    def reductions(v: jax.Array) -> dict[str, jax.Array]:
        return {
            "sum": v.sum(axis=(0, 2)), "sum_all": v.sum(), "max": v.max(axis=1),
            "min": v.min(axis=(0, 1), keepdims=True), "prod": lax.reduce_prod(v[:, :2], (1,)),
            "argmax": jnp.argmax(v, axis=2), "argmin": jnp.argmin(v, axis=0),
            "cumsum": jnp.cumsum(v, axis=1), "cumsum_reverse": lax.cumsum(v, axis=2, reverse=True),
            "cumprod": lax.cumprod(v[:, :, :3], axis=2), "cummax": lax.cummax(v, axis=0),
            "cummin": lax.cummin(v, axis=2, reverse=True),
        }
    check(reductions, x, ops=["reduce_sum", "reduce_max", "reduce_min", "reduce_prod", "argmax",
                              "argmin", "cumsum", "cumprod", "cummax", "cummin"])


def test_bool_reductions_and_nan_extremes() -> None:
    flags = rand((4, 6), "bool")
    x = rand((4, 6), seed=3)
    x[1, 2] = x[2, 4] = np.nan
    check(lambda f, v: (jnp.any(f, axis=1), jnp.all(f, axis=0), v.max(axis=1), v.min(axis=0),
                        jnp.argmax(v, axis=1), jnp.argmin(v, axis=0)),
          flags, x, ops=["reduce_or", "reduce_and", "reduce_max", "argmax"])


def test_mean_var_softmax_logsumexp() -> None:
    x = rand((2, 3, 9), "bfloat16")
    check(lambda v: (v.mean(-1), v.var(-1), jax.nn.softmax(v, -1), jax.nn.logsumexp(v, 1)), x)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "int32"])
def test_dot_general(dtype: str) -> None:
    a, b = rand((2, 3, 5), dtype, seed=1), rand((5, 2, 4), dtype, seed=2)
    c, d = rand((3, 7), dtype, seed=3), rand((7,), dtype, seed=4)
    dims = (((2,), (0,)), ((0,), (1,)))  # contract a.2 with b.0, batch a.0 with b.1
    check(lambda x, y, m, v: {"batched": lax.dot_general(x, y, dims), "matmul": m @ v,
                              "einsum": jnp.einsum("bik,bjk->bij", x, x), "outer": jnp.outer(v, v),
                              "dot": jnp.dot(v, v)},
          a, b, c, d, ops=["dot_general"])


def test_dot_general_preferred_element_type() -> None:
    a, b = rand((4, 6), "bfloat16", seed=1), rand((6, 3), "bfloat16", seed=2)
    check(lambda x, y: lax.dot_general(x, y, (((1,), (0,)), ((), ())), preferred_element_type=jnp.float32),
          a, b, ops=["dot_general"])


CONVS = {
    "nchw_same": dict(window_strides=(1, 1), padding="SAME", dimension_numbers=("NCHW", "OIHW", "NCHW")),
    "nhwc_strided": dict(window_strides=(2, 1), padding=((1, 2), (0, 1)),
                         dimension_numbers=("NHWC", "HWIO", "NHWC")),
    "dilated_valid": dict(window_strides=(1, 2), padding="VALID", rhs_dilation=(2, 1),
                          dimension_numbers=("NCHW", "OIHW", "NCHW")),
    "transposed": dict(window_strides=(1, 1), padding=((2, 2), (1, 2)), lhs_dilation=(2, 3),
                       dimension_numbers=("NCHW", "OIHW", "NCHW")),
}


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_convolutions(dtype: str) -> None:
    x = rand((2, 4, 7, 6), dtype, seed=1)         # NCHW
    x_nhwc = rand((2, 7, 6, 4), dtype, seed=2)
    w = rand((6, 4, 3, 2), dtype, seed=3)          # OIHW
    w_hwio = rand((3, 2, 4, 6), dtype, seed=4)
    w_grouped = rand((6, 2, 3, 3), dtype, seed=5)  # two groups of 2 input channels

    def convs(a, b, k, k2, kg):  # noqa: ANN001, ANN202
        out = {name: lax.conv_general_dilated(b if "nhwc" in name else a,
                                              k2 if "nhwc" in name else k, **options)
               for name, options in CONVS.items()}
        out["grouped"] = lax.conv_general_dilated(a, kg, (1, 1), ((1, 1), (0, 2)), feature_group_count=2)
        out["conv_1d"] = lax.conv_general_dilated(a[:, :, 0], k[:, :, 0], (2,), "SAME")
        return out
    check(convs, x, x_nhwc, w, w_hwio, w_grouped, ops=["conv_general_dilated"])


def test_pooling_windows() -> None:
    x = rand((2, 3, 7, 6), seed=1)

    def pools(v: jax.Array) -> dict[str, jax.Array]:
        return {
            "max_pool": lax.reduce_window(v, -jnp.inf, lax.max, (1, 1, 3, 2), (1, 1, 2, 2), "SAME"),
            "min_pool": lax.reduce_window(v, jnp.inf, lax.min, (1, 1, 2, 2), (1, 1, 1, 2), "VALID"),
            "avg_pool": lax.reduce_window(v, 0.0, lax.add, (1, 1, 2, 3), (1, 1, 2, 1),
                                          ((0, 0), (0, 0), (1, 1), (0, 2))) / 6.0,
            "dilated": lax.reduce_window(v, -jnp.inf, lax.max, (1, 1, 2, 2), (1, 1, 1, 1), "VALID",
                                         window_dilation=(1, 1, 3, 2)),
        }
    check(pools, x, ops=["reduce_window_max", "reduce_window_min", "reduce_window_sum"])
