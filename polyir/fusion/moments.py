"""Mean and variance in one traversal: the second moment beside the first.

Layer norm, group norm and batch norm (training) are lowered as two sums
over the same axis ``j``, the second using the first's final value::

    a = 0;  for j: a = a + X[j]           (R1)
    a = a / n                              (finishers of R1: the mean M)
    b = 0;  for j: b = b + (X[j] - M) * (X[j] - M)      (R2)

R2 needs R1's final value, so slicing fusion cannot merge the loops. With a
shift ``K = X[first j]`` and ``d = X - K`` the identity
``sum (X - M)^2 = sum d^2 - 2 (M - K) sum d + n (M - K)^2`` holds for *any*
``j``-invariant ``M`` (it is the expansion of ``(d - (M - K))^2``), so the
rewrite computes ``sum d`` and ``sum d^2`` in R1's loop and applies the
repair term after R1's finishers, where R2 stood::

    a = 0;  K = X[first j];  s = 0;  b = 0
    for j: { a = a + X[j];  s = s + (X[j] - K);  b = b + (X[j] - K) * (X[j] - K) }
    a = a / n
    b = b - 2 (M - K) s + n (M - K) (M - K)

**Legality** (checked; otherwise a remark names the failed condition): R1 and
R2 are ``+`` reductions over loops with the same bounds, with a constant
number ``n >= 1`` of iterations (so ``X[first j]`` exists); between them only
statements that update R1's accumulator; R2's initial value is ``0`` and its
summand is ``(X - M) * (X - M)`` with ``X`` R1's operand and ``M``
``j``-invariant, not reading R2's accumulator; ``X`` reads neither
accumulator (both are checked by the reduction matcher), so moving R2's
loop body into R1's reads the same values. ``R1`` (the mean) is unchanged,
bit for bit.

**Rounding.** Exact in real arithmetic. In floating point the sums of ``d``
and ``d^2`` are those of values centred on a sample rather than on the mean:
the result's absolute error is about ``eps * (sum (X - M)^2 + n (M - K)^2)``
(a few ``eps`` relative to the variance when the first element is within a
few standard deviations of the mean, as in normalised activations; it grows
as ``(M - K)^2 / var`` for a far outlier first, where Welford's update would
stay exact to ``O(eps)``). Without the shift (plain sum of squares) the error
would grow with ``M^2 / var``, which is why the shift is kept. Tests compare
within tolerance, with a large common offset.

**Policy.** It pays when the second traversal would read ``X`` from beyond
the L1 cache: a row of ``n`` elements is rewritten when it is larger than
``min_bytes`` (the pass passes the Target's L1 size); a smaller row is left
with a remark (the second pass reads cache and one pass would only add a
subtraction and rounding).
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from polyir.fusion.online_match import as_reduction, mentions, same_range
from polyir.ir.affine import Aff
from polyir.ir.names import claim_name, names_in
from polyir.ir.nodes import Assign, BinOp, Buffer, Const, Expr, For, Function, If, Load, Node
from polyir.ir.types import DType
from polyir.ir.walk import loads, substitute_expr

ELEMENT_BYTES = {DType.F16: 2, DType.BF16: 2, DType.F32: 4, DType.F64: 8}


@dataclass(frozen=True)
class MomentsResult:
    """What :func:`single_pass_moments` did: the new function and the notes
    ``(where, why, kind)`` for the remarks."""

    function: Function
    notes: list[tuple[str, str, str]]


def _centred_square(expr: Expr) -> tuple[Expr, Expr] | None:
    """``(X - M) * (X - M)`` as ``(X, M)``."""
    if isinstance(expr, BinOp) and expr.op == "*" and expr.lhs == expr.rhs:
        inner = expr.lhs
        if isinstance(inner, BinOp) and inner.op == "-":
            return inner.lhs, inner.rhs
    return None


def _count(loop: For) -> int | None:
    if len(loop.lower) != 1 or len(loop.upper) != 1:
        return None
    span = loop.upper[0] - loop.lower[0]
    return span.evaluate({}) if span.is_constant else None


def _rewrite_block(block: tuple[Node, ...], function: Function, min_bytes: int, taken: set[str],
                   notes: list[tuple[str, str, str]], new_locals: list[Buffer]) -> tuple[Node, ...]:
    k = 0
    while k + 1 < len(block):
        first = as_reduction(block[k], block[k + 1], "+")
        if first is None:
            k += 1
            continue
        after = k + 2
        while after < len(block) and isinstance(block[after], Assign) \
                and block[after].buffer == first.acc.buffer:  # type: ignore[union-attr]
            after += 1
        second = as_reduction(block[after], block[after + 1], "+") if after + 1 < len(block) else None
        if second is None or not same_range(first.loop, second.loop):
            k += 1
            continue
        j = first.loop.var
        summand = second.operand if second.loop.var == j else \
            substitute_expr(second.operand, {second.loop.var: Aff.var(j)})
        centred = _centred_square(summand)
        where = f"function '{function.name}', statement {second.statement.name}"
        if centred is None or centred[0] != first.operand:
            k += 1                     # not a second moment of R1's operand
            continue
        x, mean = centred
        why = None
        count = _count(first.loop)
        buffer = function.buffers[second.acc.buffer]
        finishers = block[k + 2:after]
        if any(ld.buffer == second.acc.buffer for f in finishers
               for ld in loads(f.value)):  # type: ignore[union-attr]
            why = "a statement between the sums reads the second one"
        elif mentions(mean, j) or any(ld.buffer == second.acc.buffer for ld in loads(mean)):
            why = "the centre is not invariant in the loop"
        elif not (isinstance(second.init_value, Const) and second.init_value.value == 0):
            why = "the second sum does not start at 0"
        elif count is None or count < 1:
            why = "the number of iterations is not a constant >= 1"
        elif buffer.dtype not in ELEMENT_BYTES:
            why = f"accumulator of type {buffer.dtype}"
        elif count * ELEMENT_BYTES[buffer.dtype] <= min_bytes:
            why = (f"a row of {count * ELEMENT_BYTES[buffer.dtype]} bytes fits in {min_bytes} bytes "
                   f"of L1: the second traversal reads cache")
        if why is not None:
            notes.append((where, f"variance not computed in one pass: {why}", "missed"))
            k = after + 2
            continue
        assert count is not None
        dtype = buffer.dtype
        shift = replace(buffer, name=claim_name(f"{second.acc.buffer}_shift", taken), shape=())
        total = replace(buffer, name=claim_name(f"{second.acc.buffer}_shifted_sum", taken), shape=())
        new_locals += [shift, total]

        def stmt(target: str, indices: tuple, value: Expr) -> Assign:
            return Assign(claim_name("MS", taken), target, indices, value)
        k_load, s_load, b_load = Load(shift.name, ()), Load(total.name, ()), second.acc.load()
        d = BinOp("-", x, k_load)
        body = first.loop.body + (
            stmt(total.name, (), BinOp("+", s_load, d)),
            stmt(second.acc.buffer, second.acc.indices, BinOp("+", b_load, BinOp("*", d, d))))
        offset = BinOp("-", mean, k_load)
        n = Const(float(count), dtype)
        repair = BinOp("+", BinOp("-", b_load, BinOp("*", BinOp("*", Const(2.0, dtype), offset), s_load)),
                       BinOp("*", BinOp("*", n, offset), offset))
        nodes = (first.init, stmt(shift.name, (), substitute_expr(x, {j: first.loop.lower[0]})),
                 stmt(total.name, (), Const(0.0, dtype)), second.init,
                 replace(first.loop, body=body)) + block[k + 2:after] + (
                 stmt(second.acc.buffer, second.acc.indices, repair),)
        notes.append((where, f"sum of squares about '{first.acc.buffer}' computed in the loop of "
                      f"{first.statement.name} (shifted by the first element, repaired after it)",
                      "applied"))
        block = block[:k] + nodes + block[after + 2:]
        k += len(nodes)
    return block


def single_pass_moments(function: Function, min_bytes: int = 0) -> MomentsResult:
    """Rewrite every mean-then-variance pair of sums (see the module docstring)
    whose rows are larger than ``min_bytes`` into one traversal; returns the
    function (the same object when nothing changed) and the notes."""
    notes: list[tuple[str, str, str]] = []
    taken = names_in(function)

    def visit(nodes: tuple[Node, ...], new_locals: list[Buffer]) -> tuple[Node, ...]:
        result: list[Node] = []
        for node in nodes:
            if isinstance(node, For):
                inner: list[Buffer] = []
                body = _rewrite_block(visit(node.body, inner), function, min_bytes, taken, notes, inner)
                if body != node.body:
                    node = replace(node, body=body, locals=node.locals + tuple(inner))
            elif isinstance(node, If):
                node = replace(node, then_body=visit(node.then_body, new_locals),
                               else_body=visit(node.else_body, new_locals))
            result.append(node)
        return tuple(result)

    outer: list[Buffer] = []
    body = _rewrite_block(visit(function.body, outer), function, min_bytes, taken, notes, outer)
    if body == function.body:
        return MomentsResult(function, notes)
    return MomentsResult(replace(function, body=body, locals=function.locals + tuple(outer)), notes)


__all__ = ["MomentsResult", "single_pass_moments"]
