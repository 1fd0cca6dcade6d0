"""The interpreter's error type."""
from __future__ import annotations

from polyir.errors import PolyirError


class InterpretError(PolyirError):
    """A run-time fault in interpreted IR (out-of-bounds access, division by
    zero, divergent barrier, ...). The message names the function, the
    statement, and its ``line:col`` when the IR was parsed from text."""
