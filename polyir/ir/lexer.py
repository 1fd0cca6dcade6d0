"""Tokens of the IR text form, with 1-based line and column.

Token kinds: ``name`` (identifiers, possibly dotted such as ``block.x`` or
``m16n16k16.f16.f32``), ``int``, ``float``, ``op`` (punctuation and
operators) and ``eof``. ``#`` starts a comment to the end of the line.
"""
from __future__ import annotations

import re
from collections.abc import Callable
from typing import NamedTuple, TypeVar

from polyir.errors import ParseError
from polyir.ir.nodes import SourceLoc
from polyir.ir.types import DType

MAX_NESTING = 100
"""Deepest nesting of parentheses, calls and blocks the parser accepts."""

_DTYPES = {d.value: d for d in DType}

_Item = TypeVar("_Item")

_TOKEN = re.compile(r"""
    (?P<space>[ \t\r]+|\#[^\n]*)
  | (?P<newline>\n)
  | (?P<float>\d+\.\d*(?:[eE][+-]?\d+)?|\d+[eE][+-]?\d+)
  | (?P<int>\d+)
  | (?P<name>[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*)
  | (?P<op>//|<=|>=|==|!=|[-+*/%<>=()\[\]{},:@])
  | (?P<bad>.)
""", re.VERBOSE)


class Token(NamedTuple):
    """One token: its kind, its text and where it starts."""

    kind: str
    text: str
    line: int
    column: int

    def describe(self) -> str:
        """How an error message names this token."""
        if self.kind == "eof":
            return "end of input"
        return f"'{self.text}'"


def tokenize(text: str, source_name: str = "<text>") -> list[Token]:
    """The tokens of ``text``, ending with an ``eof`` token.

    Raises ``ParseError`` on a character that starts no token.
    """
    tokens: list[Token] = []
    append = tokens.append
    line, line_start = 1, 0
    for match in _TOKEN.finditer(text):
        kind = match.lastgroup or "bad"  # never None: every alternative of _TOKEN is a named group
        if kind == "space":
            continue
        start = match.start()
        if kind == "newline":
            line, line_start = line + 1, start + 1
            continue
        if kind == "bad":
            raise ParseError(f"unexpected character {match.group()!r}", line,
                             start - line_start + 1, source_name)
        append(Token(kind, match.group(), line, start - line_start + 1))
    append(Token("eof", "", line, len(text) - line_start + 1))
    return tokens


_LOOKAHEAD = 4
"""Copies of the final ``eof`` token kept past the end, so ``peek`` needs no bounds check."""


class TokenCursor:
    """A position in a token list, with the helpers every grammar rule uses:
    look-ahead, expectations that raise ``ParseError`` saying what was
    expected and what was found, and a nesting guard."""

    def __init__(self, tokens: list[Token], source_name: str, record_locs: bool = True):
        self.tokens = tokens + [tokens[-1]] * _LOOKAHEAD
        self.record_locs = record_locs
        self.pos = 0
        self.source_name = source_name
        self.depth = 0
        self.subscript_depth = 0

    def peek(self, ahead: int = 0) -> Token:
        return self.tokens[self.pos + ahead]

    def advance(self) -> Token:
        token = self.tokens[self.pos]
        if token.kind != "eof":
            self.pos += 1
        return token

    def error(self, message: str, token: Token | None = None) -> ParseError:
        token = token or self.peek()
        return ParseError(message, token.line, token.column, self.source_name)

    def expected(self, what: str, token: Token | None = None) -> ParseError:
        token = token or self.peek()
        return self.error(f"expected {what}, found {token.describe()}", token)

    def at_op(self, text: str, ahead: int = 0) -> bool:
        token = self.tokens[self.pos + ahead]
        return token.kind == "op" and token.text == text

    def at_word(self, text: str, ahead: int = 0) -> bool:
        token = self.tokens[self.pos + ahead]
        return token.kind == "name" and token.text == text

    def expect_op(self, text: str, context: str = "") -> Token:
        if not self.at_op(text):
            raise self.expected(f"'{text}'" + (f" {context}" if context else ""))
        return self.advance()

    def expect_word(self, text: str, context: str = "") -> Token:
        if not self.at_word(text):
            raise self.expected(f"'{text}'" + (f" {context}" if context else ""))
        return self.advance()

    def expect_ident(self, what: str) -> Token:
        token = self.peek()
        if token.kind != "name" or "." in token.text:
            raise self.expected(what)
        return self.advance()

    def expect_int(self, what: str) -> int:
        token = self.peek()
        if token.kind != "int":
            raise self.expected(what)
        self.advance()
        return self.int_value(token)

    def int_value(self, token: Token) -> int:
        try:
            return int(token.text)
        except ValueError:  # more digits than Python converts
            raise self.error(f"integer literal too long ({len(token.text)} digits)", token) from None

    def dtype(self, what: str = "a dtype") -> DType:
        token = self.expect_ident(what)
        try:
            return _DTYPES[token.text]
        except KeyError:
            raise self.error(f"unknown dtype '{token.text}'; expected one of "
                             f"{', '.join(_DTYPES)}", token) from None

    def enter(self) -> None:
        self.depth += 1
        if self.depth > MAX_NESTING:
            raise self.error(f"nesting deeper than {MAX_NESTING} levels")

    def leave(self) -> None:
        self.depth -= 1

    def loc(self, token: Token) -> SourceLoc | None:
        return SourceLoc(token.line, token.column) if self.record_locs else None

    def comma_list(self, item: Callable[[], _Item], close: str, context: str) -> list[_Item]:
        """Items separated by ',' up to ``close`` (consumed); possibly empty."""
        items: list[_Item] = []
        if self.at_op(close):
            self.advance()
            return items
        while True:
            items.append(item())
            if self.at_op(","):
                self.advance()
                continue
            if self.at_op(close):
                self.advance()
                return items
            raise self.expected(f"',' or '{close}' {context}")
