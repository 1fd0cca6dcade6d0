"""In-bounds subscripts for generated programs: affine accesses and gathers.

Every program ``programs()`` draws is in bounds for *every* value >= 1 of its
size symbols:

* each loop variable ``v`` is known to lie in ``[low, E - 1]`` where ``E`` (its
  *extent*) is a size symbol or a constant, and ``low >= 0`` a constant;
* an affine subscript's smallest value is provably ``>= 0``; its largest value,
  plus one, is an affine expression in the symbols with non-negative
  coefficients (a *need* of that buffer dimension);
* a gather subscript is ``abs(cast<i64>(G[...])) % D`` with ``D`` a size
  symbol or a positive constant, so it lies in ``[0, D)``; ``D`` is a need;
* each parameter dimension is the coefficient-wise maximum of its needs (e.g.
  ``2*N + 3``), which dominates each of them whenever the symbols are >= 1.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from hypothesis import strategies as st

from polyir.ir.affine import Aff
from polyir.ir.nodes import BinOp, Call, Cast, Const, Expr, Index, Load, Var
from polyir.ir.types import DType


@dataclass(frozen=True)
class LoopVar:
    """A loop variable in scope: every value it takes lies in ``[low, extent - 1]``."""

    name: str
    extent: Aff
    low: int


@dataclass
class BufferPlan:
    """A buffer being generated. ``role`` is ``input`` (never written),
    ``output`` (parameter, updated), ``table`` (local, written once by a full
    nest and read-only afterwards), ``scratch`` (local, write-only) or ``temp``
    (0-d local written once per block before its reads). ``bounded`` says that
    every value the buffer ever holds is in the unit range (see ``_values``)."""

    name: str
    dtype: DType
    rank: int
    role: str
    shape: tuple[Aff, ...] | None = None
    needs: list[list[Aff]] = field(default_factory=list)
    bounded: bool = True


@dataclass(frozen=True)
class _Scope:
    loops: tuple[LoopVar, ...] = ()
    temps: tuple[BufferPlan, ...] = ()

    def enter(self, loop: LoopVar) -> _Scope:
        return _Scope(self.loops + (loop,), self.temps)

    def with_temp(self, temp: BufferPlan) -> _Scope:
        return _Scope(self.loops, self.temps + (temp,))


def nonnegative_for_positive_symbols(expr: Aff) -> bool:
    """True when ``expr`` (in symbols only) is >= 0 whenever every symbol is >= 1."""
    return all(c >= 0 for _, c in expr.terms) and \
        expr.evaluate({name: 1 for name in expr.variables()}) >= 0


def extreme(expr: Aff, loops: Sequence[LoopVar], largest: bool) -> Aff:
    """The largest (or smallest) value of ``expr`` over the loop ranges, in symbols."""
    mapping: dict[str, Aff] = {}
    for loop in loops:
        coefficient = expr.coefficient(loop.name)
        if coefficient == 0:
            continue
        upper = (coefficient > 0) == largest
        mapping[loop.name] = loop.extent - 1 if upper else Aff.const(loop.low)
    return expr.substitute(mapping)


def cover(needs: Sequence[Aff]) -> Aff:
    """An affine size >= every need for symbols >= 1: the coefficient-wise maximum."""
    coefficients: dict[str, int] = {}
    constant = 0
    for need in needs:
        for name in need.variables():
            coefficients[name] = max(coefficients.get(name, 0), need.coefficient(name))
        constant = max(constant, need.constant)
    size = Aff.const(constant)
    for name, coefficient in sorted(coefficients.items()):
        size = size + coefficient * Aff.var(name)
    smallest = size.evaluate({name: 1 for name in size.variables()})
    return size + (1 - smallest) if smallest < 1 else size


def _extent_value(extent: Aff) -> Expr:
    """A symbol or constant extent as an ``i64`` value expression."""
    if extent.is_constant:
        return Const(extent.constant, DType.I64)
    assert len(extent.terms) == 1 and extent.constant == 0 and extent.terms[0][1] == 1, extent
    return Var(str(extent.terms[0][0]))


class AccessDrawer:
    """Subscript drawing for ``_ProgramBuilder`` (a mixin: uses its choices)."""

    symbols: tuple[str, ...]
    used_symbols: set[str]
    inputs: list[BufferPlan]
    allow_gathers: bool

    draw: Any

    # choices, provided by _ProgramBuilder
    def pick(self, options: Sequence[Any]) -> Any:
        raise NotImplementedError

    def weighted(self, options: Any) -> Any:
        raise NotImplementedError

    def chance(self, percent: int) -> bool:
        raise NotImplementedError

    def extent(self) -> Aff:
        raise NotImplementedError

    def subscripts(self, plan: BufferPlan, scope: _Scope) -> tuple[Aff, ...]:
        """In-bounds affine subscripts for every dimension of ``plan``. Dimension
        ``d`` prefers the loop at depth ``d`` (``A[i, j]``), sometimes with the two
        innermost loops swapped (``A[j, i]``, a transposed access)."""
        order = scope.loops
        if plan.rank >= 2 and len(order) >= 2 and self.chance(30):
            order = order[:-2] + (order[-1], order[-2])
        return tuple(self.subscript(plan, d, scope.loops, order) for d in range(plan.rank))

    def read_indices(self, plan: BufferPlan, scope: _Scope) -> tuple[Index, ...]:
        """Subscripts for a read of ``plan``: affine, sometimes with one gather."""
        indices: list[Index] = list(self.subscripts(plan, scope))
        if self.allow_gathers and plan.rank >= 1 and self.chance(10):
            dim = self.draw(st.integers(0, plan.rank - 1))
            gather = self.gather_index(plan, dim, scope)
            if gather is not None:
                indices[dim] = gather
        return tuple(indices)

    def updated_read_indices(self, plan: BufferPlan, scope: _Scope) -> tuple[Index, ...]:
        """Subscripts for a read of a buffer the program writes: as
        ``read_indices``, often moved to a neighbour (``A[i - 1, j + 1]``) so
        that the read depends on an earlier (or later) iteration."""
        indices = self.read_indices(plan, scope)
        if self.chance(40) and all(isinstance(i, Aff) for i in indices):
            moved = self.shifted(plan, indices, scope)  # type: ignore[arg-type]
            if moved is not None:
                return moved
        return indices

    def gather_index(self, plan: BufferPlan, dim: int, scope: _Scope) -> Expr | None:
        """``abs(cast<i64>(G[...])) % D``: a value subscript in ``[0, D)`` for
        dimension ``dim`` of ``plan``, read from an int input ``G`` (or an exact
        float input scaled by 4); ``None`` when the program has no input."""
        sources = [p for p in self.inputs if p.dtype.is_int] or \
            [p for p in self.inputs if p.dtype.is_float]
        if not sources:
            return None
        source = self.pick(sources)
        value: Expr = Load(source.name, self.subscripts(source, scope))
        if source.dtype.is_float:
            value = BinOp("*", value, Const(4.0, source.dtype))
        if source.dtype is not DType.I64:
            value = Cast(DType.I64, value)
        if plan.shape is not None:
            extent = plan.shape[dim]
        else:
            extent = self.extent()
            plan.needs[dim].append(extent)
        self.used_symbols |= extent.variables()
        return BinOp("%", Call("abs", (value,)), _extent_value(extent))

    def shifted(self, plan: BufferPlan, indices: tuple[Aff, ...], scope: _Scope) -> tuple[Aff, ...] | None:
        """``indices`` moved by -1 or +1 in one dimension (sometimes two), in
        bounds (``A[i - 1, j]``, ``A[i - 1, j + 1]`` from ``A[i, j]``); ``None``
        when the buffer has a fixed shape or no dimension."""
        if plan.shape is not None or not indices:
            return None
        moved = list(indices)
        dims = [self.draw(st.integers(0, len(indices) - 1))]
        if len(indices) > 1 and self.chance(50):
            dims.append((dims[0] + self.draw(st.integers(1, len(indices) - 1))) % len(indices))
        for dim in dims:
            shift = self.pick((-1, 1))
            if shift < 0 and not nonnegative_for_positive_symbols(extreme(moved[dim] - 1, scope.loops, False)):
                shift = 1
            moved[dim] = moved[dim] + shift
        if moved == list(indices):
            return None
        for dim, index in enumerate(moved):
            need = extreme(index, scope.loops, largest=True) + 1
            self.used_symbols |= need.variables()
            plan.needs[dim].append(need)
        return tuple(moved)

    def subscript(self, plan: BufferPlan, dim: int, loops: tuple[LoopVar, ...],
                  preferred: tuple[LoopVar, ...]) -> Aff:
        """An in-bounds subscript for dimension ``dim`` of ``plan``."""
        index = self._draw_subscript(loops, preferred, dim)
        if plan.shape is not None:
            extent = plan.shape[dim]
            if not self._fits(index, loops, extent):
                matching = [v for v in loops if v.extent == extent]
                index = Aff.var(matching[-1].name) if matching else Aff.const(0)
            return index
        need = extreme(index, loops, largest=True) + 1
        assert nonnegative_for_positive_symbols(extreme(index, loops, largest=False)), index
        self.used_symbols |= need.variables()
        plan.needs[dim].append(need)
        return index

    @staticmethod
    def _fits(index: Aff, loops: Sequence[LoopVar], extent: Aff) -> bool:
        low, high = extreme(index, loops, False), extreme(index, loops, True)
        return nonnegative_for_positive_symbols(low) and \
            nonnegative_for_positive_symbols(extent - 1 - high)

    def _draw_subscript(self, loops: tuple[LoopVar, ...], preferred: tuple[LoopVar, ...], dim: int) -> Aff:
        if not loops:
            return Aff.const(self.draw(st.integers(0, 2)))
        kind = self.weighted({"var": 10, "const": 1, "shift": 2, "stride": 2, "sum": 1, "reverse": 1})
        default = preferred[min(dim, len(preferred) - 1)]
        loop = default if self.chance(50) else self.pick(loops)
        v = Aff.var(loop.name)
        if kind == "const":
            return Aff.const(self.draw(st.integers(0, 2)))
        if kind == "shift":
            return v + self.pick(tuple(c for c in (1, -1, 2, -2) if c >= -loop.low) or (1,))
        if kind == "stride":
            return 2 * v + self.draw(st.integers(0, 1))
        if kind == "sum":
            return v + Aff.var(self.pick(loops).name)
        if kind == "reverse":
            self.used_symbols |= loop.extent.variables()
            return loop.extent - 1 - v
        return v
