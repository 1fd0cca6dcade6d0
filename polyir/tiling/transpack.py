"""Packing one operand's accesses (mechanism): a transposed tile in a local buffer.

``pack_operand(function, at="j_r", buffer="A", along="j", order=(1, 0))``
gives loop ``at`` a loop-scoped local holding the elements of ``buffer`` that
the reads *walking it with a stride along loop* ``along`` (``along`` in a
subscript other than the last, or with a coefficient other than +-1) touch
below one iteration of ``at``, laid out
in ``order`` (a permutation of the dimensions: ``(1, 0)`` transposes a
matrix), copies them in at the start of each iteration and redirects those
reads (and only those) to the copy::

    for j_r ... {
      local A_j_r: f32[m, 64] @local
      for A_j_r_1 = 0 to m {                     # copy in, the local written in order
        for A_j_r_0 = j_r to j_r + 64 {
          A_j_r_in: A_j_r[A_j_r_1, A_j_r_0 - j_r] = A[A_j_r_0, A_j_r_1]
      ...  A[j, k] becomes A_j_r[k, j - j_r]; A[i, k] stays  ...

The copy loops run in the local's layout order: contiguous writes and
strided reads measured much faster than the reverse, which vectorises into
scatters (``mvt``'s 32-row packing at n = 1000, f32: 2.8 ms -> 0.7 ms).

This is what ``copies`` does for a whole buffer, restricted to one operand:
``syrk``'s ``A[i, k] * A[j, k]`` reads one matrix as both operands, and only
the column operand ``A[j, k]`` (unit stride along ``k``, walked along ``j``
by the vectorised loop) needs the transposed layout; copying every access
to ``A`` would copy a box spanning both row ranges.

**Why it is exact.** ``buffer`` is not written anywhere below ``at`` (else
refused), so the values copied at the start of an iteration of ``at`` are
the values each redirected read saw; the statements and their order are
unchanged. The footprint, shape and copy loops come from ``copy_buffer``
(isl footprints of the selected reads only; the selection is made by
renaming them to a stand-in buffer that the copy then replaces).

Refused (``UnsupportedNest``): ``buffer`` written below ``at``, no read of it
strided along ``along`` below ``at``, and whatever ``copy_buffer`` refuses.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import fields, is_dataclass, replace
from typing import Any

from polyir.ir.affine import Aff
from polyir.ir.names import claim_name, find_loop, names_in
from polyir.ir.nodes import Assign, For, Function, If, Load, Node
from polyir.ir.walk import subtree_accesses
from polyir.polyhedral.extract import affine_index
from polyir.tiling.bands import UnsupportedNest, replace_node
from polyir.tiling.copies import _accesses, _declaring_loop, copy_buffer


def _map_loads(value: Any, rename: Callable[[Load], Load]) -> Any:
    """``value`` (an expression, or a tuple of them) with every ``Load`` passed
    through ``rename`` (innermost first)."""
    if isinstance(value, tuple):
        return tuple(_map_loads(v, rename) for v in value)
    if isinstance(value, Aff) or not is_dataclass(value) or isinstance(value, type):
        return value
    changes = {}
    for field in fields(value):
        old = getattr(value, field.name)
        new = _map_loads(old, rename)
        if new is not old:
            changes[field.name] = new
    result = replace(value, **changes) if changes else value
    return rename(result) if isinstance(result, Load) else result


def _map_nodes(nodes: tuple[Node, ...], rename: Callable[[Load], Load]) -> tuple[Node, ...]:
    out: list[Node] = []
    for node in nodes:
        if isinstance(node, For):
            node = replace(node, body=_map_nodes(node.body, rename))
        elif isinstance(node, If):
            node = replace(node, then_body=_map_nodes(node.then_body, rename),
                           else_body=_map_nodes(node.else_body, rename))
        elif isinstance(node, Assign):
            node = replace(node, indices=_map_loads(node.indices, rename),
                           value=_map_loads(node.value, rename))
        out.append(node)
    return tuple(out)


def _strided(indices: Sequence[object], var: str) -> bool:
    """Does loop ``var`` appear in a subscript other than the last (a walk
    down a column), or in the last with a coefficient other than +-1?"""
    for d, index in enumerate(indices):
        aff = affine_index(index)
        if aff is not None and var in aff.variables() and \
                (d != len(indices) - 1 or abs(aff.coefficient(var)) != 1):
            return True
    return False


def pack_operand(function: Function, at: str, buffer: str, along: str,
                 order: Sequence[int] = (), name: str | None = None, check: bool = True
                 ) -> tuple[Function, tuple[str, ...]]:
    """``function`` with the reads of ``buffer`` below loop ``at`` that walk it
    with a stride along loop ``along`` redirected to a loop-scoped local of ``at``
    laid out in ``order`` (see the module docstring); also the names of the
    copy statements. ``check``: prove the result with ``check_rewrite``."""
    scope = find_loop(function, at)
    source = function.buffers.get(buffer)
    if source is None:
        raise UnsupportedNest(f"function '{function.name}' has no buffer '{buffer}'")
    if _declaring_loop(function, buffer) is not None:
        raise UnsupportedNest(f"'{buffer}' is a loop-scoped local: pack the buffer it copies")
    _, _, written = _accesses(scope.body, buffer)
    if written:
        raise UnsupportedNest(f"'{buffer}' is written inside loop '{at}': a packed copy of some "
                              f"of its reads could go stale")
    taken = names_in(function)
    stand_in = claim_name(f"{buffer}_{along}_operand", taken)
    hits = [0]

    def select(load: Load) -> Load:
        if load.buffer == buffer and _strided(load.indices, along):
            hits[0] += 1
            return Load(stand_in, load.indices)
        return load

    body = _map_nodes(scope.body, select)
    if not hits[0]:
        raise UnsupportedNest(f"no read of '{buffer}' inside loop '{at}' walks it with a stride "
                              f"along loop '{along}'")
    marked = replace_node(function, scope, (replace(scope, body=body),))
    marked = replace(marked, locals=marked.locals + (replace(source, name=stand_in),))
    local_name = name or claim_name(f"{buffer}_{at}", taken)
    packed, made = copy_buffer(marked, at, stand_in, None, order, local_name, check=False)

    def restore(load: Load) -> Load:
        return Load(buffer, load.indices) if load.buffer == stand_in else load

    body = tuple(_map_nodes((node,), restore)[0] if stand_in in subtree_accesses(node)[0] else node
                 for node in packed.body)    # the other nests never read the stand-in
    result = replace(packed, body=body,
                     locals=tuple(b for b in packed.locals if b.name != stand_in))
    result = _copy_in_write_order(result, at, made, order)
    if check:
        from polyir.polyhedral.dependences import MEMORY_KINDS, compute_dependences
        from polyir.polyhedral.extract import extract
        from polyir.polyhedral.legality import check_rewrite
        from polyir.tiling.bands import nest_function, nest_of
        index = nest_of(function, scope)
        deps = compute_dependences(extract(nest_function(function, index)), MEMORY_KINDS)
        check_rewrite(deps, nest_function(result, index), what=f"packing '{buffer}' at '{at}'",
                      ignore=made).require()
    return result, made


def _copy_in_write_order(function: Function, at: str, made: Sequence[str],
                         order: Sequence[int]) -> Function:
    """The copy-in nest of loop ``at`` with its loops in the local's layout
    ``order`` (the writes contiguous, the reads strided). The copied box's
    bounds depend on loops around ``at`` only, so any order of its loops
    copies the same elements."""
    scope = find_loop(function, at)
    body = list(scope.body)
    for position, node in enumerate(body):
        loops: list[For] = []
        inner: Node = node
        while isinstance(inner, For):
            loops.append(inner)
            inner = inner.body[0] if len(inner.body) == 1 else inner
            if loops[-1] is inner:
                break
        if not (isinstance(inner, Assign) and inner.name in made) or len(loops) != len(order):
            continue
        nest: Node = inner
        for d in reversed(_loop_order(loops, order)):
            nest = replace(loops[d], body=(nest,))
        body[position] = nest
    return replace_node(function, scope, (replace(scope, body=tuple(body)),))


SHORT_RUN = 64
"""The most elements of a short contiguous run of the source (see :func:`_loop_order`)."""


def _loop_order(loops: Sequence[For], order: Sequence[int]) -> tuple[int, ...]:
    """The copy loops' order (source dimensions, outermost first): the local's
    layout ``order``, except that the source's last dimensions, when they
    are also the local's last but one (before the dimension moved last) and
    copy at most :data:`SHORT_RUN` elements, go inside that moved dimension's
    loop. A convolution's weights ``w[co, ci, kh, kw]`` packed as
    ``[ci, kh, kw, co]`` are then copied ``ci, co, kh, kw``: the reads are
    runs of ``kh * kw`` contiguous elements and the writes stay within one
    ``ci`` slab, both in L1; in layout order every read is a row of its own
    (512 channels: 18 KiB apart, a new page each) and packing took longer
    than the convolution (ResNet-18's 512-channel 3x3 at 7x7: 9.0 -> 4.4 ms
    a call). A matrix ``A[j, k]`` packed as ``[k, j]`` keeps its order
    (the run would be all of ``k``)."""
    order = tuple(order)
    if len(order) < 3:
        return order
    rest = order[:-1]
    suffix = 0
    run = 1
    while suffix < len(rest) and rest[len(rest) - 1 - suffix] == len(order) - 1 - suffix:
        extent = _widest(loops[rest[len(rest) - 1 - suffix]])
        if extent is None or run * extent > SHORT_RUN:
            break
        run *= extent
        suffix += 1
    if suffix == 0 or suffix == len(rest):
        return order
    return rest[:len(rest) - suffix] + (order[-1],) + rest[len(rest) - suffix:]


def _widest(loop: For) -> int | None:
    """The most iterations of a copy loop (``a to min(N, a + 64)``: 64), if bounded by a constant."""
    widths = [(upper - lower).constant for lower in loop.lower for upper in loop.upper
              if (upper - lower).is_constant]
    return max(0, min(widths)) if widths else None


__all__ = ["pack_operand"]
