"""isl AST -> polyir IR: code generation from any schedule.

``generate(scop, schedule)`` builds an isl AST (``isl.AstBuild``) for a
schedule tree or schedule map over the scop's statements and translates it:

* ``for`` nodes become ``For`` loops whose bounds are ``max``/``min`` lists of
  affine expressions (with floor division), the increment their step;
* ``if`` nodes become ``If`` (a disjunction becomes a chain of ``else``
  branches repeating the body);
* each user node becomes the original statement with the AST's expressions
  substituted for the original loop variables (subscripts, values and
  gather subscripts alike).

A generated loop that iterates exactly one original loop (every statement
under it uses the iterator as that loop's variable) reuses the loop's name
and keeps its ``unroll`` and ``vectorize`` hints and its ``parallel`` mark
(``polyir.polyhedral.schedule`` re-checks the mark on the new code); one that
iterates several original loops (fused by the schedule) is named after the
first of them. Loop
variables stay unique in the function: a name already taken gets a suffix
(``i_1``), and other loops get fresh names from isl's (``c0``, ``c1``, ...).
A statement that the AST runs in two places (a loop split by a piecewise
bound, a disjunctive guard) is renamed in the second (``S1_1``), and so are
the loops of a body a disjunctive guard repeats, so statement names and loop
variables stay unique too.

``apply_schedule(function, schedule)`` checks the schedule against the
dependences first and raises ``IllegalTransform`` with a witness when it is
not valid.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import islpy as isl

from polyir.errors import PolyirError
from polyir.ir.affine import Aff, Constraint
from polyir.ir.canonical import rename_nodes
from polyir.ir.nodes import (
    For,
    Function,
    If,
    Node,
)
from polyir.ir.walk import STATEMENT_NODES, substitute_node, walk_nodes
from polyir.polyhedral.extract import Scop, extract, isl_name

_OP: Any = isl.ast_expr_op_type
_NODE: Any = isl.ast_node_type


class CodegenError(PolyirError):
    """An isl AST construct with no polyir equivalent; names the construct."""


# ------------------------------------------------------------ AST expressions
class _Translator:
    def __init__(self, scop: Scop):
        self.scop = scop
        self.by_isl = {isl_name(n): s for n, s in scop.statements.items()}
        self.params = {isl_name(p): p for p in scop.params}
        self.reserved = set(scop.params) | set(scop.function.buffers) | set(scop.statements)
        self.original_loops = {lp.var for lp in scop.loops.values()}
        self.loop_names: set[str] = set()       # loop variables generated so far
        self.statement_names: set[str] = set()  # statement names generated so far

    def unique(self, base: str, taken: set[str]) -> str:
        """``base``, or ``base_1``, ``base_2``, ... : the first name not in ``taken``
        nor reserved."""
        name, k = base, 0
        while name in taken or name in self.reserved:
            k += 1
            name = f"{base}_{k}"
        return name

    # -- expressions
    def aff(self, expr: isl.AstExpr, env: Mapping[str, str]) -> Aff:
        kind = expr.get_type()
        if kind == isl.ast_expr_type.int:
            return Aff.const(int(expr.get_val().to_python()))
        if kind == isl.ast_expr_type.id:
            name = expr.get_id().get_name()
            if name in env:
                return Aff.var(env[name])
            if name in self.params:
                return Aff.var(self.params[name])
            raise CodegenError(f"unknown identifier {name} in the isl AST")
        op = expr.get_op_type()
        args = [expr.get_op_arg(k) for k in range(expr.get_op_n_arg())]
        if op == _OP.minus:
            return -self.aff(args[0], env)
        if op in (_OP.add, _OP.sub, _OP.mul):
            lhs, rhs = self.aff(args[0], env), self.aff(args[1], env)
            if op == _OP.add:
                return lhs + rhs
            if op == _OP.sub:
                return lhs - rhs
            return lhs * rhs
        if op in (_OP.fdiv_q, _OP.pdiv_q, _OP.div):
            return self.aff(args[0], env) // self._divisor(args[1])
        if op in (_OP.pdiv_r, _OP.zdiv_r):
            # zdiv_r only appears compared with 0, where C remainder and mod agree
            return self.aff(args[0], env) % self._divisor(args[1])
        raise CodegenError(f"isl AST operation {op} is not affine: {expr.to_C_str()}")

    def _divisor(self, expr: isl.AstExpr) -> int:
        if expr.get_type() != isl.ast_expr_type.int:
            raise CodegenError(f"non-constant divisor {expr.to_C_str()} in the isl AST")
        return int(expr.get_val().to_python())

    def bound_list(self, expr: isl.AstExpr, env: Mapping[str, str], op: isl.ast_expr_op_type) -> list[Aff]:
        """``max(a, b, ...)`` (or ``min``) flattened into its arguments."""
        if expr.get_type() == isl.ast_expr_type.op and expr.get_op_type() == op:
            found: list[Aff] = []
            for k in range(expr.get_op_n_arg()):
                found += self.bound_list(expr.get_op_arg(k), env, op)
            return found
        return [self.aff(expr, env)]

    def condition(self, expr: isl.AstExpr, env: Mapping[str, str]) -> list[list[Constraint]]:
        """A condition as a disjunction of conjunctions of affine constraints."""
        if expr.get_type() != isl.ast_expr_type.op:
            raise CodegenError(f"condition {expr.to_C_str()} is not a comparison")
        op = expr.get_op_type()
        args = [expr.get_op_arg(k) for k in range(expr.get_op_n_arg())]
        if op in (_OP.and_, _OP.and_then):
            result: list[list[Constraint]] = [[]]
            for arg in args:
                result = [a + b for a in result for b in self.condition(arg, env)]
            return result
        if op in (_OP.or_, _OP.or_else):
            return [conj for arg in args for conj in self.condition(arg, env)]
        compare = {_OP.eq: "==", _OP.le: "<=", _OP.lt: "<", _OP.ge: ">=", _OP.gt: ">"}
        if op not in compare:
            raise CodegenError(f"condition {expr.to_C_str()} is not a comparison")
        return self.comparison(args[0], compare[op], args[1], env)

    def comparison(self, lhs: isl.AstExpr, op: str, rhs: isl.AstExpr,
                   env: Mapping[str, str]) -> list[list[Constraint]]:
        """``lhs op rhs`` where either side may be a ``min``/``max``, as a DNF."""
        for side, expr in (("rhs", rhs), ("lhs", lhs)):
            if expr.get_type() != isl.ast_expr_type.op or \
                    expr.get_op_type() not in (_OP.min, _OP.max):
                continue
            if op == "==":
                raise CodegenError(f"equality with {expr.to_C_str()}")
            is_min = expr.get_op_type() == _OP.min
            smaller = op in ("<", "<=")
            # x <= min(a, b) and x >= max(a, b) are conjunctions; the others disjunctions
            conjunctive = (is_min == smaller) if side == "rhs" else (is_min != smaller)
            parts = []
            for k in range(expr.get_op_n_arg()):
                arg = expr.get_op_arg(k)
                parts.append(self.comparison(lhs, op, arg, env) if side == "rhs"
                             else self.comparison(arg, op, rhs, env))
            if conjunctive:
                result: list[list[Constraint]] = [[]]
                for part in parts:
                    result = [a + b for a in result for b in part]
                return result
            return [conj for part in parts for conj in part]
        return [[Constraint(self.aff(lhs, env), op, self.aff(rhs, env))]]

    # -- nodes
    def node(self, node: isl.AstNode, env: Mapping[str, str]) -> list[Node]:
        kind = node.get_type()
        if kind == _NODE.block:
            children = node.block_get_children()
            result: list[Node] = []
            for k in range(children.n_ast_node()):
                result += self.node(children.get_at(k), env)
            return result
        if kind == _NODE.mark:
            return self.node(node.mark_get_node(), env)
        if kind == _NODE.for_:
            return self.loop(node, env)
        if kind == _NODE.if_:
            then = self.node(node.if_get_then_node(), env)
            other = self.node(node.if_get_else_node(), env) if node.if_has_else_node() else []
            return self.branch(node.if_get_cond(), env, then, other)
        if kind == _NODE.user:
            return self.statement(node.user_get_expr(), env)
        raise CodegenError(f"isl AST node type {kind} is not supported")

    def loop(self, node: isl.AstNode, env: Mapping[str, str],
             init: isl.AstExpr | None = None, cond: isl.AstExpr | None = None) -> list[Node]:
        init = node.for_get_init() if init is None else init
        cond = node.for_get_cond() if cond is None else cond
        iterator = node.for_get_iterator().get_id().get_name()
        # a piecewise bound (isl's "c ? a : b") becomes an If around two loops
        for which, expr in (("init", init), ("cond", cond)):
            split = _split_select(expr)
            if split is not None:
                test, if_true, if_false = split
                then = self.loop(node, env, *((if_true, cond) if which == "init" else (init, if_true)))
                other = self.loop(node, env, *((if_false, cond) if which == "init" else (init, if_false)))
                # the test only involves outer iterators and symbols (self.condition
                # refuses this loop's iterator, which is not in env yet)
                return self.branch(test, env, then, other)
        name, original = self.loop_name(node, iterator, env)
        inner = {**env, iterator: name}
        lower = self.bound_list(init, env, _OP.max)
        step = self._divisor(node.for_get_inc())
        upper: list[Aff] = []
        for conj in _single(self.condition(cond, inner), cond):
            bound, is_eq = conj.as_nonnegative()  # bound >= 0
            coeff = bound.coefficient(name)
            rest = bound - Aff.var(name) * coeff
            if is_eq or coeff >= 0 or name in rest.variables():
                raise CodegenError(f"loop condition {cond.to_C_str()} is not an upper bound")
            # coeff*v + rest >= 0 with coeff < 0  <=>  v <= floor(rest / -coeff)
            upper.append(rest // (-coeff) + 1)
        body = self.node(node.for_get_body(), inner)
        loop = For(name, tuple(lower), tuple(upper), tuple(body), step=step)
        if original is not None:
            loop = replace(loop, parallel=original.parallel, unroll=original.unroll,
                           vectorize=original.vectorize)
        return [loop]

    def branch(self, test: isl.AstExpr, env: Mapping[str, str], then: list[Node],
               other: list[Node]) -> list[Node]:
        """``if (test) then else other`` (a disjunctive test becomes an else-chain)."""
        disjuncts = self.condition(test, env)
        # every branch of the chain runs its own copy of ``then``: names stay unique
        bodies = [then] + [self.fresh_copy(then) for _ in disjuncts[1:]]
        result: tuple[Node, ...] = tuple(other)
        for conj, body in reversed(list(zip(disjuncts, bodies, strict=True))):
            result = (If(tuple(conj), tuple(body), result),)
        return list(result)

    def fresh_copy(self, nodes: list[Node]) -> list[Node]:
        """``nodes`` with every loop variable and statement name they bind renamed
        to a name not generated yet."""
        mapping: dict[str, str] = {}
        for node in walk_nodes(nodes):
            if isinstance(node, For):
                mapping[node.var] = self.unique(node.var, self.loop_names | self.original_loops)
                self.loop_names.add(mapping[node.var])
            elif isinstance(node, STATEMENT_NODES):
                mapping[node.name] = self.unique(node.name, self.statement_names | set(self.scop.statements))
                self.statement_names.add(mapping[node.name])
        return list(rename_nodes(nodes, mapping))

    def loop_name(self, node: isl.AstNode, iterator: str,
                  env: Mapping[str, str]) -> tuple[str, For | None]:
        """The variable of a generated loop and the original loop it iterates
        exactly (``None`` when it is not one original loop)."""
        candidates: set[int] = set()
        ok = True

        def visit(n: isl.AstNode) -> bool:
            nonlocal ok
            if n.get_type() == _NODE.user:
                expr = _user_call(n.user_get_expr())
                stmt = self.by_isl[expr.get_op_arg(0).get_id().get_name()]
                found = None
                for k, loop_id in enumerate(stmt.loops):
                    arg = expr.get_op_arg(k + 1)
                    if arg.get_type() == isl.ast_expr_type.id and arg.get_id().get_name() == iterator:
                        found = loop_id
                if found is None:
                    ok = False
                else:
                    candidates.add(found)
            return True

        node.for_get_body().foreach_descendant_top_down(visit)
        original: For | None = None
        if ok and len(candidates) == 1:
            original = self.scop.loops[candidates.pop()].node
            name = self.unique(original.var, self.loop_names | set(env.values()))
        elif ok and candidates:  # several original loops fused: named after the first
            name = self.unique(self.scop.loops[min(candidates)].var, self.loop_names | set(env.values()))
        else:
            name = self.unique(iterator, self.loop_names | self.original_loops | set(env.values()))
        self.loop_names.add(name)
        return name, original

    def statement(self, expr: isl.AstExpr, env: Mapping[str, str]) -> list[Node]:
        split = _split_select(expr)
        if split is not None:
            test, if_true, if_false = split
            return self.branch(test, env, self.statement(if_true, env), self.statement(if_false, env))
        stmt = self.by_isl[expr.get_op_arg(0).get_id().get_name()]
        values = {var: self.aff(expr.get_op_arg(k + 1), env)
                  for k, var in enumerate(stmt.loop_vars)}
        node = substitute_node(stmt.node, values)
        if stmt.name in self.statement_names:
            name = self.unique(stmt.name, self.statement_names | set(self.scop.statements))
            node = replace(node, name=name)  # type: ignore[arg-type]
        self.statement_names.add(node.name)  # type: ignore[union-attr]
        return [node]


def _user_call(expr: isl.AstExpr) -> isl.AstExpr:
    """The statement call of a user node (the first branch of a ``c ? a : b``)."""
    split = _split_select(expr)
    return expr if split is None else _user_call(split[1])


def _single(disjuncts: list[list[Constraint]], cond: isl.AstExpr) -> list[Constraint]:
    if len(disjuncts) != 1:
        raise CodegenError(f"loop condition {cond.to_C_str()} is a disjunction")
    return disjuncts[0]


def _split_select(expr: isl.AstExpr) -> tuple[isl.AstExpr, isl.AstExpr, isl.AstExpr] | None:
    """``(c, e_true, e_false)`` for the first ``c ? a : b`` inside ``expr``: ``expr``
    equals ``e_true`` where ``c`` holds and ``e_false`` elsewhere."""
    if expr.get_type() != isl.ast_expr_type.op:
        return None
    if expr.get_op_type() in (_OP.select, _OP.cond):
        return expr.get_op_arg(0), expr.get_op_arg(1), expr.get_op_arg(2)
    for k in range(expr.get_op_n_arg()):
        found = _split_select(expr.get_op_arg(k))
        if found is not None:
            test, if_true, if_false = found
            return test, expr.set_op_arg(k, if_true), expr.set_op_arg(k, if_false)
    return None


# ------------------------------------------------------------ entry points
def generate(scop: Scop, schedule: isl.Schedule | isl.UnionMap | None = None) -> tuple[Node, ...]:
    """The loop tree that runs the scop's statements in ``schedule``'s order
    (default: the original schedule). The schedule is not checked here."""
    if schedule is None:
        schedule = scop.schedule
    build = isl.AstBuild.from_context(scop.context)
    if isinstance(schedule, isl.Schedule):
        ast = build.node_from_schedule(schedule.intersect_domain(scop.domain))
    else:
        ast = build.node_from_schedule_map(schedule.intersect_domain(scop.domain))
    return tuple(_Translator(scop).node(ast, {}))


def apply_schedule(function: Function, schedule: isl.Schedule | isl.UnionMap | str,
                   accept_reassociation: bool = False) -> Function:
    """``function`` with its body regenerated from ``schedule``; raises
    ``IllegalTransform`` (with a witness) when the schedule violates a dependence."""
    from polyir.polyhedral.legality import check_schedule
    scop = extract(function)
    if isinstance(schedule, str):
        schedule = scop.isl_union_map(schedule)
    check_schedule(scop, schedule, accept_reassociation).require()
    return replace(function, body=generate(scop, schedule))
