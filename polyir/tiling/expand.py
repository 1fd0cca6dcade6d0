"""Scalar expansion: a scalar local of a loop becomes one element per iteration.

``for i { local t; t = 0; for j { t += A[i, j] * x[j] }; for j { y[j] += A[i, j] * t } }``
cannot be distributed while ``t`` is one scalar per iteration of ``i`` shared by
the parts; with ``t`` expanded to ``t[i]``, declared where ``i`` is, each part
reads and writes its own iteration's element, and distribution can split the
loop. :func:`expand_scalar_locals` is the mechanism; distribution calls it for
the locals that more than one part uses.

Meaning is unchanged: the polyhedral model already treats a loop-scoped local as
expanded along its loops (``polyir.ir.nodes.For``), so the expanded program has
the same statement instances and the same dependences. Refused
(``IllegalTransform``) for a local that is not a scalar (expansion would
multiply its memory by the trip count), for a loop whose step is not 1, whose
lower bound is not a nonnegative constant or whose upper bound uses loop
variables or a negative coefficient (the element count must be a size known
before the loop runs and never negative).
"""
from __future__ import annotations

from collections.abc import Collection
from dataclasses import replace

from polyir.errors import IllegalTransform
from polyir.ir.affine import Aff
from polyir.ir.nodes import Assign, Buffer, Expr, For, Function, If, Load, Node
from polyir.ir.walk import map_loads


def expansion_extent(function: Function, loop: For) -> Aff:
    """The element count of a local expanded along ``loop``: an upper bound of its
    variable that is never negative, using the function's symbols only.

    Raises ``IllegalTransform`` saying why there is none."""
    where = f"loop '{loop.var}'"
    if loop.step != 1:
        raise IllegalTransform(f"{where} has step {loop.step}; scalar expansion needs step 1")
    if len(loop.lower) != 1 or not loop.lower[0].is_constant or loop.lower[0].constant < 0:
        raise IllegalTransform(f"{where} does not start at a nonnegative constant; "
                               f"scalar expansion indexes by the loop variable")
    if len(loop.upper) != 1:
        raise IllegalTransform(f"{where} has a min() upper bound; scalar expansion needs one bound")
    upper = loop.upper[0]
    symbols = set(function.symbols)
    if not upper.variables() <= symbols or not upper.is_linear \
            or any(c < 0 for _, c in upper.terms):
        raise IllegalTransform(f"{where}'s upper bound {upper} is not a nonnegative combination of "
                               f"sizes; the expanded local would have no size known before the loop")
    # a negative constant only lowers the bound: drop it so the count is never negative
    return upper if upper.constant >= 0 else upper - upper.constant


def _expand_nodes(nodes: tuple[Node, ...], names: Collection[str], index: Aff) -> tuple[Node, ...]:
    def load(ld: Load) -> Expr:
        return Load(ld.buffer, (index,)) if ld.buffer in names else ld

    def node(n: Node) -> Node:
        if isinstance(n, Assign):
            value = map_loads(n.value, load)
            indices = tuple(i if isinstance(i, Aff) else map_loads(i, load) for i in n.indices)
            if n.buffer in names:
                indices = (index,)
            return replace(n, indices=indices, value=value)
        if isinstance(n, For):
            return replace(n, body=tuple(node(b) for b in n.body))
        if isinstance(n, If):
            return replace(n, then_body=tuple(node(b) for b in n.then_body),
                           else_body=tuple(node(b) for b in n.else_body))
        raise IllegalTransform(f"scalar expansion does not rewrite {type(n).__name__} nodes")
    return tuple(node(n) for n in nodes)


def expand_scalar_locals(function: Function, loop: For, names: Collection[str]) -> tuple[Function, For]:
    """``function`` with the scalar locals ``names`` of ``loop`` expanded along it:
    each becomes a rank-1 buffer indexed by the loop variable, declared where the
    loop is (the enclosing loop's locals, or the function's). Returns the new
    function and the new loop. Raises ``IllegalTransform`` (see the module)."""
    wanted = set(names)
    chosen = [b for b in loop.locals if b.name in wanted]
    for buffer in chosen:
        if buffer.shape:
            raise IllegalTransform(f"local '{buffer.name}' of loop '{loop.var}' is not a scalar; "
                                   f"expanding it along the loop would multiply its memory")
    if not chosen:
        return function, loop
    extent = expansion_extent(function, loop)
    expanded = tuple(Buffer(b.name, b.dtype, (extent,), b.space, b.loc) for b in chosen)
    kept = tuple(b for b in loop.locals if b.name not in wanted)
    new_loop = replace(loop, locals=kept, body=_expand_nodes(loop.body, wanted, Aff.var(loop.var)))

    def visit(nodes: tuple[Node, ...]) -> tuple[tuple[Node, ...], bool]:
        out: list[Node] = []
        placed = False
        for n in nodes:
            if n is loop:
                out.append(new_loop)
                placed = True
                continue
            if isinstance(n, For):
                body, inside = visit(n.body)
                if inside and any(c is new_loop for c in body):
                    n = replace(n, body=body, locals=n.locals + expanded)
                else:
                    n = replace(n, body=body)
                placed = placed or inside
            elif isinstance(n, If):
                then_body, a = visit(n.then_body)
                else_body, b = visit(n.else_body)
                n = replace(n, then_body=then_body, else_body=else_body)
                placed = placed or a or b
            out.append(n)
        return tuple(out), placed

    body, _ = visit(function.body)
    if any(n is new_loop for n in body):
        return replace(function, body=body, locals=function.locals + expanded), new_loop
    if not _declared_in_loop(body, new_loop):
        raise IllegalTransform(f"loop '{loop.var}' sits under a condition; scalar expansion "
                               f"declares the expanded local at the enclosing loop")
    return replace(function, body=body), new_loop


def _declared_in_loop(nodes: tuple[Node, ...], loop: For) -> bool:
    """Whether ``loop`` is a direct child of some loop in ``nodes``."""
    for n in nodes:
        if isinstance(n, For):
            if any(c is loop for c in n.body) or _declared_in_loop(n.body, loop):
                return True
        elif isinstance(n, If):
            if _declared_in_loop(n.then_body, loop) or _declared_in_loop(n.else_body, loop):
                return True
    return False


__all__ = ["expand_scalar_locals", "expansion_extent"]
