"""Affine conditions in disjunctive normal form, for the kernel frontend.

A :data:`Dnf` is a list of conjunctions of affine constraints: ``[]`` is
false, ``[[]]`` is true. ``pyast`` builds one per ``if`` condition and emits
an else-chain with one ``If`` per disjunct.
"""
from __future__ import annotations

import ast

from polyir.ir.affine import Aff, Constraint

Dnf = list[list[Constraint]]
_NEGATED = {"<": ">=", "<=": ">", ">": "<=", ">=": "<"}


def conjuncts(node: ast.expr) -> list[ast.expr]:
    """The operands of a (nested) ``and``; ``[node]`` otherwise."""
    if isinstance(node, ast.BoolOp) and isinstance(node.op, ast.And):
        return [c for v in node.values for c in conjuncts(v)]
    return [node]


def atom(lhs: Aff, op: str, rhs: Aff) -> Dnf:
    """One comparison as a DNF (``!=`` is ``<`` or ``>``)."""
    if op == "!=":
        return simplify([[Constraint(lhs, "<", rhs)], [Constraint(lhs, ">", rhs)]])
    return simplify([[Constraint(lhs, op, rhs)]])


def negate_atom(dnf: Dnf) -> Dnf:
    """Negation of an atom's DNF (a disjunction of single constraints)."""
    result: Dnf = [[]]
    for conj in dnf:
        assert len(conj) <= 1
        if not conj:
            return []
        negated = [[Constraint(conj[0].lhs, "<", conj[0].rhs)], [Constraint(conj[0].lhs, ">", conj[0].rhs)]] \
            if conj[0].op == "==" else [[Constraint(conj[0].lhs, _NEGATED[conj[0].op], conj[0].rhs)]]
        result = [x + y for x in result for y in simplify(negated)]
    return simplify(result)


def simplify(dnf: Dnf) -> Dnf:
    """Evaluate constant constraints, drop false conjunctions and repeats."""
    result: Dnf = []
    for conj in dnf:
        kept: list[Constraint] = []
        false = False
        for c in conj:
            if not c.variables():
                if not c.holds({}):
                    false = True
                    break
                continue
            if c not in kept:
                kept.append(c)
        if false:
            continue
        if not kept:
            return [[]]            # one conjunction is always true
        if kept not in result:
            result.append(kept)
    return result


def product(a: Dnf, b: Dnf) -> Dnf:
    """The DNF of ``a and b``."""
    return simplify([x + [c for c in y if c not in x] for x in a for y in b])


def count_stores(stmts: list[ast.stmt]) -> int:
    """How many stores a branch body of simple assignments makes."""
    count = 0
    for stmt in stmts:
        if isinstance(stmt, ast.Assign):
            count += len(stmt.targets)
        elif isinstance(stmt, (ast.AugAssign, ast.AnnAssign)):
            count += 1
        elif isinstance(stmt, ast.If):
            count += count_stores(stmt.body) + count_stores(stmt.orelse)
    return count
