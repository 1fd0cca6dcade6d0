"""The JAX frontend: ``polyir.jax.jit`` compiles jaxprs to polyir.

* :mod:`.graph`  a traced jaxpr as a flat list of equations (calls inlined)
* :mod:`.lower`  the lowering context, the rule table, segment lowering
* :mod:`.rules`  the lowering rules, by primitive family
* :mod:`.plan`   partition into compiled segments and JAX-run equations; build; run
* :mod:`.api`    the ``jit`` decorator: tracing, the per-signature cache, pytrees
"""
from __future__ import annotations

from polyir.frontends.jax.api import JitFunction, jit
from polyir.frontends.jax.plan import PolyirJaxFallbackWarning

__all__ = ["JitFunction", "PolyirJaxFallbackWarning", "jit"]
