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
cannot overflow.

A loop big enough also needs a team that shows up. On a machine whose cores
are busy with other work, the OS may not run a team thread for a whole time
slice, and the dispatch then costs milliseconds instead of microseconds.
:class:`LateTeam` remembers, per loop, how late the last thread of the last
team started: later than ``Target.team_late_ns`` (:data:`LATE_NS`) and after
more than half of the dispatch's time (a thread that starts late but still
does its share, as a halted virtual CPU does after waking, helped), the loop runs
serially for a back-off time (at least :data:`BACKOFF_MIN_NS`, doubling
while the team keeps coming late, up to :data:`BACKOFF_MAX_NS`; halved by
each team on time), and then tries the team again. A dispatch that took longer than the
loop took when it last ran serially (timed while the team was backed off;
before that, :data:`SLOW_FACTOR` times its estimated serial time) counts as
late too: the team started in time but lost its cores on the way. Loops with privatised reductions always
use the team when they are big enough (their result depends on the team size
by rounding, and must not depend on timing).

This is policy; the mechanism (outlining, dispatch, privatisation) is
``polyir.cpu.parallel`` and ``polyir.cpu.team``.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from llvmlite import ir

from polyir.cpu.abi import global_f64, global_i64, now_ns, runtime_global
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


LATE_NS = 200_000
"""A team whose last thread starts this long after the dispatch began (200 us;
a sleeping libgomp worker wakes in 5-50 us on an idle machine) was not given
its cores (the default of ``Target.team_late_ns``)."""
SLOW_FACTOR = 3.0
"""A dispatch that took this many times the loop's estimated serial time (the
work estimate times ``Target.work_unit_ns``) did not get its cores either:
even a scalar loop at three times the estimated time per unit runs in 1.5x
on two threads."""
NEVER_LATE_NS = 1 << 62
"""``team_late_ns`` at or above this turns the back-off off (tests, benchmarks)."""
BACKOFF_MIN_NS = 100_000_000
"""The first serial stretch after a late team (100 ms): a try that finds the
cores busy costs up to a scheduler time slice, several milliseconds."""
BACKOFF_MAX_NS = 10_000_000_000
"""The longest serial stretch (10 s)."""


class LateTeam:
    """The per-loop memory of late teams (see the module docstring): globals
    ``{base}.retry_at`` (ns; the loop may dispatch again from then on),
    ``{base}.backoff`` (ns) and ``{base}.serial_unit_ns`` (double: ns per work
    unit the loop took when it last ran serially instead of dispatching; 0
    before), and the entry function's ``deferred`` counter and ``late_ns``
    threshold (``polyir.cpu.abi.runtime_global``: its initial value is the
    hooks' ``team_late_ns``)."""

    def __init__(self, lowerer: FunctionLowerer, base: str, work_unit_ns: float = 0.1):
        module = lowerer.llvm_module
        self.lowerer = lowerer
        self.work_unit_ns = work_unit_ns
        self.retry_at = global_i64(module, f"{base}.retry_at")
        self.backoff = global_i64(module, f"{base}.backoff")
        self.serial_unit_ns = global_f64(module, f"{base}.serial_unit_ns", 0.0)
        self.deferred = runtime_global(lowerer, "deferred")
        self.late_ns = runtime_global(lowerer, "late_ns")

    def allowed(self, now: ir.Value) -> ir.Value:
        """i1: the loop may use the team at time ``now``."""
        b = self.lowerer.builder
        return b.icmp_signed(">=", now, b.load_atomic(self.retry_at, "monotonic", 8, typ=I64))

    def learn_serial(self, start: ir.Value, work: ir.Value) -> None:
        """After the loop ran serially instead of dispatching (from ``start``, ns):
        count it as deferred and keep its time per work unit."""
        b = self.lowerer.builder
        b.atomic_rmw("add", self.deferred, ir.Constant(I64, 1), "monotonic")
        elapsed = b.sitofp(b.sub(now_ns(self.lowerer), start), F64)
        per_unit = b.fdiv(elapsed, b.call(self.lowerer.intrinsic(
            "llvm.maxnum.f64", F64, [F64, F64]), [work, ir.Constant(F64, 1.0)]))
        b.store_atomic(per_unit, self.serial_unit_ns, "monotonic", 8)

    def record(self, start: ir.Value, arrival: ir.Value, work: ir.Value) -> None:
        """After a dispatch begun at ``start`` whose last thread started at
        ``arrival`` (0: nothing ran) for ``work`` units: back off when that
        was late, or when the dispatch took longer than the loop ran serially
        last time (or, before any serial run, over :data:`SLOW_FACTOR` times the
        estimate ``work * work_unit_ns``)."""
        b = self.lowerer.builder
        finished = now_ns(self.lowerer)
        lateness = b.sub(arrival, start)
        limit = b.load_atomic(self.late_ns, "monotonic", 8, typ=I64)
        ran = b.icmp_signed("!=", arrival, ir.Constant(I64, 0))
        elapsed_ns = b.sub(finished, start)
        # late and for most of the dispatch: a thread that starts late but
        # still does its share (a halted virtual CPU takes a while to wake) helped
        for_long = b.or_(b.icmp_signed("<", limit, ir.Constant(I64, 0)),
                         b.icmp_signed(">", b.mul(lateness, ir.Constant(I64, 2)), elapsed_ns))
        late_start = b.and_(b.icmp_signed(">", lateness, limit), for_long)
        measured = b.load_atomic(self.serial_unit_ns, "monotonic", 8, typ=F64)
        per_unit = b.select(b.fcmp_ordered(">", measured, ir.Constant(F64, 0.0)), measured,
                            ir.Constant(F64, self.work_unit_ns * SLOW_FACTOR))
        elapsed = b.sitofp(elapsed_ns, F64)
        slow = b.fcmp_ordered(">", elapsed, b.fmul(work, per_unit))
        disabled = b.icmp_signed(">=", limit, ir.Constant(I64, NEVER_LATE_NS))
        late: ir.Value = b.and_(ran, b.and_(b.or_(late_start, slow), b.not_(disabled)))
        previous = b.load_atomic(self.backoff, "monotonic", 8, typ=I64)
        smax = self.lowerer.intrinsic("llvm.smax.i64", I64, [I64, I64])
        smin = self.lowerer.intrinsic("llvm.smin.i64", I64, [I64, I64])
        doubled = b.call(smin, [b.call(smax, [b.mul(previous, ir.Constant(I64, 2)),
                                              ir.Constant(I64, BACKOFF_MIN_NS)]),
                                ir.Constant(I64, BACKOFF_MAX_NS)])
        backoff = b.select(late, doubled, b.sdiv(previous, ir.Constant(I64, 2)))
        b.store_atomic(backoff, self.backoff, "monotonic", 8)
        retry = b.select(late, b.add(finished, backoff), ir.Constant(I64, 0))
        b.store_atomic(retry, self.retry_at, "monotonic", 8)
