"""xDSL as the MLIR parser, with the few pieces of syntax it lacks.

xDSL (0.75) parses ``func``, ``arith``, ``math``, ``memref`` and most of
``affine`` in their custom (pretty) syntax, but falls short in three places
that affine MLIR written by people or printed by ``mlir-opt`` uses all the
time; they are added here with xDSL's own parser, as subclasses of its ops
registered in place of the originals (plain subclasses that override only
``parse``; nothing in xDSL is patched):

* ``affine.if`` has no custom syntax in xDSL (only the generic form parses);
* ``affine.max`` is not defined at all;
* ``symbol(%n)`` inside ``affine.load`` / ``affine.store`` subscripts is not
  accepted;
* ``arith.remf`` is not defined;
* ``memref.cast`` has no custom syntax.

:class:`LocatedParser` also remembers where each operation starts, so the
importer can name the line and column of an operation it refuses.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from xdsl.context import Context
from xdsl.dialects import affine as xaffine
from xdsl.dialects import arith as xarith
from xdsl.dialects import get_all_dialects
from xdsl.dialects import memref as xmemref
from xdsl.dialects.builtin import AffineMapAttr, AffineSetAttr, IndexType, MemRefType
from xdsl.ir import Dialect, Operation, Region, SSAValue
from xdsl.ir.affine import AffineExpr, AffineMap
from xdsl.irdl import irdl_op_definition, traits_def
from xdsl.parser import Parser
from xdsl.parser.affine_parser import AffineParser
from xdsl.traits import Pure
from xdsl.utils.lexer import Span
from xdsl.utils.mlir_lexer import MLIRTokenKind


def _parse_dims_and_symbols(parser: Parser) -> list[SSAValue]:
    """``(%d0, ...)[%s0, ...]`` after a map or set: its operands, dims first."""
    dims = parser.parse_optional_comma_separated_list(
        parser.Delimiter.PAREN, lambda: parser.parse_operand(IndexType())) or []
    syms = parser.parse_optional_comma_separated_list(
        parser.Delimiter.SQUARE, lambda: parser.parse_operand(IndexType())) or []
    return [*dims, *syms]


def _ensure_yield(region: Region) -> None:
    """Affine regions may leave out an empty ``affine.yield``; put it back."""
    if not region.blocks:
        return
    block = region.block
    if block.last_op is None or not isinstance(block.last_op, xaffine.YieldOp):
        block.add_op(xaffine.YieldOp.get())


class IfOp(xaffine.IfOp):
    """``affine.if #set(%dims)[%syms] (-> (types))? {then} (else {else})?``."""

    name = "affine.if"

    @classmethod
    def parse(cls, parser: Parser) -> IfOp:
        pos = parser.pos
        condition = parser.parse_attribute()
        if not isinstance(condition, AffineSetAttr):
            parser.raise_error("expected an integer set (affine_set<...>) after affine.if", pos)
        operands = _parse_dims_and_symbols(parser)
        result_types: Sequence[Any] = ()
        if parser.parse_optional_punctuation("->") is not None:
            if parser.parse_optional_punctuation("(") is not None:
                result_types = parser.parse_comma_separated_list(parser.Delimiter.NONE, parser.parse_type)
                parser.parse_punctuation(")")
            else:
                result_types = (parser.parse_type(),)
        then_region = parser.parse_region()
        else_region = Region()
        if parser.parse_optional_keyword("else") is not None:
            else_region = parser.parse_region()
        _ensure_yield(then_region)
        _ensure_yield(else_region)
        attributes = parser.parse_optional_attr_dict()
        op = cls.build(operands=[operands], result_types=[list(result_types)],
                       properties={"condition": condition}, regions=[then_region, else_region])
        op.attributes |= attributes
        return op


class MaxOp(xaffine.MinOp):
    """``affine.max #map(%dims)[%syms]``: the largest result of the map."""

    name = "affine.max"

    @classmethod
    def parse(cls, parser: Parser) -> MaxOp:
        pos = parser.pos
        map_attr = parser.parse_attribute()
        if not isinstance(map_attr, AffineMapAttr):
            parser.raise_error("expected an affine map after affine.max", pos)
        return cls(_parse_dims_and_symbols(parser), map_attr)


def _parse_access_map(parser: Parser) -> tuple[AffineMap, list[Any]]:
    """``[expr, ...]`` over SSA names, where ``symbol(%n)`` may stand for ``%n``."""
    affine = AffineParser(parser._parser_state)
    parse_ssa, _, spans = affine._get_parse_optional_ssa_value()

    def parse_operand_expr() -> AffineExpr | None:
        token = affine._current_token
        if token.kind is MLIRTokenKind.BARE_IDENT and token.span.text == "symbol":
            affine._consume_token()
            affine._parse_token(MLIRTokenKind.L_PAREN, "expected '(' after symbol")
            expr = parse_ssa()
            if expr is None:
                affine.raise_error("expected an SSA value in symbol(...)")
            affine._parse_token(MLIRTokenKind.R_PAREN, "expected ')' after symbol(%value")
            return expr
        return parse_ssa()

    exprs = affine.parse_comma_separated_list(
        affine.Delimiter.SQUARE, lambda: affine._parse_affine_expr(parse_operand_expr))
    access = AffineMap(0, len(spans), tuple(exprs))
    operands = [parser.resolve_operand(_unresolved(span), IndexType()) for span in spans]
    return access, operands


def _unresolved(span: Span) -> Any:
    from xdsl.parser import UnresolvedOperand
    return UnresolvedOperand(span, 0)


def _parse_memref_access(parser: Parser) -> tuple[Any, AffineMap, list[SSAValue], MemRefType]:
    memref = parser.parse_unresolved_operand()
    access, indices = _parse_access_map(parser)
    parser.parse_punctuation(":")
    pos = parser.pos
    memref_type = parser.parse_type()
    if not isinstance(memref_type, MemRefType):
        parser.raise_error("expected a memref type", pos)
    return parser.resolve_operand(memref, memref_type), access, indices, memref_type


class LoadOp(xaffine.LoadOp):
    name = "affine.load"

    @classmethod
    def parse(cls, parser: Parser) -> LoadOp:
        memref, access, indices, memref_type = _parse_memref_access(parser)
        return cls(memref, indices, AffineMapAttr(access), memref_type.get_element_type())


class StoreOp(xaffine.StoreOp):
    name = "affine.store"

    @classmethod
    def parse(cls, parser: Parser) -> StoreOp:
        value = parser.parse_unresolved_operand()
        parser.parse_punctuation(",")
        memref, access, indices, memref_type = _parse_memref_access(parser)
        resolved = parser.resolve_operand(value, memref_type.get_element_type())
        return cls(resolved, memref, indices, AffineMapAttr(access))


@irdl_op_definition
class RemfOp(xarith.FloatingPointLikeBinaryOperation):
    """``arith.remf``: the C ``fmod`` remainder (sign of the dividend)."""

    name = "arith.remf"

    traits = traits_def(Pure())


_REPLACED = {"affine.if": IfOp, "affine.load": LoadOp, "affine.store": StoreOp}


def _affine_dialect() -> Dialect:
    ops: list[Any] = [_REPLACED.get(op.name, op) for op in xaffine.Affine.operations]
    ops.append(MaxOp)
    return Dialect("affine", ops, list(xaffine.Affine.attributes))


class CastOp(xmemref.CastOp):
    """``memref.cast %m : memref<4xf32> to memref<?xf32>``."""

    name = "memref.cast"

    @classmethod
    def parse(cls, parser: Parser) -> CastOp:
        source = parser.parse_unresolved_operand()
        parser.parse_punctuation(":")
        source_type = parser.parse_type()
        parser.parse_keyword("to")
        target_type = parser.parse_type()
        attributes = parser.parse_optional_attr_dict()
        op = cls.build(operands=[parser.resolve_operand(source, source_type)], result_types=[target_type])
        op.attributes |= attributes
        return op


def _memref_dialect() -> Dialect:
    ops = [CastOp if op.name == "memref.cast" else op for op in xmemref.MemRef.operations]
    return Dialect("memref", ops, list(xmemref.MemRef.attributes))


def _arith_dialect() -> Dialect:
    return Dialect("arith", [*xarith.Arith.operations, RemfOp], list(xarith.Arith.attributes))


class LocatedParser(Parser):
    """xDSL's parser, remembering the start of every operation it parses."""

    def __init__(self, ctx: Context, text: str, name: str) -> None:
        super().__init__(ctx, text, name)
        self.starts: dict[int, Span] = {}
        self.open: list[Span] = []     # operations being parsed, outermost first

    def parse_operation(self) -> Operation:
        start = self._current_token.span
        self.open.append(start)
        op = super().parse_operation()
        self.open.pop()
        self.starts[id(op)] = start
        return op


def make_context() -> Context:
    """A context with every xDSL dialect (so any operation parses and can be
    refused by name) and the completed ``affine`` dialect."""
    ctx = Context()
    completed: dict[str, Callable[[], Dialect]] = {"affine": _affine_dialect, "arith": _arith_dialect,
                                                   "memref": _memref_dialect}
    for name, factory in get_all_dialects().items():
        ctx.register_dialect(name, completed.get(name, factory))
    return ctx
