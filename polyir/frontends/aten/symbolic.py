"""Symbolic sizes: torch ``SymInt`` shapes (dynamic=True) as polyir sizes.

With ``polyir.compile(..., dynamic=True)`` the capture traces with symbolic
batch and sequence sizes, so node shapes hold ``torch.SymInt`` values whose
expressions are over the ShapeEnv's size symbols (``s27``, ``s77``, ...).
:class:`SymbolTable` turns them into the IR's sizes:

* a constant (after the ShapeEnv's replacements) is an ``int``;
* a linear expression in size symbols is an ``Aff`` over symbols of the same
  names (``2*s77 + 1``);
* any other term (a product ``s27*s77``, a ``//`` or ``%`` by a symbol) becomes
  a *derived* symbol ``dyn0, dyn1, ...``, which the caller passes explicitly; its
  value at call time comes from :meth:`SymbolTable.evaluator`.

A lowering rule that compares a symbolic size (``if size == 1``) or turns it
into a Python ``int`` makes the ShapeEnv record a guard; the compiled plan is
reused for new sizes only while every guard holds (``polyir.frontends.fx``).
Products of a size with a loop index are not affine: :func:`index_mul`,
:func:`index_floordiv` and :func:`index_mod` make non-affine (gather-style)
subscripts for them.
"""
from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any, Union

import sympy
import torch

from polyir.ir.affine import Aff
from polyir.ir.nodes import BinOp, Cast, Const, Expr, Index, Var
from polyir.ir.types import DType
from polyir.ir.walk import aff_to_expr

Size = Union[int, torch.SymInt]
_SYMBOL_NAME = re.compile(r"(s|u|dyn)\d+")


def is_symbolic(size: object) -> bool:
    return isinstance(size, torch.SymInt)


class SymbolTable:
    """The size symbols of one lowered function and the derived ones it made."""

    def __init__(self, shape_env: Any):
        self.shape_env = shape_env
        self.derived: dict[str, sympy.Expr] = {}
        self._names: dict[sympy.Expr, str] = {}

    # ------------------------------------------------------- conversion
    def expr(self, size: Size) -> sympy.Expr:
        """The simplified sympy expression of ``size`` (replacements applied)."""
        if isinstance(size, torch.SymInt):
            return self.shape_env.simplify(size.node.expr)
        return sympy.Integer(int(size))

    def expr_of_name(self, name: str) -> sympy.Expr | None:
        """What the size symbol ``name`` stands for now (itself, another symbol,
        or a constant a guard pinned it to); ``None`` if there is no such symbol."""
        values = getattr(self.shape_env, "backed_var_to_val", None) or self.shape_env.var_to_val
        for symbol in values:
            if str(symbol) == name:
                return self.shape_env.simplify(symbol)
        return None

    def dim(self, size: Size) -> Size:
        """``size`` as an ``int`` when it is a constant, else the ``SymInt``."""
        if isinstance(size, torch.SymInt):
            expr = self.expr(size)
            if expr.is_Integer:
                return int(expr)
            return size
        return int(size)

    def aff(self, size: Size) -> Aff:
        """``size`` as an affine expression over size symbols (see the module docstring)."""
        return self.aff_of_expr(self.expr(size))

    def aff_of_expr(self, expr: sympy.Expr) -> Aff:
        expr = sympy.expand(expr)
        if expr.is_Integer:
            return Aff.const(int(expr))
        total = Aff.const(0)
        for term in sympy.Add.make_args(expr):
            coeff, rest = term.as_coeff_Mul()
            if rest == 1:
                total = total + int(coeff)
                continue
            if not coeff.is_Integer:
                coeff, rest = sympy.Integer(1), term
            total = total + self._atom(rest) * int(coeff)
        return total

    @staticmethod
    def reserved(name: str) -> bool:
        """Names size symbols may take (torch's ``s12``/``u3``, derived ``dyn0``):
        never given to buffers."""
        return _SYMBOL_NAME.fullmatch(name) is not None

    def _atom(self, expr: sympy.Expr) -> Aff:
        if isinstance(expr, sympy.Symbol):
            return Aff.var(str(expr))
        name = self._names.get(expr)
        if name is None:
            name = f"dyn{len(self.derived)}"
            self._names[expr] = name
            self.derived[name] = expr
        return Aff.var(name)

    def value(self, size: Size, dtype: DType) -> Expr:
        """``size`` as a value of ``dtype`` (a constant, or a cast of its i64 expression)."""
        aff = self.aff(size)
        if aff.is_constant:
            from polyir.frontends.aten.context import const
            return const(aff.constant, dtype)
        value = aff_to_expr(aff)
        return value if dtype is DType.I64 else Cast(dtype, value)

    # ------------------------------------------------------- evaluation
    def evaluator(self, names: Sequence[str]) -> Callable[[dict[str, int]], list[int]]:
        """A function from the base symbols' values (by name) to the values of
        the symbols ``names`` (base or derived)."""
        return compile_sizes([self.derived.get(n, sympy.Symbol(n)) for n in names])


def compile_sizes(exprs: Sequence[sympy.Expr]) -> Callable[[dict[str, int]], list[int]]:
    """A fast evaluator of sympy size expressions: ``f(values) -> [int, ...]``."""
    import math

    from torch.utils._sympy.printers import PythonPrinter

    printer = PythonPrinter()
    body = ", ".join(printer.doprint(e) for e in exprs)
    names = sorted({str(s) for e in exprs for s in e.free_symbols})
    source = f"lambda {', '.join(names) + ', ' if names else ''}**_: [{body}]"
    fn = eval(source, {"math": math, "torch": torch})  # generated from sympy, not user text

    def evaluate(values: dict[str, int]) -> list[int]:
        return [int(v) for v in fn(**values)]
    return evaluate


# ---------------------------------------------------------- index algebra
def _as_expr(index: Index | Size, table: SymbolTable | None) -> Expr:
    if isinstance(index, Aff):
        return aff_to_expr(index)
    if isinstance(index, int):
        return Const(index, DType.I64)
    if isinstance(index, torch.SymInt):
        assert table is not None
        return aff_to_expr(table.aff(index))
    return index


def _size_aff(size: Size, table: SymbolTable | None) -> Aff:
    if isinstance(size, torch.SymInt):
        assert table is not None, "a symbolic size needs a SymbolTable"
        return table.aff(size)
    return Aff.const(int(size))


def index_add(a: Index, b: Index | Size, table: SymbolTable | None = None) -> Index:
    """``a + b`` (affine when both are)."""
    b_aff = b if isinstance(b, Aff) else (_size_aff(b, table) if isinstance(b, (int, torch.SymInt))
                                          else None)
    if isinstance(a, Aff) and b_aff is not None:
        return a + b_aff
    return BinOp("+", _as_expr(a, table), _as_expr(b, table))


def index_mul(a: Index, size: Size, table: SymbolTable | None = None) -> Index:
    """``a * size``: affine when ``size`` is a constant or ``a`` is."""
    factor = _size_aff(size, table)
    if factor.is_constant and factor.constant == 1:
        return a
    if isinstance(a, Aff):
        if factor.is_constant:
            return a * factor.constant
        if a.is_constant:
            return factor * a.constant
    return BinOp("*", _as_expr(a, table), aff_to_expr(factor))


def index_floordiv(a: Index, size: Size, table: SymbolTable | None = None) -> Index:
    """``a // size`` for ``a >= 0`` (indices are): affine for a constant ``size``."""
    divisor = _size_aff(size, table)
    if divisor.is_constant and divisor.constant == 1:
        return a
    if isinstance(a, Aff) and divisor.is_constant:
        return a // divisor.constant
    return BinOp("/", _as_expr(a, table), aff_to_expr(divisor))


def index_mod(a: Index, size: Size, table: SymbolTable | None = None) -> Index:
    """``a % size`` for ``a >= 0``: affine for a constant ``size``."""
    divisor = _size_aff(size, table)
    if isinstance(a, Aff) and divisor.is_constant:
        return a % divisor.constant
    return BinOp("%", _as_expr(a, table), aff_to_expr(divisor))


def is_affine(indices: Sequence[Index]) -> bool:
    return all(isinstance(i, Aff) for i in indices)


__all__ = ["Size", "SymbolTable", "compile_sizes", "index_add", "index_mul", "index_floordiv",
           "index_mod", "is_affine", "is_symbolic", "Var"]
