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
from collections.abc import Callable

from polyir.ir.affine import Aff
from polyir.ir.nodes import Assign, For, Function, Node
from polyir.ir.types import DType
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



JAMMED_VECTORS = (1, 2, 4)
"""Vectors per copy :func:`jammed_copies` takes: LLVM's interleave counts are
powers of two (a hint of 3 is dropped and the copy stays a loop of three
vector iterations, its accumulators in memory), so a copy of 3 vectors keeps
LLVM's full unrolling."""


def jammed_copies(nodes: tuple[Node, ...], function: Function,
                  lanes: Callable[[DType], int]) -> dict[int, int]:
    """``id`` -> vectors per copy for each loop among ``nodes`` when they are two
    or more sibling lane loops and nothing else, as a depth-limited
    unroll-and-jam leaves the copies of a lane loop (``for r { for j {S}; for
    j_1 {S_1}; ... }``, a register tile's rows): innermost, with a constant trip
    count of ``lanes(dtype)`` (at least 8) times one of :data:`JAMMED_VECTORS`
    for the type of every buffer its statements store into (``function`` gives
    the buffers), no unroll or vectorize factor of their own, and no statement
    that updates one element on every iteration (a reduction along the loop,
    which LLVM would not vectorise). An empty dict otherwise.

    Lowered with ``llvm.loop.unroll.disable`` (and, for several vectors, the
    vector width and that many interleaved parts) the loop vectoriser turns
    each copy into one vector iteration, which LLVM then keeps in registers
    across the enclosing loop as it would the unrolled statements. LLVM's O3
    would instead fully unroll each copy into scalar statements for the SLP
    vectoriser to put back together, and leave the enclosing loop with hundreds
    of memory accesses for the loop-access analysis (quadratic) of the loop
    vectoriser and of loop load elimination: the transformer encoder's
    attention spent half of its O3 time there, a ResNet convolution's 8x32
    tile (two vectors a row) 0.77 s against 0.24 s, for the same machine code."""
    from polyir.llvm.lower import constant_trip_count

    candidates = []
    for node in nodes:
        if not isinstance(node, For) or node.unroll or node.vectorize or node.parallel \
                or node.mapping is not None or not node.body \
                or not all(_along(inner, node.var) for inner in node.body):
            continue
        widths = {lanes(function.buffers[inner.buffer].dtype) for inner in node.body
                  if isinstance(inner, Assign) and inner.buffer in function.buffers}
        trips = constant_trip_count(node)
        width = next(iter(widths)) if len(widths) == 1 else 0
        if width >= 8 and trips is not None and trips % width == 0 and trips // width in JAMMED_VECTORS:
            candidates.append((node, trips // width))
    if len(candidates) < 2 or len(candidates) < len(nodes):
        return {}
    return {id(loop): vectors for loop, vectors in candidates}


def _along(node: Node, var: str) -> bool:
    """Whether ``node`` is a statement whose subscripts are affine and one of them uses ``var``."""
    return isinstance(node, Assign) and all(isinstance(index, Aff) for index in node.indices) \
        and any(isinstance(index, Aff) and var in index.variables() for index in node.indices)
