"""When an LLVM loop hint would change a result: vectorising float reductions.

An explicit ``llvm.loop.vectorize.width``/``enable`` hint allows LLVM's loop
vectoriser to reorder the operations of a reduction (LLVM's
``LoopVectorizeHints::allowReordering``): a float sum ``s = s + a[k]``
vectorised 8 wide adds in 8 partial sums, which rounds differently from the
sequential order the IR specifies. polyir keeps float results exact unless
``fast_math`` allows reassociation, so a ``vectorize=`` factor on such a loop
is not passed to LLVM (and a warning on the ``polyir`` logger says so).
"""
from __future__ import annotations

import logging

from polyir.ir.affine import Aff
from polyir.ir.nodes import Assign, For, Function
from polyir.ir.walk import walk_nodes

LOGGER = logging.getLogger("polyir.llvm")


def reorders_float_reduction(loop: For, function: Function) -> bool:
    """True when ``loop``'s body holds a reduction statement
    (``polyir.polyhedral.extract.reduction_of``) on a float buffer whose
    affine subscripts do not use the loop's variable (one element updated by
    every iteration; ``function`` gives the buffers' dtypes), i.e. vectorising the loop would reassociate float operations.
    Logs a warning naming the loop when it is true."""
    from polyir.polyhedral.extract import reduction_of

    buffers = function.buffers
    for node in walk_nodes(loop.body):
        if not isinstance(node, Assign) or node.buffer not in buffers \
                or not buffers[node.buffer].dtype.is_float or reduction_of(node) is None:
            continue
        if any(not isinstance(index, Aff) or loop.var in index.variables()
               for index in node.indices):
            continue
        LOGGER.warning("loop '%s' has vectorize=%d but reduces floats into '%s' across its "
                       "iterations: not vectorised (vectorising reorders the sum; "
                       "fast_math=True allows it)", loop.var, loop.vectorize, node.buffer)
        return True
    return False

