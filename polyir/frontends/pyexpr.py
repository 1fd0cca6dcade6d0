"""Lowering of Python expressions to typed IR expressions (``@polyir.kernel``).

:class:`ExprLowering` turns an ``ast.expr`` into a :class:`Val`: an IR
expression with a :class:`VType`, plus its ``Aff`` when the value is an affine
integer (loop variables, size symbols, integer literals and their sums,
constant multiples, and floor division / modulo by positive constants).
Subscripts and loop bounds use the ``Aff``; anything else becomes an ordinary
expression, with explicit casts wherever numpy's promotion rules convert
(the IR has no implicit promotion). Statement lowering builds on this class
(see ``pyast.py``).
"""
from __future__ import annotations

import ast
import operator
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Union

from polyir.errors import ArgumentError
from polyir.frontends.pycheck import MATH_CONSTANTS, MATH_FUNCTIONS, KernelSource
from polyir.frontends.pytypes import (
    BOOL,
    F64,
    I64,
    WEAK_FLOAT,
    WEAK_INT,
    Val,
    VType,
    aff_val,
    arithmetic_type,
    const_val,
    convert,
    floor_div,
    negate,
    promote,
    python_mod,
    zero,
)
from polyir.ir.affine import Aff
from polyir.ir.nodes import BinOp, Buffer, Call, Compare, Const, Expr, Index, Load, Select, to_affine
from polyir.ir.walk import loads


@dataclass(frozen=True)
class ArrayRef:
    """A name bound to an array parameter (a buffer of rank >= 0)."""

    buffer: Buffer


@dataclass(frozen=True)
class ScalarRef:
    """A name bound to a scalar parameter held in a 0-d buffer."""

    buffer: Buffer
    vtype: VType


Binding = Union[Val, ArrayRef, ScalarRef]

BINARY_OPERATORS: dict[type, str] = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/",
                            ast.FloorDiv: "//", ast.Mod: "%", ast.Pow: "**"}
COMPARE_OPERATORS: dict[type, str] = {ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=",
                              ast.Eq: "==", ast.NotEq: "!="}
_PY_OPS: dict[str, Callable[[Any, Any], Any]] = {
    "+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv,
    "//": operator.floordiv, "%": operator.mod, "**": operator.pow,
}


class NotAffine(Exception):
    """Internal: a value that was needed as an affine integer is not one."""


def contains_load(expr: Expr) -> bool:
    """True when ``expr`` reads any buffer."""
    return any(True for _ in loads(expr))


def loaded_buffers(expr: Expr) -> set[str]:
    """Names of the buffers ``expr`` reads."""
    return {load.buffer for load in loads(expr)}


class ExprLowering:
    """Expression lowering; subclasses provide name lookup for locals."""

    src: KernelSource

    # -- hooks (implemented by the statement lowering) --------------------
    def lookup(self, node: ast.Name) -> Binding:
        raise NotImplementedError

    def shape_of(self, node: ast.AST, name: str) -> tuple[Aff, ...]:
        """The shape of array parameter ``name`` (symbols or constants)."""
        binding = self.lookup(ast.copy_location(ast.Name(id=name, ctx=ast.Load()), node))
        if not isinstance(binding, ArrayRef):
            raise self.argument_error(node, f"'{name}.shape' needs an array argument for '{name}'")
        return binding.buffer.shape

    # -- errors -----------------------------------------------------------
    def unsupported(self, node: ast.AST, message: str) -> Exception:
        return self.src.error(node, message)

    def argument_error(self, node: ast.AST, message: str) -> ArgumentError:
        return ArgumentError(f"{self.src.where(node)}: {message} (in kernel '{self.src.tree.name}')")

    # -- entry points -----------------------------------------------------
    def lower(self, node: ast.expr) -> Val:
        """The typed value of ``node``."""
        method = getattr(self, f"_lower_{type(node).__name__}", None)
        if method is None:
            raise self.unsupported(node, f"unsupported syntax: '{type(node).__name__}' expression")
        return method(node)

    def lower_affine(self, node: ast.expr) -> Aff:
        """``node`` as an affine integer expression; raises ``NotAffine``."""
        val = self.lower(node)
        if val.aff is None:
            raise NotAffine(node)
        return val.aff

    def lower_truth(self, node: ast.expr) -> Expr:
        """A ``bool`` expression for ``node``'s truth value (``x != 0`` for numbers)."""
        if isinstance(node, ast.BoolOp):
            op = "and" if isinstance(node.op, ast.And) else "or"
            result = self.lower_truth(node.values[0])
            for value in node.values[1:]:
                result = BinOp(op, result, self.lower_truth(value))
            return result
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            return Call("not", (self.lower_truth(node.operand),))
        return self.truth(self.lower(node))

    @staticmethod
    def truth(val: Val) -> Expr:
        if val.dtype is BOOL:
            return val.as_expr()
        return Compare("!=", val.as_expr(), zero(val.dtype))

    def lower_index(self, node: ast.expr, buffer: Buffer, dim: int) -> Index:
        """A subscript: an ``Aff`` when affine, else an ``i64`` expression (a gather)."""
        val = self.lower(node)
        if val.aff is not None:
            aff = val.aff
            if aff.is_constant and aff.constant < 0:
                aff = buffer.shape[dim] + aff.constant    # A[-1] is the last element
            return aff
        if val.dtype.is_float:
            if contains_load(val.as_expr()):
                raise self.argument_error(node, f"subscript '{ast.unparse(node)}' reads float "
                                                f"data; index arrays must hold integers")
            raise self.unsupported(node, f"float subscript '{ast.unparse(node)}'")
        expr = convert(val, I64)
        affine = to_affine(expr)
        return affine if affine is not None else expr

    # -- leaves -----------------------------------------------------------
    def _lower_Constant(self, node: ast.Constant) -> Val:
        if isinstance(node.value, (bool, int, float)):
            return const_val(node.value)
        raise self.unsupported(node, f"unsupported syntax: constant {node.value!r}")

    def _lower_Name(self, node: ast.Name) -> Val:
        binding = self.lookup(node)
        if isinstance(binding, Val):
            return binding
        if isinstance(binding, ScalarRef):
            return Val(binding.vtype, Load(binding.buffer.name, ()))
        if binding.buffer.rank == 0:
            return Val(VType(binding.buffer.dtype), Load(binding.buffer.name, ()))
        raise self.argument_error(node, f"'{node.id}' is an array of rank {binding.buffer.rank} "
                                        f"but is used as a scalar value")

    def _lower_Attribute(self, node: ast.Attribute) -> Val:
        if isinstance(node.value, ast.Name) and self.src.resolve_global(node.value.id) == ("math", "") \
                and node.attr in MATH_CONSTANTS:
            return Val(WEAK_FLOAT, Const(MATH_CONSTANTS[node.attr], F64))
        raise self.unsupported(node, f"unsupported syntax: attribute '{ast.unparse(node)}' used as a value")

    def _lower_Tuple(self, node: ast.Tuple) -> Val:
        raise self.unsupported(node, f"unsupported syntax: tuple '{ast.unparse(node)}' used as a value")

    def _lower_Subscript(self, node: ast.Subscript) -> Val:
        if isinstance(node.value, ast.Attribute) and node.value.attr == "shape":
            return aff_val(self.shape_dim(node))
        name_node, index_nodes = self.split_subscript(node)
        buffer = self.subscripted_buffer(name_node, len(index_nodes), node)
        indices = tuple(self.lower_index(ix, buffer, d) for d, ix in enumerate(index_nodes))
        return Val(VType(buffer.dtype), Load(buffer.name, indices))

    def shape_dim(self, node: ast.Subscript) -> Aff:
        attribute = node.value
        assert isinstance(attribute, ast.Attribute) and isinstance(attribute.value, ast.Name)
        shape = self.shape_of(node, attribute.value.id)
        try:
            dim = self.lower_affine(node.slice)
        except NotAffine:
            dim = None
        if dim is None or not dim.is_constant:
            raise self.unsupported(node, f"'{ast.unparse(node)}' needs a constant dimension")
        d = dim.constant
        if not -len(shape) <= d < len(shape):
            raise self.argument_error(node, f"'{ast.unparse(node)}' is out of range for an array "
                                            f"of rank {len(shape)}")
        return shape[d]

    def split_subscript(self, node: ast.Subscript) -> tuple[ast.Name, list[ast.expr]]:
        """``A[i][j, k]`` -> (``A``, [i, j, k])."""
        parts: list[list[ast.expr]] = []
        current: ast.expr = node
        while isinstance(current, ast.Subscript):
            index = current.slice
            parts.append(list(index.elts) if isinstance(index, ast.Tuple) else [index])
            current = current.value
        if not isinstance(current, ast.Name):
            raise self.unsupported(node, f"unsupported syntax: subscript of '{ast.unparse(current)}'")
        return current, [ix for part in reversed(parts) for ix in part]

    def subscripted_buffer(self, name_node: ast.Name, count: int, node: ast.AST) -> Buffer:
        binding = self.lookup(name_node)
        if not isinstance(binding, ArrayRef):
            raise self.argument_error(node, f"'{name_node.id}' is subscripted but is not an array argument")
        buffer = binding.buffer
        if count != buffer.rank:
            raise self.argument_error(node, f"array '{name_node.id}' has rank {buffer.rank} but "
                                            f"'{ast.unparse(node)}' uses {count} subscript(s)")
        return buffer

    # -- operators --------------------------------------------------------
    def _lower_BinOp(self, node: ast.BinOp) -> Val:
        op = BINARY_OPERATORS.get(type(node.op))
        if op is None:
            raise self.unsupported(node, f"unsupported syntax: operator in '{ast.unparse(node)}'")
        return self.arith(op, self.lower(node.left), self.lower(node.right), node)

    def arith(self, op: str, a: Val, b: Val, node: ast.AST) -> Val:
        """``a op b`` with Python/numpy semantics (``/`` true division, ``//`` floor)."""
        if a.aff is not None and b.aff is not None:
            affine = _affine_op(op, a.aff, b.aff)
            if affine is not None:
                return aff_val(affine)
        folded = _fold(op, a, b)
        if folded is not None:
            return folded
        if op == "**":
            return self.power(a, b, node)
        rtype = arithmetic_type(a.vtype, b.vtype)
        if op == "/" and not rtype.dtype.is_float:
            rtype = VType(F64, rtype.weak)
        dtype = rtype.dtype
        lhs, rhs = convert(a, dtype), convert(b, dtype)
        if op == "//":
            if dtype.is_float:
                return Val(rtype, Call("floor", (BinOp("/", lhs, rhs),)))
            return Val(rtype, floor_div(lhs, rhs, dtype))
        if op == "%":
            if dtype.is_float:
                floor = Call("floor", (BinOp("/", lhs, rhs),))
                return Val(rtype, BinOp("-", lhs, BinOp("*", floor, rhs)))
            return Val(rtype, python_mod(lhs, rhs, dtype))
        return Val(rtype, BinOp(op, lhs, rhs))

    def power(self, a: Val, b: Val, node: ast.AST) -> Val:
        exponent = b.as_expr()
        if isinstance(exponent, Const) and b.dtype.is_int and 1 <= exponent.value <= 4:
            rtype = arithmetic_type(a.vtype, a.vtype)
            base = convert(a, rtype.dtype)
            result: Expr = base
            for _ in range(int(exponent.value) - 1):
                result = BinOp("*", result, base)
            return Val(rtype, result)
        rtype = arithmetic_type(a.vtype, b.vtype)
        if not rtype.dtype.is_float:
            raise self.unsupported(node, f"integer power '{ast.unparse(node)}' with an exponent "
                                         f"that is not a constant 1..4")
        return Val(rtype, Call("pow", (convert(a, rtype.dtype), convert(b, rtype.dtype))))

    def _lower_UnaryOp(self, node: ast.UnaryOp) -> Val:
        val = self.lower(node.operand)
        if isinstance(node.op, ast.UAdd):
            return val
        if isinstance(node.op, ast.Not):
            return Val(VType(BOOL, val.vtype.weak), Call("not", (self.truth(val),)))
        if isinstance(node.op, ast.USub):
            if val.aff is not None:
                return aff_val(-val.aff)
            if val.dtype is BOOL:
                val = Val(VType(I64, val.vtype.weak), convert(val, I64))
            return Val(val.vtype, negate(val.as_expr()))
        raise self.unsupported(node, f"unsupported syntax: operator in '{ast.unparse(node)}'")

    def _lower_BoolOp(self, node: ast.BoolOp) -> Val:
        op = "and" if isinstance(node.op, ast.And) else "or"
        values = [self.lower(v) for v in node.values]
        for v, value_node in zip(values, node.values, strict=True):
            if v.dtype is not BOOL:
                raise self.unsupported(value_node, f"'{op}' on a non-boolean value "
                                                   f"'{ast.unparse(value_node)}' outside a condition")
        result = values[0].as_expr()
        for v in values[1:]:
            result = BinOp(op, result, v.as_expr())
        return Val(VType(BOOL), result)

    def _lower_Compare(self, node: ast.Compare) -> Val:
        result: Expr | None = None
        left = self.lower(node.left)
        for op_node, right_node in zip(node.ops, node.comparators, strict=True):
            op = COMPARE_OPERATORS.get(type(op_node))
            if op is None:
                raise self.unsupported(node, f"unsupported syntax: comparison in '{ast.unparse(node)}'")
            right = self.lower(right_node)
            rtype = promote(left.vtype, right.vtype)
            comparison = Compare(op, convert(left, rtype.dtype), convert(right, rtype.dtype))
            result = comparison if result is None else BinOp("and", result, comparison)
            left = right
        assert result is not None
        return Val(VType(BOOL), result)

    def _lower_IfExp(self, node: ast.IfExp) -> Val:
        cond = self.lower_truth(node.test)
        a, b = self.lower(node.body), self.lower(node.orelse)
        rtype = promote(a.vtype, b.vtype)
        return Val(rtype, Select(cond, convert(a, rtype.dtype), convert(b, rtype.dtype)))

    # -- calls ------------------------------------------------------------
    def _lower_Call(self, node: ast.Call) -> Val:
        func = node.func
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) \
                and self.src.resolve_global(func.value.id) == ("math", ""):
            return self.math_call(MATH_FUNCTIONS[func.attr], node, f"math.{func.attr}")
        assert isinstance(func, ast.Name)
        resolved = self.src.resolve_global(func.id)
        assert resolved is not None
        if resolved[0] == "math_function":
            return self.math_call(resolved[1], node, func.id)
        name = resolved[1]
        args = node.args
        if name in ("min", "max"):
            if len(args) < 2:
                raise self.unsupported(node, f"{name}() needs two or more arguments here")
            result = self.lower(args[0])
            for arg in args[1:]:
                result = self.min_max(name, result, self.lower(arg))
            return result
        if len(args) != 1:
            raise self.unsupported(node, f"{name}() takes one argument")
        if name == "len":
            if not isinstance(args[0], ast.Name):
                raise self.unsupported(node, "len() of something other than an array argument")
            shape = self.shape_of(node, args[0].id)
            if not shape:
                raise self.argument_error(node, f"len() of 0-d array '{args[0].id}'")
            return aff_val(shape[0])
        val = self.lower(args[0])
        if name == "abs":
            if val.dtype is BOOL:
                val = Val(VType(I64, val.vtype.weak), convert(val, I64))
            return Val(val.vtype, Call("abs", (val.as_expr(),)))
        if name == "float":
            return Val(WEAK_FLOAT, convert(val, F64))
        assert name == "int"
        if val.aff is not None:
            return val
        return Val(WEAK_INT, convert(val, I64))

    def min_max(self, name: str, a: Val, b: Val) -> Val:
        rtype = promote(a.vtype, b.vtype)
        ea, eb = convert(a, rtype.dtype), convert(b, rtype.dtype)
        if isinstance(ea, Const) and isinstance(eb, Const):
            return Val(rtype, Const((min if name == "min" else max)(ea.value, eb.value), rtype.dtype))
        return Val(rtype, Call(name, (ea, eb)))

    def math_call(self, fn: str, node: ast.Call, shown: str) -> Val:
        args = [self.lower(a) for a in node.args]
        expected = 2 if fn == "pow" else (1, 2) if fn == "log" else 1
        if len(args) not in ((expected,) if isinstance(expected, int) else expected):
            raise self.unsupported(node, f"{shown}() with {len(args)} argument(s)")
        vtype = args[0].vtype
        for other in args[1:]:
            vtype = promote(vtype, other.vtype)
        if not vtype.dtype.is_float:
            vtype = VType(F64, vtype.weak)
        exprs = tuple(convert(a, vtype.dtype) for a in args)
        if fn == "log" and len(exprs) == 2:
            return Val(vtype, BinOp("/", Call("log", (exprs[0],)), Call("log", (exprs[1],))))
        result: Expr = Call(fn, exprs)
        if fn in ("floor", "ceil"):                 # Python returns an int
            return Val(WEAK_INT, convert(Val(vtype, result), I64))
        return Val(vtype, result)


def _affine_op(op: str, a: Aff, b: Aff) -> Aff | None:
    if op == "+":
        return a + b
    if op == "-":
        return a - b
    if op == "*" and b.is_constant:
        return a * b.constant
    if op == "*" and a.is_constant:
        return b * a.constant
    if op in ("//", "%") and b.is_constant and b.constant > 0:
        return a // b.constant if op == "//" else a % b.constant
    if op == "**" and a.is_constant and b.is_constant and b.constant >= 0:
        return Aff.const(a.constant ** b.constant)
    return None


def _fold(op: str, a: Val, b: Val) -> Val | None:
    """Python's own result for two weak literals (computed as Python would)."""
    ea, eb = a.as_expr(), b.as_expr()
    if not (isinstance(ea, Const) and isinstance(eb, Const) and a.vtype.weak and b.vtype.weak):
        return None
    try:
        value = _PY_OPS[op](ea.value, eb.value)
    except (ZeroDivisionError, OverflowError, ValueError):
        return None
    if isinstance(value, (bool, int, float)) and not isinstance(value, complex):
        return const_val(value)
    return None


__all__ = ["BINARY_OPERATORS", "COMPARE_OPERATORS", "ArrayRef", "Binding", "ExprLowering",
           "NotAffine", "ScalarRef", "contains_load", "loaded_buffers"]
