"""What a lowering rule works with: tensor values, typed expressions, loop nests.

A lowering rule turns one graph operator into loop nests over named buffers. It
reads its operands as :class:`TensorValue` objects (a buffer seen through an
index map, so views cost nothing), asks the :class:`LoweringContext` for the
buffer its result goes to, and emits ``For`` nests whose statements write that
buffer. Shapes are Python ints taken from the example inputs or, when a
frontend traces with symbolic sizes (the ATen table with ``dynamic=True``),
also symbolic sizes that the context's :class:`~polyir.frontends.lowering.sizes.SizeTable`
turns into symbolic extents where they reach the IR (loop bounds, buffer
shapes, index maps, counts). No framework is imported: the ATen and jaxpr
tables share it.
"""
from __future__ import annotations

import keyword
import re
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Union

import numpy as np

from polyir.errors import UnsupportedOp
from polyir.frontends.lowering.sizes import Size, SizeTable, size_aff, static_dims
from polyir.ir.affine import Aff, Constraint
from polyir.ir.nodes import (
    CALLS,
    Assign,
    Buffer,
    Cast,
    Compare,
    Const,
    Expr,
    For,
    Index,
    Load,
    Node,
)
from polyir.ir.types import DType, MemorySpace

Shape = tuple[Size, ...]
IndexMap = Callable[[Sequence[Aff]], tuple[Index, ...]]
Scalar = Union[int, float, bool]

def accumulator_dtype(dtype: DType) -> DType:
    """The type sums of ``dtype`` values are accumulated in (f16/bf16 -> f32)."""
    return DType.F32 if dtype in (DType.F16, DType.BF16) else dtype


# --------------------------------------------------------------- expressions
def expr_dtype(expr: Expr, buffers: dict[str, Buffer]) -> DType:
    """The static type of a value expression (the verifier's typing rule)."""
    from polyir.ir.verifier import expr_dtype as verifier_expr_dtype
    return verifier_expr_dtype(expr, buffers)


def const(value: Scalar, dtype: DType) -> Const:
    """A literal of ``dtype`` (the Python value converted to that kind)."""
    if dtype is DType.BOOL:
        return Const(bool(value), dtype)
    if dtype.is_int:
        return Const(int(value), dtype)
    return Const(float(value), dtype)


def aff_value(aff: Aff) -> Expr:
    """An ``i64`` value expression equal to a linear affine expression
    (:func:`polyir.ir.walk.aff_to_expr`)."""
    if not aff.is_linear:
        raise ValueError(f"only linear affine expressions become values, not {aff}")
    from polyir.ir.walk import aff_to_expr
    return aff_to_expr(aff)


# ------------------------------------------------------------- tensor values
@dataclass(frozen=True)
class TensorValue:
    """A tensor as lowering sees it: ``buffer`` read through ``index_map``.

    ``index_map`` takes the value's own indices (one ``Aff`` per dimension) and
    returns the subscripts into ``buffer``; ``None`` means the identity. Views
    (permute, expand, slice, reshape, ...) are new ``TensorValue`` objects over
    the same buffer with a composed index map, never copies.
    """

    buffer: str
    shape: Shape
    dtype: DType
    index_map: IndexMap | None = None

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def is_identity(self) -> bool:
        return self.index_map is None

    def subscripts(self, idx: Sequence[Aff]) -> tuple[Index, ...]:
        if len(idx) != self.rank:
            raise ValueError(f"{self.buffer}: {len(idx)} indices for a rank-{self.rank} tensor")
        return tuple(idx) if self.index_map is None else self.index_map(tuple(idx))

    def load(self, idx: Sequence[Aff]) -> Load:
        """The element at ``idx`` (one affine index per dimension)."""
        return Load(self.buffer, self.subscripts(idx))

    def view(self, shape: Sequence[Size], index_map: IndexMap) -> TensorValue:
        """A view of this value: ``index_map`` maps the view's indices to ours.

        When ``index_map`` makes a non-affine index (a gather, a reshape over
        symbolic sizes) our own map receives it: maps that only move indices
        around (permute, expand, select) accept that; one that computes with
        them raises ``UnsupportedOp`` (see :meth:`composes`)."""
        inner = self.index_map
        if inner is None:
            composed = index_map
        else:
            def composed(idx: Sequence[Aff], _outer: IndexMap = index_map,
                         _inner: IndexMap = inner) -> tuple[Index, ...]:
                mapped = _outer(idx)
                try:
                    return _inner(mapped)  # type: ignore[arg-type]
                except (TypeError, AttributeError):  # arithmetic on a non-affine index
                    raise UnsupportedOp("view", self.buffer, "a view computing with a "
                                        "non-affine (gathered) index") from None
        return TensorValue(self.buffer, static_dims(shape), self.dtype, composed)

    def composes(self, shape: Sequence[Size], index_map: IndexMap) -> bool:
        """Whether :meth:`view` with ``index_map`` can compute subscripts for the
        view's indices (tried on symbolic indices; size-1 dimensions index 0)."""
        probe = [Aff.const(0) if size == 1 else Aff.var(f"_probe{d}") for d, size in enumerate(shape)]
        try:
            self.view(shape, index_map).subscripts(probe)
        except UnsupportedOp:
            return False
        return True


Operand = Union[TensorValue, Scalar]


def broadcast_index(value: TensorValue, idx: Sequence[Aff], shape: Sequence[Size]) -> list[Aff]:
    """Indices into ``value`` for element ``idx`` of the broadcast ``shape``."""
    offset = len(shape) - value.rank
    if offset < 0:
        raise ValueError(f"cannot broadcast {value.shape} to {tuple(shape)}")
    return [Aff.const(0) if size == 1 and shape[offset + d] != 1 else idx[offset + d]
            for d, size in enumerate(value.shape)]


_IDENT = re.compile(r"[^A-Za-z0-9_]")
# Words of the IR text form and the call names: never used as buffer names.
_RESERVED = {"func", "kernel", "local", "for", "to", "step", "parallel", "unroll", "vectorize",
             "gpu", "if", "else", "barrier", "launch", "grid", "block", "shared", "select",
             "cast", "true", "false", "and", "or", "not", "inf", "nan", "index", "max", "min",
             "fragment_fill", "fragment_load", "fragment_mma", "fragment_store"}


_DTYPE_NAMES = {str(dtype) for dtype in DType}


class LoweringContext:
    """Collects the parameters, locals and loop nests of one polyir function.

    ``outputs`` maps a frontend's key for a graph value (the ATen table uses
    ``(fx node name, output index)``, the jaxpr table the variable) to the
    parameter buffer that value is written to; :meth:`result_for` hands that
    parameter to the first rule that produces it, so results land in place
    without a copy.

    ``symbols`` (a frontend's :class:`~polyir.frontends.lowering.sizes.SizeTable`)
    reads symbolic sizes; without it every size is an ``int``.
    """

    def __init__(self, symbols: SizeTable | None = None) -> None:
        self.symbols = symbols
        self.params: list[Buffer] = []
        self.locals: list[Buffer] = []
        self.body: list[Node] = []
        self.buffers: dict[str, Buffer] = {}
        self.outputs: dict[Hashable, Buffer] = {}
        self._claimed: set[str] = set()
        self._names: set[str] = set()
        self._counters: dict[str, int] = {}
        self._statements = 0

    # -- names -------------------------------------------------------------
    def fresh(self, hint: str) -> str:
        """A new identifier based on ``hint``, unique in this function."""
        base = _IDENT.sub("_", hint) or "t"
        if not base[0].isalpha():
            base = "t" + base
        if base in _RESERVED or base in CALLS or base in _DTYPE_NAMES or keyword.iskeyword(base):
            base += "_v"
        name = base
        while name in self._names or (self.symbols is not None and self.symbols.reserved(name)):
            self._counters[base] = self._counters.get(base, 0) + 1
            name = f"{base}_{self._counters[base]}"
        self._names.add(name)
        return name

    # -- sizes -------------------------------------------------------------
    def dims(self, shape: Sequence[Size]) -> Shape:
        """A shape as ints, symbolic sizes kept as they are (constant ones as ints)."""
        if self.symbols is None:
            return tuple(int(s) for s in shape)
        symbols = self.symbols
        return tuple(symbols.dim(s) if symbols.is_symbolic(s) else int(s) for s in shape)

    def size_aff(self, size: Size) -> Aff:
        """A size as an affine expression (a constant unless it is symbolic)."""
        return size_aff(size, self.symbols)

    def size_value(self, size: Size, dtype: DType) -> Expr:
        """A size (an element count, say) as a value of ``dtype``."""
        if self.symbols is not None and self.symbols.is_symbolic(size):
            return self.symbols.value(size, dtype)
        return const(int(size), dtype)

    # -- buffers -----------------------------------------------------------
    def add_param(self, hint: str, shape: Shape, dtype: DType) -> TensorValue:
        shape = self.dims(shape)
        buffer = Buffer(self.fresh(hint), dtype, tuple(self.size_aff(s) for s in shape))
        self.params.append(buffer)
        self.buffers[buffer.name] = buffer
        return TensorValue(buffer.name, shape, dtype)

    def add_output(self, key: Hashable, hint: str, shape: Shape, dtype: DType) -> Buffer:
        value = self.add_param(hint, shape, dtype)
        buffer = self.buffers[value.buffer]
        self.outputs[key] = buffer
        return buffer

    def temp(self, hint: str, shape: Sequence[Size], dtype: DType) -> TensorValue:
        """A new local buffer (space ``global``: heap memory on the CPU)."""
        dims = self.dims(shape)
        buffer = Buffer(self.fresh(hint), dtype, tuple(self.size_aff(s) for s in dims),
                        MemorySpace.GLOBAL)
        self.locals.append(buffer)
        self.buffers[buffer.name] = buffer
        return TensorValue(buffer.name, dims, dtype)

    def result_for(self, key: Hashable, hint: str, shape: Sequence[Size],
                   dtype: DType) -> TensorValue:
        """The buffer the value ``key`` is written to.

        A value registered with :meth:`add_output` under ``key`` gets its output
        parameter (once, and only if ``dtype`` matches); anything else a fresh
        local named after ``hint``.
        """
        shape = self.dims(shape)
        buffer = self.outputs.get(key)
        if buffer is not None and buffer.name not in self._claimed and buffer.dtype is dtype:
            self._claimed.add(buffer.name)
            return TensorValue(buffer.name, shape, dtype)
        return self.temp(hint, shape, dtype)

    def is_claimed(self, buffer: str) -> bool:
        return buffer in self._claimed

    def claim(self, buffer: str) -> None:
        self._claimed.add(buffer)

    # -- expressions -------------------------------------------------------
    def dtype(self, expr: Expr) -> DType:
        return expr_dtype(expr, self.buffers)

    def cast(self, expr: Expr, dtype: DType) -> Expr:
        """``expr`` as ``dtype``: a ``Cast`` when the types differ (float->bool
        compares with zero, as torch does)."""
        current = self.dtype(expr)
        if current is dtype:
            return expr
        if isinstance(expr, Const):
            return const(expr.value, dtype)
        if dtype is DType.BOOL:
            return Compare("!=", expr, const(0, current))
        return Cast(dtype, expr)

    def operand(self, value: Operand, idx: Sequence[Aff], shape: Sequence[Size],
                dtype: DType) -> Expr:
        """Element ``idx`` of ``value`` broadcast to ``shape``, as ``dtype``."""
        if isinstance(value, TensorValue):
            return self.cast(value.load(broadcast_index(value, idx, shape)), dtype)
        return const(value, dtype)

    # -- statements and loops ----------------------------------------------
    def assign(self, target: TensorValue, idx: Sequence[Aff], value: Expr) -> Assign:
        """``S: target[idx] = value`` with ``value`` cast to the target's type."""
        name = f"S{self._statements}"
        self._statements += 1
        return Assign(name, target.buffer, target.subscripts(idx), self.cast(value, target.dtype))

    def store(self, target: TensorValue, indices: Sequence[Index], value: Expr) -> Assign:
        """``S: target[indices] = value`` with subscripts given as they are
        (affine or value expressions: a scatter); ``target`` is a whole buffer."""
        if not target.is_identity:
            raise ValueError(f"{target.buffer}: a scatter needs a whole buffer, not a view")
        name = f"S{self._statements}"
        self._statements += 1
        return Assign(name, target.buffer, tuple(indices), self.cast(value, target.dtype))

    def loops(self, shape: Sequence[Size], hint: str = "i") -> tuple[list[Aff], list[tuple[str, Aff]]]:
        """Index expressions for iterating over ``shape`` and the loops that bind
        them; a dimension of extent 1 gets the constant 0 and no loop (for a
        symbolic extent the comparison is a guard of the compiled plan)."""
        idx: list[Aff] = []
        loops: list[tuple[str, Aff]] = []
        for extent in shape:
            if extent == 1:
                idx.append(Aff.const(0))
            else:
                var = self.fresh(hint)
                idx.append(Aff.var(var))
                loops.append((var, self.size_aff(extent)))
        return idx, loops

    @staticmethod
    def nest(loops: Sequence[tuple[str, Aff | int]], body: Sequence[Node]) -> list[Node]:
        """``body`` wrapped in ``for var = 0 to extent`` loops, outermost first."""
        nodes = list(body)
        for var, extent in reversed(loops):
            upper = extent if isinstance(extent, Aff) else Aff.const(int(extent))
            nodes = [For(var, (Aff.const(0),), (upper,), tuple(nodes))]
        return nodes

    @staticmethod
    def guard(conditions: Sequence[Constraint], body: Sequence[Node]) -> list[Node]:
        """``body`` under an affine ``if`` (no ``if`` when there is no condition)."""
        from polyir.ir.builder import guard as guarded
        return list(guarded(conditions, body))

    def emit(self, nodes: Sequence[Node]) -> None:
        self.body.extend(nodes)

    def map_elements(self, out: TensorValue, element: Callable[[list[Aff]], Expr],
                     hint: str = "i") -> None:
        """One nest writing ``out[idx] = element(idx)`` for every element."""
        idx, loops = self.loops(out.shape, hint)
        self.emit(self.nest(loops, [self.assign(out, idx, element(idx))]))

    def map_operands(self, out: TensorValue, operands: Sequence[Operand], compute: DType,
                     fn: Callable[..., Expr]) -> None:
        """One nest: ``out[idx] = fn(*operands at idx, cast to compute)``, with
        the operands broadcast to ``out``'s shape (numbers become constants)."""
        def element(idx: list[Aff]) -> Expr:
            return fn(*[self.operand(v, idx, out.shape, compute) for v in operands])
        self.map_elements(out, element, hint="i")

    def copy(self, source: TensorValue, target: TensorValue) -> None:
        """A nest copying ``source`` into ``target`` (same shape), with a cast."""
        self.map_elements(target, lambda idx: source.load(idx))


def normalize_dim(dim: int, rank: int) -> int:
    """``dim`` in ``[0, rank)`` (negative dims count from the end)."""
    if rank == 0 and dim in (0, -1):
        return 0
    if not -rank <= dim < rank:
        raise IndexError(f"dimension {dim} out of range for rank {rank}")
    return dim % rank


def extreme(dtype: DType, largest: bool) -> Const:
    """The identity of ``max`` (``largest``) or ``min`` over ``dtype``: -inf/inf,
    the smallest/largest integer, or False/True."""
    if dtype.is_float:
        return const(-np.inf if largest else np.inf, dtype)
    if dtype is DType.BOOL:
        return const(not largest, dtype)
    info = np.iinfo(dtype.numpy)
    return const(int(info.min) if largest else int(info.max), dtype)
