"""The jaxpr lowering table: one module per primitive family.

Importing this package fills :data:`polyir.frontends.jax.lower.RULES`.
"""
from __future__ import annotations

from polyir.frontends.jax.rules import (  # noqa: F401  (registers the rules)
    elementwise,
    index,
    linalg,
    reduce,
    shape,
)
