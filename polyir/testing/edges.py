"""Hypothesis strategies for the edges ``programs()`` does not draw.

``programs()`` makes programs that are in bounds for sizes >= 1 and keep
their values finite and well-conditioned, so it never meets the cases that
found issue 16's bugs. These strategies do, for differential tests (the
interpreter against native code, bit for bit):

* :func:`edge_programs` draws one-loop programs ``Y[...] = <expr>`` over
  ``A``, ``B`` (float) or ``I``, ``J`` (int) whose expressions combine
  ``+ - * /``, ``max``/``min``, ``floor``/``ceil``, floor division, ``abs``, ``neg``,
  selects, integer ``/`` and ``%`` (divisor made non-zero by a select) and
  constants among signed zeros, infinities, NaN, subnormals and the extremes
  of the type; subscripts are ``i``, the reversed ``N - 1 - i`` and the
  constants ``0`` and ``-1 + N``, so a size of zero makes a constant
  subscript out of bounds (a refusal both sides must agree on).
* :func:`edge_reductions` draws one-loop reductions ``Y[0] = op(Y[0], e)``
  (``max``/``min``, and ``+``/``*`` on ``i64``, which wrap the same in any
  order) over the same edge values, for ``mark-parallel{accept_reassociation=true}``
  against the serial order.
* :func:`edge_sizes` draws size values including ``0``.
* :func:`edge_arrays` draws array contents full of the same edge values.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from hypothesis import strategies as st

FLOAT_EDGES = (0.0, -0.0, float("inf"), float("-inf"), float("nan"), 5e-324, -5e-324,
               1e-310, 1.0, -1.0, 0.5, -0.5, 1.5, -2.5, 1e300, -1e300)
"""Float constants and values the edge strategies favour (f32 rounds the
f64-only ones to zeros and infinities, edges too)."""

INT_EDGES = (0, 1, -1, 2, -2, 7, -7, 2**31 - 1, -2**31, 2**62, -2**62)
"""Integer values the edge strategies favour (``i64``; products may wrap,
which both backends do in two's complement)."""

SUBSCRIPTS = ("i", "-1 + N - i", "0", "-1 + N")

__all__ = ["FLOAT_EDGES", "INT_EDGES", "edge_arrays", "edge_programs", "edge_reductions", "edge_sizes"]


def edge_sizes(max_size: int = 6) -> st.SearchStrategy[int]:
    """Sizes ``0..max_size`` (``0`` first, so failures shrink to empty arrays)."""
    return st.integers(0, max_size)


def edge_arrays(dtype: str, size: int) -> st.SearchStrategy[np.ndarray]:
    """Arrays of ``size`` elements of ``dtype`` (``f32``, ``f64``, ``i64``),
    mostly edge values (``FLOAT_EDGES`` / ``INT_EDGES``), some arbitrary."""
    if dtype == "i64":
        element: st.SearchStrategy[Any] = st.one_of(st.sampled_from(INT_EDGES),
                                                     st.integers(-2**63, 2**63 - 1))
        numpy_type: Any = np.int64
    else:
        arbitrary = st.floats(width=32) if dtype == "f32" else st.floats(width=64)
        element = st.one_of(st.sampled_from(FLOAT_EDGES), arbitrary)
        numpy_type = np.float32 if dtype == "f32" else np.float64

    def as_array(values: list[Any]) -> np.ndarray:
        with np.errstate(over="ignore"):     # f64 extremes become f32 infinities
            return np.array(values, dtype=np.int64 if numpy_type is np.int64
                            else np.float64).astype(numpy_type)

    return st.lists(element, min_size=size, max_size=size).map(as_array)


def _float_literal(value: float, dtype: str) -> str:
    text = repr(float(value))
    if text in ("inf", "-inf", "nan"):
        return f"{text}:{dtype}" if dtype != "f32" else text
    return text if dtype == "f32" else f"{text}:{dtype}"


def _expression(draw: Callable[[st.SearchStrategy[Any]], Any], dtype: str, depth: int) -> str:
    integer = dtype == "i64"
    names = ("I", "J") if integer else ("A", "B")
    if depth == 0 or draw(st.integers(0, 3)) == 0:
        if draw(st.booleans()):
            return f"{draw(st.sampled_from(names))}[{draw(st.sampled_from(SUBSCRIPTS))}]"
        if integer:
            return str(draw(st.sampled_from(INT_EDGES)))
        return _float_literal(draw(st.sampled_from(FLOAT_EDGES)), dtype)
    a = _expression(draw, dtype, depth - 1)
    b = _expression(draw, dtype, depth - 1)
    ops = ["+", "-", "*", "max", "min", "abs", "neg", "select"]
    ops += ["/", "%"] if integer else ["/", "floor", "ceil", "floordiv"]
    op = draw(st.sampled_from(ops))
    if op in ("+", "-", "*"):
        return f"({a} {op} {b})"
    if op in ("/", "%") and integer:
        zero = "0"
        return f"({a} {op} select({b} == {zero}, 1, {b}))"
    if op == "/":
        return f"({a} / {b})"
    if op == "floordiv":             # torch's rounding_mode="floor" over NaN, infinities, zeros
        return f"floor({a} / {b})"
    if op in ("max", "min"):
        return f"{op}({a}, {b})"
    if op == "select":
        compare = draw(st.sampled_from(("<", "<=", "==", "!=")))
        return f"select({a} {compare} {b}, {a}, {b})"
    return f"{op}({a})"


def edge_programs(dtype: str = "f64", max_depth: int = 3) -> st.SearchStrategy[str]:
    """IR text of ``func f(Y: T[N], A: T[N], B: T[N])`` (``I``, ``J`` for
    ``dtype="i64"``) with one loop ``for i = 0 to N`` storing an edge
    expression (see the module docstring) at ``Y[i]`` or ``Y[-1 + N - i]``."""
    if dtype not in ("f32", "f64", "i64"):
        raise ValueError(f"edge_programs() takes f32, f64 or i64, not {dtype!r}")
    names = ("I", "J") if dtype == "i64" else ("A", "B")

    @st.composite
    def draw_program(draw: Callable[[st.SearchStrategy[Any]], Any]) -> str:
        expression = _expression(draw, dtype, max_depth)
        target = draw(st.sampled_from(("i", "-1 + N - i")))
        return (f"func f(Y: {dtype}[N], {names[0]}: {dtype}[N], {names[1]}: {dtype}[N]) {{\n"
                f"  for i = 0 to N {{\n    S0: Y[{target}] = {expression}\n  }}\n}}\n")

    return draw_program()


def edge_reductions(dtype: str = "f64") -> st.SearchStrategy[str]:
    """IR text of ``func r(Y: T[1], A: T[N])`` whose one loop ``for k = 0 to N``
    reduces into ``Y[0]`` with an operator whose result does not depend on the
    order of the updates: ``max``/``min`` (NaN and infinities included; only
    the sign of a zero result may differ, see docs/ir.md), and for ``i64``
    also wrapping ``+`` and ``*``. The element is ``A[k]``, ``A[-1 + N - k]``,
    ``-A[k]`` or ``abs(A[k])``."""
    if dtype not in ("f32", "f64", "i64"):
        raise ValueError(f"edge_reductions() takes f32, f64 or i64, not {dtype!r}")
    operators = ("max", "min", "+", "*") if dtype == "i64" else ("max", "min")

    @st.composite
    def draw_program(draw: Callable[[st.SearchStrategy[Any]], Any]) -> str:
        op = draw(st.sampled_from(operators))
        element = draw(st.sampled_from(("A[k]", "A[-1 + N - k]", "-A[k]", "abs(A[k])")))
        update = f"Y[0] {op} {element}" if op in ("+", "*") else f"{op}(Y[0], {element})"
        return (f"func r(Y: {dtype}[1], A: {dtype}[N]) {{\n"
                f"  for k = 0 to N {{\n    S0: Y[0] = {update}\n  }}\n}}\n")

    return draw_program()
