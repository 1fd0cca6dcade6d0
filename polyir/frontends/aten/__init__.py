"""The ATen lowering table: one module per operator family.

``LOWERINGS`` maps ATen operators to rules (see :mod:`.registry`);
:func:`lower_segment` turns a run of graph nodes into a polyir module.
Importing this package registers every family.
"""
from __future__ import annotations

from polyir.frontends.aten import (  # noqa: F401  (registers the rules)
    attention,
    conv,
    elementwise,
    embedding,
    matmul,
    norm,
    pool,
    reduction,
    resample,
    shape,
)
from polyir.frontends.aten.lower import LoweredSegment, lower_segment, unsupported_reason
from polyir.frontends.aten.registry import LOWERINGS, find_rule, op_name, register

__all__ = ["LOWERINGS", "LoweredSegment", "find_rule", "lower_segment", "op_name", "register",
           "unsupported_reason"]
