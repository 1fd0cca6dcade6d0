"""The IR's text form (see docs/ir.md): modules, functions, nodes, expressions.

``parse(print_module(m)) == m`` holds for every module the verifier accepts;
``polyir.ir.parser`` reads exactly what this module writes.
"""
from __future__ import annotations

import math
import numbers

import numpy as np

from polyir.ir.affine import Aff, Constraint
from polyir.ir.nodes import (
    Assign,
    Barrier,
    BinOp,
    Buffer,
    Call,
    Cast,
    Compare,
    Const,
    Expr,
    For,
    FragmentFill,
    FragmentLoad,
    FragmentMMA,
    FragmentStore,
    Function,
    If,
    Index,
    Launch,
    Load,
    Module,
    Node,
    Select,
    Symbol,
    Var,
)
from polyir.ir.types import DType, MemorySpace

INDENT = "  "

# Binding strength of value-expression forms, loosest first. The parser uses
# the same numbers (polyir.ir.parser).
PREC_OR = 1
PREC_AND = 2
PREC_NOT = 3
PREC_COMPARE = 4
PREC_ADD = 5
PREC_MUL = 6
PREC_UNARY = 7
PREC_ATOM = 8

BINOP_PREC = {"or": PREC_OR, "and": PREC_AND, "+": PREC_ADD, "-": PREC_ADD,
              "*": PREC_MUL, "/": PREC_MUL, "%": PREC_MUL}


# ----------------------------------------------------------------- module level
def print_module(module: Module) -> str:
    """The text of ``module``: its functions in order, separated by a blank line."""
    if not module.functions:
        return ""
    return "\n".join(print_function(f) for f in module.functions)


def print_function(function: Function) -> str:
    """``func``/``kernel`` header, local declarations and body; ends with a newline."""
    keyword = "kernel" if function.kind == "kernel" else "func"
    params = ", ".join(_print_param(p) for p in function.params)
    lines = [f"{keyword} {function.name}({params}) {{"]
    for buffer in function.locals:
        lines.append(f"{INDENT}local {_print_buffer_type(buffer)}")
    for node in function.body:
        lines.append(print_node(node, 1))
    lines.append("}")
    return "\n".join(lines) + "\n"


def _print_param(param: Buffer | Symbol) -> str:
    if isinstance(param, Symbol):
        return f"{param.name}: index"
    return _print_buffer_type(param)


def _print_buffer_type(buffer: Buffer) -> str:
    dims = ", ".join(print_index(d) for d in buffer.shape)
    text = f"{buffer.name}: {buffer.dtype}[{dims}]"
    if buffer.space is not MemorySpace.GLOBAL:
        text += f" @{buffer.space}"
    return text


# ------------------------------------------------------------------------ nodes
def print_node(node: Node, indent: int = 0) -> str:
    """One node (and, for loops and ifs, its body) at ``indent`` levels; no final newline."""
    pad = INDENT * indent
    if isinstance(node, Assign):
        return f"{pad}{node.name}: {node.buffer}[{_print_indices(node.indices)}] = {print_expr(node.value)}"
    if isinstance(node, For):
        return _print_for(node, indent)
    if isinstance(node, If):
        conditions = ", ".join(print_constraint(c) for c in node.conditions)
        lines = [f"{pad}if ({conditions}) {{"]
        lines.extend(print_node(n, indent + 1) for n in node.then_body)
        if node.else_body:
            lines.append(f"{pad}}} else {{")
            lines.extend(print_node(n, indent + 1) for n in node.else_body)
        lines.append(f"{pad}}}")
        return "\n".join(lines)
    if isinstance(node, Barrier):
        return f"{pad}barrier"
    if isinstance(node, FragmentFill):
        return f"{pad}{node.name}: {node.fragment} = fragment_fill({print_expr(node.value)})"
    if isinstance(node, FragmentLoad):
        return (f"{pad}{node.name}: {node.fragment} = fragment_load<{node.role}, {node.shape}, "
                f"{node.layout}>({node.buffer}[{_print_indices(node.indices)}])")
    if isinstance(node, FragmentMMA):
        return (f"{pad}{node.name}: {node.result} = fragment_mma<{node.shape}>"
                f"({node.a}, {node.b}, {node.acc})")
    if isinstance(node, FragmentStore):
        return (f"{pad}{node.name}: fragment_store<{node.shape}, {node.layout}>"
                f"({node.buffer}[{_print_indices(node.indices)}], {node.fragment})")
    if isinstance(node, Launch):
        grid = ", ".join(print_index(g) for g in node.grid)
        block = ", ".join(str(b) for b in node.block)
        shared = f" shared {node.shared_bytes}" if node.shared_bytes else ""
        args = ", ".join(node.args)
        return f"{pad}launch {node.kernel} grid({grid}) block({block}){shared} ({args})"
    raise TypeError(f"print_node: not an IR node: {node!r}")


def _print_for(node: For, indent: int) -> str:
    pad = INDENT * indent
    header = [f"{pad}for {node.var} = {_print_bound('max', node.lower)} to "
              f"{_print_bound('min', node.upper)}"]
    if node.step != 1:
        header.append(f"step {node.step}")
    if node.parallel:
        header.append("parallel")
    if node.unroll:
        header.append(f"unroll={node.unroll}")
    if node.vectorize:
        header.append(f"vectorize={node.vectorize}")
    if node.mapping is not None:
        header.append(f"gpu={node.mapping}")
    lines = [" ".join(header) + " {"]
    lines.extend(f"{pad}{INDENT}local {_print_buffer_type(b)}" for b in node.locals)
    lines.extend(print_node(n, indent + 1) for n in node.body)
    lines.append(f"{pad}}}")
    return "\n".join(lines)


def _print_bound(combine: str, bounds: tuple[Aff, ...]) -> str:
    if len(bounds) == 1:
        return print_index(bounds[0])
    return f"{combine}({', '.join(print_index(b) for b in bounds)})"


def print_constraint(constraint: Constraint) -> str:
    """``lhs op rhs`` of an affine constraint."""
    return f"{print_index(constraint.lhs)} {constraint.op} {print_index(constraint.rhs)}"


def _print_indices(indices: tuple[Index, ...]) -> str:
    return ", ".join(print_index(i) for i in indices)


def print_index(index: Index) -> str:
    """A subscript, bound or dimension: an ``Aff`` as ``str(aff)``, else a value expression."""
    if isinstance(index, Aff):
        return str(index)
    return print_expr(index)


# ------------------------------------------------------------------ expressions
def print_expr(expr: Expr) -> str:
    """A value expression with exactly the parentheses its tree needs."""
    return _expr(expr)[0]


def print_const(const: Const) -> str:
    """A literal: ``true``, ``3``, ``1.5``, ``-inf``, with ``:dtype`` when not the default."""
    value = const.value
    if isinstance(value, (bool, np.bool_)):
        text, default = ("true" if value else "false"), DType.BOOL
    elif isinstance(value, numbers.Integral):
        text, default = str(int(value)), DType.I64
    elif isinstance(value, numbers.Real):
        number = float(value)
        text = "nan" if math.isnan(number) else repr(number)
        default = DType.F32
    else:
        raise TypeError(f"print_const: unsupported constant value {value!r}")
    if const.dtype is not default:
        text += f":{const.dtype}"
    return text


def _precedence(expr: Expr) -> int:
    if isinstance(expr, BinOp):
        return BINOP_PREC.get(expr.op, PREC_ATOM)
    if isinstance(expr, Compare):
        return PREC_COMPARE
    if isinstance(expr, Call) and len(expr.args) == 1:
        if expr.fn == "not":
            return PREC_NOT
        if expr.fn == "neg":
            return PREC_UNARY
    return PREC_ATOM


def _expr(expr: Expr) -> tuple[str, int]:
    """``(text, precedence)`` of ``expr``."""
    if isinstance(expr, Const):
        return print_const(expr), PREC_ATOM
    if isinstance(expr, Var):
        return expr.name, PREC_ATOM
    if isinstance(expr, Load):
        return f"{expr.buffer}[{_print_indices(expr.indices)}]", PREC_ATOM
    if isinstance(expr, BinOp):
        prec = BINOP_PREC.get(expr.op)
        if prec is None:
            raise TypeError(f"print_expr: unknown binary operator {expr.op!r}")
        # left associative: the right operand needs parentheses at equal precedence
        lhs = _operand(expr.lhs, prec)
        rhs = _operand(expr.rhs, prec + 1)
        return f"{lhs} {expr.op} {rhs}", prec
    if isinstance(expr, Compare):
        # comparisons do not chain: both operands bind tighter
        lhs = _operand(expr.lhs, PREC_COMPARE + 1)
        rhs = _operand(expr.rhs, PREC_COMPARE + 1)
        return f"{lhs} {expr.op} {rhs}", PREC_COMPARE
    if isinstance(expr, Call):
        if expr.fn == "neg" and len(expr.args) == 1:
            operand = expr.args[0]
            text, prec = _expr(operand)
            # -(2.0) is neg of a literal, -2.0 a negative literal; -(-x) avoids "--"
            if prec < PREC_UNARY or (isinstance(operand, Const) and not isinstance(operand.value, bool)) \
                    or text.startswith("-"):
                text = f"({text})"
            return f"-{text}", PREC_UNARY
        if expr.fn == "not" and len(expr.args) == 1:
            return f"not {_operand(expr.args[0], PREC_NOT)}", PREC_NOT
        args = ", ".join(print_expr(a) for a in expr.args)
        return f"{expr.fn}({args})", PREC_ATOM
    if isinstance(expr, Select):
        return (f"select({print_expr(expr.cond)}, {print_expr(expr.if_true)}, "
                f"{print_expr(expr.if_false)})"), PREC_ATOM
    if isinstance(expr, Cast):
        return f"cast<{expr.dtype}>({print_expr(expr.value)})", PREC_ATOM
    if isinstance(expr, Aff):
        return f"({expr})", PREC_ATOM
    raise TypeError(f"print_expr: not a value expression: {expr!r}")


def _operand(expr: Expr, min_prec: int) -> str:
    text, prec = _expr(expr)
    return f"({text})" if prec < min_prec else text
