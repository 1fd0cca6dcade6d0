"""Unroll-and-jam (mechanism): register tiles.

``unroll_jam(function, loop="i", factor=4)`` on ``for i { for j { for k { S(i, j, k) } } }``
unrolls ``i`` by 4 and jams (fuses) the copies all the way into the innermost
loop of the band below it::

    for j { for k { S(i0, j, k); S(i0 + 1, j, k); S(i0 + 2, j, k); S(i0 + 3, j, k) } }

where ``i0`` is ``i``'s lower bound. The loop must run exactly ``factor``
times, as the full tiles of a tiled loop do (``split-tiles``); a loop that
runs ``min(N, i0 + factor)`` times gets a guard (the jammed copies when the
tile is full, the original loop otherwise, renamed), and any other loop is
first strip-mined by ``factor``. A loop whose body holds statements only is
simply unrolled.

Combined with a scratchpad for the accumulators (``copies`` at the register
tile) this is the register tiling of a matrix product: the ``factor`` rows of
``C`` live in loop-scoped locals that LLVM keeps in registers across the
reduction loop, each element still summed in its original order.

Legality: moving ``i`` innermost in its band (``check_permutation``, with a
witness) and the result against the original's dependences with the copies'
origins (``check_rewrite``). Refused: bands below ``i`` whose bounds use
``i``, loop-scoped buffers on the jammed loops, steps other than 1 inside.
"""
from __future__ import annotations

from dataclasses import replace

from polyir.ir.affine import Aff, Constraint
from polyir.ir.names import claim_name, find_loop, names_in
from polyir.ir.nodes import Assign, For, Function, If, Node
from polyir.ir.walk import STATEMENT_NODES, substitute_node
from polyir.polyhedral.dependences import Dependences
from polyir.polyhedral.legality import Origin, check_permutation, check_rewrite
from polyir.tiling.bands import (
    UnsupportedNest,
    loops_inside,
    nest_dependences,
    nest_function,
    nest_of,
    renamed_copy,
    replace_node,
)
from polyir.tiling.split import full_tile_guard
from polyir.tiling.tile import tile_band


def _rename_copy(items: tuple[Node, ...], k: int, var: str, value: Aff, taken: set[str],
                 origins: dict[str, Origin]) -> tuple[Node, ...]:
    """Copy ``k`` of ``items`` (``var`` already replaced by ``value``): statements
    renamed from the second copy on, their origins recorded."""
    renamed: list[Node] = []
    for node in items:
        if isinstance(node, If):
            node = replace(node, then_body=_rename_copy(node.then_body, k, var, value, taken, origins),
                           else_body=_rename_copy(node.else_body, k, var, value, taken, origins))
        elif isinstance(node, STATEMENT_NODES):
            new_name = node.name if k == 0 else claim_name(node.name, taken)
            origins[new_name] = Origin.of(node.name, {var: value})
            node = replace(node, name=new_name)
        elif isinstance(node, For):
            raise UnsupportedNest("unroll-jam: a loop inside the jammed body")
        renamed.append(node)
    return tuple(renamed)


def _copies(nodes: tuple[Node, ...], var: str, values: list[Aff], taken: set[str]
            ) -> tuple[tuple[Node, ...], dict[str, Origin]]:
    """Each node of ``nodes`` once per value of ``var`` (statements renamed from
    the second copy on), copy after copy; and the copies' origins."""
    origins: dict[str, Origin] = {}
    out: list[Node] = []
    for k, value in enumerate(values):
        moved = tuple(substitute_node(n, {var: value}) for n in nodes)
        out.extend(_rename_copy(moved, k, var, value, taken, origins))
    return tuple(out), origins


def _keep_names(nodes: tuple[Node, ...], var: str, value: Aff
                ) -> tuple[tuple[Node, ...], dict[str, Origin]]:
    """``nodes`` as they are, and the origin of each statement in them (``var``
    given by ``value``)."""
    from polyir.tiling.bands import statements_inside
    return nodes, {s.name: Origin.of(s.name, {var: value}) for s in statements_inside(nodes)
                   if isinstance(s, Assign)}


def _jam(loop: For, factor: int, taken: set[str], depth: int = -1
         ) -> tuple[tuple[Node, ...], dict[str, Origin]]:
    """The jammed replacement of ``loop`` (which runs exactly ``factor`` times):
    the copies fused into ``depth`` loops of the band below (all: -1)."""
    start = loop.lower[0]
    values = [start + a * loop.step for a in range(factor)]
    body = loop.body
    chain: list[For] = []
    while len(body) == 1 and isinstance(body[0], For) and (depth < 0 or len(chain) < depth):
        chain.append(body[0])
        body = body[0].body
    if depth >= 0 and len(chain) < depth:
        raise UnsupportedNest(f"unroll-jam of loop '{loop.var}': no band of {depth} loops below it")
    if depth >= 0 and loops_inside(body):
        # jammed no further: each copy keeps its own inner loops, renamed
        for inner in chain:
            if any(loop.var in b.variables() for b in inner.lower + inner.upper):
                raise UnsupportedNest(f"unroll-jam of loop '{loop.var}': the bounds of loop "
                                      f"'{inner.var}' depend on it")
        origins: dict[str, Origin] = {}
        copies: list[Node] = []
        for a, value in enumerate(values):
            if a == 0:
                moved = tuple(substitute_node(n, {loop.var: value}) for n in body)
                first, first_origins = _keep_names(moved, loop.var, value)
                copies.extend(first)
                origins.update(first_origins)
            else:
                copied, copied_origins = renamed_copy(body, taken, {loop.var: value})
                copies.extend(copied)
                origins.update(copied_origins)
        jammed_nodes: tuple[Node, ...] = tuple(copies)
        for inner in reversed(chain):
            jammed_nodes = (replace(inner, body=jammed_nodes),)
        return jammed_nodes, origins
    if loops_inside(body):
        raise UnsupportedNest(f"unroll-jam of loop '{loop.var}': the loops below it are not a "
                              f"band (a loop body holds a loop among other nodes)")
    for inner in chain:
        if any(loop.var in b.variables() for b in inner.lower + inner.upper):
            raise UnsupportedNest(f"unroll-jam of loop '{loop.var}': the bounds of loop "
                                  f"'{inner.var}' depend on it")
        if inner.locals:
            raise UnsupportedNest(f"unroll-jam of loop '{loop.var}': loop '{inner.var}' declares "
                                  f"loop-scoped buffers")
    if loop.locals:
        raise UnsupportedNest(f"unroll-jam: loop '{loop.var}' declares loop-scoped buffers")
    jammed, origins = _copies(body, loop.var, values, taken)
    for inner in reversed(chain):
        jammed = (replace(inner, body=jammed),)
    return jammed, origins


def unroll_jam(function: Function, loop: str, factor: int, depth: int = -1,
               deps: Dependences | None = None, check: bool = True
               ) -> tuple[Function, dict[str, Origin]]:
    """``function`` with loop ``loop`` unrolled by ``factor`` and jammed into the
    band below it (``depth``: into that many of its loops; 0 is a plain unroll
    whose copies keep their own, renamed, inner loops; -1: all of them); also
    the origins of the new statements (for ``check_rewrite``). ``deps``: the
    dependences of the top-level nest, when known.

    Raises ``UnknownLoop``, ``UnsupportedNest`` and ``IllegalTransform`` (with
    the dependence and two instances) when ``loop`` cannot move innermost."""
    if factor < 1:
        raise UnsupportedNest(f"unroll-jam factor must be >= 1, got {factor}")
    target = find_loop(function, loop)
    if target.mapping is not None:
        raise UnsupportedNest(f"loop '{loop}' is mapped to {target.mapping}")
    if factor == 1:
        return function, {}
    index = nest_of(function, target)
    original = function
    if check:
        deps = deps if deps is not None else nest_dependences(function, index)
        chain = [target]
        while len(chain[-1].body) == 1 and isinstance(chain[-1].body[0], For) \
                and (depth < 0 or len(chain) <= depth):
            chain.append(chain[-1].body[0])
        if len(chain) > 1:
            names = [c.var for c in chain]
            check_permutation(deps, names, list(range(1, len(names))) + [0]).require()
    full = full_tile_guard(target)
    span = factor * target.step
    if full is None or len(target.lower) != 1 or (full[0] - target.lower[0]).constant != span:
        # strip-mine first: the point loop then runs at most `factor` times
        function = tile_band(function, [loop], [factor], check=False)
        target = find_loop(function, loop)
        full = full_tile_guard(target)
        assert full is not None
    taken = names_in(function)
    bound, guard = full
    start = next(lo for lo in target.lower if (bound - lo).is_constant)
    trimmed = replace(target, lower=(start,), upper=(bound,))
    jammed, origins = _jam(trimmed, factor, taken, depth)
    if guard:
        partial, partial_origins = renamed_copy((target,), taken)
        origins.update(partial_origins)
        replacement: tuple[Node, ...] = (If(tuple(Constraint(c.lhs, c.op, c.rhs) for c in guard),
                                            jammed, partial),)
    else:
        replacement = jammed
    result = replace_node(function, target, replacement)
    if check:
        assert deps is not None
        check_rewrite(deps, nest_function(result, index), what=f"unroll-jam of loop '{loop}'",
                      origins=origins).require()
    del original
    return result, origins


__all__ = ["unroll_jam"]
