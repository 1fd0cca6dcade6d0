"""Sizes in lowering: Python ints, or a frontend's symbolic sizes.

A frontend that traces with symbolic sizes (the ATen table with
``dynamic=True``: torch ``SymInt`` values) lowers with a :class:`SizeTable`,
which turns those sizes into the IR's: a constant, an affine expression over
size symbols, or a derived symbol the caller passes
(:class:`polyir.frontends.aten.symbolic.SymbolTable`). Without a table every
size is an ``int``. Nothing here imports a framework.

Products of a symbolic size with a loop index are not affine:
:func:`index_mul`, :func:`index_floordiv` and :func:`index_mod` then make
non-affine (gather-style) subscripts; with constant sizes they stay affine.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, Union, cast

import numpy as np

from polyir.ir.affine import Aff
from polyir.ir.nodes import BinOp, Const, Expr, Index
from polyir.ir.types import DType
from polyir.ir.walk import aff_to_expr

Size = Union[int, Any]
"""A dimension size: an ``int``, or a symbolic size a :class:`SizeTable` reads."""


class SizeTable(Protocol):
    """How a frontend's symbolic sizes become IR sizes."""

    def is_symbolic(self, size: object) -> bool:
        """Whether ``size`` is one of this frontend's symbolic sizes."""
        ...

    def dim(self, size: Size) -> Size:
        """``size`` as an ``int`` when it is a constant, else as it is."""
        ...

    def aff(self, size: Size) -> Aff:
        """``size`` as an affine expression over size symbols."""
        ...

    def value(self, size: Size, dtype: DType) -> Expr:
        """``size`` as a value of ``dtype``."""
        ...

    def reserved(self, name: str) -> bool:
        """Whether ``name`` may be a size symbol's (never given to a buffer)."""
        ...


def is_static(size: object) -> bool:
    """Whether ``size`` is a plain integer (``int`` or a numpy integer)."""
    return isinstance(size, (int, np.integer))


def static_dims(shape: Sequence[Size]) -> tuple[Size, ...]:
    """A shape as ints, keeping symbolic sizes as they are."""
    return tuple(int(s) if is_static(s) else s for s in shape)


def size_aff(size: Size, table: SizeTable | None) -> Aff:
    """``size`` as an affine expression (a constant unless it is symbolic)."""
    if table is not None and table.is_symbolic(size):
        return table.aff(size)
    return Aff.const(int(size))


def _as_expr(index: Index | Size, table: SizeTable | None) -> Expr:
    if isinstance(index, Aff):
        return aff_to_expr(index)
    if table is not None and table.is_symbolic(index):
        return aff_to_expr(table.aff(index))
    if is_static(index):
        return Const(int(cast(int, index)), DType.I64)
    return cast(Expr, index)


def index_add(a: Index, b: Index | Size, table: SizeTable | None = None) -> Index:
    """``a + b`` (affine when both are)."""
    b_aff: Aff | None
    if isinstance(b, Aff):
        b_aff = b
    elif is_static(b) or (table is not None and table.is_symbolic(b)):
        b_aff = size_aff(b, table)
    else:
        b_aff = None
    if isinstance(a, Aff) and b_aff is not None:
        return a + b_aff
    return BinOp("+", _as_expr(a, table), _as_expr(b, table))


def index_mul(a: Index, size: Size, table: SizeTable | None = None) -> Index:
    """``a * size``: affine when ``size`` is a constant or ``a`` is."""
    factor = size_aff(size, table)
    if factor.is_constant and factor.constant == 1:
        return a
    if isinstance(a, Aff):
        if factor.is_constant:
            return a * factor.constant
        if a.is_constant:
            return factor * a.constant
    return BinOp("*", _as_expr(a, table), aff_to_expr(factor))


def index_floordiv(a: Index, size: Size, table: SizeTable | None = None) -> Index:
    """``a // size`` for ``a >= 0`` (indices are): affine for a constant ``size``."""
    divisor = size_aff(size, table)
    if divisor.is_constant and divisor.constant == 1:
        return a
    if isinstance(a, Aff) and divisor.is_constant:
        return a // divisor.constant
    return BinOp("/", _as_expr(a, table), aff_to_expr(divisor))


def index_mod(a: Index, size: Size, table: SizeTable | None = None) -> Index:
    """``a % size`` for ``a >= 0``: affine for a constant ``size``."""
    divisor = size_aff(size, table)
    if isinstance(a, Aff) and divisor.is_constant:
        return a % divisor.constant
    return BinOp("%", _as_expr(a, table), aff_to_expr(divisor))


def is_affine(indices: Sequence[Index]) -> bool:
    return all(isinstance(i, Aff) for i in indices)


def size_product(sizes: Sequence[Size]) -> Size:
    """The product of ``sizes`` (an int, or a symbolic size when one is)."""
    total: Size = 1
    for size in sizes:
        total = total * size
    return total


__all__ = ["Size", "SizeTable", "index_add", "index_floordiv", "index_mod", "index_mul",
           "is_affine", "is_static", "size_aff", "size_product", "static_dims"]
