"""Affine expressions and constraints over loop variables and size symbols.

An :class:`Aff` is kept in one canonical form: a sorted tuple of
``(atom, coefficient)`` terms plus a constant, where an atom is a variable
name (``str``) or a :class:`FloorDiv` / :class:`Mod` of another ``Aff`` by a
positive integer constant. Two equal affine functions built the same way
compare equal, which is what makes ``parse(print(ir)) == ir`` hold.

Build them with operators::

    i, j = Aff.var("i"), Aff.var("j")
    e = 2 * i + j - 1          # Aff
    q = (i + 3) // 4           # floordiv by a constant
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Union

IntLike = Union[int, "Aff"]


@dataclass(frozen=True)
class FloorDiv:
    """``floor(expr / divisor)`` with ``divisor > 0``."""

    expr: Aff
    divisor: int

    def __str__(self) -> str:
        return f"{_wrap(self.expr)} // {self.divisor}"


@dataclass(frozen=True)
class Mod:
    """``expr - divisor * floor(expr / divisor)`` (always in ``[0, divisor)``)."""

    expr: Aff
    divisor: int

    def __str__(self) -> str:
        return f"{_wrap(self.expr)} % {self.divisor}"


Atom = Union[str, FloorDiv, Mod]


def _atom_key(atom: Atom) -> tuple[int, str]:
    if isinstance(atom, str):
        return (0, atom)
    return (1 if isinstance(atom, FloorDiv) else 2, str(atom))


def _wrap(expr: Aff) -> str:
    text = str(expr)
    simple = len(expr.terms) == 1 and expr.constant == 0 and expr.terms[0][1] == 1 \
        and isinstance(expr.terms[0][0], str)
    return text if simple or (not expr.terms) else f"({text})"


def _merged_floordiv(expr: Aff, divisor: int) -> Aff:
    """``expr // divisor``, merged into ``expr``'s own floor division when
    ``expr`` is exactly one (``(e // a) // b == e // (a*b)`` for ``a, b > 0``)."""
    if expr.constant == 0 and len(expr.terms) == 1:
        (atom, c), = expr.terms
        if c == 1 and isinstance(atom, FloorDiv):
            return atom.expr // (atom.divisor * divisor)
    return expr // divisor


@dataclass(frozen=True)
class Aff:
    """A canonical affine expression ``sum(coeff * atom) + constant``."""

    terms: tuple[tuple[Atom, int], ...] = ()
    constant: int = 0

    # -- construction -----------------------------------------------------
    @staticmethod
    def var(name: str) -> Aff:
        return Aff(((name, 1),), 0)

    @staticmethod
    def const(value: int) -> Aff:
        return Aff((), int(value))

    @staticmethod
    def lift(value: IntLike) -> Aff:
        """An ``Aff`` from an int or an ``Aff``."""
        if isinstance(value, Aff):
            return value
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"not an affine value: {value!r}")
        return Aff.const(value)

    @staticmethod
    def _from_dict(coeffs: Mapping[Atom, int], constant: int) -> Aff:
        terms = tuple(sorted(((a, c) for a, c in coeffs.items() if c != 0),
                             key=lambda term: _atom_key(term[0])))
        return Aff(terms, constant)

    def _coeffs(self) -> dict[Atom, int]:
        return dict(self.terms)

    # -- arithmetic -------------------------------------------------------
    def __add__(self, other: IntLike) -> Aff:
        other = Aff.lift(other)
        coeffs = self._coeffs()
        for atom, c in other.terms:
            coeffs[atom] = coeffs.get(atom, 0) + c
        return Aff._from_dict(coeffs, self.constant + other.constant)

    __radd__ = __add__

    def __neg__(self) -> Aff:
        return self * -1

    def __sub__(self, other: IntLike) -> Aff:
        return self + (-Aff.lift(other))

    def __rsub__(self, other: IntLike) -> Aff:
        return Aff.lift(other) - self

    def __mul__(self, factor: IntLike) -> Aff:
        if isinstance(factor, Aff):
            if factor.is_constant:
                factor = factor.constant
            elif self.is_constant:
                return factor * self.constant
            else:
                raise TypeError(f"product of two non-constant affine expressions: ({self}) * ({factor})")
        if isinstance(factor, bool) or not isinstance(factor, int):
            raise TypeError(f"affine expressions multiply by integers only, not {factor!r}")
        return Aff._from_dict({a: c * factor for a, c in self.terms}, self.constant * factor)

    __rmul__ = __mul__

    def __floordiv__(self, divisor: int) -> Aff:
        divisor = _positive_divisor(divisor, "//")
        if divisor == 1:
            return self
        if all(c % divisor == 0 for _, c in self.terms):
            # floor((d*e + c) / d) == e + floor(c / d) for integer e
            exact = Aff._from_dict({a: c // divisor for a, c in self.terms}, 0)
            return exact + self.constant // divisor
        return Aff(((FloorDiv(self, divisor), 1),), 0)

    def __mod__(self, divisor: int) -> Aff:
        divisor = _positive_divisor(divisor, "%")
        if all(c % divisor == 0 for _, c in self.terms):
            return Aff.const(self.constant % divisor)
        return Aff(((Mod(self, divisor), 1),), 0)

    # -- queries ----------------------------------------------------------
    @property
    def is_constant(self) -> bool:
        return not self.terms

    def coefficient(self, name: str) -> int:
        """The coefficient of variable ``name`` outside any floordiv/mod."""
        return self._coeffs().get(name, 0)

    def variables(self) -> frozenset[str]:
        """Every variable name, including those inside floordiv/mod."""
        names: set[str] = set()
        for atom, _ in self.terms:
            if isinstance(atom, str):
                names.add(atom)
            else:
                names |= atom.expr.variables()
        return frozenset(names)

    @property
    def is_linear(self) -> bool:
        """True when no floordiv/mod occurs."""
        return all(isinstance(atom, str) for atom, _ in self.terms)

    def evaluate(self, env: Mapping[str, int]) -> int:
        """The integer value with every variable taken from ``env``."""
        total = self.constant
        for atom, c in self.terms:
            if isinstance(atom, str):
                total += c * env[atom]
            elif isinstance(atom, FloorDiv):
                total += c * (atom.expr.evaluate(env) // atom.divisor)
            else:
                total += c * (atom.expr.evaluate(env) % atom.divisor)
        return total

    def substitute(self, mapping: Mapping[str, IntLike]) -> Aff:
        """Replace variables by affine expressions (also inside floordiv/mod)."""
        result = Aff.const(self.constant)
        for atom, c in self.terms:
            if isinstance(atom, str):
                result = result + Aff.lift(mapping.get(atom, Aff.var(atom))) * c
            elif isinstance(atom, FloorDiv):
                result = result + (atom.expr.substitute(mapping) // atom.divisor) * c
            else:
                result = result + (atom.expr.substitute(mapping) % atom.divisor) * c
        return result

    def rename(self, mapping: Mapping[str, str]) -> Aff:
        """Every variable ``v`` written ``mapping[v]`` (the others kept). When the
        renaming keeps this expression's variables distinct (the usual case)
        only the names change: the terms are re-sorted, nothing re-derived;
        else (two variables made one) it is :meth:`substitute`, which folds."""
        names = self.variables()
        if not names or not any(name in mapping for name in names):
            return self
        if len({mapping.get(name, name) for name in names}) < len(names):
            return self.substitute({old: Aff.var(new) for old, new in mapping.items()})
        return self._renamed(mapping)

    def _renamed(self, mapping: Mapping[str, str]) -> Aff:
        """:meth:`rename` by a mapping that keeps the variables distinct."""
        terms: list[tuple[Atom, int]] = []
        for atom, c in self.terms:
            if isinstance(atom, str):
                terms.append((mapping.get(atom, atom), c))
            else:
                terms.append((type(atom)(atom.expr._renamed(mapping), atom.divisor), c))
        return Aff(tuple(sorted(terms, key=lambda term: _atom_key(term[0]))), self.constant)

    def expanded(self) -> Aff:
        """The same value with every ``e % d`` written ``e - d*(e // d)`` and
        nested floor divisions merged (``(e // a) // b == e // (a*b)``), so
        that digit sums cancel: ``(k // 9)*9 + ((k // 3) % 3)*3 + k % 3`` is
        ``k`` (the address of a gathered element, ``polyir.llvm.lower``)."""
        result = Aff.const(self.constant)
        for atom, c in self.terms:
            if isinstance(atom, str):
                result = result + Aff.var(atom) * c
            elif isinstance(atom, FloorDiv):
                result = result + _merged_floordiv(atom.expr.expanded(), atom.divisor) * c
            else:
                inner = atom.expr.expanded()
                result = result + (inner - _merged_floordiv(inner, atom.divisor) * atom.divisor) * c
        return result

    def atom_count(self) -> int:
        """How many floordiv/mod atoms the expression holds, nested ones included."""
        return sum(0 if isinstance(atom, str) else 1 + atom.expr.atom_count()
                   for atom, _ in self.terms)

    # -- printing ---------------------------------------------------------
    def __str__(self) -> str:
        parts: list[str] = []
        for atom, c in self.terms:
            atom_text = atom if isinstance(atom, str) else str(atom)
            if not isinstance(atom, str) and (abs(c) != 1 or (c < 0 and not parts)):
                atom_text = f"({atom_text})"
            magnitude = abs(c)
            body = atom_text if magnitude == 1 else f"{magnitude}*{atom_text}"
            if not parts:
                parts.append(body if c > 0 else f"-{body}")
            else:
                parts.append(f" + {body}" if c > 0 else f" - {body}")
        if self.constant or not parts:
            if not parts:
                parts.append(str(self.constant))
            elif self.constant > 0:
                parts.append(f" + {self.constant}")
            else:
                parts.append(f" - {-self.constant}")
        return "".join(parts)

    def __repr__(self) -> str:
        return f"Aff({str(self)!r})"


def _positive_divisor(divisor: IntLike, op: str) -> int:
    if isinstance(divisor, Aff):
        if not divisor.is_constant:
            raise TypeError(f"affine '{op}' needs a constant divisor, not {divisor}")
        divisor = divisor.constant
    if isinstance(divisor, bool) or not isinstance(divisor, int) or divisor <= 0:
        raise TypeError(f"affine '{op}' needs a positive integer divisor, not {divisor!r}")
    return divisor


COMPARISONS = ("<", "<=", ">", ">=", "==")


@dataclass(frozen=True)
class Constraint:
    """``lhs op rhs`` with ``op`` one of ``< <= > >= ==``; an affine condition."""

    lhs: Aff
    op: str
    rhs: Aff

    def __post_init__(self) -> None:
        if self.op not in COMPARISONS:
            raise ValueError(f"unknown comparison {self.op!r}; expected one of {COMPARISONS}")

    def holds(self, env: Mapping[str, int]) -> bool:
        a, b = self.lhs.evaluate(env), self.rhs.evaluate(env)
        return {"<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b, "==": a == b}[self.op]

    def as_nonnegative(self) -> tuple[Aff, bool]:
        """``(e, is_equality)`` with the constraint meaning ``e >= 0`` or ``e == 0``."""
        if self.op == "==":
            return self.lhs - self.rhs, True
        if self.op == ">=":
            return self.lhs - self.rhs, False
        if self.op == ">":
            return self.lhs - self.rhs - 1, False
        if self.op == "<=":
            return self.rhs - self.lhs, False
        return self.rhs - self.lhs - 1, False

    def variables(self) -> frozenset[str]:
        return self.lhs.variables() | self.rhs.variables()

    def substitute(self, mapping: Mapping[str, IntLike]) -> Constraint:
        return Constraint(self.lhs.substitute(mapping), self.op, self.rhs.substitute(mapping))

    def __str__(self) -> str:
        return f"{self.lhs} {self.op} {self.rhs}"
