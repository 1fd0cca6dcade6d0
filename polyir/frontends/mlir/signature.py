"""The signature of an imported MLIR function: its arguments as polyir
parameters (``index`` arguments as size symbols, memrefs as buffers whose
dynamic dimensions become symbols or follow ``{polyir.shape}``, scalars as
0-d buffers), and the helpers the importer (``importer.py``) shares with it."""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from xdsl.dialects import builtin
from xdsl.ir import Block, Operation, SSAValue
from xdsl.ir.affine import AffineMap

from polyir.errors import ParseError
from polyir.frontends.mlir import values as V
from polyir.frontends.mlir.values import IndexValue, MemrefValue, NotSupported, ScalarValue, Value
from polyir.ir.affine import Aff
from polyir.ir.nodes import Buffer, Load, Symbol
from polyir.ir.parser import RESERVED_WORDS, parse_affine
from polyir.ir.types import DType

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def _string_attr(attrs: Any, key: str) -> str | None:
    value = attrs.data.get(key) if attrs is not None else None
    return value.data if isinstance(value, builtin.StringAttr) else None


def _count_uses(value: SSAValue) -> int:
    return sum(1 for _ in value.uses)


class _Refusal(Exception):
    def __init__(self, op: Operation, detail: str):
        super().__init__(detail)
        self.op, self.detail = op, detail


@dataclass
class _Names:
    """Identifiers in use in one function (buffers, symbols, loop variables)."""

    used: set[str] = field(default_factory=set)

    def fresh(self, hint: str | None, default: str) -> str:
        base = hint if hint and _IDENTIFIER.match(hint) and hint not in RESERVED_WORDS else default
        name, count = base, 0
        while name in self.used:
            count += 1
            name = f"{base}_{count}"
        self.used.add(name)
        return name


class _SignatureImporter:
    """The parameter half of ``importer._FunctionImporter`` (which sets the
    attributes below)."""

    names: _Names
    values: dict[SSAValue, Value]
    remaining: dict[SSAValue, int]
    symbols: list[str]
    index_args: set[str]

    # ------------------------------------------------------------- parameters
    def _dim_hints(self, block: Block) -> dict[tuple[SSAValue, int], str]:
        """``memref.dim`` results by (argument, constant dimension): their SSA names."""
        hints: dict[tuple[SSAValue, int], str] = {}
        for op in block.walk():
            if op.name != "memref.dim" or not op.results[0].name_hint:
                continue
            index_op = op.operands[1].owner
            if isinstance(index_op, Operation) and index_op.name == "arith.constant":
                value = getattr(index_op, "value", None)
                if isinstance(value, builtin.IntegerAttr):
                    hints.setdefault((op.operands[0], int(value.value.data)), op.results[0].name_hint)
        return hints

    def _params(self, op: Any, block: Block) -> list[Buffer | Symbol]:
        arg_attrs = list(op.arg_attrs.data) if op.arg_attrs is not None else [None] * len(block.args)
        hints = self._dim_hints(block)
        params: list[Buffer | Symbol] = []
        # names first, so that symbols named by polyir.shape keep their names
        given = [_string_attr(attrs, "polyir.name") for attrs in arg_attrs]
        for name in given:
            if name is not None and _IDENTIFIER.match(name) and name not in self.names.used:
                self.names.used.add(name)
        arg_names = [name if name is not None and _IDENTIFIER.match(name)
                     else self.names.fresh(arg.name_hint, f"arg{i}")
                     for i, (arg, name) in enumerate(zip(block.args, given, strict=True))]
        self.index_args = {name for arg, name in zip(block.args, arg_names, strict=True)
                           if isinstance(arg.type, builtin.IndexType)}
        for i, (arg, name, attrs) in enumerate(zip(block.args, arg_names, arg_attrs, strict=True)):
            type_ = arg.type
            if isinstance(type_, builtin.IndexType):
                params.append(Symbol(name))
                self.symbols.append(name)
                self.values[arg] = IndexValue.affine(Aff.var(name))
            elif isinstance(type_, builtin.MemRefType):
                shape = self._arg_shape(op, i, name, type_, attrs, hints, arg)
                buffer = Buffer(name, self._element_dtype(op, type_), shape)
                params.append(buffer)
                self.values[arg] = MemrefValue(buffer)
            else:
                dtype = self._dtype(op, type_)
                buffer = Buffer(name, dtype, ())
                params.append(buffer)
                self.values[arg] = ScalarValue(Load(name, ()), dtype)
            self.remaining[arg] = _count_uses(arg)
        return params

    def _arg_shape(self, op: Operation, position: int, name: str, type_: Any, attrs: Any,
                   hints: dict[tuple[SSAValue, int], str], arg: SSAValue) -> tuple[Aff, ...]:
        self._check_layout(op, type_)
        static = type_.get_shape()
        shape_attr = attrs.data.get("polyir.shape") if attrs is not None else None
        if isinstance(shape_attr, builtin.StringAttr):
            texts = [t for t in shape_attr.data.split(",") if t.strip()]
            try:
                dims = tuple(parse_affine(text) for text in texts)
            except ParseError as error:
                raise _Refusal(op, f"argument {position}: bad polyir.shape {shape_attr.data!r}: "
                                   f"{error.message}") from None
            if len(dims) != len(static) or any(s != builtin.DYNAMIC_INDEX and (not d.is_constant or
                                                                              d.constant != s)
                                               for d, s in zip(dims, static, strict=False)):
                raise _Refusal(op, f"argument {position}: polyir.shape {shape_attr.data!r} does not "
                                   f"fit {type_}")
            for dim in dims:
                for symbol in sorted(dim.variables()):
                    if symbol in self.symbols or symbol in self.index_args:
                        continue
                    if symbol in self.names.used:
                        raise _Refusal(op, f"polyir.shape symbol '{symbol}' is also the name of a "
                                           f"non-index argument")
                    self.names.used.add(symbol)
                    self.symbols.append(symbol)
            return dims
        shape: list[Aff] = []
        for axis, extent in enumerate(static):
            if extent != builtin.DYNAMIC_INDEX:
                shape.append(Aff.const(extent))
                continue
            symbol = self.names.fresh(hints.get((arg, axis)), f"{name}_d{axis}")
            self.symbols.append(symbol)
            shape.append(Aff.var(symbol))
        return tuple(shape)

    def _check_layout(self, op: Operation, type_: Any) -> None:
        identity = AffineMap.identity(len(type_.get_shape()))
        if not isinstance(type_.layout, builtin.NoneAttr) and not (
                isinstance(type_.layout, builtin.AffineMapAttr) and type_.layout.data == identity):
            raise _Refusal(op, f"memref layout {type_.layout} (only the default row-major layout is imported)")
        if not isinstance(type_.memory_space, builtin.NoneAttr):
            raise _Refusal(op, f"memref memory space {type_.memory_space} (only the default space is imported)")

    def _dtype(self, op: Operation, type_: Any) -> DType:
        try:
            return V.dtype_of(type_)
        except NotSupported as reason:
            raise _Refusal(op, str(reason)) from None

    def _element_dtype(self, op: Operation, type_: Any) -> DType:
        return self._dtype(op, type_.get_element_type())
