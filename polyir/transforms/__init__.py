"""Simple IR-to-IR passes, one module per pass; importing this package registers them.

* ``simplify-bounds``         drop dominated bound terms, empty loops, constant ifs
* ``simplify-subscripts``     floor divisions and remainders the loops' ranges decide, made affine
* ``remove-dead-statements``  drop writes to local buffers that nothing live reads
* ``canonicalize-names``      renumber statements S0, S1, ... in program order
* ``split-guards``            split innermost loops where their guards start and stop holding
* ``forward-inits``           copies of an initialised buffer read the initial value; the init goes
"""
from __future__ import annotations

from polyir.transforms.canonicalize_names import CanonicalizeNames, canonicalize_names
from polyir.transforms.forward_inits import ForwardInits, forward_inits
from polyir.transforms.remove_dead_statements import RemoveDeadStatements, remove_dead_statements
from polyir.transforms.simplify_bounds import SimplifyBounds, simplify_bounds
from polyir.transforms.simplify_subscripts import SimplifySubscripts, simplify_subscripts
from polyir.transforms.split_guards import SplitGuards, split_guards

__all__ = [
    "SimplifyBounds", "simplify_bounds", "SimplifySubscripts", "simplify_subscripts",
    "RemoveDeadStatements", "remove_dead_statements",
    "CanonicalizeNames", "canonicalize_names", "SplitGuards", "split_guards",
    "ForwardInits", "forward_inits",
]
