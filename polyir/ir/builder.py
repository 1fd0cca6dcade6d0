"""Small helpers for writing IR by hand (tests, frontends, examples).

Anything that has a text form can be given as text, parsed with the IR
parser (errors are ``polyir.ParseError``)::

    from polyir.ir.builder import buf, sym, loop, stmt, func, module

    gemm = module(func("gemm", [buf("C", "f32", "N", "M"), buf("A", "f32", "N", "K"),
                                buf("B", "f32", "K", "M")], [
        loop("i", 0, "N", [
            loop("j", 0, "M", [
                loop("k", 0, "K", [
                    stmt("S0: C[i, j] = C[i, j] + A[i, k] * B[k, j]"),
                ]),
            ], parallel=True),
        ]),
    ]))

Bounds, dimensions and grid sizes accept an ``int``, an affine string or an
``Aff``; a lower (upper) bound may also be a list, meaning ``max`` (``min``).
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Union

from polyir.ir.affine import Aff, Constraint
from polyir.ir.names import fresh_name, names_in  # noqa: F401  (re-exported)
from polyir.ir.nodes import (
    Buffer,
    Expr,
    For,
    Function,
    If,
    Module,
    Node,
    Param,
    Symbol,
)
from polyir.ir.parser import parse_affine, parse_constraint, parse_expr, parse_param, parse_statement
from polyir.ir.types import DType, MemorySpace

AffLike = Union[int, str, Aff]
BoundLike = Union[AffLike, Sequence[AffLike]]

__all__ = ["aff", "expr", "stmt", "buf", "sym", "param", "loop", "if_", "func", "kernel", "module",
           "guard", "fresh_name", "names_in"]


def aff(value: AffLike) -> Aff:
    """An ``Aff`` from an int, an affine string (``"2*i + j // 4"``) or an ``Aff``."""
    if isinstance(value, Aff):
        return value
    if isinstance(value, str):
        return parse_affine(value)
    return Aff.lift(value)


def expr(text: str) -> Expr:
    """A value expression from text: ``expr("A[i, k] * B[k, j]")``.

    Bare names are ``Var`` (i64), ``name[...]`` are loads; affine subscripts
    become ``Aff``.
    """
    return parse_expr(text)


def stmt(text: str) -> Node:
    """One statement from text: ``stmt("S0: C[i, j] = C[i, j] + A[i, k] * B[k, j]")``.

    Also accepts fragment operations, ``barrier`` and ``launch ...``.
    """
    return parse_statement(text)


def buf(name: str, dtype: DType | str, *dims: AffLike,
        space: MemorySpace | str = MemorySpace.GLOBAL) -> Buffer:
    """A buffer: ``buf("A", "f32", "N", 16)``; no dims makes a 0-d scalar."""
    return Buffer(name, DType(dtype) if isinstance(dtype, str) else dtype,
                  tuple(aff(d) for d in dims),
                  MemorySpace(space) if isinstance(space, str) else space)


def sym(name: str) -> Symbol:
    """An explicit integer size parameter."""
    return Symbol(name)


def param(value: Param | str) -> Param:
    """A parameter from a ``Buffer``/``Symbol`` or text (``"A: f32[N]"``, ``"n: index"``)."""
    return parse_param(value) if isinstance(value, str) else value


def _bound(value: BoundLike) -> tuple[Aff, ...]:
    if isinstance(value, (list, tuple)):
        return tuple(aff(v) for v in value)
    return (aff(value),)  # type: ignore[arg-type]


def loop(var: str, lower: BoundLike, upper: BoundLike, body: Iterable[Node] = (), *,
         step: int = 1, parallel: bool = False, mapping: str | None = None,
         unroll: int = 0, vectorize: int = 0) -> For:
    """``for var = lower to upper step step { body }`` (``upper`` exclusive)."""
    return For(var, _bound(lower), _bound(upper), tuple(body), step=step, parallel=parallel,
               mapping=mapping, unroll=unroll, vectorize=vectorize)


def if_(conditions: Iterable[Constraint | str], then: Iterable[Node],
        otherwise: Iterable[Node] = ()) -> If:
    """``if (c1, c2, ...) { then } else { otherwise }``; conditions may be text like ``"i < j"``."""
    parsed = tuple(parse_constraint(c) if isinstance(c, str) else c for c in conditions)
    return If(parsed, tuple(then), tuple(otherwise))


def func(name: str, params: Iterable[Param | str], body: Iterable[Node],
         locals: Iterable[Buffer] = (), kind: str = "host") -> Function:  # noqa: A002
    """A function; ``params`` may mix ``Buffer``/``Symbol`` objects and declaration text."""
    return Function(name, tuple(param(p) for p in params), tuple(body), tuple(locals), kind)


def kernel(name: str, params: Iterable[Param | str], body: Iterable[Node],
           locals: Iterable[Buffer] = ()) -> Function:
    """A GPU kernel function (``kind="kernel"``), run through ``launch``."""
    return func(name, params, body, locals, kind="kernel")


def module(*functions: Function) -> Module:
    """A module of ``functions`` in order (the entry is the first host function)."""
    return Module(tuple(functions))


# ----------------------------------------------------------------- guards
def guard(constraints: Iterable[Constraint], body: Iterable[Node]) -> tuple[Node, ...]:
    """``body`` under ``if (constraints)`` (no ``If`` when there are none)."""
    conditions, nodes = tuple(constraints), tuple(body)
    if not conditions:
        return nodes
    return (If(conditions, nodes),)
