"""Property-based testing kit for polyir passes (public API).

* ``programs(...)``                  Hypothesis strategy of random valid modules
* ``edge_programs(dtype)``, ``edge_reductions``, ``edge_arrays``, ``edge_sizes``  what ``programs()`` never
  draws: signed zeros, NaN, infinities, extreme ints, empty arrays, constant and
  reversed subscripts (``polyir.testing.edges``)
* ``symbol_values(function, sizes)``  values for a function's size symbols
* ``random_arguments(function, rng, sizes)``  random inputs for a function
* ``assert_equivalent(a, b, ...)``    compare two programs in the interpreter
* ``assert_preserves_or_refuses(pass_fn, module)``  the property every pass must have

See docs/testing.md for a complete example.
"""
from __future__ import annotations

from polyir.extras import requiring

with requiring("polyir.testing"):
    from polyir.testing.edges import edge_arrays, edge_programs, edge_reductions, edge_sizes
    from polyir.testing.equivalence import (
        DEFAULT_SIZES,
        assert_equivalent,
        assert_preserves_or_refuses,
        random_arguments,
        symbol_values,
    )
    from polyir.testing.strategies import programs

__all__ = [
    "programs", "edge_programs", "edge_reductions", "edge_arrays", "edge_sizes", "symbol_values", "random_arguments", "assert_equivalent",
    "assert_preserves_or_refuses", "DEFAULT_SIZES",
]
