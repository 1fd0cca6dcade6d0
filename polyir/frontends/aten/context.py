"""What a lowering rule works with: tensor values, typed expressions, loop nests.

A lowering rule turns one ATen operator into loop nests over named buffers. It
reads its operands as :class:`TensorValue` objects (a buffer seen through an
index map, so views cost nothing), asks the :class:`LoweringContext` for the
buffer its result goes to, and emits ``For`` nests whose statements write that
buffer. Shapes are Python ints taken from the example inputs, or, when
compiling with dynamic shapes, torch ``SymInt`` values for the dynamic sizes:
the context turns those into symbolic extents (``polyir.frontends.aten.symbolic``)
where they reach the IR (loop bounds, buffer shapes, index maps, counts).
"""
from __future__ import annotations

import keyword
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Union

import torch

from polyir.errors import UnsupportedOp
from polyir.frontends.aten.symbolic import Size, SymbolTable
from polyir.ir.affine import Aff, Constraint
from polyir.ir.nodes import (
    CALLS,
    Assign,
    BinOp,
    Buffer,
    Call,
    Cast,
    Compare,
    Const,
    Expr,
    For,
    If,
    Index,
    Load,
    Node,
    Select,
    Var,
)
from polyir.ir.types import DType, MemorySpace

Shape = tuple[Size, ...]
IndexMap = Callable[[Sequence[Aff]], tuple[Index, ...]]
Scalar = Union[int, float, bool]

# ------------------------------------------------------------------- dtypes
_TORCH_TO_DTYPE = {
    torch.float16: DType.F16, torch.bfloat16: DType.BF16, torch.float32: DType.F32,
    torch.float64: DType.F64, torch.int8: DType.I8, torch.int32: DType.I32,
    torch.int64: DType.I64, torch.bool: DType.BOOL,
}
_DTYPE_TO_TORCH = {v: k for k, v in _TORCH_TO_DTYPE.items()}


def dtype_of(torch_dtype: torch.dtype) -> DType:
    """The polyir type of a torch dtype; ``KeyError`` when polyir has none."""
    return _TORCH_TO_DTYPE[torch_dtype]


def torch_dtype_of(dtype: DType) -> torch.dtype:
    return _DTYPE_TO_TORCH[dtype]


def is_supported_dtype(torch_dtype: torch.dtype) -> bool:
    return torch_dtype in _TORCH_TO_DTYPE


def accumulator_dtype(dtype: DType) -> DType:
    """The type sums of ``dtype`` values are accumulated in (f16/bf16 -> f32)."""
    return DType.F32 if dtype in (DType.F16, DType.BF16) else dtype


# --------------------------------------------------------------- expressions
def expr_dtype(expr: Expr, buffers: dict[str, Buffer]) -> DType:
    """The static type of a value expression (see ``polyir.ir.nodes``)."""
    if isinstance(expr, Const):
        return expr.dtype
    if isinstance(expr, Var):
        return DType.I64
    if isinstance(expr, Load):
        return buffers[expr.buffer].dtype
    if isinstance(expr, Compare):
        return DType.BOOL
    if isinstance(expr, BinOp):
        return DType.BOOL if expr.op in ("and", "or") else expr_dtype(expr.lhs, buffers)
    if isinstance(expr, Call):
        return DType.BOOL if expr.fn == "not" else expr_dtype(expr.args[0], buffers)
    if isinstance(expr, Select):
        return expr_dtype(expr.if_true, buffers)
    if isinstance(expr, Cast):
        return expr.dtype
    raise TypeError(f"not a value expression: {expr!r}")


def const(value: Scalar, dtype: DType) -> Const:
    """A literal of ``dtype`` (the Python value converted to that kind)."""
    if dtype is DType.BOOL:
        return Const(bool(value), dtype)
    if dtype.is_int:
        return Const(int(value), dtype)
    return Const(float(value), dtype)


def aff_value(aff: Aff) -> Expr:
    """An ``i64`` value expression equal to a linear affine expression."""
    if not aff.is_linear:
        raise ValueError(f"only linear affine expressions become values, not {aff}")
    result: Expr | None = None
    for atom, coeff in aff.terms:
        name = atom if isinstance(atom, str) else str(atom)  # linear: always a name
        term: Expr = Var(name) if coeff == 1 else BinOp("*", Const(coeff, DType.I64), Var(name))
        result = term if result is None else BinOp("+", result, term)
    if result is None:
        return Const(aff.constant, DType.I64)
    return BinOp("+", result, Const(aff.constant, DType.I64)) if aff.constant else result


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
                if all(isinstance(i, Aff) for i in mapped):
                    return _inner(mapped)  # type: ignore[arg-type]
                try:
                    return _inner(mapped)  # type: ignore[arg-type]
                except (TypeError, AttributeError):  # arithmetic on a non-affine index
                    raise UnsupportedOp("view", self.buffer, "a view computing with a "
                                        "non-affine (gathered) index") from None
        return TensorValue(self.buffer, _dims(shape), self.dtype, composed)

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


def _dims(shape: Sequence[Size]) -> Shape:
    """A shape as ints, keeping symbolic sizes (``SymInt``) as they are."""
    return tuple(s if isinstance(s, torch.SymInt) else int(s) for s in shape)


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

    ``outputs`` maps ``(fx node name, output index)`` to the parameter buffer
    that output is written to; :meth:`result` hands that parameter to the first
    rule that produces it, so results land in place without a copy.
    """

    def __init__(self, symbols: SymbolTable | None = None) -> None:
        self.symbols = symbols
        self.params: list[Buffer] = []
        self.locals: list[Buffer] = []
        self.body: list[Node] = []
        self.buffers: dict[str, Buffer] = {}
        self.outputs: dict[tuple[str, int], Buffer] = {}
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
        """A shape as ints, symbolic sizes as ``SymInt`` (constant ones as ints)."""
        if self.symbols is None:
            return tuple(int(s) for s in shape)
        return tuple(self.symbols.dim(s) for s in shape)

    def size_aff(self, size: Size) -> Aff:
        """A size as an affine expression (a constant unless it is symbolic)."""
        if isinstance(size, torch.SymInt) and self.symbols is not None:
            return self.symbols.aff(size)
        return Aff.const(int(size))

    def size_value(self, size: Size, dtype: DType) -> Expr:
        """A size (an element count, say) as a value of ``dtype``."""
        if isinstance(size, torch.SymInt) and self.symbols is not None:
            return self.symbols.value(size, dtype)
        return const(int(size), dtype)

    # -- buffers -----------------------------------------------------------
    def add_param(self, hint: str, shape: Shape, dtype: DType) -> TensorValue:
        shape = self.dims(shape)
        buffer = Buffer(self.fresh(hint), dtype, tuple(self.size_aff(s) for s in shape))
        self.params.append(buffer)
        self.buffers[buffer.name] = buffer
        return TensorValue(buffer.name, shape, dtype)

    def add_output(self, key: tuple[str, int], hint: str, shape: Shape, dtype: DType) -> Buffer:
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

    def result(self, node: torch.fx.Node, index: int | None = None,
               dtype: DType | None = None) -> TensorValue:
        """The buffer output ``index`` of ``node`` is written to.

        Shape and dtype come from the node's example value. A graph output
        gets its output parameter (once); anything else a fresh local.
        """
        meta = node_meta(node, index)
        shape = self.dims(meta.shape)
        want = dtype or dtype_of(meta.dtype)
        buffer = self.outputs.get((node.name, index or 0))
        if buffer is not None and buffer.name not in self._claimed and buffer.dtype is want:
            self._claimed.add(buffer.name)
            return TensorValue(buffer.name, shape, want)
        hint = node.name if index is None else f"{node.name}_{index}"
        return self.temp(hint, shape, want)

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
            nodes = [For(var, (Aff.const(0),), (Aff.lift(extent),), tuple(nodes))]
        return nodes

    @staticmethod
    def guard(conditions: Sequence[Constraint], body: Sequence[Node]) -> list[Node]:
        """``body`` under an affine ``if`` (no ``if`` when there is no condition)."""
        return [If(tuple(conditions), tuple(body))] if conditions else list(body)

    def emit(self, nodes: Sequence[Node]) -> None:
        self.body.extend(nodes)

    def map_elements(self, out: TensorValue, element: Callable[[list[Aff]], Expr],
                     hint: str = "i") -> None:
        """One nest writing ``out[idx] = element(idx)`` for every element."""
        idx, loops = self.loops(out.shape, hint)
        self.emit(self.nest(loops, [self.assign(out, idx, element(idx))]))

    def copy(self, source: TensorValue, target: TensorValue) -> None:
        """A nest copying ``source`` into ``target`` (same shape), with a cast."""
        self.map_elements(target, lambda idx: source.load(idx))


def node_meta(node: torch.fx.Node, index: int | None = None) -> Any:
    """The example value (a fake tensor) of ``node``, or of its output ``index``."""
    meta = node.meta.get("val")
    if meta is None:
        raise UnsupportedOp(str(node.target), node.name, "no example value recorded")
    if index is not None and isinstance(meta, (tuple, list)):
        return meta[index]
    return meta


def packet(node: torch.fx.Node) -> Any:
    """The overload packet of ``node``'s operator (``aten.add`` for ``aten.add.Tensor``)."""
    return getattr(node.target, "overloadpacket", node.target)


def normalize_dim(dim: int, rank: int) -> int:
    """``dim`` in ``[0, rank)`` (negative dims count from the end)."""
    if rank == 0 and dim in (0, -1):
        return 0
    if not -rank <= dim < rank:
        raise IndexError(f"dimension {dim} out of range for rank {rank}")
    return dim % rank
