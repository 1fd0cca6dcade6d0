"""Spill a fused reduction's scalar accumulator into the cell its result is
stored to, so that the reduction becomes a band of its own again.

Fusion puts a matrix product's or a convolution's epilogue (bias, batch norm,
activation, residual add, a reshape's copy) after its reduction loop, and
``shrink-buffers`` turns the product's output into a loop-scoped scalar::

    for i, j { local acc: f32[]; S0: acc = b[j]; for k { S1: acc = acc + A[i, k] * B[k, j] }
               S2: out[i, j] = gelu(acc) }

The scalar chains every iteration of ``i, j`` to the next (it is one memory
cell), so no loop of the band can be tiled or distributed, and ``auto-tile``
finds no matrix product: the nest runs untiled, one dependent add at a time.

Mechanism (:func:`spill_accumulator`): the local ``acc`` of loop ``L`` is
replaced by ``out[i, j]``, the cell the last statement reading it (``S2``,
at the top of ``L``'s body) stores to, and the local is dropped::

    for i, j { S0: out[i, j] = b[j]; for k { S1: out[i, j] = out[i, j] + A[i, k] * B[k, j] }
               S2: out[i, j] = gelu(out[i, j]) }

It preserves meaning under the IR's sequential semantics whatever the
subscripts: one execution of ``L``'s body is a contiguous interval of the
run; inside it nothing but the rewritten statements touches ``out`` (checked),
so no statement sees the cell's intermediate values, and at the interval's end
``S2`` stores what it stored before. Refused (``SpillRefused``, with the
reason) when ``out``'s element type differs from the accumulator's (the sums
would round differently), for 16-bit floats, when ``out`` is read or written
elsewhere in the body, when ``S2`` is not the body's last use of the
accumulator or is subscripted by a gather, and inside a parallel or
GPU-mapped loop.

Policy (:func:`spill_for_tiling`, run by ``auto-tile`` first): a nest is
spilled only when, after ``distribute`` has split it (legality by isl, as
always), its reduction statements form a band that ``auto-tile`` has a matrix
product, register-tile or direct-convolution plan for; otherwise the nest is
kept as it was, accumulator in a register, with a remark. The cost is one more
pass over the output for the epilogue; the gain is the tiled product.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

from polyir.errors import PolyirError
from polyir.ir.affine import Aff
from polyir.ir.nodes import Assign, BinOp, Buffer, For, Function, If, Load, Node
from polyir.ir.types import DType
from polyir.ir.walk import loads, map_loads, statements, subtree_accesses, walk_expr, walk_nodes

Remark = Callable[[str, str, str], None]


class SpillRefused(PolyirError):
    """The accumulator cannot be spilled (the message says why)."""


_NARROW = {DType.F16, DType.BF16}


def _buffer_dtypes(function: Function, nodes: Sequence[Node]) -> dict[str, Buffer]:
    table = {p.name: p for p in function.params if isinstance(p, Buffer)}
    table.update({b.name: b for b in function.locals})
    for node in walk_nodes(nodes):
        if isinstance(node, For):
            table.update({b.name: b for b in node.locals})
    return table


def _touches(node: Node, buffer: str) -> bool:
    reads, writes = subtree_accesses(node)
    return buffer in reads or buffer in writes


def spill_accumulator(function: Function, owner: For, name: str,
                      buffers: dict[str, Buffer] | None = None,
                      enclosing: Sequence[For] = ()) -> tuple[For, str]:
    """``owner`` (a loop declaring the scalar local ``name``) with the local
    replaced by the cell its result is stored to (see the module docstring),
    and that buffer's name; ``SpillRefused`` says why not. ``enclosing``: the
    loops around ``owner``."""
    local = next((b for b in owner.locals if b.name == name), None)
    if local is None or local.shape:
        raise SpillRefused(f"'{name}' is not a scalar local of loop '{owner.var}'")
    if local.dtype in _NARROW:
        raise SpillRefused(f"'{name}' is {local.dtype.value}: 16-bit sums stay in registers")
    for loop in (*enclosing, owner):
        if loop.parallel or loop.mapping is not None:
            raise SpillRefused(f"loop '{loop.var}' is parallel or mapped")
    body = owner.body
    users = [k for k, node in enumerate(body) if _touches(node, name)]
    if not users:
        raise SpillRefused(f"'{name}' is not used")
    last = users[-1]
    store = body[last]
    if not isinstance(store, Assign) or store.buffer == name:
        raise SpillRefused(f"the last use of '{name}' is not a store of its value to another buffer")
    out = store.buffer
    if not all(isinstance(index, Aff) for index in store.indices):
        raise SpillRefused(f"'{out}' is stored through a gather")
    table = buffers if buffers is not None else _buffer_dtypes(function, (owner,))
    target = table.get(out)
    if target is None or target.dtype != local.dtype:
        found = "unknown" if target is None else target.dtype.value
        raise SpillRefused(f"'{out}' is {found}, the accumulator {local.dtype.value}")
    if any(load.buffer == out for load in loads(store.value)):
        raise SpillRefused(f"the store to '{out}' reads '{out}'")
    for k, node in enumerate(body):
        if k != last and _touches(node, out):
            raise SpillRefused(f"'{out}' is used elsewhere in the body of loop '{owner.var}'")
    cell = store.indices

    def expr(value):  # noqa: ANN001, ANN202  (Expr -> Expr)
        return map_loads(value, lambda load: Load(out, cell) if load.buffer == name else load)

    def rewrite(nodes: tuple[Node, ...]) -> tuple[Node, ...]:
        result: list[Node] = []
        for node in nodes:
            if isinstance(node, For):
                node = replace(node, body=rewrite(node.body))
            elif isinstance(node, If):
                node = replace(node, then_body=rewrite(node.then_body),
                               else_body=rewrite(node.else_body))
            elif isinstance(node, Assign):
                if node.buffer == name and node.indices:
                    raise SpillRefused(f"'{name}' is subscripted")
                node = replace(node, buffer=out if node.buffer == name else node.buffer,
                               indices=cell if node.buffer == name else node.indices,
                               value=expr(node.value))
            elif _touches(node, name):
                raise SpillRefused(f"'{name}' is used by a {type(node).__name__}")
            result.append(node)
        return tuple(result)

    new_body = rewrite(body[:last + 1]) + body[last + 1:]
    locals_ = tuple(b for b in owner.locals if b.name != name)
    return replace(owner, body=new_body, locals=locals_), out


def _has_product_reduction(owner: For, name: str) -> bool:
    """Cheap filter: an inner loop of ``owner`` updates ``name`` with a product
    of two other loads (``acc = acc + x * y``), as a contraction does."""
    for node in owner.body:
        if not isinstance(node, For):
            continue
        for statement in statements((node,)):
            if not isinstance(statement, Assign) or statement.buffer != name:
                continue
            for part in walk_expr(statement.value):
                if isinstance(part, BinOp) and part.op == "*" and \
                        sum(1 for _ in loads(part)) >= 2 and \
                        all(load.buffer != name for load in loads(part)):
                    return True
    return False


def _candidates(nest: For) -> list[tuple[For, str, list[For]]]:
    found: list[tuple[For, str, list[For]]] = []

    def visit(nodes: Sequence[Node], around: list[For]) -> None:
        for node in nodes:
            if isinstance(node, For):
                for local in node.locals:
                    if not local.shape and _has_product_reduction(node, local.name):
                        found.append((node, local.name, list(around)))
                visit(node.body, [*around, node])
            elif isinstance(node, If):
                visit(node.then_body, around)
                visit(node.else_body, around)

    visit((nest,), [])
    return found


def _replace_loop(nodes: tuple[Node, ...], old: For, new: For) -> tuple[Node, ...]:
    result: list[Node] = []
    for node in nodes:
        if node is old:
            node = new
        elif isinstance(node, For):
            node = replace(node, body=_replace_loop(node.body, old, new))
        elif isinstance(node, If):
            node = replace(node, then_body=_replace_loop(node.then_body, old, new),
                           else_body=_replace_loop(node.else_body, old, new))
        result.append(node)
    return tuple(result)


TILED_KINDS = ("gemm", "register", "direct")
"""Plans for which a spill pays."""


def spill_for_tiling(function: Function, plans: Callable[[Function, Sequence[For]], Sequence[str]],
                     remark: Remark) -> Function:
    """``function`` with each fused reduction whose spilled and distributed form
    gets a tiling plan spilled (see the module docstring). ``plans(function,
    band)`` gives the kinds of ``auto-tile``'s candidate plans for a band."""
    from polyir.ir.names import names_in
    from polyir.tiling.autotile import find_bands
    from polyir.tiling.distribute import AnalysisBudget, _distribute_nest

    taken = names_in(function)   # fresh loop names unique in the whole function
    body: list[Node] = []
    changed = False
    for nest in function.body:
        if not isinstance(nest, For):
            body.append(nest)
            continue
        current: tuple[Node, ...] = (nest,)
        for owner, name, around in _candidates(nest):
            where = f"function '{function.name}', loop '{owner.var}'"
            if len(current) != 1 or not isinstance(current[0], For):
                break
            try:
                spilled, out = spill_accumulator(function, owner, name,
                                                 _buffer_dtypes(function, current), around)
            except SpillRefused as why:
                remark(where, f"accumulator '{name}' kept in a register: {why}", "missed")
                continue
            trial = replace(function, body=_replace_loop(current, owner, spilled))
            errors: list[tuple[str, Exception]] = []
            try:
                split = _distribute_nest(trial, set(), set(taken), errors)
            except PolyirError as error:
                errors.append((owner.var, error))
                split = trial
            budget = [error for _, error in errors if isinstance(error, AnalysisBudget)]
            if budget:
                remark(where, f"accumulator '{name}' kept in a register: {budget[0]}", "missed")
                continue
            reduction = {s.name for s in statements(spilled.body) if isinstance(s, Assign)
                         and s.buffer == out and any(load.buffer == out for load in loads(s.value))}
            kinds = [kind for chain in find_bands(split)
                     if reduction & {s.name for s in statements(chain[-1].body)}
                     for kind in plans(split, chain)]
            good = [kind for kind in kinds if kind in TILED_KINDS]
            if not good:
                remark(where, f"accumulator '{name}' kept in a register: spilled into '{out}' "
                       f"its reduction would get no tiling plan", "missed")
                continue
            remark(where, f"accumulator '{name}' spilled into '{out}' and the nest distributed: "
                   f"its reduction gets the {good[0]} plan", "applied")
            current = split.body
            taken |= names_in(split)
            changed = True
        body.extend(current)
    return replace(function, body=tuple(body)) if changed else function


__all__ = ["SpillRefused", "spill_accumulator", "spill_for_tiling", "TILED_KINDS"]
