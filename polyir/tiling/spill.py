"""Spill a fused matrix product's scalar accumulator into the cell its result
is stored to, so that the reduction becomes a band of its own again.

Fusion puts a matrix product's epilogue (bias, activation, residual add, a
reshape's copy) after its reduction loop, and ``shrink-buffers`` turns the
product's output into a loop-scoped scalar::

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

An epilogue that fusion holds in further scalars (``relu(fc(x)) + r``:
``t = max(acc, 0); out[i, j] = t + r[i, j]``) is first rewritten by
:func:`forward_substitute`: a temporary stored once and read once is replaced
by its value, so that the accumulator's last use stores to ``out``.

Policy (:func:`spill_for_tiling`, run by ``auto-tile`` first): only matrix
products are candidates, an accumulator updated by one loop holding one
``acc = acc + x * y`` (a Linear layer, a batched or 1x1-convolution product);
a kernel window (several reduction loops) is a convolution's, which
``auto-tile`` widens to a tile instead (``polyir.tiling.widen``), with no
extra pass over the output. Spilling runs before widening because widening
also fits a matrix product, as one row of accumulators with no loop blocked,
which leaves a matrix-vector product per row. A candidate is spilled only
when, after ``distribute`` has split it (legality by isl, as always), its
reduction statements form a band that ``auto-tile`` has a matrix product,
register-tile or direct-convolution plan for; otherwise the nest is kept as it
was, accumulator in a register, with a remark. The cost is one more pass over
the output for the epilogue; the gain is the tiled product.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

from polyir.errors import PolyirError
from polyir.ir.affine import Aff
from polyir.ir.canonical import CanonicalForm, canonical_form, rename_text, transfer_names
from polyir.ir.names import UnknownLoop, find_loop
from polyir.ir.nodes import Assign, BinOp, Buffer, Expr, For, Function, If, Load, Node
from polyir.ir.types import DType
from polyir.ir.walk import (
    loads,
    map_loads,
    node_exprs,
    statements,
    subtree_accesses,
    walk_expr,
    walk_nodes,
)
from polyir.tiling.bands import enclosing_loops

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


def _replace_loads(expr: Expr, name: str, value: Expr) -> Expr:
    """``expr`` with every load of the scalar ``name`` replaced by ``value``."""
    return map_loads(expr, lambda load: value if load.buffer == name else load)


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
                               value=_replace_loads(node.value, name, Load(out, cell)))
            elif _touches(node, name):
                raise SpillRefused(f"'{name}' is used by a {type(node).__name__}")
            result.append(node)
        return tuple(result)

    new_body = rewrite(body[:last + 1]) + body[last + 1:]
    locals_ = tuple(b for b in owner.locals if b.name != name)
    return replace(owner, body=new_body, locals=locals_), out


def _single_use(body: Sequence[Node], start: int, name: str) -> tuple[int, int] | None:
    """Positions ``(d, u)`` in ``body`` when ``name`` is stored once, by the
    statement at ``d >= start`` with no subscripts, and loaded once, in the
    value of the statement at ``u > d``, and nothing from ``d`` to before
    ``u`` writes a buffer the stored value reads; else ``None``."""
    writers = [node for node in statements(body) if isinstance(node, Assign) and node.buffer == name]
    if len(writers) != 1 or writers[0].indices:
        return None
    d = next((k for k in range(start, len(body)) if body[k] is writers[0]), None)
    uses: list[int] = []
    for k, node in enumerate(body):
        for statement in statements((node,)):
            uses += [k] * sum(1 for e in node_exprs(statement) for load in loads(e) if load.buffer == name)
    if d is None or len(uses) != 1 or uses[0] <= d:
        return None
    u = uses[0]
    reader = body[u]
    if not isinstance(reader, Assign) or not any(load.buffer == name for load in loads(reader.value)):
        return None
    needs = {load.buffer for load in loads(writers[0].value)}
    if any(needs & subtree_accesses(node)[1] for node in body[d:u]):
        return None
    return d, u


def forward_substitute(owner: For) -> tuple[For, tuple[str, ...]]:
    """``owner`` with its epilogue's single-use scalar temporaries substituted
    away, and their names.

    The epilogue is ``owner``'s body after its last loop. A scalar local of
    ``owner`` that one epilogue statement ``t = e`` stores and one later
    statement of that body reads once (``out[c] = f(t)``), with nothing from
    the store on writing what ``e`` reads, is replaced there by ``e``
    (``out[c] = f(e)``); the store and the local go. Meaning is kept: ``e``
    is a pure expression of the same iteration's values, evaluated once as
    before, of ``t``'s type (a store does not convert). So ``relu(fc(x)) + r``,
    whose ReLU fusion holds in a second scalar, stores the product's result
    to the output directly, as :func:`spill_accumulator` needs."""
    loops = [k for k, node in enumerate(owner.body) if isinstance(node, For)]
    start = loops[-1] + 1 if loops else 0
    body = list(owner.body)
    substituted: list[str] = []
    progress = True
    while progress:
        progress = False
        for local in owner.locals:
            found = None if local.shape or local.name in substituted else \
                _single_use(body, start, local.name)
            if found is None:
                continue
            d, u = found
            definition, reader = body[d], body[u]
            assert isinstance(definition, Assign) and isinstance(reader, Assign)
            body[u] = replace(reader, value=_replace_loads(reader.value, local.name, definition.value))
            del body[d]
            substituted.append(local.name)
            progress = True
    if not substituted:
        return owner, ()
    locals_ = tuple(b for b in owner.locals if b.name not in substituted)
    return replace(owner, body=tuple(body), locals=locals_), tuple(substituted)


def _is_product_reduction(owner: For, name: str) -> bool:
    """Is ``name`` reduced as a matrix product does it: a loop of ``owner``'s
    body holding one statement, ``name = name + x * y`` with ``x`` and ``y``
    two different loads of other buffers and ``x * y`` no square? (A kernel
    window, several reduction loops, is a convolution's: ``widen`` takes
    those; ``(x - m) * (x - m)`` is a variance's sum, not a product.)"""
    for node in owner.body:
        if not isinstance(node, For) or len(node.body) != 1:
            continue
        statement = node.body[0]
        if not isinstance(statement, Assign) or statement.buffer != name:
            continue
        for part in walk_expr(statement.value):
            if not isinstance(part, BinOp) or part.op != "*" or part.lhs == part.rhs:
                continue
            operands = {(load.buffer, load.indices) for load in loads(part)}
            if len(operands) >= 2 and all(buffer != name for buffer, _ in operands):
                return True
    return False


def _candidates(nest: For) -> list[tuple[For, str]]:
    found: list[tuple[For, str]] = []

    def visit(nodes: Sequence[Node]) -> None:
        for node in nodes:
            if isinstance(node, For):
                for local in node.locals:
                    if not local.shape and _is_product_reduction(node, local.name):
                        found.append((node, local.name))
                visit(node.body)
            elif isinstance(node, If):
                visit(node.then_body)
                visit(node.else_body)

    visit((nest,))
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


def _noting(remark: Remark, notes: list[tuple[str, str, str]]) -> Remark:
    """``remark`` that also keeps each remark in ``notes``."""
    def noted(where: str, why: str, kind: str) -> None:
        notes.append((where, why, kind))
        remark(where, why, kind)
    return noted


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
    # a nest the same up to names as one done before (a repeated layer) takes its
    # result renamed, and its remarks: no spill trials, no distribution again
    seen: dict[str, tuple[CanonicalForm, tuple[Node, ...] | None, list[tuple[str, str, str]]]] = {}
    for nest in function.body:
        if not isinstance(nest, For):
            body.append(nest)
            continue
        form = canonical_form(function, (nest,))
        if form.key in seen:
            first, done, recorded = seen[form.key]
            mapping = form.renaming(first)
            if done is not None:
                nodes, mapping = transfer_names(done, first, form, taken)
                body.extend(nodes)
                changed = True
            else:
                body.append(nest)
            for where, why, kind in recorded:
                remark(rename_text(where, mapping), rename_text(why, mapping), kind)
            continue
        notes: list[tuple[str, str, str]] = []
        nest_remark = _noting(remark, notes)
        current: tuple[Node, ...] = (nest,)
        for candidate, name in _candidates(nest):
            where = f"function '{function.name}', loop '{candidate.var}'"
            if len(current) != 1 or not isinstance(current[0], For):
                break
            # an accepted spill rebuilt the nest: the loop is looked up again, by its variable
            # (unique in the function), in what the spills so far made of it
            so_far = replace(function, body=current)
            try:
                owner = find_loop(so_far, candidate.var)
            except UnknownLoop:
                nest_remark(where, f"accumulator '{name}' kept in a register: an earlier spill's "
                                   f"distribution split loop '{candidate.var}'", "missed")
                continue
            around = enclosing_loops(so_far, candidate.var)
            inlined, temporaries = forward_substitute(owner)
            try:
                spilled, out = spill_accumulator(function, inlined, name,
                                                 _buffer_dtypes(function, current), around)
            except SpillRefused as why:
                nest_remark(where, f"accumulator '{name}' kept in a register: {why}", "missed")
                continue
            trial = replace(function, body=_replace_loop(current, owner, spilled))
            errors: list[tuple[str, Exception]] = []
            # the loops the spill left as they were (the same loop, the same body) were
            # distributed as far as they go before (the distribute pass, an earlier
            # spill): only the loops it changed, and those around them, are tried
            before = {n.var: n for n in walk_nodes(current) if isinstance(n, For)}
            settled = frozenset(n.var for n in walk_nodes(trial.body)
                                if isinstance(n, For) and before.get(n.var) == n)
            try:
                split = _distribute_nest(trial, set(), set(taken), errors, settled)
            except PolyirError as error:
                errors.append((owner.var, error))
                split = trial
            budget = [error for _, error in errors if isinstance(error, AnalysisBudget)]
            if budget:
                nest_remark(where, f"accumulator '{name}' kept in a register: {budget[0]}", "missed")
                continue
            reduction = {s.name for s in statements(spilled.body) if isinstance(s, Assign)
                         and s.buffer == out and any(load.buffer == out for load in loads(s.value))}
            kinds = [kind for chain in find_bands(split)
                     if reduction & {s.name for s in statements(chain[-1].body)}
                     for kind in plans(split, chain)]
            good = [kind for kind in kinds if kind in TILED_KINDS]
            if not good:
                nest_remark(where, f"accumulator '{name}' kept in a register: spilled into '{out}' "
                       f"its reduction would get no tiling plan", "missed")
                continue
            substituted = f" (epilogue temporaries {', '.join(temporaries)} substituted)" \
                if temporaries else ""
            nest_remark(where, f"accumulator '{name}' spilled into '{out}'{substituted} and the nest "
                   f"distributed: its reduction gets the {good[0]} plan", "applied")
            current = split.body
            taken |= names_in(split)
            changed = True
        seen[form.key] = (form, None if len(current) == 1 and current[0] is nest else current, notes)
        body.extend(current)
    return replace(function, body=tuple(body)) if changed else function


__all__ = ["SpillRefused", "forward_substitute", "spill_accumulator", "spill_for_tiling",
           "TILED_KINDS"]
