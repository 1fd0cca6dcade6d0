"""A jaxpr as a flat graph: equations over values, with calls inlined.

``jax.make_jaxpr`` gives a closed jaxpr whose equations may call other
jaxprs (``jit``/``pjit``, ``closed_call``, ``custom_jvp_call``,
``custom_vjp_call``, ``remat``). :func:`flatten` inlines every such call, so
the lowering and the partition see one list of :class:`Equation` objects in
execution order. Each equation keeps its JAX primitive and parameters, so an
equation with no lowering can still be run by JAX itself
(:meth:`Equation.run`).

Values (:class:`Value`) are identified by object, never by the jaxpr's
printed names (an inlined jaxpr called twice reuses its variables). Scalar
literals stay Python numbers (:class:`Literal`); the closed jaxpr's
constants (arrays a function closes over) become :class:`Value` objects
holding their array, passed to the compiled code like inputs.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Union

import jax
import numpy as np

try:  # the public homes (JAX >= 0.4.36); older releases keep them in jax.core / jax._src
    from jax.extend import core as jcore
    from jax.extend import source_info_util
except ImportError:  # pragma: no cover - depends on the installed JAX
    from jax import core as jcore  # type: ignore[no-redef]
    from jax._src import source_info_util  # type: ignore[no-redef]

_DropVar: Any = getattr(jcore, "DropVar", None) or getattr(jax.core, "DropVar", ())

INLINED = ("jit", "pjit", "closed_call", "core_call", "custom_jvp_call", "custom_vjp_call",
           "custom_vjp_call_jaxpr", "remat", "remat2", "checkpoint", "custom_lin")
"""Primitives that only call a jaxpr: replaced by the jaxpr's equations."""

_BODY_PARAMS = ("jaxpr", "call_jaxpr", "fun_jaxpr")


@dataclass(eq=False)
class Value:
    """An array value of the graph: shape, numpy dtype, a readable name, and
    for a constant its array."""

    shape: tuple[int, ...]
    dtype: np.dtype
    name: str
    constant: Any = None

    def __repr__(self) -> str:
        dims = ",".join(map(str, self.shape))
        return f"{self.name}:{self.dtype}[{dims}]"


@dataclass(frozen=True)
class Literal:
    """A scalar constant operand (``2.0:f32[]`` in a jaxpr)."""

    value: Union[int, float, bool]
    dtype: np.dtype


Atom = Union[Value, Literal]


@dataclass(eq=False)
class Equation:
    """One primitive application: ``outputs = primitive[params](*inputs)``.

    ``where`` is the user's source line (``file.py:12 (fn)``) when JAX recorded
    one; ``text`` the equation as the jaxpr prints it (first line)."""

    primitive: Any
    params: dict[str, Any]
    inputs: list[Atom]
    outputs: list[Value]
    where: str = ""
    text: str = ""

    @property
    def name(self) -> str:
        return str(self.primitive.name)

    def describe(self) -> str:
        """``text`` and ``where`` for messages: ``c:f32[4] = sort a (model.py:12 (f))``."""
        return f"{self.text}" + (f" ({self.where})" if self.where else "")

    def run(self, *args: Any) -> list[Any]:
        """Apply the primitive with JAX to ``args`` (arrays or scalars)."""
        bound = self.primitive.get_bind_params(self.params)
        if isinstance(bound, tuple):  # JAX before 0.7: (sub-functions, parameters)
            subfuns, params = bound
            args = (*subfuns, *args)
        else:
            params = bound
        result = self.primitive.bind(*args, **params)
        return list(result) if self.primitive.multiple_results else [result]


@dataclass
class Graph:
    """The flat graph of one traced function."""

    inputs: list[Value]
    outputs: list[Atom]
    equations: list[Equation]
    constants: list[Value] = field(default_factory=list)


class _Names:
    """Readable, unique value names: the primitive that makes a value, numbered."""

    def __init__(self) -> None:
        self.counts: dict[str, int] = {}

    def make(self, hint: str) -> str:
        count = self.counts.get(hint, 0)
        self.counts[hint] = count + 1
        return hint if count == 0 else f"{hint}{count}"


def _aval_value(aval: Any, name: str, constant: Any = None) -> Value:
    return Value(tuple(int(d) for d in aval.shape), np.dtype(aval.dtype), name, constant)


def _literal(value: Any, aval: Any) -> Literal:
    return _scalar(np.asarray(value), np.dtype(aval.dtype))


def _scalar(array: np.ndarray, dtype: np.dtype) -> Literal:
    """A 0-d array as a Python number (bf16 and f16 through float64: exact)."""
    if dtype == np.bool_:
        return Literal(bool(array), dtype)
    if np.issubdtype(dtype, np.integer):
        return Literal(int(array), dtype)
    return Literal(float(np.asarray(array).astype(np.float64)), dtype)


def _summary(eqn: Any) -> str:
    try:
        return str(source_info_util.summarize(eqn.source_info))
    except Exception:  # source info is a convenience, never a failure
        return ""


def _first_line(eqn: Any) -> str:
    text = str(eqn).strip().splitlines()
    return text[0] if text else eqn.primitive.name


def _body(eqn: Any) -> tuple[Any, Sequence[Any]] | None:
    """The jaxpr an inlined call runs and its constants, or ``None``."""
    if eqn.primitive.name not in INLINED:
        return None
    for key in _BODY_PARAMS:
        body = eqn.params.get(key)
        if isinstance(body, jcore.ClosedJaxpr):
            return body.jaxpr, body.consts
        if isinstance(body, jcore.Jaxpr):
            return body, ()
    return None


def flatten(closed: Any, names: Sequence[str] | None = None) -> Graph:
    """The flat graph of ``closed`` (a ``ClosedJaxpr``); ``names`` are hints
    for its inputs."""
    namer = _Names()
    inputs = [_aval_value(var.aval, namer.make(names[i] if names and i < len(names) else "arg"))
              for i, var in enumerate(closed.jaxpr.invars)]
    graph = Graph(inputs, [], [])
    graph.outputs = _inline(closed.jaxpr, closed.consts, list(inputs), graph, namer, "")
    return graph


def _inline(jaxpr: Any, consts: Sequence[Any], args: list[Atom], graph: Graph,
            namer: _Names, where: str) -> list[Atom]:
    """Append ``jaxpr``'s equations (calls inlined) to ``graph``; its results.
    ``where`` is the call site, for equations whose own source is JAX's."""
    env: dict[Any, Atom] = {}
    for var, value in zip(jaxpr.constvars, consts, strict=True):
        env[var] = _constant(value, var.aval, graph, namer)
    for var, arg in zip(jaxpr.invars, args, strict=True):
        env[var] = arg

    def read(atom: Any) -> Atom:
        if isinstance(atom, jcore.Literal):
            if np.shape(atom.val) == ():
                return _literal(atom.val, atom.aval)
            return _constant(atom.val, atom.aval, graph, namer)
        return env[atom]

    for eqn in jaxpr.eqns:
        operands = [read(a) for a in eqn.invars]
        here = _summary(eqn) or where
        body = _body(eqn)
        if body is not None:
            results = _inline(body[0], body[1], operands, graph, namer, here)
            for var, result in zip(eqn.outvars, results, strict=True):
                env[var] = result
            continue
        outputs = [_aval_value(var.aval, namer.make(eqn.primitive.name)) for var in eqn.outvars]
        graph.equations.append(Equation(eqn.primitive, dict(eqn.params), operands, outputs,
                                        here, _first_line(eqn)))
        for var, value in zip(eqn.outvars, outputs, strict=True):
            if not isinstance(var, _DropVar):
                env[var] = value
    return [read(a) for a in jaxpr.outvars]


def _constant(value: Any, aval: Any, graph: Graph, namer: _Names) -> Atom:
    array = np.asarray(jax.device_get(value))
    if array.shape == ():
        return _scalar(array, np.dtype(aval.dtype))
    constant = _aval_value(aval, namer.make("const"), array)
    graph.constants.append(constant)
    return constant
