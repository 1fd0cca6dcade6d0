"""When a parallel loop runs on threads: its estimated work against the dispatch cost.

A dispatch through the OpenMP runtime costs ``Target.parallel_dispatch_ns``
(measured, see docs/cpu.md), so a loop marked ``parallel`` only runs on the
thread team when its work pays for that. The estimate is made at run time,
just before the loop, from the values of its bounds:

* the *work* of a statement is the number of operations in it: one per
  load, store, arithmetic operation, comparison, select and cast, more for
  divisions and math calls (:data:`OPERATION_COST`);
* the work of a loop is its trip count times the work of one iteration of its
  body, the body's loop variables taken at the middle of their ranges (exact
  for rectangular nests, the average for triangular ones); an ``if`` counts
  both branches;
* the loop runs on threads when its work exceeds ``Target.min_parallel_work``
  plus the cost of filling and combining its privatised reductions
  (:func:`dispatch_threshold`), else serially in the calling thread.

Everything is computed in ``double``, so deep nests of large trip counts
cannot overflow. This is policy; the mechanism (outlining, dispatch,
privatisation) is ``polyir.cpu.parallel``.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from llvmlite import ir

from polyir.ir.affine import Aff
from polyir.ir.nodes import Assign, BinOp, Call, Cast, Compare, For, If, Load, Node, Select
from polyir.llvm.hooks import F64, I64

if TYPE_CHECKING:
    from polyir.llvm.lower import FunctionLowerer

OPERATION_COST = {"load": 1.0, "store": 1.0, "arith": 1.0, "divide": 4.0, "math": 10.0,
                  "cheap_call": 1.0}
"""Work units per operation (a unit is about one scalar operation of a
vectorised loop; ``Target.work_unit_ns`` says how long one takes)."""

_CHEAP_CALLS = frozenset({"neg", "abs", "max", "min", "not", "floor", "ceil"})

PRIVATE_ELEMENT_COST = 2.0
"""Work per element of a privatised reduction copy, per thread: filled with
the identity, then combined into the real buffer."""


def expression_cost(expr: object) -> float:
    """Work units of evaluating ``expr`` once (subscripts cost nothing: they
    are strength-reduced affine arithmetic)."""
    if isinstance(expr, Load):
        return OPERATION_COST["load"] + sum(expression_cost(i) for i in expr.indices
                                            if not isinstance(i, Aff))
    if isinstance(expr, BinOp):
        kind = "divide" if expr.op in ("/", "%") else "arith"
        return OPERATION_COST[kind] + expression_cost(expr.lhs) + expression_cost(expr.rhs)
    if isinstance(expr, Compare):
        return OPERATION_COST["arith"] + expression_cost(expr.lhs) + expression_cost(expr.rhs)
    if isinstance(expr, Call):
        kind = "cheap_call" if expr.fn in _CHEAP_CALLS else "math"
        return OPERATION_COST[kind] + sum(expression_cost(a) for a in expr.args)
    if isinstance(expr, Select):
        return OPERATION_COST["arith"] + sum(expression_cost(e) for e in
                                             (expr.cond, expr.if_true, expr.if_false))
    if isinstance(expr, Cast):
        return OPERATION_COST["arith"] + expression_cost(expr.value)
    return 0.0


def statement_cost(node: Assign) -> float:
    """Work units of one execution of an assignment (its value and the store)."""
    gathers = sum(expression_cost(i) for i in node.indices if not isinstance(i, Aff))
    return OPERATION_COST["store"] + expression_cost(node.value) + gathers


def trip_count(lowerer: FunctionLowerer, loop: For) -> tuple[ir.Value, ir.Value]:
    """``(trip, lo)``: the number of iterations (i64, at least 0) and the first
    value of ``loop``'s variable, for the variables bound now."""
    b = lowerer.builder
    lo, hi = lowerer.loop_bounds(loop)
    span = b.sub(hi, lo)
    trip = b.sdiv(b.add(span, ir.Constant(I64, loop.step - 1)), ir.Constant(I64, loop.step))
    trip = b.select(b.icmp_signed(">", span, ir.Constant(I64, 0)), trip, ir.Constant(I64, 0))
    return trip, lo


def body_work(lowerer: FunctionLowerer, body: tuple[Node, ...]) -> ir.Value:
    """The estimated work (f64) of one execution of ``body`` (see the module
    docstring); binds and unbinds the body's loop variables on ``lowerer``."""
    b = lowerer.builder
    constant = 0.0
    total: ir.Value | None = None
    for node in body:
        if isinstance(node, Assign):
            constant += statement_cost(node)
        elif isinstance(node, If):
            branch = b.fadd(body_work(lowerer, node.then_body),
                            body_work(lowerer, node.else_body))
            total = branch if total is None else b.fadd(total, branch)
        elif isinstance(node, For):
            loop = loop_work(lowerer, node)
            total = loop if total is None else b.fadd(total, loop)
        else:  # fragments, barriers: rejected by the lowering anyway
            constant += 1.0
    result = ir.Constant(F64, constant)
    return result if total is None else b.fadd(total, result)


def loop_work(lowerer: FunctionLowerer, loop: For) -> ir.Value:
    """Trip count times the work of one iteration, the variable taken at the
    middle of its range (f64)."""
    b = lowerer.builder
    trip, lo = trip_count(lowerer, loop)
    half = b.sdiv(trip, ir.Constant(I64, 2))
    middle = b.add(lo, b.mul(half, ir.Constant(I64, loop.step)))
    previous = lowerer.bind(loop.var, middle)
    per_iteration = body_work(lowerer, loop.body)
    lowerer.unbind(loop.var, previous)
    return b.fmul(b.sitofp(trip, F64), per_iteration)


def dispatch_threshold(lowerer: FunctionLowerer, min_parallel_work: ir.Value, cores: int,
                       private_elements: ir.Value | None) -> ir.Value:
    """The work (f64) above which the loop runs on threads: ``min_parallel_work``
    (f64, the target's) plus, per privatised element, its fill and combine
    on every thread (``PRIVATE_ELEMENT_COST * cores / (cores - 1)``: the part
    of the work that threads save must also pay for that)."""
    threshold = min_parallel_work
    if private_elements is None:
        return threshold
    b = lowerer.builder
    factor = PRIVATE_ELEMENT_COST * cores / max(1, cores - 1)
    extra = b.fmul(b.sitofp(private_elements, F64), ir.Constant(F64, factor))
    return b.fadd(threshold, extra)
