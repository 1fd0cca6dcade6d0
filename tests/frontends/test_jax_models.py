"""Flax-free JAX models through ``polyir.jax.jit`` against ``jax.jit`` (XLA):
natively at the benchmark's sizes, and in the reference interpreter at small
sizes (native compile time grows steeply when LLVM fully unrolls small
extents, so small sizes are cheap only in the interpreter)."""
from __future__ import annotations

import numpy as np
import pytest
from jax_support import assert_close, jax

import polyir
from polyir.frontends.jax.models import MODELS

SMALL = {"mlp_layernorm": ({"d": 24, "hidden": 40}, (3, 24)),
         "transformer_block": ({"d": 32, "hidden": 48}, (2, 9, 32)),
         "small_cnn": ({}, (2, 3, 12, 10))}


def _inputs(shape: tuple[int, ...], seed: int = 2) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize("name", sorted(MODELS))
def test_model_matches_xla_natively(name: str) -> None:
    init, apply, shape = MODELS[name]
    params = init(seed=1)
    x = _inputs(shape(1 if name == "transformer_block" else 2))
    compiled = polyir.jax.jit(apply, fallback=False)
    assert_close(compiled(params, x), jax.jit(apply)(params, x), rtol=2e-4, atol=2e-4)
    summary = compiled.summary()
    assert summary["fallbacks"] == [] and summary["functions"] == 1
    # New weights of the same shapes reuse the plan: no recompilation.
    params2 = init(seed=3)
    assert_close(compiled(params2, x), jax.jit(apply)(params2, x), rtol=2e-4, atol=2e-4)
    assert len(compiled.plans) == 1


@pytest.mark.parametrize("name", sorted(MODELS))
def test_model_matches_xla_in_the_interpreter(name: str) -> None:
    init, apply, _ = MODELS[name]
    sizes, shape = SMALL[name]
    params, x = init(seed=1, **sizes), _inputs(shape)
    got = polyir.jax.jit(apply, fallback=False, target="interpret")(params, x)
    assert_close(got, jax.jit(apply)(params, x), rtol=2e-4, atol=2e-4)


def test_transformer_block_in_bfloat16() -> None:
    init, apply, _ = MODELS["transformer_block"]
    sizes, shape = SMALL["transformer_block"]
    bf16 = jax.numpy.bfloat16
    params = jax.tree_util.tree_map(lambda p: p.astype(bf16), init(seed=1, **sizes))
    x = _inputs(shape).astype(bf16)
    got = polyir.jax.jit(apply, fallback=False, target="interpret")(params, x)
    want = jax.jit(apply)(params, x)
    assert got.dtype == want.dtype == bf16
    # Both round every op to bf16, in different orders: a few bf16 ulps apart.
    np.testing.assert_allclose(np.asarray(got, np.float32), np.asarray(want, np.float32),
                               rtol=0.05, atol=0.1)
