"""Partition a traced graph, build its segments, and run them.

Equations the lowering table covers are grouped into segments (one polyir
function each, by :func:`~polyir.frontends.lowering.partition.group_by_fallback_depth`,
as the fx frontend groups nodes); the others run through JAX itself, each run
of them as one ``jax.jit`` of their primitives. Values move between the two as host
arrays: numpy views of JAX CPU arrays going in, and results allocated on
64-byte boundaries so JAX takes the large ones over through DLPack without a
copy coming out.
"""
from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Union

import jax
import jax.numpy as jnp
import numpy as np

from polyir.errors import UnsupportedOp
from polyir.frontends.jax.graph import Atom, Equation, Graph, Literal, Value
from polyir.frontends.jax.lower import lower_segment, unsupported_reason
from polyir.frontends.lowering.partition import group_by_fallback_depth
from polyir.frontends.lowering.registry import LoweredSegment


class PolyirJaxFallbackWarning(UserWarning):
    """Some primitives of a function compiled by ``polyir.jax.jit`` have no
    lowering and run through JAX."""


@dataclass
class Segment:
    """Consecutive supported equations compiled as one polyir function."""

    equations: list[Equation]
    inputs: list[Value] = field(default_factory=list)
    outputs: list[Value] = field(default_factory=list)
    lowered: LoweredSegment | None = None
    executable: Any = None


@dataclass
class JaxStep:
    """An equation run by JAX (``reason``: why polyir does not lower it)."""

    equation: Equation
    reason: str


@dataclass
class JaxSegment:
    """Consecutive equations run by JAX, as one ``jax.jit`` of their primitives."""

    steps: list[JaxStep]
    inputs: list[Value] = field(default_factory=list)
    outputs: list[Value] = field(default_factory=list)
    function: Any = None

    @property
    def equations(self) -> list[Equation]:
        return [step.equation for step in self.steps]

    def compile(self) -> None:
        """``function``: the equations' primitives applied in order, under ``jax.jit``."""
        equations, inputs, outputs = self.equations, self.inputs, self.outputs

        def evaluate(*arrays: Any) -> list[Any]:
            env: dict[Value, Any] = dict(zip(inputs, arrays, strict=True))
            for eqn in equations:
                operands = [a.value if isinstance(a, Literal) else env[a] for a in eqn.inputs]
                for value, result in zip(eqn.outputs, eqn.run(*operands), strict=True):
                    env[value] = result
            return [env[v] for v in outputs]
        self.function = jax.jit(evaluate)


Step = Union[Segment, JaxSegment]


def partition(graph: Graph) -> list[Step]:
    """Steps in execution order: segments of supported equations, compiled by
    polyir, and runs of the other equations, run by JAX."""
    producer: dict[Value, Equation] = {}
    for eqn in graph.equations:
        for value in eqn.outputs:
            producer[value] = eqn
    reasons = {eqn: unsupported_reason(eqn) for eqn in graph.equations}

    def inputs_of(eqn: Equation) -> list[Equation]:
        return [producer[a] for a in eqn.inputs if isinstance(a, Value) and a in producer]

    steps: list[Step] = []
    for compiled, members in group_by_fallback_depth(graph.equations, inputs_of, reasons):
        if compiled:
            steps.append(Segment(members))
        else:
            jax_step = JaxStep(members[0], reasons[members[0]] or "")
            if steps and isinstance(steps[-1], JaxSegment):
                steps[-1].steps.append(jax_step)
            else:
                steps.append(JaxSegment([jax_step]))
    used_by: dict[Value, set[int]] = {}
    for position, step in enumerate(steps):
        for eqn in step.equations:
            for atom in eqn.inputs:
                if isinstance(atom, Value):
                    used_by.setdefault(atom, set()).add(position)
    graph_outputs = {a for a in graph.outputs if isinstance(a, Value)}
    for position, step in enumerate(steps):
        made = [v for eqn in step.equations for v in eqn.outputs]
        made_here = set(made)
        step.inputs = list(dict.fromkeys(a for eqn in step.equations for a in eqn.inputs
                                         if isinstance(a, Value) and a not in made_here))
        step.outputs = [v for v in made if v in graph_outputs or used_by.get(v, set()) - {position}]
    return [s for s in steps if s.outputs]


def build_module(module: Any, target: Any, pipeline: str | None) -> Any:
    """The one place a lowered module becomes an executable: the driver's
    ``compile_ir`` (default pipeline when ``pipeline`` is None) where it
    exists, else ``pipeline`` through ``polyir.transform`` and ``driver.build``."""
    from polyir import driver
    from polyir.ir.verifier import verify

    compile_ir = getattr(driver, "compile_ir", None)
    if compile_ir is not None:  # it verifies the module itself
        return compile_ir(module, target, pipeline=pipeline)
    verify(module)
    if pipeline:
        from polyir.passes import transform
        module = transform(module, pipeline)
    return driver.build(module, target)


# ------------------------------------------------------------------- arrays
def aligned_empty(shape: Sequence[int], dtype: Any, alignment: int = 64) -> np.ndarray:
    """An uninitialised C-contiguous array whose data starts on an
    ``alignment``-byte boundary (what XLA needs to adopt it without a copy)."""
    dtype = np.dtype(dtype)
    nbytes = math.prod(int(s) for s in shape) * dtype.itemsize
    raw = np.empty(nbytes + alignment, dtype=np.uint8)
    offset = (-raw.ctypes.data) % alignment
    return raw[offset:offset + nbytes].view(dtype).reshape(tuple(shape))


_BF16 = np.dtype(jnp.bfloat16)

ADOPT_BYTES = 1 << 18
"""Results from this size up are handed to JAX through DLPack, without a copy;
smaller ones go through ``jnp.asarray`` (which may copy), cheaper than DLPack's
fixed overhead (about 100 us a result on the development machine, against
50-80 us for copying up to 256 KiB)."""


def _is_bf16(dtype: Any) -> bool:
    return bool(dtype == _BF16)


def host_array(value: Any, dtype: Any) -> np.ndarray:
    """``value`` as the host array polyir code reads: a numpy view of a JAX CPU
    array (no copy), bf16 widened to float32 (polyir holds bf16 so)."""
    array = np.asarray(value)
    if array.dtype != np.dtype(dtype):
        array = array.astype(dtype)
    if _is_bf16(array.dtype):
        array = array.astype(np.float32)
    return array


def to_jax(value: Any, dtype: Any, adopt: bool = True) -> Any:
    """A JAX array of ``value``: JAX arrays as they are; with ``adopt`` (a
    result polyir allocated), an aligned host array of at least
    :data:`ADOPT_BYTES` through DLPack without a copy, a smaller one through
    ``jnp.asarray``; without ``adopt`` (the caller's own array) a copy. bf16
    results are narrowed from float32."""
    if isinstance(value, jax.Array):
        return value
    if not adopt:  # a caller's array: JAX may alias an aligned one, so copy it
        return jnp.array(value, dtype=dtype, copy=True)
    if _is_bf16(dtype) or not isinstance(value, np.ndarray) or value.nbytes < ADOPT_BYTES:
        return jnp.asarray(value, dtype=dtype)
    if value.flags.c_contiguous and value.flags.writeable and value.ctypes.data % 64 == 0:
        try:
            return jax.dlpack.from_dlpack(value)
        except (BufferError, TypeError, RuntimeError):  # a layout JAX will not share
            pass
    return jnp.asarray(value)


# ----------------------------------------------------------------- the plan
@dataclass
class Plan:
    """Everything compiled for one signature of a traced function."""

    graph: Graph
    steps: list[Step]
    out_tree: Any
    target: Any

    @property
    def segments(self) -> list[Segment]:
        return [s for s in self.steps if isinstance(s, Segment)]

    @property
    def fallbacks(self) -> list[JaxStep]:
        return [step for s in self.steps if isinstance(s, JaxSegment) for step in s.steps]

    def run(self, leaves: Sequence[Any]) -> list[Any]:
        """The flat outputs (JAX arrays) for the flat inputs ``leaves``."""
        env: dict[Value, Any] = {}
        for value, leaf in zip(self.graph.inputs, leaves, strict=True):
            env[value] = leaf
        for constant in self.graph.constants:
            env[constant] = constant.constant

        made: set[Atom] = set()

        def read(atom: Atom) -> Any:
            return atom.value if isinstance(atom, Literal) else env[atom]

        for step in self.steps:
            if isinstance(step, JaxSegment):
                results = step.function(*[_jax_operand(env[v], v) for v in step.inputs])
                for value, result in zip(step.outputs, results, strict=True):
                    env[value] = result
                continue
            arrays = [host_array(env[v], v.dtype) for v in step.inputs]
            outs = [aligned_empty(v.shape, np.float32 if _is_bf16(v.dtype) else v.dtype)
                    for v in step.outputs]
            step.executable(*arrays, *outs)
            for value, out in zip(step.outputs, outs, strict=True):
                env[value] = out
                made.add(value)
        # Only buffers polyir wrote are adopted: a caller's array returned as it
        # came in is copied, so changing it later cannot change the result.
        return [to_jax(read(atom), atom.dtype, adopt=atom in made) for atom in self.graph.outputs]


def _jax_operand(value: Any, atom: Atom) -> Any:
    """An operand for a primitive run by JAX: JAX arrays as they are, the rest
    (host arrays, numbers) converted to the equation's dtype."""
    if isinstance(value, jax.Array):
        return value
    return jnp.asarray(value, dtype=atom.dtype)


def build_plan(graph: Graph, out_tree: Any, *, target: Any, fallback: bool,
               pipeline: str | None, stacklevel: int = 4) -> Plan:
    """Partition ``graph``, lower and build its segments; warn once (or raise
    ``UnsupportedOp`` when ``fallback`` is false) for equations left to JAX."""
    plan = Plan(graph, partition(graph), out_tree, target)
    unsupported = plan.fallbacks
    if unsupported and not fallback:
        first = unsupported[0]
        raise UnsupportedOp(first.equation.name, first.equation.describe(), first.reason)
    for step in plan.steps:
        if isinstance(step, JaxSegment):
            step.compile()
    for index, segment in enumerate(plan.segments):
        name = "forward" if len(plan.segments) == 1 else f"segment{index}"
        segment.lowered = lower_segment(segment.equations, segment.inputs, segment.outputs, name)
        segment.executable = build_module(segment.lowered.module, target, pipeline)
    if unsupported:
        names = sorted({s.equation.name for s in unsupported})
        where = "; ".join(f"{s.equation.describe()} [{s.reason}]" for s in unsupported)
        warnings.warn(f"polyir.jax.jit: primitives without a lowering run in JAX: "
                      f"{', '.join(names)}; equations: {where}", PolyirJaxFallbackWarning,
                      stacklevel=stacklevel)
    return plan
