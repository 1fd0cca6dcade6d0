"""Tokens of the IR text form, with 1-based line and column.

Token kinds: ``name`` (identifiers, possibly dotted such as ``block.x`` or
``m16n16k16.f16.f32``), ``int``, ``float``, ``op`` (punctuation and
operators) and ``eof``. ``#`` starts a comment to the end of the line.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from polyir.errors import ParseError

_TOKEN = re.compile(r"""
    (?P<space>[ \t\r]+|\#[^\n]*)
  | (?P<newline>\n)
  | (?P<float>\d+\.\d*(?:[eE][+-]?\d+)?|\d+[eE][+-]?\d+)
  | (?P<int>\d+)
  | (?P<name>[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*)
  | (?P<op>//|<=|>=|==|!=|[-+*/%<>=()\[\]{},:@])
  | (?P<bad>.)
""", re.VERBOSE)


@dataclass(frozen=True)
class Token:
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
        kind = match.lastgroup
        if kind == "space":
            continue
        start = match.start()
        if kind == "newline":
            line, line_start = line + 1, start + 1
            continue
        if kind == "bad":
            raise ParseError(f"unexpected character {match.group()!r}", line,
                             start - line_start + 1, source_name)
        append(Token(kind, match.group(), line, start - line_start + 1))  # type: ignore[arg-type]
    append(Token("eof", "", line, len(text) - line_start + 1))
    return tokens
