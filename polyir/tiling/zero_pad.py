"""Zero-padded operands (mechanism): a padded convolution's guards become a
padded copy of its input, so that the micro-kernel has no branch.

A convolution with zero padding is lowered with an affine guard around its
update (``polyir.frontends.lowering.conv``)::

    if (h + kh - 1 >= 0, h + kh - 1 < H, w + kw - 1 >= 0, w + kw - 1 < W) {
      S: O[co, h, w] = O[co, h, w] + F[co, ci, kh, kw] * I[ci, h + kh - 1, w + kw - 1]
    }

Inside a register tile such a guard holds for some rows and not for others:
LLVM then keeps the accumulators in memory and versions every row.
:func:`pad_operand` gives the function a local ``I_pad`` holding ``I`` with
``lo_d`` zeros before and ``hi_d`` after each dimension ``d`` the guard
bounds (``lo_d``, ``hi_d``: how far the subscript leaves the buffer, over
the statement's iterations without those conditions, from isl), filled by
one nest placed just before the nest that reads it (or, when that nest
writes the buffer, as the first convolution of a residual block writes the
second one's input, just before the highest loop inside it that does not:
the padded copy is then a local of the enclosing loop; or, when the nest's
outer loops each read one unpadded dimension of the buffer alone, as a
depthwise convolution's channel loop reads its channel, only that slice, a
local of the innermost of them filled in each of its iterations:
:func:`_slicing`), and rewrites the
statement to read ``I_pad[.., h + kh - 1 + lo, w + kw - 1 + lo]``
unguarded (the guard keeps any other condition)::

    local I_pad: f32[CI, H + 2, W + 2]
    for a, b, c { if (b - 1 >= 0, b - 1 < H, c - 1 >= 0, c - 1 < W) { I_pad[a, b, c] = I[a, b - 1, c - 1] }
                  else { I_pad[a, b, c] = 0.0 } }
    for co, h, w, ci, kh, kw { S: O[co, h, w] = O[co, h, w] + F[co, ci, kh, kw] * I_pad[ci, h + kh, w + kw] }

**What it keeps.** The iterations the guard removed now add ``F[..] * 0``
to their element: ``x + (w * 0) == x`` for every finite ``w`` (the result
may differ only in the sign of a zero sum). A weight that is infinite or
NaN would turn ``w * 0`` into NaN, so the rewrite is made only when asked
(``auto-tile{zero_pad=true}``; ``polyir.compile``, whose results are compared
with eager within a tolerance, asks for it with ``fast_math``). Every other
instance computes the same value in the same order: the copy reads ``I``
just before the code that reads it, which does not write ``I``.

Refused (:class:`PadRefused`, with the reason): a statement that is not
``Y[f] = Y[f] + e`` with the guarded buffer a factor of a product in ``e``
(so that a zero element makes ``e`` zero), a buffer written at every level
around the statement (no place for the copy), a parallel loop in the nest
(the new instances would race), another access of the statement that the
guard kept in bounds, a
condition of the guard that is not a bound of the buffer's subscripts, or
padding that is not a constant (isl: the subscript's range over the
unguarded iterations).
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import islpy as isl

from polyir.errors import PolyirError
from polyir.ir.affine import Aff, Constraint
from polyir.ir.names import claim_name, names_in
from polyir.ir.nodes import Assign, BinOp, Buffer, Cast, Const, Expr, For, Function, If, Load, Node
from polyir.ir.types import MemorySpace
from polyir.ir.walk import map_loads, walk_nodes
from polyir.polyhedral.extract import (
    NotPolyhedral,
    Scop,
    aff_to_isl,
    affine_index,
    expr_loads,
    extract,
    isl_name,
    reduction_of,
)
from polyir.tiling.bands import nest_function

Remark = Callable[[str, str, str], None]


class PadRefused(PolyirError):
    """The guarded statement does not have the shape :func:`pad_operand` rewrites."""


@dataclass(frozen=True)
class Guarded:
    """A guarded sum ``statement`` (under ``guard``) whose conditions ``bounds``
    are the bounds of the subscripts of ``buffer``'s one read in it."""

    guard: If
    statement: Assign
    buffer: str
    bounds: tuple[Constraint, ...]


def _zero_makes_zero(expr: Expr, buffer: str) -> bool:
    """Is ``expr`` zero whenever every element of ``buffer`` it reads is zero
    (and its other factors are finite)? A load of ``buffer``, a cast of such,
    or a product with such a factor."""
    if isinstance(expr, Load):
        return expr.buffer == buffer
    if isinstance(expr, Cast):
        return _zero_makes_zero(expr.value, buffer)
    if isinstance(expr, BinOp) and expr.op == "*":
        return _zero_makes_zero(expr.lhs, buffer) or _zero_makes_zero(expr.rhs, buffer)
    return False


def _added_term(stmt: Assign) -> Expr | None:
    """``e`` of ``Y[f] = Y[f] + e`` (either order), else ``None``."""
    update = reduction_of(stmt)
    if update is None or update[1] != "+" or not isinstance(stmt.value, BinOp):
        return None
    lhs, rhs = stmt.value.lhs, stmt.value.rhs
    return rhs if isinstance(lhs, Load) and lhs.buffer == stmt.buffer else lhs


def _bound_of(condition: Constraint, subscripts: Sequence[Aff], shape: Sequence[Aff]
              ) -> bool:
    """Is ``condition`` ``s_d >= 0`` or ``s_d <= shape_d - 1`` for a subscript ``s_d``?"""
    expr, equality = condition.as_nonnegative()
    if equality:
        return False
    for subscript, size in zip(subscripts, shape, strict=True):
        low = expr - subscript
        high = expr + subscript - size + 1
        if (low.is_constant and low.constant == 0) or (high.is_constant and high.constant == 0):
            return True
    return False


def guarded_reads(function: Function, nest: Node) -> list[Guarded]:
    """The guarded sums under ``nest`` that :func:`pad_operand` can rewrite:
    an ``If`` (no else) around one statement ``Y[f] = Y[f] + e`` whose
    conditions include bounds of the subscripts of a buffer read once in
    ``e`` as a factor of a product (where the copy can go, if anywhere, is
    :func:`pad_operand`'s question)."""
    buffers = function.buffers
    found: list[Guarded] = []
    for node in walk_nodes((nest,)):
        if not isinstance(node, If) or node.else_body or len(node.then_body) != 1:
            continue
        stmt = node.then_body[0]
        if not isinstance(stmt, Assign):
            continue
        term = _added_term(stmt)
        if term is None:
            continue
        for load in expr_loads(term):
            buffer = buffers.get(load.buffer)
            if buffer is None or load.buffer == stmt.buffer:
                continue
            if sum(ld.buffer == load.buffer for ld in expr_loads(term)) != 1 \
                    or not _zero_makes_zero(term, load.buffer):
                continue
            subscripts = [affine_index(i) for i in load.indices]
            if any(s is None for s in subscripts) or len(subscripts) != len(buffer.shape):
                continue
            affs = [s for s in subscripts if s is not None]
            bounds = tuple(c for c in node.conditions if _bound_of(c, affs, buffer.shape))
            if bounds:
                found.append(Guarded(node, stmt, load.buffer, bounds))
                break
    return found


def _padding(scop: Scop, stmt: str, buffer: str, shape: Sequence[Aff]) -> list[tuple[int, int]]:
    """``(lo_d, hi_d)`` per dimension: how far below 0 and above ``shape_d - 1``
    the read of ``buffer`` in ``stmt`` goes over its iterations (constants)."""
    info = scop.statements[stmt]
    reads = [a for a in info.reads if a.buffer == buffer]
    if len(reads) != 1:
        raise PadRefused(f"statement {stmt} reads {buffer} {len(reads)} times")
    return _box_excess(scop, _elements(scop, reads[0].relation, len(shape)), shape, stmt, buffer)


def _elements(scop: Scop, relation: isl.Map, rank: int) -> isl.Set:
    """The buffer elements ``relation`` touches (a loop-scoped local's
    expansion dimensions, which come first, projected out)."""
    values = relation.range().reset_tuple_id().intersect_params(scop.context)
    extra = values.dim(isl.dim_type.set) - rank
    return values.project_out(isl.dim_type.set, 0, extra) if extra > 0 else values


def _box_excess(scop: Scop, values: isl.Set, shape: Sequence[Aff], stmt: str, buffer: str
                ) -> list[tuple[int, int]]:
    """``(lo_d, hi_d)``: how far the elements ``values`` go below 0 and above
    ``shape_d - 1`` in each dimension (constants, else :class:`PadRefused`)."""
    names = {p: isl_name(p) for p in scop.params}
    rank = len(shape)
    dims = ", ".join(f"x{d}" for d in range(rank))
    pads: list[tuple[int, int]] = []
    for d in range(rank):
        size = aff_to_isl(shape[d], names)
        below = scop.isl_map(f"{scop.param_space} -> {{ [{dims}] -> [e] : e = -x{d} }}")
        above = scop.isl_map(f"{scop.param_space} -> {{ [{dims}] -> [e] : e = x{d} - ({size}) + 1 }}")
        pads.append((_constant_max(values.apply(below), stmt, buffer, d),
                     _constant_max(values.apply(above), stmt, buffer, d)))
    return pads


def _require_in_bounds(function: Function, scop: Scop, found: Guarded) -> None:
    """Every other access of the statement stays inside its buffer without the
    dropped conditions (they may guard the written element too)."""
    info = scop.statements[found.statement.name]
    for access in info.accesses:
        if access.kind == "read" and access.buffer == found.buffer:
            continue
        target = function.buffers.get(access.buffer)
        if target is None or not target.shape:
            continue
        values = _elements(scop, access.relation, len(target.shape))
        outside = _outside(scop, values, target.shape, found.statement.name, access.buffer)
        if outside:
            raise PadRefused(f"without the guard, statement {found.statement.name} would "
                             f"{access.kind} {access.buffer} outside its bounds")


def _outside(scop: Scop, values: isl.Set, shape: Sequence[Aff], stmt: str, buffer: str) -> bool:
    try:
        return any(lo or hi for lo, hi in _box_excess(scop, values, shape, stmt, buffer))
    except PadRefused:
        return True


def _constant_max(values: isl.Set, stmt: str, buffer: str, d: int) -> int:
    """``max(0, max(values))`` when that maximum is a constant."""
    if values.is_empty():
        return 0
    pieces: list[isl.Aff] = []
    values.dim_max(0).foreach_piece(lambda _set, aff: pieces.append(aff))
    tops = []
    for aff in pieces:
        if not aff.is_cst():
            raise PadRefused(f"the padding of dimension {d} of {buffer} read by {stmt} is not a "
                             f"constant")
        tops.append(int(aff.get_constant_val().to_python()))
    return max(0, max(tops))


def pad_operand(function: Function, index: int, found: Guarded
                ) -> tuple[Function, str]:
    """``function`` with the read of ``found.buffer`` in ``found.statement``
    (under top-level node ``index``) redirected to a zero-padded copy and the
    guard's bound conditions dropped (see the module docstring); the name of
    the padded local. Raises :class:`PadRefused`."""
    buffer = function.buffers[found.buffer]
    if not (buffer.dtype.is_float or buffer.dtype.is_int):
        raise PadRefused(f"{found.buffer} holds {buffer.dtype}, not numbers")
    enclosing = [n for n in walk_nodes((function.body[index],))
                 if isinstance(n, For) and (n.parallel or n.mapping is not None)]
    if enclosing:
        raise PadRefused(f"loop '{enclosing[0].var}' is parallel or mapped: the new instances "
                         f"would race")
    kept = tuple(c for c in found.guard.conditions if c not in found.bounds)
    unguarded: tuple[Node, ...] = (If(kept, found.guard.then_body),) if kept else \
        found.guard.then_body
    candidate = _replace(function, found.guard, unguarded)
    try:
        scop = extract(nest_function(candidate, index))
    except NotPolyhedral as error:
        raise PadRefused(str(error)) from None
    pads = _padding(scop, found.statement.name, found.buffer, buffer.shape)
    _require_in_bounds(function, scop, found)
    if not any(lo or hi for lo, hi in pads):
        raise PadRefused(f"the guard of {found.statement.name} removes no iteration")
    taken = names_in(function)
    local = claim_name(f"{found.buffer}_pad", taken)
    sliced = _slicing(function, index, found, pads)
    fixed = {} if sliced is None else sliced[1]
    shape = tuple(Aff.const(1) if d in fixed else size + lo + hi
                  for d, (size, (lo, hi)) in enumerate(zip(buffer.shape, pads, strict=True)))
    host, before = _placement(function, index, found) if sliced is None else sliced[0]

    def redirect(load: Load) -> Load:
        if load.buffer != found.buffer:
            return load
        moved = tuple(Aff.const(0) if d in fixed else Aff.const(lo) + affine_index(i)  # type: ignore[operator]
                      for d, (i, (lo, _)) in enumerate(zip(load.indices, pads, strict=True)))
        return Load(local, moved)

    stmt = replace(found.statement, value=map_loads(found.statement.value, redirect))
    body: tuple[Node, ...] = (If(kept, (stmt,)),) if kept else (stmt,)
    fill = _fill_nest(local, buffer, shape, pads, taken, fixed)
    padded = Buffer(local, buffer.dtype, shape, MemorySpace.LOCAL)
    if host is None:  # before the top-level nest, a local of the function
        result = _replace(function, found.guard, body)
        new_body = result.body[:index] + (fill,) + result.body[index:]
        return replace(result, body=new_body, locals=result.locals + (padded,)), local
    position = next(k for k, node in enumerate(host.body) if node is before)
    moved_host = replace(host, body=host.body[:position] + (fill,) + host.body[position:],
                         locals=host.locals + (padded,))
    result = _replace(function, host, (moved_host,))
    return _replace(result, found.guard, body), local


def _slicing(function: Function, index: int, found: Guarded, pads: Sequence[tuple[int, int]]
             ) -> tuple[tuple[For, Node], dict[int, Aff]] | None:
    """A padded copy per iteration of the nest's outer loops that each index
    one unpadded dimension of the buffer alone (a depthwise convolution's
    channel loop reads ``I[0, c, ..]``): ``((loop, node), {d: subscript})``,
    the fill placed in the innermost of those loops before ``node`` and
    copying only the slice those subscripts select, so that the copy stays
    in cache for the reads that follow (MobileNetV2's stride-2 depthwise
    convolution at 96 channels of 112x112: a 51 KiB slice per channel instead
    of a 4.9 MB copy before the nest). ``None`` when the nest's outermost
    loop indexes no dimension so, or the buffer is written inside it."""
    path = _path(function.body[index], found.guard)
    if not path:
        return None
    read = next(ld for ld in expr_loads(found.statement.value) if ld.buffer == found.buffer)
    subscripts = [affine_index(i) for i in read.indices]
    fixed: dict[int, Aff] = {}
    last: For | None = None
    inside = 0          # the path's nodes in the slicing loops
    for node in path:
        if not isinstance(node, For) or node.step != 1:
            break
        dims = [d for d, sub in enumerate(subscripts) if sub is not None and pads[d] == (0, 0)
                and (sub - Aff.var(node.var)).is_constant and (sub - Aff.var(node.var)).constant == 0]
        if len(dims) != 1:
            break
        fixed[dims[0]] = Aff.var(node.var)
        last = node
        inside += 1
    else:
        return None
    if last is None or any(isinstance(n, Assign) and n.buffer == found.buffer
                           for n in walk_nodes((last,))):
        return None
    return (last, path[inside]), fixed


def _placement(function: Function, index: int, found: Guarded) -> tuple[For | None, Node]:
    """Where the fill nest goes: before the highest node on the path from
    top-level node ``index`` to the guard that does not write the buffer and
    sees it (a loop-scoped local: inside its loop); ``(None, nest)`` for
    before the nest itself, else ``(loop, node)`` with ``node`` in the body of
    ``loop``. Raises :class:`PadRefused` when no node qualifies."""
    path = _path(function.body[index], found.guard)
    if path is None:
        raise PadRefused(f"statement {found.statement.name} is not under top-level node {index}")
    owner = next((k for k, node in enumerate(path) if isinstance(node, For)
                  and any(b.name == found.buffer for b in node.locals)), None)
    for k, node in enumerate(path):
        parent = path[k - 1] if k else None
        if owner is not None and (parent is None or k <= owner):
            continue  # the local is not visible before this node
        if parent is not None and not isinstance(parent, For):
            continue  # locals are declared by loops
        if any(isinstance(n, Assign) and n.buffer == found.buffer for n in walk_nodes((node,))):
            continue
        return parent, node
    raise PadRefused(f"{found.buffer} is written around statement {found.statement.name} at "
                     f"every level: no place for its padded copy")


def _path(node: Node, target: Node) -> list[Node] | None:
    """The nodes from ``node`` down to ``target``'s parent (``target`` excluded)."""
    if node is target:
        return []
    children: tuple[Node, ...] = ()
    if isinstance(node, For):
        children = node.body
    elif isinstance(node, If):
        children = node.then_body + node.else_body
    for child in children:
        below = _path(child, target)
        if below is not None:
            return [node] + below
    return None


def _fill_nest(local: str, buffer: Buffer, shape: Sequence[Aff], pads: Sequence[tuple[int, int]],
               taken: set[str], fixed: dict[int, Aff] | None = None) -> Node:
    """``local[p] = buffer[p - lo]`` where that is inside ``buffer``, else zero;
    a dimension ``d`` of ``fixed`` is the one element ``fixed[d]`` of ``buffer``
    (element 0 of ``local``, no loop)."""
    fixed = fixed or {}
    loop_vars = [claim_name(f"{local}_{d}", taken) for d in range(len(shape))]
    source = tuple(fixed[d] if d in fixed else Aff.var(v) - lo
                   for d, (v, (lo, _)) in enumerate(zip(loop_vars, pads, strict=True)))
    target = tuple(Aff.const(0) if d in fixed else Aff.var(v) for d, v in enumerate(loop_vars))
    conditions: list[Constraint] = []
    for d, (lo, hi) in enumerate(pads):
        if lo:
            conditions.append(Constraint(source[d], ">=", Aff.const(0)))
        if hi:
            conditions.append(Constraint(source[d], "<", buffer.shape[d]))
    copy = Assign(claim_name(f"{local}_in", taken), local, target, Load(buffer.name, source))
    zero = Assign(claim_name(f"{local}_zero", taken), local, target,
                  Const(0.0 if buffer.dtype.is_float else 0, buffer.dtype))
    node: Node = If(tuple(conditions), (copy,), (zero,))
    for d, (v, size) in reversed(list(enumerate(zip(loop_vars, shape, strict=True)))):
        if d not in fixed:
            node = For(v, (Aff.const(0),), (size,), (node,))
    return node


def _replace(function: Function, old: Node, new: tuple[Node, ...]) -> Function:
    from polyir.tiling.bands import replace_node
    return replace_node(function, old, list(new))


def pad_function(function: Function, remark: Remark) -> Function:
    """``function`` with every guarded sum :func:`guarded_reads` finds in a
    top-level nest reading a zero-padded copy (:func:`pad_operand`); a
    refusal leaves the statement as it was and says why in a ``missed``
    remark."""
    index = 0
    while index < len(function.body):
        nest = function.body[index]
        done = False
        for found in guarded_reads(function, nest):
            where = f"function '{function.name}', statement {found.statement.name}"
            try:
                function, local = pad_operand(function, index, found)
            except PadRefused as error:
                remark(where, f"not padded: {error}", "missed")
                continue
            remark(where, f"reads of {found.buffer} from a zero-padded copy {local}: the guard's "
                          f"bounds dropped", "applied")
            done = True
            break
        if done:
            continue  # the nest moved to index + 1 and may hold more guarded sums
        index += 1
    return function


__all__ = ["PadRefused", "Guarded", "guarded_reads", "pad_operand", "pad_function"]
