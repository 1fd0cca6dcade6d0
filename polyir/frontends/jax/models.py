"""Small Flax-free JAX models (``jax.numpy`` and ``jax.nn`` only), the JAX
counterparts of the torch test and demo models: an MLP with layer norm, a
pre-norm transformer block with causal attention, and a small CNN.

Each model is ``init(seed, **sizes) -> params`` (a dict of numpy arrays,
drawn with numpy so no JAX random state is involved) and
``apply(params, x) -> y``. The tests compare ``polyir.jax.jit(apply)`` with
``jax.jit(apply)``; ``bench`` times both.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

Params = dict[str, Any]


def _dense(rng: np.random.Generator, n_in: int, n_out: int) -> tuple[np.ndarray, np.ndarray]:
    bound = 1.0 / np.sqrt(n_in)
    return (rng.uniform(-bound, bound, (n_in, n_out)).astype(np.float32),
            rng.uniform(-bound, bound, (n_out,)).astype(np.float32))


def layer_norm(x: jax.Array, scale: jax.Array, bias: jax.Array, eps: float = 1e-5) -> jax.Array:
    mean = x.mean(-1, keepdims=True)
    variance = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) * jax.lax.rsqrt(variance + eps) * scale + bias


# ----------------------------------------------------------------------- MLP
def mlp_init(seed: int = 0, d: int = 128, hidden: int = 256) -> Params:
    rng = np.random.default_rng(seed)
    w1, b1 = _dense(rng, d, hidden)
    w2, b2 = _dense(rng, hidden, d)
    return {"w1": w1, "b1": b1, "scale": 1 + 0.1 * rng.standard_normal(hidden).astype(np.float32),
            "shift": 0.1 * rng.standard_normal(hidden).astype(np.float32), "w2": w2, "b2": b2}


def mlp_apply(params: Params, x: jax.Array) -> jax.Array:
    """Dense -> LayerNorm -> GELU -> Dense."""
    h = layer_norm(x @ params["w1"] + params["b1"], params["scale"], params["shift"])
    return jax.nn.gelu(h) @ params["w2"] + params["b2"]


# ------------------------------------------------------- transformer block
def transformer_init(seed: int = 0, d: int = 64, hidden: int = 128) -> Params:
    rng = np.random.default_rng(seed)
    wqkv, bqkv = _dense(rng, d, 3 * d)
    wo, bo = _dense(rng, d, d)
    w1, b1 = _dense(rng, d, hidden)
    w2, b2 = _dense(rng, hidden, d)
    ones, zeros = np.ones(d, np.float32), np.zeros(d, np.float32)
    return {"ln1": (ones, zeros), "wqkv": wqkv, "bqkv": bqkv, "wo": wo, "bo": bo,
            "ln2": (ones.copy(), zeros.copy()), "w1": w1, "b1": b1, "w2": w2, "b2": b2}


def causal_attention(q: jax.Array, k: jax.Array, v: jax.Array) -> jax.Array:
    """``softmax(q k^T / sqrt(d) + causal mask) v`` over ``[B, H, T, Dh]``."""
    t = q.shape[-2]
    scores = jnp.einsum("bhqd,bhkd->bhqk", q, k) / float(np.sqrt(q.shape[-1]))
    mask = jnp.tril(jnp.ones((t, t), dtype=bool))
    weights = jax.nn.softmax(jnp.where(mask, scores, -jnp.inf), axis=-1)
    return jnp.einsum("bhqk,bhkd->bhqd", weights, v)


def transformer_apply(params: Params, x: jax.Array, heads: int = 4) -> jax.Array:
    """Pre-norm block: x + attention(LN(x)) over ``heads`` heads; then + MLP(LN(.))
    with GELU."""
    b, t, d = x.shape
    h = layer_norm(x, *params["ln1"])
    qkv = h @ params["wqkv"] + params["bqkv"]
    q, k, v = (z.reshape(b, t, heads, d // heads).transpose(0, 2, 1, 3)
               for z in jnp.split(qkv, 3, axis=-1))
    attended = causal_attention(q, k, v).transpose(0, 2, 1, 3).reshape(b, t, d)
    x = x + attended @ params["wo"] + params["bo"]
    h = layer_norm(x, *params["ln2"])
    return x + jax.nn.gelu(h @ params["w1"] + params["b1"]) @ params["w2"] + params["b2"]


# ------------------------------------------------------------------------ CNN
def cnn_init(seed: int = 0, channels: int = 3, classes: int = 10) -> Params:
    rng = np.random.default_rng(seed)

    def kernel(c_out: int, c_in: int) -> np.ndarray:
        return (rng.standard_normal((c_out, c_in, 3, 3)) / np.sqrt(9 * c_in)).astype(np.float32)
    w, b = _dense(rng, 32, classes)
    return {"k1": kernel(16, channels), "c1": 0.1 * rng.standard_normal(16).astype(np.float32),
            "k2": kernel(32, 16), "c2": 0.1 * rng.standard_normal(32).astype(np.float32),
            "w": w, "b": b}


def _conv(x: jax.Array, kernel: jax.Array, bias: jax.Array) -> jax.Array:
    y = jax.lax.conv_general_dilated(x, kernel, (1, 1), "SAME",
                                     dimension_numbers=("NCHW", "OIHW", "NCHW"))
    return jax.nn.relu(y + bias[None, :, None, None])


def _max_pool(x: jax.Array) -> jax.Array:
    return jax.lax.reduce_window(x, -jnp.inf, jax.lax.max, (1, 1, 2, 2), (1, 1, 2, 2), "VALID")


def cnn_apply(params: Params, x: jax.Array) -> jax.Array:
    """conv3x3-relu-maxpool, conv3x3-relu-maxpool, global average, dense (NCHW)."""
    x = _max_pool(_conv(x, params["k1"], params["c1"]))
    x = _max_pool(_conv(x, params["k2"], params["c2"]))
    return x.mean(axis=(2, 3)) @ params["w"] + params["b"]


# name -> (init, apply, input shape for a batch size)
MODELS: dict[str, tuple[Callable[..., Params], Callable[[Params, jax.Array], jax.Array],
                        Callable[[int], tuple[int, ...]]]] = {
    "mlp_layernorm": (mlp_init, mlp_apply, lambda b: (b, 128)),
    "transformer_block": (transformer_init, transformer_apply, lambda b: (b, 32, 64)),
    "small_cnn": (cnn_init, cnn_apply, lambda b: (b, 3, 32, 32)),
}
