"""``split-guards``: split innermost loops where their guards start and stop holding.

An innermost sequential loop ``for x = lo to hi`` whose body is guarded
statements (``if`` nodes, and statements with no guard) where every ``if``
bounds ``x`` the same way, at most once from below and once from above
(``x + e >= 0``, ``x + f < N``: ``x`` with coefficient 1 or -1 and never
under ``//`` or ``%``), becomes three loops over consecutive ranges:

* ``[lo, min(hi, L))``: before every lower bound holds (the body as it was);
* ``[max(lo, L), min(hi, U))``: where every bound on ``x`` holds, so the
  body's ``if`` nodes keep only their other conditions (none: the statements
  run unguarded);
* ``[max(lo, L, U), hi)``: the rest (the body as it was).

The iterations run in the same order as before and each runs the same
statements, so the meaning is unchanged whatever the body does; only the
tests of ``x`` go from the middle loop, which is what lets LLVM vectorise a
padded convolution's width loop or a stencil's interior. A loop that does not
fit (no bound on ``x``, bounds that differ between the guards, two lower or
two upper bounds, a step other than 1, a mapped loop) is left alone with a
remark saying why, when it has guards on ``x`` at all. Neither is a loop of
a constant trip count below ``min_trip`` (16): a kernel window's three
iterations are cheaper guarded (LLVM unrolls them) than as three loops.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from polyir.ir.affine import Aff, Constraint
from polyir.ir.names import names_in
from polyir.ir.nodes import Assign, For, Function, If, Module, Node
from polyir.passes import register_pass
from polyir.tiling.bands import renamed_copy

if TYPE_CHECKING:
    from polyir.context import PassContext


class _Refused(Exception):
    """Why a loop is not split (for the remark)."""


@dataclass(frozen=True)
class _Bounds:
    """The range the guards allow ``x``: ``lower <= x < upper`` (None: unbounded)."""

    lower: Aff | None
    upper: Aff | None


def _bound(constraint: Constraint, var: str) -> tuple[str, Aff] | None:
    """``("lower", L)`` for ``x >= L``, ``("upper", U)`` for ``x < U``; None
    when the condition does not mention ``x``; ``_Refused`` when it does in
    another form."""
    expr, equality = constraint.as_nonnegative()          # expr >= 0 (or == 0)
    inside = any(not isinstance(atom, str) and var in atom.expr.variables()
                 for atom, _ in expr.terms)
    k = expr.coefficient(var)
    if k == 0 and not inside:
        return None
    if equality or inside or k not in (1, -1):
        raise _Refused(f"condition '{constraint}' bounds '{var}' in a form not split "
                       f"(an equality, a coefficient other than 1 or -1, or under // or %)")
    rest = expr - Aff.var(var) * k
    return ("lower", -rest) if k == 1 else ("upper", rest + 1)


def _guard_bounds(node: If, var: str) -> tuple[_Bounds, tuple[Constraint, ...]]:
    """The bounds ``node``'s conditions put on ``var`` and its other conditions."""
    lower: Aff | None = None
    upper: Aff | None = None
    others: list[Constraint] = []
    for constraint in node.conditions:
        found = _bound(constraint, var)
        if found is None:
            others.append(constraint)
        elif found[0] == "lower":
            if lower is not None and lower != found[1]:
                raise _Refused(f"two lower bounds on '{var}' in one guard")
            lower = found[1]
        else:
            if upper is not None and upper != found[1]:
                raise _Refused(f"two upper bounds on '{var}' in one guard")
            upper = found[1]
    return _Bounds(lower, upper), tuple(others)


def _plan(loop: For) -> _Bounds:
    """The common bounds of ``loop``'s guards on its variable (``_Refused``
    when the body does not fit)."""
    var = loop.var
    common: _Bounds | None = None
    for node in loop.body:
        if isinstance(node, Assign):
            continue
        if not isinstance(node, If):
            raise _Refused(f"its body holds a {type(node).__name__.lower()}, not only guarded "
                           f"statements")
        if any(isinstance(inner, For) for inner in (*node.then_body, *node.else_body)):
            raise _Refused("a guard holds a loop")
        bounds, _ = _guard_bounds(node, var)
        if common is None:
            common = bounds
        elif bounds != common:
            raise _Refused(f"its guards bound '{var}' differently")
    if common is None or (common.lower is None and common.upper is None):
        raise _Refused(f"no guard bounds '{var}'")
    for bound in (common.lower, common.upper):
        if bound is not None and var in bound.variables():
            raise _Refused(f"a bound on '{var}' depends on '{var}'")
    return common


def _unguarded(body: Sequence[Node], var: str) -> tuple[Node, ...]:
    """``body`` where every bound on ``var`` holds: the guards keep their other conditions."""
    out: list[Node] = []
    for node in body:
        if not isinstance(node, If):
            out.append(node)
            continue
        _, others = _guard_bounds(node, var)
        if others:
            out.append(replace(node, conditions=others))
        else:
            out.extend(node.then_body)
    return tuple(out)


MIN_TRIP = 16
"""A loop with a constant trip count below this is not split: its guards cost
less than three loops (LLVM unrolls a kernel window's 3 iterations whole)."""


def _constant_trip(loop: For) -> int | None:
    if len(loop.lower) == 1 and len(loop.upper) == 1:
        extent = loop.upper[0] - loop.lower[0]
        if extent.is_constant:
            return max(0, extent.constant)
    return None


def split_loop(loop: For, taken: set[str], min_trip: int = MIN_TRIP) -> tuple[Node, ...]:
    """The pieces of ``loop`` (module docstring); ``_Refused`` when it does not
    fit or has a constant trip count below ``min_trip``."""
    if loop.step != 1 or loop.mapping is not None:
        raise _Refused("a step other than 1 or a mapped loop")
    trip = _constant_trip(loop)
    if trip is not None and trip < min_trip:
        raise _Refused(f"{trip} iterations, fewer than {min_trip}: the guards cost less")
    bounds = _plan(loop)
    lower, upper = bounds.lower, bounds.upper
    inner = replace(loop, body=_unguarded(loop.body, loop.var),
                    lower=loop.lower + ((lower,) if lower is not None else ()),
                    upper=loop.upper + ((upper,) if upper is not None else ()))
    pieces: list[Node] = []
    if lower is not None:
        (before,), _ = renamed_copy((replace(loop, upper=loop.upper + (lower,)),), taken)
        pieces.append(before)
    pieces.append(inner)
    if upper is not None:
        after_lower = loop.lower + ((lower,) if lower is not None else ()) + (upper,)
        (after,), _ = renamed_copy((replace(loop, lower=after_lower),), taken)
        pieces.append(after)
    return tuple(pieces)


def _has_guard_on(loop: For) -> bool:
    return any(isinstance(node, If) and any(loop.var in c.variables() for c in node.conditions)
               for node in loop.body)


def split_guards(function: Function, ctx: PassContext | None = None,
                 min_trip: int = MIN_TRIP) -> Function:
    """``function`` with every innermost loop that fits split (module docstring;
    constant trip counts below ``min_trip`` are left alone)."""
    taken = names_in(function)

    def visit(nodes: Sequence[Node]) -> tuple[Node, ...]:
        out: list[Node] = []
        for node in nodes:
            if isinstance(node, For):
                if not any(isinstance(inner, For) for inner in node.body) and _has_guard_on(node):
                    try:
                        out.extend(split_loop(node, taken, min_trip))
                        if ctx is not None:
                            ctx.remark("split-guards", f"function '{function.name}', loop "
                                       f"'{node.var}'", "split where its guards hold",
                                       kind="applied")
                        continue
                    except _Refused as why:
                        if ctx is not None:
                            ctx.remark("split-guards", f"function '{function.name}', loop "
                                       f"'{node.var}'", f"not split: {why}", kind="missed")
                out.append(replace(node, body=visit(node.body)))
            elif isinstance(node, If):
                out.append(replace(node, then_body=visit(node.then_body),
                                   else_body=visit(node.else_body)))
            else:
                out.append(node)
        return tuple(out)

    body = visit(function.body)
    return function if body == function.body else replace(function, body=body)


@register_pass("split-guards")
@dataclass(frozen=True)
class SplitGuards:
    """Split innermost loops into the ranges before, where and after their
    guards on the loop variable hold, so that the middle range runs unguarded
    (``polyir.transforms.split_guards``); loops of a constant trip count below
    ``min_trip`` are left alone."""

    min_trip: int = MIN_TRIP

    def run(self, module: Module, ctx: PassContext) -> Module:
        """Every function of ``module`` with its fitting innermost loops split."""
        functions = tuple(split_guards(f, ctx, self.min_trip) for f in module.functions)
        changed = any(new is not old for new, old in zip(functions, module.functions, strict=True))
        return Module(functions) if changed else module


__all__ = ["split_guards", "split_loop", "SplitGuards", "MIN_TRIP"]
