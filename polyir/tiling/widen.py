"""Widen a fused reduction's scalar accumulator back to a tile (policy and
mechanism of one ``auto-tile`` step).

Fusion with its epilogue at full depth (a convolution followed by batch norm,
ReLU, a residual add) and ``shrink-buffers`` leave a band ``p_1 .. p_n`` whose
innermost body is ``acc = 0; <reduction nest into acc>; <epilogue reading
acc>`` with ``acc`` a scalar local of ``p_n``: every output element is a chain
of scalar adds over a short kernel window, and no tiling plan applies.

:func:`widen_band` strip-mines one outer band loop ``b`` (the loop a loaded
operand does not use while another does: a convolution's output channel) by
``factor`` (halved until it divides the trip count; with no such loop, or no block of
2 or more, nothing is strip-mined and the tile is one row along ``p_n``) into ``b_t`` (outside) and
``b_r``, and distributes the loops
``b_r, p_n`` over the three parts of the body, the scalars shared by two
parts expanded to a ``factor x extent(p_n)`` tile (a loop-scoped local of the
innermost remaining outer loop)::

    for b_t, <other outer loops> {
      local acc: f32[factor, T]
      for b_r, p_n { acc[b_r, p_n] = 0 }
      for b_r, p_n, <reduction loops> { acc[b_r, p_n] += ... }
      for b_r, p_n { <epilogue reading acc[b_r, p_n]> }
    }

The reduction part is then a perfect band the direct-convolution (or
register) plan tiles. Each original instance runs once, each sum in its
original order; the tile holds one element per original accumulator
instance (``b = lower + factor * b_t + b_r`` and ``p_n`` are a bijection onto
``(b_t, b_r, p_n)``), so the new storage carries the same values, and the
schedule is proven against the original nest's dependences by
``check_rewrite`` (:func:`widen_function`).
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

from polyir.errors import PolyirError
from polyir.ir.affine import Aff
from polyir.ir.names import claim_name, names_in
from polyir.ir.nodes import Assign, Buffer, For, Function, If, Load, Node
from polyir.ir.walk import loads, map_loads, substitute, walk_nodes
from polyir.polyhedral.dependences import Dependences
from polyir.polyhedral.extract import NotPolyhedral, affine_index, expr_loads, reduction_of
from polyir.polyhedral.legality import Origin, check_rewrite
from polyir.target import Target
from polyir.tiling.bands import nest_function, nest_of, perfect_chain, replace_node, reused_dependences
from polyir.tiling.levels import ELEMENT_BYTES, trip_count

Remark = Callable[[str, str, str], None]

TILE_BYTES = 16 * 1024
"""The most bytes a widened accumulator tile may take (half a typical L1)."""


class WidenRefused(PolyirError):
    """The band does not have the shape :func:`widen_band` rewrites; says why."""


def _parts(body: Sequence[Node]) -> list[tuple[Node, ...]]:
    """``body`` split around its loops: each loop a part, each run of other
    nodes between them a part (a fused convolution's ``acc = 0``, its
    reduction nest, its epilogue; two convolutions fused into one sum, as a
    residual block's main path and its downsampling shortcut, make five)."""
    if not any(isinstance(node, For) for node in body):
        raise WidenRefused("the innermost band loop holds no reduction nest")
    parts: list[tuple[Node, ...]] = []
    run: list[Node] = []
    for node in body:
        if isinstance(node, For):
            if run:
                parts.append(tuple(run))
                run = []
            parts.append((node,))
        else:
            run.append(node)
    if run:
        parts.append(tuple(run))
    return parts


def _touches(nodes: Sequence[Node], buffer: str) -> bool:
    for node in walk_nodes(nodes):
        if isinstance(node, Assign) and (node.buffer == buffer
                                         or any(ld.buffer == buffer for ld in expr_loads(node.value))):
            return True
    return False


def _reduction(nest: For, scalars: set[str]) -> Assign:
    """The one ``+=`` statement of the reduction nest into one of ``scalars``."""
    found = [n for n in walk_nodes((nest,)) if isinstance(n, Assign)]
    if len(found) != 1:
        raise WidenRefused(f"the reduction nest holds {len(found)} statements, not one")
    stmt = found[0]
    update = reduction_of(stmt)
    if update is None or update[1] != "+" or stmt.buffer not in scalars:
        raise WidenRefused(f"statement {stmt.name} is not a sum into a scalar local of the band")
    return stmt


def block_loop(chain: Sequence[For], stmt: Assign) -> str | None:
    """The outer band loop to strip-mine: the innermost one (step 1, constant
    bounds) that some operand of ``stmt`` does not use while that operand
    walks the innermost band loop along its last dimension (any stride), and another operand
    uses (a convolution's output channel: the input row serves every
    channel of the block, the weight differs)."""
    inner = chain[-1].var
    loads = [ld for ld in expr_loads(stmt.value) if ld.buffer != stmt.buffer]
    used: list[set[str]] = []
    for ld in loads:
        affs = [affine_index(i) for i in ld.indices]
        if any(a is None for a in affs):
            return None
        used.append({v for a in affs if a is not None for v in a.variables()})
    unit = [u for ld, u in zip(loads, used, strict=True)
            if ld.indices and inner in u and _last_only(ld, inner)]
    for loop in reversed(chain[:-1]):
        var = loop.var
        if loop.step != 1 or trip_count(loop) is None:
            continue
        if any(var not in u for u in unit) and any(var in u for u in used):
            return var
    return None


def _last_only(load: Load, var: str) -> bool:
    """Does ``var`` move ``load`` along its last dimension only (any stride: a
    strided convolution's input row still serves every output channel)?"""
    last = affine_index(load.indices[-1])
    others = [affine_index(i) for i in load.indices[:-1]]
    return last is not None and last.coefficient(var) != 0 \
        and all(a is not None and var not in a.variables() for a in others)


def vector_block(target: Target, count: int, extent: int, elem_bytes: int) -> int | None:
    """The block of a widened tile's strip-mined loop (``count`` iterations)
    that fills the vector columns of a register tile (``sizes.register_tile``
    with ``extent`` rows): a multiple of the vector lanes, at least two
    vectors (see ``MIN_COLUMN_VECTORS`` in ``autotile``), that divides
    ``count`` and keeps the tile within ``TILE_BYTES``; ``None`` when there is
    none."""
    from polyir.tiling.sizes import lanes, register_tile
    width = lanes(target, elem_bytes)
    block = register_tile(target, elem_bytes, extent, count).nr
    while block >= 2 * width:
        if count % block == 0 and block * extent * elem_bytes <= TILE_BYTES:
            return block
        block -= width
    return None


def widen_band(function: Function, chain: Sequence[For], factor: int,
               target: Target | None = None
               ) -> tuple[Function, dict[str, Origin], str | None]:
    """``function`` with the band ``chain`` widened (see the module docstring);
    the origins of its statements and the strip-mined loop (``None``: no outer
    loop gives a loaded value several accumulators, or none has a block of 2
    or more; then the tile is one row along the innermost loop). Raises
    :class:`WidenRefused` (saying why) when the band does not fit."""
    inner = chain[-1]
    if len(chain) < 2:
        raise WidenRefused("the band has one loop")
    scalars = {b.name for b in inner.locals if not b.shape}
    if not scalars or len(scalars) != len(inner.locals):
        raise WidenRefused(f"loop '{inner.var}' declares no scalar locals only")
    parts = _parts(inner.body)
    nests = [p[0] for p in parts if isinstance(p[0], For)]
    stmts = [_reduction(nest, scalars) for nest in nests]
    extent = trip_count(inner)
    if inner.step != 1 or extent is None:
        raise WidenRefused(f"loop '{inner.var}' has no constant trip count")
    dtypes = {next(b.dtype for b in inner.locals if b.name == stmt.buffer) for stmt in stmts}
    dtype = next(iter(dtypes))
    if len(dtypes) != 1 or dtype not in ELEMENT_BYTES:
        raise WidenRefused(f"the accumulators {', '.join(s.buffer for s in stmts)} are not all f32 "
                           f"or all f64")
    # one loop blocked for every reduction, or none
    blocks = {block_loop(chain, stmt) for stmt in stmts}
    var = blocks.pop() if len(blocks) == 1 else None
    count = 0
    if var is not None:
        count = trip_count(next(loop for loop in chain if loop.var == var)) or 0
        guarded = any(isinstance(n, If) for n in walk_nodes(tuple(nests)))
        vectors = vector_block(target, count, extent, ELEMENT_BYTES[dtype]) \
            if target is not None and dtype in ELEMENT_BYTES and not guarded else None
        factor = vectors or factor
        while factor > 1 and count % factor:
            factor //= 2
    if var is None or factor == 1:
        var, factor = None, 1  # one row of accumulators along the innermost loop
    if factor * extent * ELEMENT_BYTES[dtype] > TILE_BYTES:
        raise WidenRefused(f"a {factor} x {extent} accumulator tile exceeds {TILE_BYTES} bytes")
    band_vars = {loop.var for loop in chain}
    for loop in chain:
        for bound in loop.lower + loop.upper:
            if set(bound.variables()) & band_vars:
                raise WidenRefused(f"loop '{loop.var}' has bounds that use band loops")
    shared = {name for name in scalars if sum(_touches(p, name) for p in parts) > 1}
    visible = {b.name for b in function.locals} | {p.name for p in function.params} \
        | {b.name for loop in chain[:-1] for b in loop.locals}
    if shared & visible:
        raise WidenRefused(f"a tile named {sorted(shared & visible)[0]} would shadow a buffer")
    for stmt in stmts:
        if stmt.buffer not in shared:
            raise WidenRefused(f"the accumulator {stmt.buffer} is used by the reduction nest alone")

    taken = names_in(function)
    tile_var = claim_name(f"{var}_t", taken) if var is not None else ""
    origins: dict[str, Origin] = {}
    new_parts: list[Node] = []
    for part in parts:
        column = claim_name(inner.var, taken)
        values = {inner.var: Aff.var(column)}
        index: tuple[Aff, ...] = (Aff.var(column) - inner.lower[0],)
        if var is not None:
            point = claim_name(f"{var}_r", taken)
            block = next(loop for loop in chain if loop.var == var)
            values[var] = block.lower[0] + Aff.var(tile_var) * factor + Aff.var(point)
            index = (Aff.var(point),) + index
        body = _widen_accesses(substitute(part, values), shared, index)
        for node in walk_nodes(body):
            if isinstance(node, Assign):
                origins[node.name] = Origin.of(node.name, values)
        own = tuple(b for b in inner.locals if b.name not in shared and _touches(part, b.name))
        columns: Node = replace(inner, var=column, body=body, locals=own)
        if var is not None:
            columns = For(point, (Aff.const(0),), (Aff.const(factor),), (columns,))
        new_parts.append(columns)
    shape = ((Aff.const(factor),) if var is not None else ()) + (Aff.const(extent),)
    tiles = tuple(Buffer(b.name, b.dtype, shape, b.space) for b in inner.locals if b.name in shared)
    tile_loop = {"var": tile_var, "lower": (Aff.const(0),), "upper": (Aff.const(count // factor),),
                 "step": 1}
    outer = [replace(loop, **tile_loop) if loop.var == var else loop  # type: ignore[arg-type]
             for loop in chain[:-1]]
    rebuilt = replace(outer[-1], body=tuple(new_parts), locals=outer[-1].locals + tiles)
    for loop in reversed(outer[:-1]):
        rebuilt = replace(loop, body=(rebuilt,))
    return replace_node(function, chain[0], [rebuilt]), origins, var


def _widen_accesses(nodes: tuple[Node, ...], shared: set[str], index: tuple[Aff, ...]
                    ) -> tuple[Node, ...]:
    def load(ld: Load) -> Load:
        return Load(ld.buffer, index) if ld.buffer in shared else ld

    def visit(node: Node) -> Node:
        if isinstance(node, Assign):
            if any(ld.buffer in shared for i in node.indices if not isinstance(i, Aff)
                   for ld in loads(i)):
                raise WidenRefused(f"statement {node.name} indexes with a value of an accumulator")
            indices = index if node.buffer in shared else node.indices
            return replace(node, indices=indices, value=map_loads(node.value, load))
        if isinstance(node, For):
            return replace(node, body=tuple(visit(n) for n in node.body))
        if isinstance(node, If):
            return replace(node, then_body=tuple(visit(n) for n in node.then_body),
                           else_body=tuple(visit(n) for n in node.else_body))
        raise WidenRefused(f"cannot widen accesses in a {type(node).__name__}")

    return tuple(visit(n) for n in nodes)


def widen_function(function: Function, target: Target, remark: Remark, factor: int,
                   analysed: dict[int, tuple[Function, Dependences]] | None = None) -> Function:
    """``function`` with every band that :func:`widen_band` fits widened,
    each proven against its nest's dependences (a refusal or a failed proof
    leaves the band as it was and says why in a ``missed`` remark).
    ``analysed`` receives, by top-level index, each nest's dependences with
    the function they were computed for (``bands.reused_dependences``)."""
    analysed = {} if analysed is None else analysed
    from polyir.ir.canonical import canonical_form
    from polyir.ir.names import UnknownLoop, find_loop
    from polyir.tiling.autotile import find_bands
    # the decision for a band of a nest the same up to names as one decided
    # before (a repeated layer): its refusal, or its widening without the proof
    decided: dict[str, str | None] = {}
    for found in find_bands(function):
        try:
            chain = perfect_chain(find_loop(function, found[0].var))[:len(found)]
        except UnknownLoop:
            continue
        inner = chain[-1]
        if not inner.locals or not any(isinstance(n, For) for n in inner.body):
            continue
        where = f"function '{function.name}', loop '{chain[0].var}'"
        index = nest_of(function, chain[0])
        form = canonical_form(function, (function.body[index],))
        key = f"{form.key} {form.canonical(chain[0].var)} {len(chain)}"
        try:
            if key in decided:
                refusal = decided[key]
                if refusal is not None:
                    raise WidenRefused(form.actual(refusal))
                result, origins, var = widen_band(function, chain, factor, target)
            else:
                decided[key] = None
                deps = reused_dependences(analysed.get(index), function, index)
                analysed[index] = (function, deps)
                result, origins, var = widen_band(function, chain, factor, target)
                check_rewrite(deps, nest_function(result, index), what=f"widening loop '{inner.var}'",
                              origins=origins).require()
        except (PolyirError, NotPolyhedral, ValueError) as error:
            if key not in decided or decided[key] is None:
                decided[key] = form.canonical(str(error))
            remark(where, f"accumulators not widened: {error}", "missed")
            continue
        block = f"loop {var} blocked" if var is not None else "one row, no loop blocked"
        remark(where, f"scalar accumulators of loop '{inner.var}' widened to a tile ({block}); the "
                      f"reduction and its epilogue distributed over the tile", "applied")
        function = result
    return function


__all__ = ["WidenRefused", "block_loop", "widen_band", "widen_function", "vector_block", "TILE_BYTES"]
