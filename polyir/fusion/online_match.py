"""Recognition for reduce-reduce fusion (``polyir.fusion.online`` rewrites).

:func:`match_region` finds a cascade in a block of sibling nodes: a max
reduction over ``j`` followed by sum reductions over the same range (per
element or per ``d``) and maps over ``j``. :func:`plan_region` checks the
rule stated in ``polyir.fusion.online`` for each reduction (its summand,
after inlining the maps only such reductions read, is ``G * c`` with ``c``
``j``-invariant and ``G`` linear in the terms ``exp(X - m)``) and says why a
reduction is refused; it also finds the producer of ``X`` that can move into
the key tile and the ``-inf`` guard that can become loop bounds. Nothing here
builds new nodes.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from polyir.ir.affine import Aff
from polyir.ir.nodes import (
    Assign,
    BinOp,
    Call,
    Const,
    Expr,
    For,
    Function,
    If,
    Load,
    Node,
    Select,
    Var,
)
from polyir.ir.walk import (
    buffer_accesses,
    loads,
    map_loads,
    statements,
    substitute_expr,
    walk_expr,
)

DEFAULT_TILE = 256
NEG_INF = float("-inf")


@dataclass(frozen=True)
class Accumulator:
    """``buffer[indices]``, the element a reduction accumulates into."""

    buffer: str
    indices: tuple

    def load(self) -> Load:
        return Load(self.buffer, self.indices)


@dataclass
class Reduction:
    """A reduction ``acc = acc op operand`` over a ``j`` loop, with its init
    nodes; ``outer`` is the loop around it for a reduction per ``d``."""

    acc: Accumulator
    op: str
    init: Node
    init_value: Expr
    loop: For
    operand: Expr          # with the loop variable renamed to the canonical one
    outer: For | None = None
    core: Expr | None = None
    post: list[Callable[[Expr], Expr]] = field(default_factory=list)
    dependent: bool = False

    @property
    def statement(self) -> Assign:
        body = self.loop.body[0]
        assert isinstance(body, Assign)
        return body

    def nodes(self) -> tuple[Node, ...]:
        return (self.outer,) if self.outer is not None else (self.init, self.loop)


@dataclass
class Region:
    """A matched cascade in one block: the max, the items after it (reductions
    and maps, in order) and the index range of the block they occupy."""

    start: int
    stop: int
    maximum: Reduction
    items: list[Reduction | For]
    canonical: str




# ---------------------------------------------------------------- matching
def _mentions(expr: Expr, var: str) -> bool:
    """Whether ``expr`` uses the variable ``var`` (as a value or in a subscript)."""
    for sub in walk_expr(expr):
        if isinstance(sub, Aff) and var in sub.variables():
            return True
        if isinstance(sub, Var) and sub.name == var:
            return True
        if isinstance(sub, Load) and _index_mentions(sub.indices, var):
            return True
    return False


def _reads(expr: Expr, buffer: str) -> bool:
    return any(load.buffer == buffer for load in loads(expr))


def _index_mentions(indices: tuple, var: str) -> bool:
    return any((isinstance(i, Aff) and var in i.variables()) or (not isinstance(i, Aff) and _mentions(i, var))
               for i in indices)


def _plain_loop(node: Node) -> bool:
    return isinstance(node, For) and node.step == 1 and node.mapping is None and not node.locals


def _reduction(init: Node, loop: Node, op: str) -> Reduction | None:
    """``init; loop`` as a reduction with combiner ``op`` (``"max"`` or ``"+"``)."""
    if not (isinstance(init, Assign) and _plain_loop(loop)):
        return None
    assert isinstance(loop, For)
    if len(loop.body) != 1 or not isinstance(loop.body[0], Assign):
        return None
    step = loop.body[0]
    if step.buffer != init.buffer or step.indices != init.indices or _index_mentions(step.indices, loop.var):
        return None
    acc = Accumulator(step.buffer, step.indices)
    value = step.value
    operand: Expr | None = None
    if op == "max" and isinstance(value, Call) and value.fn == "max":
        a, b = value.args
        operand = b if a == acc.load() else a if b == acc.load() else None
    elif op == "+" and isinstance(value, BinOp) and value.op == "+":
        operand = value.rhs if value.lhs == acc.load() else value.lhs if value.rhs == acc.load() else None
    if operand is None or _reads(operand, acc.buffer) or _reads(init.value, acc.buffer):
        return None
    return Reduction(acc, op, init, init.value, loop, operand)


def _nested_reduction(node: Node) -> Reduction | None:
    """``for d { r[..d..] = c; for j { r[..d..] = r[..d..] + F } }``."""
    if not (_plain_loop(node) and len(node.body) == 2):  # type: ignore[union-attr]
        return None
    assert isinstance(node, For)
    found = _reduction(node.body[0], node.body[1], "+")
    if found is not None:
        found.outer = node
    return found


def _same_range(a: For, b: For) -> bool:
    return a.lower == b.lower and a.upper == b.upper and a.step == b.step


def _rename(expr: Expr, old: str, new: str) -> Expr:
    return expr if old == new else substitute_expr(expr, {old: Aff.var(new)})


def _map(node: Node, like: For) -> For | None:
    """A loop ``for j { p[.., j] = E }`` over ``like``'s range."""
    if not (_plain_loop(node) and _same_range(node, like)):  # type: ignore[arg-type]
        return None
    assert isinstance(node, For)
    if len(node.body) != 1 or not isinstance(node.body[0], Assign):
        return None
    store = node.body[0]
    if not store.indices or store.indices[-1] != Aff.var(node.var) \
            or _index_mentions(store.indices[:-1], node.var) or _reads(store.value, store.buffer):
        return None
    return node


def match_region(block: tuple[Node, ...], start: int) -> Region | None:
    maximum = _reduction(block[start], block[start + 1], "max") if start + 1 < len(block) else None
    if maximum is None:
        return None
    canonical = maximum.loop.var
    items: list[Reduction | For] = []
    k = start + 2
    while k < len(block):
        found = _reduction(block[k], block[k + 1], "+") if k + 1 < len(block) else None
        if found is not None and _same_range(found.loop, maximum.loop):
            found.operand = _rename(found.operand, found.loop.var, canonical)
            items.append(found)
            k += 2
            continue
        found = _nested_reduction(block[k])
        if found is not None and _same_range(found.loop, maximum.loop):
            found.operand = _rename(found.operand, found.loop.var, canonical)
            items.append(found)
            k += 1
            continue
        mapped = _map(block[k], maximum.loop)
        if mapped is not None:
            items.append(mapped)
            k += 1
            continue
        break
    return Region(start, k, maximum, items, canonical)


# ------------------------------------------------------------ the algebra
def _is_shift_exp(expr: Expr, operand: Expr, m: Load) -> bool | None:
    """``True`` for ``exp(operand - m)``; ``None`` for ``exp(A - m)`` with another ``A``."""
    if isinstance(expr, Call) and expr.fn == "exp":
        arg = expr.args[0]
        if isinstance(arg, BinOp) and arg.op == "-" and arg.rhs == m and not _reads(arg.lhs, m.buffer):
            return True if arg.lhs == operand else None
    return False


def _linear(expr: Expr, operand: Expr, m: Load) -> str | None:
    """``None`` when ``expr`` is linear in the terms ``exp(operand - m)``, else why not."""
    shift = _is_shift_exp(expr, operand, m)
    if shift:
        return None
    if shift is None:
        return "an exponent's argument is not the value whose max is taken"
    if isinstance(expr, BinOp):
        left, right = _reads(expr.lhs, m.buffer), _reads(expr.rhs, m.buffer)
        if expr.op in ("+", "-"):
            for side, uses in ((expr.lhs, left), (expr.rhs, right)):
                if not uses:
                    return f"{expr.op} of a term without the max"
                why = _linear(side, operand, m)
                if why:
                    return why
            return None
        if expr.op == "*" and left != right:
            return _linear(expr.lhs if left else expr.rhs, operand, m)
        if expr.op == "/" and left and not right:
            return _linear(expr.lhs, operand, m)
        return f"the max enters a '{expr.op}' on both sides or in a divisor"
    if isinstance(expr, Call) and expr.fn == "neg":
        return _linear(expr.args[0], operand, m)
    name = type(expr).__name__ if not isinstance(expr, Call) else f"'{expr.fn}'"
    return f"the max is used through {name}, which has no repair term"


def _factor(expr: Expr, variant: Callable[[Expr], bool]) -> tuple[Expr, list[Callable[[Expr], Expr]]]:
    """``expr`` as ``post(core)``: j-invariant factors and zero guards pulled out
    (innermost wrapper last in the list). Pulling a factor out of a product
    reassociates it (one rounding); pulling a guard ``c ? 0 : a`` out of
    ``a * b`` differs only where ``b`` is ``inf`` or ``NaN``."""
    if isinstance(expr, Select) and not variant(expr.cond):
        if isinstance(expr.if_true, Const) and expr.if_true.value == 0 and variant(expr.if_false):
            core, post = _factor(expr.if_false, variant)
            return core, [lambda r, c=expr.cond, z=expr.if_true: Select(c, z, r)] + post
        if isinstance(expr.if_false, Const) and expr.if_false.value == 0 and variant(expr.if_true):
            core, post = _factor(expr.if_true, variant)
            return core, [lambda r, c=expr.cond, z=expr.if_false: Select(c, r, z)] + post
    if isinstance(expr, BinOp) and expr.op == "*":
        if not variant(expr.lhs) and variant(expr.rhs):
            core, post = _factor(expr.rhs, variant)
            return core, [lambda r, c=expr.lhs: BinOp("*", c, r)] + post
        if not variant(expr.rhs) and variant(expr.lhs):
            core, post = _factor(expr.lhs, variant)
            return core, [lambda r, c=expr.rhs: BinOp("*", r, c)] + post
        left, left_post = _factor(expr.lhs, variant)
        right, right_post = _factor(expr.rhs, variant)
        return BinOp("*", left, right), left_post + right_post
    if isinstance(expr, BinOp) and expr.op == "/":
        if not variant(expr.rhs) and variant(expr.lhs):
            core, post = _factor(expr.lhs, variant)
            return core, [lambda r, c=expr.rhs: BinOp("/", r, c)] + post
        core, post = _factor(expr.lhs, variant)
        return BinOp("/", core, expr.rhs), post
    return expr, []


def apply_post(post: list[Callable[[Expr], Expr]], value: Expr) -> Expr:
    for wrap in reversed(post):
        value = wrap(value)
    return value


# ---------------------------------------------------------------- planning
@dataclass
class Plan:
    fused: list[Reduction]
    kept: list[Node]
    producer: For | None
    scores: tuple[str, tuple] | None     # the producer's buffer and subscript prefix
    bounds: tuple[tuple[Aff, ...], tuple[Aff, ...]]
    guard_bounds: bool
    reasons: list[str]


def _readers(function: Function, buffer: str) -> set[str]:
    return {s.name for s in statements(function.body) if buffer in buffer_accesses((s,))[0]}


def _producer(block: tuple[Node, ...], region: Region, function: Function) -> For | None:
    """The loop right before the max that writes the max's operand row, when
    every write in it is ``s[prefix.., j]`` of one local ``s``."""
    if region.start == 0:
        return None
    node = block[region.start - 1]
    if not (_plain_loop(node) and _same_range(node, region.maximum.loop)):  # type: ignore[arg-type]
        return None
    assert isinstance(node, For)
    written = {s.buffer for s in statements(node.body) if isinstance(s, Assign)}
    if len(written) != 1 or any(not isinstance(s, Assign) for s in statements(node.body)):
        return None
    buffer = written.pop()
    params = {p.name for p in function.params}
    if buffer in params:
        return None
    for s in statements(node.body):
        assert isinstance(s, Assign)
        if s.indices[-1:] != (Aff.var(node.var),) or _index_mentions(s.indices[:-1], node.var):
            return None
    return node


def _guard_bounds(producer: For, buffer: str) -> tuple[list[Aff], list[Aff]] | None:
    """Bounds on ``j`` from a guard whose else branch stores ``-inf``."""
    if len(producer.body) != 1 or not isinstance(producer.body[0], If):
        return None
    guard = producer.body[0]
    if not guard.else_body or not all(
            isinstance(s, Assign) and s.buffer == buffer and isinstance(s.value, Const)
            and s.value.value == NEG_INF for s in guard.else_body):
        return None
    lower: list[Aff] = []
    upper: list[Aff] = []
    for condition in guard.conditions:
        expr, equality = condition.as_nonnegative()
        coefficient = expr.coefficient(producer.var)
        if equality or abs(coefficient) != 1 or not expr.is_linear:
            return None
        rest = expr - Aff.var(producer.var) * coefficient
        if coefficient == 1:           # j + rest >= 0
            lower.append(-rest)
        else:                          # rest - j >= 0
            upper.append(rest + 1)
    return lower, upper


def plan_region(block: tuple[Node, ...], region: Region, function: Function) -> Plan:
    maximum = region.maximum
    m = maximum.acc.load()
    j = region.canonical
    region_nodes = list(block[region.start:region.stop])
    _, region_writes = buffer_accesses(region_nodes)
    maps = {item.body[0].buffer: item for item in region.items  # type: ignore[union-attr]
            if isinstance(item, For)}
    reductions = [item for item in region.items if isinstance(item, Reduction)]
    reasons: list[str] = []

    # Inline maps into the reductions that read them.
    def inline(expr: Expr) -> Expr:
        def change(load: Load) -> Expr:
            source = maps.get(load.buffer)
            if source is None or load.indices[:-1] != source.body[0].indices[:-1]:  # type: ignore[union-attr]
                return load
            store = source.body[0]
            assert isinstance(store, Assign)
            last = load.indices[-1]
            if not isinstance(last, Aff):
                return load
            return inline(substitute_expr(store.value, {source.var: last}))
        return map_loads(expr, change)

    fused: list[Reduction] = []
    results = {maximum.acc.buffer}
    for red in reductions:
        results.add(red.acc.buffer)
    for red in reductions:
        summand = inline(red.operand)
        where = f"reduction into '{red.acc.buffer}'"

        def variant(e: Expr) -> bool:
            return _mentions(e, j) or any(load.buffer in region_writes - results for load in loads(e))
        core, post = _factor(summand, variant)
        if post and not (isinstance(red.init_value, Const) and red.init_value.value == 0):
            reasons.append(f"{where}: a factor outside the sum needs the initial value 0")
            continue
        uses_max = _reads(core, m.buffer)
        others = {load.buffer for load in loads(core)} & (region_writes - {m.buffer})
        if others - {name for name in maps} - {maximum.acc.buffer}:
            reasons.append(f"{where}: its summand reads {', '.join(sorted(others))}, which the region computes")
            continue
        if any(load.buffer in maps for load in loads(core)):
            reasons.append(f"{where}: it reads a map that other statements read too")
            continue
        if not uses_max:
            reasons.append(f"{where}: it does not use the max (left as it is)")
            continue
        why = _linear(core, maximum.operand, m)
        if why is not None:
            reasons.append(f"{where}: {why}")
            continue
        if not (isinstance(red.init_value, Const) and red.init_value.value == 0):
            reasons.append(f"{where}: the correction needs the initial value 0")
            continue
        red.core, red.post, red.dependent = core, post, True
        fused.append(red)

    changed = True
    while changed:   # what is applied after the loop may read only fused results
        changed = False
        allowed_results = {maximum.acc.buffer} | {red.acc.buffer for red in fused}
        for red in list(fused):
            probe = apply_post(red.post, red.acc.load())
            late = {load.buffer for load in loads(probe)} & (region_writes - allowed_results)
            if late:
                reasons.append(f"reduction into '{red.acc.buffer}': its factor reads "
                               f"{', '.join(sorted(late))}, which is not fused")
                fused.remove(red)
                changed = True
    fused_names = {red.statement.name for red in fused}
    for red in list(fused):   # an earlier kept node must not read the accumulator
        position = region.items.index(red)
        if any(red.acc.buffer in buffer_accesses(item.nodes() if isinstance(item, Reduction) else (item,))[0]
               for item in region.items[:position] if not (isinstance(item, Reduction) and item in fused)):
            reasons.append(f"reduction into '{red.acc.buffer}': read before it completes")
            fused.remove(red)
            fused_names.discard(red.statement.name)
    dropped: set[str] = set()
    for name in maps:
        readers = _readers(function, name)
        if readers and readers <= fused_names:
            dropped.add(name)
    kept: list[Node] = []
    for item in region.items:
        if isinstance(item, Reduction):
            if item not in fused:
                kept.extend(item.nodes())
        elif item.body[0].buffer not in dropped:  # type: ignore[union-attr]
            kept.append(item)

    producer = _producer(block, region, function) if fused else None
    scores: tuple[str, tuple] | None = None
    bounds = (maximum.loop.lower, maximum.loop.upper)
    guard_bounds = False
    if producer is not None:
        store = next(iter(statements(producer.body)))
        assert isinstance(store, Assign)
        buffer = store.buffer
        prefix = tuple(store.indices[:-1])
        allowed = {maximum.statement.name} | fused_names | {s.name for s in statements(producer.body)}
        allowed |= {maps[name].body[0].name for name in dropped}  # type: ignore[union-attr]
        if not _readers(function, buffer) <= allowed:
            producer = None
        else:
            scores = (buffer, prefix)
            extra = _guard_bounds(producer, buffer)
            if extra is not None and (extra[0] or extra[1]):
                low, high = extra
                bounds = (bounds[0] + tuple(low), bounds[1] + tuple(high))
                guard_bounds = True
    return Plan(fused, kept, producer, scores, bounds, guard_bounds, reasons)




# ------------------------------------------- consumers into the cascade's rows
def cascade_depth(nest: Node) -> int | None:
    """The number of perfectly nested outer loops of ``nest`` around a block that
    starts a max reduction (the row loops of a softmax), or ``None``."""
    if not isinstance(nest, For):
        return None
    from polyir.polyhedral.slices import loop_chain
    for depth, loop in enumerate(loop_chain(nest), start=1):
        if any(match_region(loop.body, k) is not None for k in range(len(loop.body))):
            return depth
    return None



def as_reduction(init: Node, loop: Node, op: str) -> Reduction | None:
    """``init; loop`` as a reduction ``acc = acc op operand`` (``op`` ``"max"`` or
    ``"+"``) over a plain loop, or ``None``."""
    return _reduction(init, loop, op)


def same_range(a: For, b: For) -> bool:
    """Whether loops ``a`` and ``b`` have the same bounds and step."""
    return _same_range(a, b)


def mentions(expr: Expr, var: str) -> bool:
    """Whether ``expr`` uses the variable ``var`` (as a value or in a subscript)."""
    return _mentions(expr, var)


__all__ = ["DEFAULT_TILE", "NEG_INF", "Accumulator", "Plan", "Reduction", "Region", "apply_post",
           "as_reduction", "cascade_depth", "match_region", "mentions", "plan_region", "same_range"]
