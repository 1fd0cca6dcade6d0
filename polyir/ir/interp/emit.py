"""Building blocks of the Python source the interpreter generates.

A :class:`Block` is a list of source lines with relative indentation, each
tagged with the index of the IR node it came from (for error messages).
:class:`Names` maps IR names to Python identifiers.
"""
from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

from polyir.ir.affine import Aff, Atom, Constraint, FloorDiv
from polyir.ir.types import DType

STORAGE_FORMAT = {
    DType.F16: "f", DType.BF16: "f", DType.F32: "f", DType.F64: "d",
    DType.I8: "b", DType.I32: "i", DType.I64: "q", DType.BOOL: "?",
}
"""memoryview format that holds each type (f16 and bf16 live in float32 storage)."""

F32_COMPUTED = (DType.F32, DType.F16, DType.BF16)
"""Types whose arithmetic is done in float32."""


@dataclass
class Line:
    indent: int
    text: str
    node: int


@dataclass
class Block:
    """Source lines with indentation relative to the block."""

    lines: list[Line] = field(default_factory=list)

    def emit(self, text: str, node: int = -1, indent: int = 0) -> None:
        self.lines.append(Line(indent, text, node))

    def extend(self, other: Block, indent: int = 0) -> None:
        for line in other.lines:
            self.lines.append(Line(line.indent + indent, line.text, line.node))

    def body_into(self, other: Block, indent: int, node: int) -> None:
        """Append this block as the indented body of a compound statement in ``other``."""
        if not self.lines:
            other.emit("pass", node, indent)
        else:
            other.extend(self, indent)

    def render(self, base_indent: int = 0) -> tuple[list[str], list[int]]:
        texts = ["    " * (base_indent + line.indent) + line.text for line in self.lines]
        return texts, [line.node for line in self.lines]


_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def _sanitize(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_]", lambda m: f"_{ord(m.group()):x}_", name)


class Names:
    """IR names -> Python identifiers, by kind (``v_`` variables, ``b_`` buffers)."""

    def var(self, name: str) -> str:
        return "v_" + _sanitize(name)

    def buf(self, name: str) -> str:
        return "b_" + _sanitize(name)

    def dim(self, name: str, axis: int) -> str:
        return f"d_{_sanitize(name)}_{axis}"

    def stride(self, name: str, axis: int, rank: int) -> str:
        return "1" if axis == rank - 1 else f"s_{_sanitize(name)}_{axis}"


def is_simple(code: str) -> bool:
    """True for an identifier or a non-negative numeric literal (safe to repeat)."""
    return bool(_IDENT.match(code)) or code.replace(".", "", 1).isdigit()


def aff_code(aff: Aff, var: Callable[[str], str]) -> str:
    """Python source computing ``aff``; ``var`` gives the code for each variable."""
    parts: list[str] = []
    for atom, coeff in aff.terms:
        if isinstance(atom, str):
            text = var(atom)
        else:
            op = "//" if isinstance(atom, FloorDiv) else "%"
            text = f"(({aff_code(atom.expr, var)}) {op} {atom.divisor})"
        if coeff == 1:
            parts.append(f"+ {text}")
        elif coeff == -1:
            parts.append(f"- {text}")
        elif coeff < 0:
            parts.append(f"- {-coeff}*{text}")
        else:
            parts.append(f"+ {coeff}*{text}")
    if aff.constant or not parts:
        parts.append(f"+ {aff.constant}" if aff.constant >= 0 else f"- {-aff.constant}")
    text = " ".join(parts)
    text = text[2:] if text.startswith("+ ") else "-" + text[2:]
    return text if len(parts) == 1 and not text.startswith("-") else f"({text})"


def bound_code(affs: tuple[Aff, ...], combine: str, var: Callable[[str], str]) -> str:
    """``max(...)``/``min(...)`` of affine bounds (just the one when there is one)."""
    codes = [aff_code(a, var) for a in affs]
    return codes[0] if len(codes) == 1 else f"{combine}({', '.join(codes)})"


def constraint_code(c: Constraint, var: Callable[[str], str]) -> str:
    return f"{aff_code(c.lhs, var)} {c.op} {aff_code(c.rhs, var)}"


def linear_split(aff: Aff, name: str) -> tuple[Aff, int] | None:
    """``(base, coeff)`` with ``aff == base + coeff * name`` and ``name`` not in
    ``base``; ``None`` when ``name`` occurs inside a floordiv/mod."""
    coeff = 0
    rest: list[tuple[Atom, int]] = []
    for atom, c in aff.terms:
        if atom == name:
            coeff = c
        elif not isinstance(atom, str) and name in atom.expr.variables():
            return None
        else:
            rest.append((atom, c))
    return Aff(tuple(rest), aff.constant), coeff
