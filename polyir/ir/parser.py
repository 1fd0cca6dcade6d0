"""Recursive-descent parser for the IR text form (docs/ir.md).

``parse(text)`` returns a :class:`~polyir.ir.nodes.Module`; malformed text
always raises :class:`polyir.ParseError` with a 1-based line and column and a
message saying what was expected and what was found. Nodes with a ``loc``
field get the position of their first token.

Subscripts are read as value expressions and become an :class:`Aff` whenever
they are affine (see :func:`index_to_aff`); bounds, conditions, dimensions,
grid sizes and fragment tile origins are affine by grammar.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from polyir.errors import ParseError
from polyir.ir.affine import Aff, Constraint
from polyir.ir.fragments import MMA_SHAPES
from polyir.ir.lexer import Token, TokenCursor, tokenize
from polyir.ir.nodes import (
    CALLS,
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
    SourceLoc,
    Symbol,
    Var,
)
from polyir.ir.printer import BINOP_PREC, PREC_COMPARE, PREC_MUL, PREC_NOT, PREC_UNARY
from polyir.ir.types import DType, MemorySpace

RESERVED_WORDS = frozenset({"true", "false", "inf", "nan", "and", "or", "not", "cast", "select"})
"""Words that cannot name a variable, symbol or buffer used in an expression."""

_SPACES = {s.value: s for s in MemorySpace}
_AFFINE_COMPARISONS = ("<", "<=", ">", ">=", "==")
_VALUE_COMPARISONS = frozenset({"<", "<=", ">", ">=", "==", "!="})
_LOOP_ATTRIBUTES = ("step", "parallel", "unroll", "vectorize", "gpu")

_Piece = TypeVar("_Piece")


def parse(text: str, source_name: str = "<text>") -> Module:
    """Parse IR text into a ``Module``.

    Raises ``ParseError`` (with ``line``, ``column`` and ``source_name``) for
    any malformed text; never another exception for a ``str`` argument.
    """
    tokens = tokenize(text, source_name)
    parser = _Parser(tokens, source_name)
    try:
        return parser.module()
    except RecursionError:
        token = parser.peek()
        raise ParseError("input nested too deeply", token.line, token.column, source_name) from None


def parse_affine(text: str) -> Aff:
    """Parse one affine expression such as ``"2*i + (j + 1) // 4"``."""
    return _parse_piece(text, lambda p: p.affine(), "an affine expression")


def parse_constraint(text: str) -> Constraint:
    """Parse one affine constraint such as ``"i + j < N"``."""
    return _parse_piece(text, lambda p: p.constraint(), "a constraint")


def parse_expr(text: str) -> Expr:
    """Parse one value expression such as ``"A[i, k] * B[k, j]"`` (subscripts become ``Aff`` when affine)."""
    return _parse_piece(text, lambda p: p.expr(), "an expression")


def parse_statement(text: str) -> Node:
    """Parse one statement (or loop, if, barrier, launch) such as ``"S0: C[i] = A[i] + 1.0"``."""
    return _parse_piece(text, lambda p: p.statement(), "a statement")


def parse_param(text: str) -> Buffer | Symbol:
    """Parse a parameter declaration such as ``"A: f32[N, M]"`` or ``"n: index"``."""
    return _parse_piece(text, lambda p: p.param(), "a parameter")


def _parse_piece(text: str, rule: Callable[[_Parser], _Piece], what: str) -> _Piece:
    """Parse all of ``text`` with one grammar rule; pieces carry no ``loc`` (they are not from a file)."""
    parser = _Parser(tokenize(text), "<text>", record_locs=False)
    try:
        result = rule(parser)
    except RecursionError:
        token = parser.peek()
        raise ParseError("input nested too deeply", token.line, token.column) from None
    if parser.peek().kind != "eof":
        raise parser.expected(f"end of input after {what}")
    return result


@dataclass(frozen=True)
class _FloorDivExpr:
    """``lhs // rhs`` seen in a subscript; legal only where the subscript is affine."""

    lhs: Expr
    rhs: Expr
    token: Token


def index_to_aff(expr: Index) -> Aff | None:
    """The ``Aff`` a subscript expression denotes, or ``None`` when it is not affine.

    Like :func:`polyir.ir.nodes.to_affine`, also accepting ``%`` (and, in parsed
    text, ``//``) by a positive integer constant. A value-expression subscript
    for which this returns an ``Aff`` would print as an affine one, so the
    verifier refuses it.
    """
    if isinstance(expr, Aff):
        return expr
    if isinstance(expr, Var):
        return Aff.var(expr.name)
    if isinstance(expr, Const):
        if expr.dtype is DType.I64 and isinstance(expr.value, int) and not isinstance(expr.value, bool):
            return Aff.const(expr.value)
        return None
    if isinstance(expr, Call):
        if expr.fn == "neg" and len(expr.args) == 1:
            inner = index_to_aff(expr.args[0])
            return None if inner is None else -inner
        return None
    if isinstance(expr, _FloorDivExpr) or (isinstance(expr, BinOp) and expr.op == "%"):
        lhs, rhs = index_to_aff(expr.lhs), index_to_aff(expr.rhs)
        if lhs is None or rhs is None or not rhs.is_constant or rhs.constant <= 0:
            return None
        return lhs // rhs.constant if isinstance(expr, _FloorDivExpr) else lhs % rhs.constant
    if isinstance(expr, BinOp) and expr.op in ("+", "-", "*"):
        lhs, rhs = index_to_aff(expr.lhs), index_to_aff(expr.rhs)
        if lhs is None or rhs is None:
            return None
        if expr.op == "+":
            return lhs + rhs
        if expr.op == "-":
            return lhs - rhs
        if rhs.is_constant:
            return lhs * rhs.constant
        if lhs.is_constant:
            return rhs * lhs.constant
    return None


def _find_floordiv(expr: object) -> _FloorDivExpr | None:
    """The first ``//`` left in a non-affine subscript expression, if any."""
    if isinstance(expr, _FloorDivExpr):
        return expr
    if isinstance(expr, (BinOp, Compare)):
        return _find_floordiv(expr.lhs) or _find_floordiv(expr.rhs)
    if isinstance(expr, Call):
        for arg in expr.args:
            found = _find_floordiv(arg)
            if found:
                return found
    if isinstance(expr, Select):
        return _find_floordiv(expr.cond) or _find_floordiv(expr.if_true) or _find_floordiv(expr.if_false)
    if isinstance(expr, Cast):
        return _find_floordiv(expr.value)
    return None


class _Parser(TokenCursor):
    """The grammar of docs/ir.md, one method per construct."""

    # -- module and functions ----------------------------------------------------
    def module(self) -> Module:
        functions = []
        while self.peek().kind != "eof":
            functions.append(self.function())
        return Module(tuple(functions))

    def function(self) -> Function:
        keyword = self.peek()
        if not (self.at_word("func") or self.at_word("kernel")):
            raise self.expected("'func' or 'kernel'")
        self.advance()
        name = self.expect_ident("a function name").text
        self.expect_op("(", "after the function name")
        params = self.comma_list(self.param, ")", "after a parameter")
        self.expect_op("{", "to open the function body")
        local_buffers = self.local_declarations()
        body = self.block_body(keyword)
        kind = "kernel" if keyword.text == "kernel" else "host"
        return Function(name, tuple(params), body, tuple(local_buffers), kind, self.loc(keyword))

    def local_declarations(self) -> list[Buffer]:
        """``local name: dtype[dims] [@space]`` lines at the start of a body."""
        local_buffers = []
        while self.at_word("local") and not self.at_op(":", 1):
            self.advance()
            name_token = self.expect_ident("a local buffer name")
            self.expect_op(":", "after the local buffer name")
            if self.at_word("index"):
                raise self.error("a local must be a buffer (dtype[dims]), not 'index'")
            local_buffers.append(self.buffer_type(name_token))
        return local_buffers

    def param(self) -> Buffer | Symbol:
        name_token = self.expect_ident("a parameter name")
        self.expect_op(":", "after the parameter name")
        if self.at_word("index"):
            self.advance()
            return Symbol(name_token.text, self.loc(name_token))
        return self.buffer_type(name_token)

    def buffer_type(self, name_token: Token) -> Buffer:
        """``dtype[dims] [@space]`` after ``name:``."""
        dtype = self.dtype("a dtype or 'index'")
        self.expect_op("[", "before the buffer dimensions")
        shape = self.comma_list(self.affine, "]", "after a dimension")
        space = MemorySpace.GLOBAL
        if self.at_op("@"):
            self.advance()
            token = self.expect_ident("a memory space")
            if token.text not in _SPACES:
                raise self.error(f"unknown memory space '{token.text}'; expected one of "
                                 f"{', '.join(_SPACES)}", token)
            space = _SPACES[token.text]
        return Buffer(name_token.text, dtype, tuple(shape), space, self.loc(name_token))

    # -- statements --------------------------------------------------------------
    def block_body(self, opener: Token) -> tuple[Node, ...]:
        """Statements up to the closing '}' (consumed); the '{' is already read."""
        self.enter()
        nodes = []
        while not self.at_op("}"):
            if self.peek().kind == "eof":
                raise self.expected(f"'}}' to close the block opened at line {opener.line}")
            nodes.append(self.statement())
        self.advance()
        self.leave()
        return tuple(nodes)

    def statement(self) -> Node:
        token = self.peek()
        if token.kind == "name" and self.at_op(":", 1):
            return self.labeled_statement()
        if token.kind == "name":
            if token.text == "for":
                return self.for_loop()
            if token.text == "if":
                return self.if_node()
            if token.text == "barrier":
                self.advance()
                return Barrier(self.loc(token))
            if token.text == "launch":
                return self.launch()
            if token.text == "local":
                raise self.error("local declarations must come first in a function or loop body")
        raise self.expected("a statement ('NAME:', 'for', 'if', 'barrier', 'launch') or '}'")

    def for_loop(self) -> For:
        keyword = self.advance()
        var = self.expect_ident("a loop variable").text
        self.expect_op("=", "after the loop variable")
        lower = self.bound("max", "lower")
        self.expect_word("to", "after the lower bound")
        upper = self.bound("min", "upper")
        seen: set[str] = set()
        factors: dict[str, int] = {}  # step, unroll, vectorize
        parallel = False
        mapping: str | None = None
        while not self.at_op("{"):
            token = self.peek()
            if token.kind != "name" or token.text not in _LOOP_ATTRIBUTES:
                raise self.expected("a loop attribute (step, parallel, unroll=, vectorize=, gpu=) or '{'")
            if token.text in seen:
                raise self.error(f"duplicate loop attribute '{token.text}'", token)
            seen.add(token.text)
            self.advance()
            if token.text == "step":
                factors["step"] = self.expect_int("an integer after 'step'")
            elif token.text == "parallel":
                parallel = True
            elif token.text == "gpu":
                self.expect_op("=", "after 'gpu'")
                mapping = self.expect_name_any("a GPU dimension such as block.x").text
            else:
                self.expect_op("=", f"after '{token.text}'")
                factors[token.text] = self.expect_int(f"an integer factor after '{token.text}='")
        self.advance()
        local_buffers = self.local_declarations()
        body = self.block_body(keyword)
        return For(var, lower, upper, body,
                   step=factors.get("step", 1),
                   parallel=parallel,
                   mapping=mapping,
                   unroll=factors.get("unroll", 0),
                   vectorize=factors.get("vectorize", 0),
                   locals=tuple(local_buffers),
                   loc=self.loc(keyword))

    def expect_name_any(self, what: str) -> Token:
        if self.peek().kind != "name":
            raise self.expected(what)
        return self.advance()

    def bound(self, combine: str, which: str) -> tuple[Aff, ...]:
        other = "min" if combine == "max" else "max"
        if self.at_op("(", 1) and self.at_word(other):
            article = "a" if which == "lower" else "an"
            raise self.error(f"{article} {which} bound combines with {combine}(...), not {other}(...)")
        if self.at_word(combine) and self.at_op("(", 1):
            self.advance()
            self.advance()
            items = self.comma_list(self.affine, ")", f"in {combine}(...)")
            if not items:
                raise self.error(f"{combine}() needs at least one bound", self.tokens[self.pos - 1])
            return tuple(items)
        return (self.affine(),)

    def if_node(self) -> If:
        keyword = self.advance()
        self.expect_op("(", "after 'if'")
        conditions = self.comma_list(self.constraint, ")", "after a condition")
        self.expect_op("{", "to open the 'if' body")
        then_body = self.block_body(keyword)
        else_body: tuple[Node, ...] = ()
        if self.at_word("else"):
            else_token = self.advance()
            self.expect_op("{", "after 'else'")
            else_body = self.block_body(else_token)
        return If(tuple(conditions), then_body, else_body, self.loc(keyword))

    def constraint(self) -> Constraint:
        lhs = self.affine()
        token = self.peek()
        if token.kind != "op" or token.text not in _AFFINE_COMPARISONS:
            raise self.expected("a comparison (<, <=, >, >=, ==) in the condition")
        self.advance()
        return Constraint(lhs, token.text, self.affine())

    def launch(self) -> Launch:
        keyword = self.advance()
        kernel = self.expect_ident("a kernel name after 'launch'").text
        self.expect_word("grid", "after the kernel name")
        self.expect_op("(", "after 'grid'")
        grid = self.comma_list(self.affine, ")", "in grid(...)")
        if len(grid) != 3:
            raise self.error(f"grid(...) takes 3 sizes, found {len(grid)}", self.tokens[self.pos - 1])
        self.expect_word("block", "after grid(...)")
        self.expect_op("(", "after 'block'")
        block = self.comma_list(lambda: self.expect_int("an integer block size"), ")", "in block(...)")
        if len(block) != 3:
            raise self.error(f"block(...) takes 3 sizes, found {len(block)}", self.tokens[self.pos - 1])
        shared = 0
        if self.at_word("shared"):
            self.advance()
            shared = self.expect_int("a byte count after 'shared'")
        self.expect_op("(", "before the launch arguments")
        args = self.comma_list(lambda: self.expect_ident("an argument name").text, ")", "after a launch argument")
        return Launch(kernel, (grid[0], grid[1], grid[2]), (block[0], block[1], block[2]), tuple(args), shared,
                      self.loc(keyword))

    def labeled_statement(self) -> Node:
        label = self.advance()
        if "." in label.text:
            raise self.expected("a statement name", label)
        self.advance()  # ':'
        loc = self.loc(label)
        target = self.peek()
        if self.at_word("fragment_store") and self.at_op("<", 1):
            return self.fragment_store(label.text, loc)
        self.expect_ident("a buffer or fragment name after the statement label")
        if self.at_op("["):
            self.advance()
            indices = self.subscripts()
            self.expect_op("=", "after the assigned element")
            value = self.expr()
            return Assign(label.text, target.text, indices, value, loc)
        if self.at_op("="):
            self.advance()
            op = self.peek()
            if op.kind == "name" and op.text == "fragment_fill":
                self.advance()
                self.expect_op("(", "after 'fragment_fill'")
                value = self.expr()
                self.expect_op(")", "after the fill value")
                return FragmentFill(label.text, target.text, value, loc)
            if op.kind == "name" and op.text == "fragment_load":
                return self.fragment_load(label.text, target.text, loc)
            if op.kind == "name" and op.text == "fragment_mma":
                self.advance()
                self.expect_op("<", "after 'fragment_mma'")
                shape = self.mma_shape()
                self.expect_op(">", "after the MMA shape")
                self.expect_op("(", "before the fragment_mma operands")
                operands = self.comma_list(lambda: self.expect_ident("a fragment name").text, ")",
                                           "after a fragment_mma operand")
                if len(operands) != 3:
                    raise self.error(f"fragment_mma takes 3 fragments (a, b, acc), found {len(operands)}",
                                     self.tokens[self.pos - 1])
                a, b, acc = operands
                return FragmentMMA(label.text, target.text, a, b, acc, shape, loc)
            raise self.expected("fragment_fill, fragment_load or fragment_mma after '='")
        raise self.expected(f"'[' or '=' after '{target.text}'")

    def fragment_load(self, name: str, fragment: str, loc: SourceLoc | None) -> FragmentLoad:
        self.advance()
        self.expect_op("<", "after 'fragment_load'")
        role = self.choice(("a", "b", "acc"), "a fragment role")
        self.expect_op(",", "after the fragment role")
        shape = self.mma_shape()
        layout = "row"
        if self.at_op(","):
            self.advance()
            layout = self.choice(("row", "col"), "a layout")
        self.expect_op(">", "after the fragment_load parameters")
        self.expect_op("(", "before the loaded tile")
        buffer, indices = self.tile_origin()
        self.expect_op(")", "after the loaded tile")
        return FragmentLoad(name, fragment, role, shape, buffer, indices, layout, loc)

    def fragment_store(self, name: str, loc: SourceLoc | None) -> FragmentStore:
        self.advance()
        self.advance()  # '<'
        shape = self.mma_shape()
        layout = "row"
        if self.at_op(","):
            self.advance()
            layout = self.choice(("row", "col"), "a layout")
        self.expect_op(">", "after the fragment_store parameters")
        self.expect_op("(", "before the stored tile")
        buffer, indices = self.tile_origin()
        self.expect_op(",", "after the stored tile")
        fragment = self.expect_ident("a fragment name").text
        self.expect_op(")", "after the stored fragment")
        return FragmentStore(name, buffer, indices, fragment, shape, layout, loc)

    def tile_origin(self) -> tuple[str, tuple[Aff, ...]]:
        buffer = self.expect_ident("a buffer name").text
        self.expect_op("[", "after the buffer name")
        indices = self.comma_list(self.affine, "]", "after a tile subscript")
        return buffer, tuple(indices)

    def choice(self, options: tuple[str, ...], what: str) -> str:
        token = self.peek()
        if token.kind != "name" or token.text not in options:
            raise self.expected(f"{what} ({' or '.join(options)})")
        self.advance()
        return token.text

    def mma_shape(self) -> str:
        token = self.expect_name_any("an MMA shape key")
        if token.text not in MMA_SHAPES:
            raise self.error(f"unknown MMA shape '{token.text}'; expected one of "
                             f"{', '.join(MMA_SHAPES)}", token)
        return token.text

    # -- affine expressions ------------------------------------------------------
    def affine(self) -> Aff:
        """``term (('+' | '-') term)*`` with affine terms."""
        result = self.affine_term()
        while self.at_op("+") or self.at_op("-"):
            op = self.advance().text
            rhs = self.affine_term()
            result = result + rhs if op == "+" else result - rhs
        return result

    def affine_term(self) -> Aff:
        result = self.affine_unary()
        while self.peek().kind == "op" and self.peek().text in ("*", "//", "%"):
            op = self.advance()
            rhs_token = self.peek()
            rhs = self.affine_unary()
            if op.text == "*":
                if not (result.is_constant or rhs.is_constant):
                    raise self.error(f"product of two non-constant affine terms ({result}) * ({rhs})", op)
                result = result * rhs.constant if rhs.is_constant else rhs * result.constant
            else:
                if not rhs.is_constant or rhs.constant <= 0:
                    raise self.error(f"'{op.text}' needs a positive integer constant divisor, "
                                     f"found '{rhs}'", rhs_token)
                result = result // rhs.constant if op.text == "//" else result % rhs.constant
        return result

    def affine_unary(self) -> Aff:
        token = self.peek()
        if token.kind == "op" and token.text == "-":
            self.advance()
            self.enter()
            value = -self.affine_unary()
            self.leave()
            return value
        if token.kind == "int":
            self.advance()
            return Aff.const(self.int_value(token))
        if token.kind == "name" and "." not in token.text and token.text not in RESERVED_WORDS:
            self.advance()
            return Aff.var(token.text)
        if token.kind == "op" and token.text == "(":
            self.advance()
            self.enter()
            value = self.affine()
            self.leave()
            self.expect_op(")", "to close '('")
            return value
        raise self.expected("an affine expression (integer, variable or '(')")

    # -- value expressions -------------------------------------------------------
    def subscripts(self) -> tuple[Index, ...]:
        """Subscripts after '[' up to and including ']'."""
        if self.at_op("]"):
            self.advance()
            return ()
        indices = []
        while True:
            indices.append(self.subscript())
            if self.at_op(","):
                self.advance()
                continue
            if self.at_op("]"):
                self.advance()
                return tuple(indices)
            raise self.expected("']' after subscripts")

    def subscript(self) -> Index:
        self.subscript_depth += 1
        value = self.expr()
        self.subscript_depth -= 1
        aff = index_to_aff(value)
        if aff is not None:
            return aff
        floordiv = _find_floordiv(value)
        if floordiv is not None:
            raise self.error("'//' needs an affine left operand and a positive integer constant "
                             "divisor", floordiv.token)
        return value

    def expr(self, min_prec: int = 1) -> Expr:
        """Precedence climbing over ``or and not compare + - * / % //``."""
        self.enter()
        lhs = self.prefix(min_prec)
        while True:
            token = self.peek()
            if token.kind == "op":
                op = token.text
                if op in _VALUE_COMPARISONS:
                    prec = PREC_COMPARE
                elif op == "//":
                    prec = PREC_MUL
                else:
                    prec = BINOP_PREC.get(op, 0)
            elif token.kind == "name" and token.text in ("and", "or"):
                op, prec = token.text, BINOP_PREC[token.text]
            else:
                break
            if prec == 0 or prec < min_prec:
                break
            self.advance()
            if prec == PREC_COMPARE:
                lhs = Compare(op, lhs, self.expr(PREC_COMPARE + 1))
                after = self.peek()
                if after.kind == "op" and after.text in _VALUE_COMPARISONS:
                    raise self.error("comparisons do not chain; parenthesize one of them", after)
            elif op == "//":
                if self.subscript_depth == 0:
                    raise self.error("'//' is only allowed in affine subscripts and bounds", token)
                lhs = _FloorDivExpr(lhs, self.expr(prec + 1), token)  # type: ignore[assignment]
            else:
                lhs = BinOp(op, lhs, self.expr(prec + 1))
        self.leave()
        return lhs

    def prefix(self, min_prec: int) -> Expr:
        token = self.peek()
        if token.kind == "name" and token.text == "not":
            if min_prec > PREC_NOT:
                raise self.error("'not' needs parentheses here", token)
            self.advance()
            return Call("not", (self.expr(PREC_NOT),))
        if token.kind == "op" and token.text == "-":
            self.advance()
            number = self.peek()
            if number.kind in ("int", "float") or (number.kind == "name" and number.text in ("inf", "nan")):
                return self.literal(negative=True)
            self.enter()
            operand = self.prefix(PREC_UNARY)
            self.leave()
            return Call("neg", (operand,))
        return self.primary()

    def literal(self, negative: bool = False) -> Const:
        token = self.advance()
        value: int | float | bool
        if token.kind == "int":
            value, dtype = self.int_value(token), DType.I64
        elif token.kind == "float":
            value, dtype = float(token.text), DType.F32
        elif token.text in ("true", "false"):
            value, dtype = token.text == "true", DType.BOOL
        else:  # inf, nan
            value, dtype = (math.inf if token.text == "inf" else math.nan), DType.F32
        if negative:
            value = -value
        if isinstance(value, float) and math.isnan(value):
            value = math.nan  # one NaN object, so that equal texts give equal constants
        if self.at_op(":"):
            self.advance()
            dtype = self.dtype("a dtype after ':'")
        return Const(value, dtype)

    def primary(self) -> Expr:
        token = self.peek()
        if token.kind in ("int", "float"):
            return self.literal()
        if token.kind == "op" and token.text == "(":
            self.advance()
            value = self.expr()
            self.expect_op(")", "to close '('")
            return value
        if token.kind != "name" or "." in token.text:
            raise self.expected("an expression")
        name = token.text
        if name in ("true", "false", "inf", "nan"):
            return self.literal()
        if name == "cast" and self.at_op("<", 1):
            self.advance()
            self.advance()
            dtype = self.dtype("a dtype in cast<...>")
            self.expect_op(">", "after the cast dtype")
            self.expect_op("(", "after cast<...>")
            value = self.expr()
            self.expect_op(")", "after the cast operand")
            return Cast(dtype, value)
        if name == "select" and self.at_op("(", 1):
            self.advance()
            self.advance()
            args = self.comma_list(self.expr, ")", "after a select operand")
            if len(args) != 3:
                raise self.error(f"select takes 3 arguments (cond, a, b), found {len(args)}", token)
            return Select(*args)
        if name in RESERVED_WORDS:
            raise self.expected("an expression")
        self.advance()
        if self.at_op("("):
            if name not in CALLS:
                raise self.error(f"unknown function '{name}'", token)
            self.advance()
            args = self.comma_list(self.expr, ")", f"after an argument of {name}")
            if len(args) != CALLS[name]:
                plural = "" if CALLS[name] == 1 else "s"
                raise self.error(f"{name} takes {CALLS[name]} argument{plural}, found {len(args)}", token)
            return Call(name, tuple(args))
        if self.at_op("["):
            self.advance()
            return Load(name, self.subscripts())
        return Var(name)
