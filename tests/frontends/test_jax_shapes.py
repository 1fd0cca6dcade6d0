"""Shape and indexing rules against XLA: views, copies, gathers, dynamic slices."""
from __future__ import annotations

import numpy as np
import pytest
from jax_support import check, jax, jnp, rand

lax = jax.lax


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "int32", "bool"])
def test_views(dtype: str) -> None:
    """broadcast_in_dim, reshape, squeeze, expand_dims, transpose, rev, slice
    (with strides), split, each on odd shapes; the results are views copied
    once into the outputs."""
    x = rand((3, 1, 5, 4), dtype)

    def views(v: jax.Array) -> dict[str, jax.Array]:
        return {
            "broadcast": jnp.broadcast_to(v, (2, 3, 6, 5, 4)),
            "broadcast_in_dim": lax.broadcast_in_dim(v[:, 0, :, 0], (5, 3, 2, 5), (1, 3)),
            "reshape": v.reshape(5, 12),
            "reshape_grouped": v.reshape(3, 20),
            "squeeze": jnp.squeeze(v, 1),
            "expand_dims": jnp.expand_dims(v, (0, 3)),
            "transpose": jnp.transpose(v, (2, 0, 3, 1)),
            "rev": v[::-1, :, ::-1],
            "slice": v[1:, :, 1:5:2, ::3],
            "split": jnp.split(v, [2, 3], axis=2)[1],
        }
    check(views, x, ops=["broadcast_in_dim", "reshape", "squeeze", "transpose", "rev", "slice",
                         "split"])


@pytest.mark.parametrize("dtype", ["float32", "float16", "int32"])
def test_concatenate_pad_iota(dtype: str) -> None:
    a, b = rand((2, 3, 4), dtype, seed=1), rand((2, 5, 4), dtype, seed=2)

    def copies(x: jax.Array, y: jax.Array) -> dict[str, jax.Array]:
        return {
            "concat": jnp.concatenate([x, y, x], axis=1),
            "pad": jnp.pad(x, ((1, 0), (2, 3), (0, 1)), constant_values=7),
            "pad_interior": lax.pad(x, jnp.array(-1, x.dtype), ((0, 0, 0), (1, -1, 2), (-1, 2, 1))),
            "pad_value_from_array": lax.pad(y, x[0, 0, 0], ((0, 1, 1), (0, 0, 0), (2, 0, 0))),
            "iota": lax.broadcasted_iota(x.dtype, (3, 7), 1) + lax.iota(x.dtype, 3)[:, None],
        }
    check(copies, a, b, ops=["concatenate", "pad", "iota"])


def test_gather_embedding_take_and_indexing() -> None:
    table = rand((11, 6), seed=1)
    ids = rand((2, 5), "int32", seed=2, low=-11, high=10)

    def gathers(t: jax.Array, i: jax.Array) -> dict[str, jax.Array]:
        return {
            "embedding": t[i],
            "take": jnp.take(t, i[0], axis=0),
            "take_columns": jnp.take(t, jnp.clip(i[1], 0, 5), axis=1),
            "take_fill": jnp.take(t, i[0] * 2, axis=0, mode="fill", fill_value=-3.0),
            "take_clip": jnp.take(t, i[1] * 3, axis=0, mode="clip"),
            "row": t[3],
            "pairs": t[jnp.clip(i[0], 0, 10), jnp.clip(i[1], 0, 5)],
        }
    check(gathers, table, ids, ops=["gather"])


def test_gather_fill_defaults_to_nan_and_int_minimum() -> None:
    floats, ints = rand((5, 3)), rand((5, 3), "int32", low=-9, high=9)
    ids = np.array([0, 4, 5, -1, 9], np.int32)
    check(lambda f, n, i: (jnp.take(f, i, axis=0, mode="fill"), jnp.take(n, i, axis=0, mode="fill")),
          floats, ints, ids, ops=["gather"])


def test_dynamic_slice_and_update_clamp_their_starts() -> None:
    x = rand((6, 7), seed=1)
    update = rand((2, 3), seed=2)

    def dynamic(v: jax.Array, u: jax.Array, i: jax.Array, j: jax.Array) -> dict[str, jax.Array]:
        return {
            "slice": lax.dynamic_slice(v, (i, j), (3, 4)),
            "static": lax.dynamic_slice(v, (1, 2), (3, 4)),
            "mixed": lax.dynamic_slice(v, (2, j), (4, 2)),
            "update": lax.dynamic_update_slice(v, u, (i, j)),
            "index": v[i],
        }
    for i, j in [(1, 2), (5, 6), (-3, 0)]:
        check(dynamic, x, update, np.int32(i), np.int32(j), ops=["dynamic_slice", "dynamic_update_slice"])
