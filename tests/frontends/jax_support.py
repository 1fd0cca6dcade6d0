"""Shared helpers of the JAX frontend tests: compile with ``polyir.jax.jit``,
compare with ``jax.jit`` (XLA on the CPU), and check which primitives were
lowered."""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pytest

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402

import polyir  # noqa: E402

TOLERANCES = {"float16": (2e-3, 2e-3), "bfloat16": (1.6e-2, 1.6e-2), "float32": (2e-5, 2e-5),
              "float64": (1e-12, 1e-12)}


def tolerance(dtype: Any) -> tuple[float, float]:
    return TOLERANCES.get(np.dtype(dtype).name, (0.0, 0.0))


def assert_close(got: Any, want: Any, rtol: float | None = None, atol: float | None = None) -> None:
    """Every leaf of ``got`` is a JAX array equal to ``want``'s within the
    tolerance of its dtype (exactly for integers and bools); same structure."""
    got_leaves, got_tree = jax.tree_util.tree_flatten(got)
    want_leaves, want_tree = jax.tree_util.tree_flatten(want)
    assert got_tree == want_tree, f"structure {got_tree} != {want_tree}"
    for g, w in zip(got_leaves, want_leaves, strict=True):
        assert isinstance(g, jax.Array), f"result leaf is a {type(g).__name__}, not a jax.Array"
        assert g.dtype == w.dtype and g.shape == w.shape, f"{g.dtype}{g.shape} != {w.dtype}{w.shape}"
        r, a = tolerance(w.dtype)
        np.testing.assert_allclose(np.asarray(g, dtype=np.float64) if w.dtype == jnp.bfloat16 else np.asarray(g),
                                   np.asarray(w, dtype=np.float64) if w.dtype == jnp.bfloat16 else np.asarray(w),
                                   rtol=r if rtol is None else rtol, atol=a if atol is None else atol,
                                   equal_nan=True)


def check(fn: Callable[..., Any], *args: Any, ops: Sequence[str] = (), target: str = "cpu",
          rtol: float | None = None, atol: float | None = None, **options: Any) -> Any:
    """Compile ``fn`` with ``fallback=False``, run it on ``args``, compare with
    ``jax.jit(fn)``, and check that every primitive in ``ops`` was lowered."""
    compiled = polyir.jax.jit(fn, target=target, fallback=False, **options)
    got = compiled(*args)
    static = {k: v for k, v in options.items() if k.startswith("static_")}
    want = jax.jit(fn, **static)(*args)
    assert_close(got, want, rtol, atol)
    summary = compiled.summary()
    assert summary["fallbacks"] == []
    for op in ops:
        assert op in summary["ops"], f"{op} not lowered; lowered: {sorted(summary['ops'])}"
    return compiled


def rand(shape: Sequence[int], dtype: Any = np.float32, seed: int = 0, low: float = -2.0,
         high: float = 2.0) -> np.ndarray:
    """Random values of ``dtype`` (integers in [low, high], bools half true)."""
    rng = np.random.default_rng(seed)
    dtype = jnp.dtype(dtype)
    if dtype == np.bool_:
        return rng.random(shape) < 0.5
    if np.issubdtype(dtype, np.integer):
        return rng.integers(int(low), int(high) + 1, size=shape).astype(dtype)
    return rng.uniform(low, high, size=shape).astype(np.float32).astype(dtype)
