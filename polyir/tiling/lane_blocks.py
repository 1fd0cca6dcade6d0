"""Lane blocks (mechanism): chains of growing length run side by side.

``lane_blocks(function, loop="j", lanes=16)`` on a loop whose body starts
with a reduction whose length grows with it (Cholesky's dot products)::

    for j = L to U {
      for k = K to j + c { S(j, k) }      # one statement: X[.., j] = X[.., j] op e
      rest(j)                             # anything (the division by the pivot)
    }

runs blocks of ``lanes`` consecutive ``j``: the part of their reductions
that all of them share (``k < j0 + c``, ``j0`` the block's first ``j``)
together, a loop over the lanes innermost, then each ``j`` of the block in
order with the rest of its reduction
(``j0 + c <= k < j + c``) and its ``rest``; the last ``(U - L) % lanes``
values of ``j`` keep the original body::

    for j = L to U - (lanes - 1) step lanes {
      for k = K to j + c { for l = 0 to lanes { S(j + l, k) } }
      for r = 0 to lanes {
        for k' = max(K, j + c) to j + r + c { S(j + r, k') }
        rest(j + r)
      }
    }
    for j' = max(L, L + lanes * ((U - L) // lanes)) to U { S ...; rest(j') }

Each ``S(j, ·)`` still runs ``k = K, K + 1, ...`` in order, so every sum keeps
its order of operations (bit-equal results). Unrolled
(``unroll-jam{loops=l factors=lanes depth=0}``, which reorders nothing), the
``l`` loop's copies are a row block that the CPU lowering runs across vector
lanes (``polyir.llvm.row_block``). The proof is made on the rolled form: one
statement for the shared part instead of ``lanes``, seconds of isl less.
Legal when no instance of the shared part reads what ``rest`` or the
per-lane parts of earlier lanes of the block write: proven against the
original's dependences with the copies' origins (``check_rewrite``, a
witness when refused). Refused (``UnsupportedNest``): a step other than 1,
several bounds, a reduction loop with other nodes or a lower bound using
``j``, an upper bound not ``j`` plus terms without ``j``, loop-scoped
buffers.
"""
from __future__ import annotations

from dataclasses import replace

from polyir.ir.affine import Aff
from polyir.ir.names import claim_name, find_loop, names_in
from polyir.ir.nodes import Assign, For, Function
from polyir.ir.walk import substitute_node
from polyir.polyhedral.dependences import Dependences
from polyir.polyhedral.legality import Origin, check_rewrite
from polyir.tiling.bands import (
    UnsupportedNest,
    nest_dependences,
    nest_function,
    nest_of,
    renamed_copy,
    replace_node,
)


def lane_block_shape(loop: For) -> tuple[For, Assign] | None:
    """The reduction loop and its statement when ``loop`` has the shape
    :func:`lane_blocks` rewrites (see the module docstring), else ``None``."""
    if loop.step != 1 or loop.locals or len(loop.lower) != 1 or len(loop.upper) != 1 \
            or loop.mapping is not None or loop.parallel or not loop.body:
        return None
    inner = loop.body[0]
    if not isinstance(inner, For) or inner.step != 1 or inner.locals or len(inner.lower) != 1 \
            or len(inner.upper) != 1 or len(inner.body) != 1 or not isinstance(inner.body[0], Assign) \
            or inner.mapping is not None:
        return None
    if loop.var in inner.lower[0].variables():
        return None
    upper = inner.upper[0]
    if upper.coefficient(loop.var) != 1 or loop.var in (upper - Aff.var(loop.var)).variables():
        return None
    return inner, inner.body[0]


def lane_blocks(function: Function, loop: str, lanes: int, lane: str = "",
                deps: Dependences | None = None, check: bool = True
                ) -> tuple[Function, dict[str, Origin]]:
    """``function`` with loop ``loop`` run in blocks of ``lanes`` (see the
    module docstring; the shared part's lanes a loop ``lane``, default a fresh
    name, innermost, for ``unroll-jam{loops=<lane> factors=<lanes> depth=0}``
    to unroll), and the origins of the new statements (for ``check_rewrite``).
    ``deps``: the dependences of the top-level nest, when known. Raises
    ``UnknownLoop``, ``UnsupportedNest`` and ``IllegalTransform`` (the
    dependence and two instances)."""
    if lanes < 2:
        raise UnsupportedNest(f"lane-blocks of loop '{loop}': lanes must be >= 2, got {lanes}")
    target = find_loop(function, loop)
    shape = lane_block_shape(target)
    if shape is None:
        raise UnsupportedNest(f"lane-blocks of loop '{loop}': not a loop whose body starts with a "
                              f"reduction loop of one statement running to '{loop}' plus terms "
                              f"without it")
    inner, statement = shape
    taken = names_in(function)
    if lane and lane in taken:
        raise UnsupportedNest(f"lane-blocks of loop '{loop}': the name '{lane}' is taken")
    lane = claim_name(lane or f"{loop}_lane", taken)
    j = Aff.var(loop)
    start, end = target.lower[0], target.upper[0]
    shared_end = inner.upper[0]
    copy = substitute_node(statement, {loop: j + Aff.var(lane)})
    assert isinstance(copy, Assign)
    name = claim_name(statement.name, taken)
    origins = {name: Origin.of(statement.name, {loop: j + Aff.var(lane)})}
    lanes_loop = For(lane, (Aff.const(0),), (Aff.const(lanes),), (replace(copy, name=name),))
    shared = replace(inner, body=(lanes_loop,))
    each = claim_name("r", taken)
    per_lane, lane_origins = renamed_copy(target.body, taken, {loop: j + Aff.var(each)})
    origins.update(lane_origins)
    first = per_lane[0]
    assert isinstance(first, For)
    per_lane = (replace(first, lower=(inner.lower[0], shared_end)),) + per_lane[1:]
    blocks = replace(target, upper=(end - (lanes - 1),), step=lanes,
                     body=(shared, For(each, (Aff.const(0),), (Aff.const(lanes),), per_lane)))
    remainder_start = start + (end - start) // lanes * lanes
    rest, rest_origins = renamed_copy((replace(target, lower=(start, remainder_start)),), taken)
    origins.update(rest_origins)
    result = replace_node(function, target, (blocks,) + rest)
    if check:
        index = nest_of(function, target)
        deps = deps if deps is not None else nest_dependences(function, index)
        added = len(result.body) - len(function.body)  # the remainder of a top-level loop
        nest = replace(nest_function(result, index), body=result.body[index:index + 1 + added])
        check_rewrite(deps, nest, what=f"lane-blocks of loop '{loop}'", origins=origins).require()
    return result, origins


__all__ = ["lane_blocks", "lane_block_shape"]
