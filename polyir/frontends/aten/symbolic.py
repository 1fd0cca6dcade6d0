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
Products of a size with a loop index are not affine: the index algebra of
:mod:`polyir.frontends.lowering.sizes` (``index_mul``, ``index_floordiv``,
``index_mod``, re-exported here) makes non-affine (gather-style) subscripts
for them. :class:`SymbolTable` is the ATen table's
:class:`~polyir.frontends.lowering.sizes.SizeTable`.
"""
from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any, Union

import sympy
import torch

from polyir.frontends.lowering.sizes import (
    index_add,
    index_floordiv,
    index_mod,
    index_mul,
    is_affine,
)
from polyir.ir.affine import Aff
from polyir.ir.nodes import Cast, Expr
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
    def is_symbolic(self, size: object) -> bool:
        """Whether ``size`` is a ``SymInt`` (a size this table converts)."""
        return isinstance(size, torch.SymInt)

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
            from polyir.frontends.lowering.context import const
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


__all__ = ["Size", "SymbolTable", "compile_sizes", "index_add", "index_mul", "index_floordiv",
           "index_mod", "is_affine", "is_symbolic"]
