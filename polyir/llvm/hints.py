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
from polyir.ir.nodes import Assign, For, Function, Node
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



JAMMED_COPY_MIN_TRIPS = 16
"""Sibling lane loops shorter than this keep LLVM's full unrolling (fewer
iterations than a float vector of 512 bits has lanes)."""


def jammed_copies(nodes: tuple[Node, ...] | list[Node]) -> frozenset[int]:
    """The ``id`` of each loop among ``nodes`` that is one of two or more sibling
    copies of a lane loop, as a depth-limited unroll-and-jam leaves them
    (``for r { for j {S}; for j_1 {S_1}; ... }``): innermost, with a constant
    trip count of at least :data:`JAMMED_COPY_MIN_TRIPS`, no unroll or vectorize
    factor of their own, and no statement that updates one element on every
    iteration (a reduction along the loop, which LLVM would not vectorise).

    Lowered with ``llvm.loop.unroll.disable`` the loop vectoriser still turns
    each copy into vector code, while LLVM's full unrolling would make a copy's
    iterations into scalar statements for the SLP vectoriser to put back
    together, and leave the enclosing loop with hundreds of memory accesses for
    the loop-access analysis (quadratic) of the loop vectoriser and of loop load
    elimination: the transformer encoder's attention spent half of its O3 time
    there, for the same machine code."""
    from polyir.llvm.lower import constant_trip_count

    candidates = [node for node in nodes if isinstance(node, For) and node.unroll == 0
                  and node.vectorize == 0 and not node.parallel and node.mapping is None
                  and all(isinstance(inner, Assign) for inner in node.body)
                  and (constant_trip_count(node) or 0) >= JAMMED_COPY_MIN_TRIPS
                  and all(_along(inner, node.var) for inner in node.body)]
    if len(candidates) < 2:
        return frozenset()
    return frozenset(id(loop) for loop in candidates)


def _along(node: Node, var: str) -> bool:
    """Whether ``node`` is a statement whose subscripts are affine and one of them uses ``var``."""
    return isinstance(node, Assign) and all(isinstance(index, Aff) for index in node.indices) \
        and any(isinstance(index, Aff) and var in index.variables() for index in node.indices)
