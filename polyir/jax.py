"""``polyir.jax``: compile JAX functions through polyir.

``polyir.jax.jit(fn, target="cpu", fallback=True, pipeline=None)`` is a
decorator like ``jax.jit``; see :mod:`polyir.frontends.jax` and docs/jax.md.
Importing this module imports JAX (not torch).
"""
from __future__ import annotations

from polyir.frontends.jax import JitFunction, PolyirJaxFallbackWarning, jit

__all__ = ["JitFunction", "PolyirJaxFallbackWarning", "jit"]
