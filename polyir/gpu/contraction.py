"""Contractions found in the IR after fusion (matmul, batched matmul, linear layers).

What the ATen lowering and fusion leave for ``C = A @ B`` plus an epilogue is

    for b, i, j parallel {            # b (batch) is optional
      before...                       # e.g. acc[] = cast<f32>(bias[j])
      for r = 0 to K {
        U: acc[...] = acc[...] + cast<f32>(A[..., i, r]) * cast<f32>(B[..., r, j])
      }
      after...                        # casts, activation, residual, the store
    }

:func:`find_contraction` recognises that shape in one top-level nest and says
why not (a :class:`NotAContraction` with a reason) when it does not match.
Conditions:

* the band: 2 or 3 perfectly nested ``parallel`` loops from 0 with step 1 and
  one upper bound each, affine in size symbols; the innermost band loop's body
  is plain statements, exactly one reduction loop, plain statements;
* the reduction loop: from 0, step 1, one symbolic bound, not parallel, no
  locals, body one statement ``acc[x] = acc[x] + X * Y`` (or ``X * Y + acc[x]``),
  ``acc`` f32, ``x`` free of the reduction variable;
* ``X`` and ``Y`` are loads (each possibly under ``cast<f32>``) of two buffers
  of the same dtype whose last two subscripts are the reduction variable and
  one band variable each (either order: transposed operands), every other
  subscript a band variable that is neither of those two, or a constant;
* the band variable of ``X`` (the row) and of ``Y`` (the column) differ; a
  third band loop is the batch;
* nothing in the nest writes ``A`` or ``B``, no statement outside the reduction
  loop uses the reduction variable, and ``X``/``Y`` do not read ``acc``.

The band loops' ``parallel`` flags (``mark-parallel`` proves them) make the
iterations independent; the mapping then only reassociates the f32 sum of
each output element (as every tiled GEMM does).
"""
from __future__ import annotations

from dataclasses import dataclass

from polyir.gpu.rewrite import used_variables
from polyir.ir.affine import Aff
from polyir.ir.nodes import Assign, BinOp, Cast, Expr, For, Function, Load, Node
from polyir.ir.types import DType
from polyir.ir.walk import buffer_accesses, loads


class NotAContraction(Exception):
    """The nest is no contraction the GPU mapping handles; ``str()`` says why."""


@dataclass(frozen=True)
class Operand:
    """One input of a contraction.

    ``layout`` is how the 2-d tile is stored: for ``a`` ``row`` = ``[m, k]``,
    ``col`` = ``[k, m]``; for ``b`` ``row`` = ``[k, n]``, ``col`` = ``[n, k]``.
    ``lead`` are the subscripts before the last two (band variables or constants).
    """

    buffer: str
    dtype: DType
    layout: str
    lead: tuple[Aff, ...]


@dataclass(frozen=True)
class Contraction:
    """A recognised contraction nest (see the module docstring)."""

    band: tuple[For, ...]
    row: str
    col: str
    batch: str | None
    before: tuple[Node, ...]
    reduction: For
    update: Assign
    after: tuple[Node, ...]
    a: Operand
    b: Operand

    @property
    def m(self) -> Aff:
        return self._extent(self.row)

    @property
    def n(self) -> Aff:
        return self._extent(self.col)

    @property
    def k(self) -> Aff:
        return self.reduction.upper[0]

    @property
    def batch_extent(self) -> Aff | None:
        return None if self.batch is None else self._extent(self.batch)

    @property
    def input_dtype(self) -> DType:
        return self.a.dtype

    def output_map(self, row: Aff, col: Aff) -> dict[str, Aff]:
        """The row and column variables at GEMM element ``(row, col)``."""
        return {self.row: row, self.col: col}

    def _extent(self, var: str) -> Aff:
        return next(loop.upper[0] for loop in self.band if loop.var == var)


def _simple_loop(loop: For, symbols: set[str]) -> str | None:
    """Why ``loop`` is not ``for v = 0 to E`` with E affine in symbols (None when it is)."""
    if len(loop.lower) != 1 or len(loop.upper) != 1:
        return f"loop '{loop.var}' has max/min bounds"
    if loop.lower[0] != Aff.const(0) or loop.step != 1:
        return f"loop '{loop.var}' does not run from 0 with step 1"
    if not loop.upper[0].variables() <= symbols:
        return f"loop '{loop.var}' has a bound that is not a function of size symbols"
    if loop.mapping is not None:
        return f"loop '{loop.var}' is already mapped"
    return None


def _strip(expr: Expr) -> Load | None:
    if isinstance(expr, Cast) and expr.dtype is DType.F32:
        expr = expr.value
    return expr if isinstance(expr, Load) else None


def _operand(load: Load, dtype: DType, r: str, band: set[str], role: str
             ) -> tuple[Operand, str]:
    """The operand and its free band variable, or NotAContraction."""
    if len(load.indices) < 2 or not all(isinstance(i, Aff) for i in load.indices):
        raise NotAContraction(f"operand '{load.buffer}' needs rank >= 2 and affine subscripts")
    indices = [i for i in load.indices if isinstance(i, Aff)]
    last2 = indices[-2:]
    names = []
    for index in last2:
        vs = index.variables()
        if len(vs) != 1 or index != Aff.var(next(iter(vs))):
            raise NotAContraction(f"operand '{load.buffer}': subscript '{index}' is not one loop "
                                  f"variable")
        names.append(next(iter(vs)))
    if r not in names or names[0] == names[1]:
        raise NotAContraction(f"operand '{load.buffer}' does not have the reduction variable "
                              f"'{r}' in one of its last two subscripts")
    free = names[1] if names[0] == r else names[0]
    if free not in band:
        raise NotAContraction(f"operand '{load.buffer}': '{free}' is not a parallel band loop")
    r_last = names[1] == r
    if role == "a":
        layout = "row" if r_last else "col"
    else:
        layout = "col" if r_last else "row"
    lead = tuple(indices[:-2])
    for index in lead:
        if r in index.variables() or free in index.variables():
            raise NotAContraction(f"operand '{load.buffer}': leading subscript '{index}' uses "
                                  f"the row/column or reduction variable")
        if not index.is_constant and not (len(index.variables()) == 1
                                          and index == Aff.var(next(iter(index.variables())))):
            raise NotAContraction(f"operand '{load.buffer}': leading subscript '{index}' is "
                                  f"neither a constant nor a band variable")
    return Operand(load.buffer, dtype, layout, lead), free


def find_contraction(function: Function, nest: Node) -> Contraction:
    """The contraction ``nest`` (a top-level node of ``function``) computes;
    raises :class:`NotAContraction` saying why when it is none."""
    if not isinstance(nest, For):
        raise NotAContraction("not a loop")
    symbols = set(function.symbols)
    band: list[For] = []
    loop: Node = nest
    while isinstance(loop, For) and loop.parallel and len(band) < 4:
        why = _simple_loop(loop, symbols)
        if why:
            raise NotAContraction(why)
        band.append(loop)
        if len(loop.body) == 1 and isinstance(loop.body[0], For) and loop.body[0].parallel:
            loop = loop.body[0]
        else:
            break
    if len(band) < 2:
        raise NotAContraction("fewer than two parallel loops around the reduction")
    if len(band) > 3:
        raise NotAContraction("more than three parallel loops (one batch dimension at most)")
    body = band[-1].body
    reductions = [n for n in body if isinstance(n, For)]
    if len(reductions) != 1 or not all(isinstance(n, (Assign, For)) for n in body):
        raise NotAContraction("the band's body is not statements around one reduction loop")
    red = reductions[0]
    position = body.index(red)
    before, after = body[:position], body[position + 1:]
    why = _simple_loop(red, symbols)
    if why or red.parallel or red.locals:
        raise NotAContraction(why or f"reduction loop '{red.var}' is parallel or has locals")
    if len(red.body) != 1 or not isinstance(red.body[0], Assign):
        raise NotAContraction(f"reduction loop '{red.var}' holds more than one statement")
    update = red.body[0]
    acc = function.buffers.get(update.buffer)
    if acc is None or acc.dtype is not DType.F32:
        raise NotAContraction(f"accumulator '{update.buffer}' is not f32")
    value = update.value
    if not isinstance(value, BinOp) or value.op != "+":
        raise NotAContraction(f"statement {update.name} is not 'acc = acc + x * y'")
    target = Load(update.buffer, update.indices)
    product = value.rhs if value.lhs == target else value.lhs if value.rhs == target else None
    if not isinstance(product, BinOp) or product.op != "*":
        raise NotAContraction(f"statement {update.name} is not 'acc = acc + x * y'")
    if any(isinstance(i, Aff) and red.var in i.variables() for i in update.indices) or \
            not all(isinstance(i, Aff) for i in update.indices):
        raise NotAContraction(f"statement {update.name}: accumulator subscripts use the "
                              f"reduction variable or are not affine")
    x, y = _strip(product.lhs), _strip(product.rhs)
    if x is None or y is None:
        raise NotAContraction(f"statement {update.name}: the product is not of two loads")
    buffers = function.buffers
    x_type, y_type = buffers[x.buffer].dtype, buffers[y.buffer].dtype
    if x_type is not y_type:
        raise NotAContraction(f"operands '{x.buffer}' ({x_type}) and '{y.buffer}' ({y_type}) "
                              f"have different types")
    if x_type is not DType.F32 and (product.lhs == x or product.rhs == y):
        raise NotAContraction("a 16-bit operand is multiplied without a cast to f32")
    band_vars = {lp.var for lp in band}
    a, row = _operand(x, x_type, red.var, band_vars, "a")
    b, col = _operand(y, y_type, red.var, band_vars, "b")
    if row == col:
        raise NotAContraction(f"both operands run along '{row}'")
    rest = [v for v in (lp.var for lp in band) if v not in (row, col)]
    batch = rest[0] if rest else None
    for operand in (a, b):
        for index in operand.lead:
            if not index.is_constant and index.variables() != {batch}:
                raise NotAContraction(f"operand '{operand.buffer}': leading subscript '{index}'")
    _, written = buffer_accesses(nest_body(band))
    if x.buffer in written or y.buffer in written:
        raise NotAContraction("the nest writes one of its operands")
    if update.buffer in (x.buffer, y.buffer) or any(
            ld.buffer == update.buffer for ld in (*loads(product.lhs), *loads(product.rhs))):
        raise NotAContraction("the product reads the accumulator")
    if red.var in used_variables(before + after):
        raise NotAContraction(f"statements outside the reduction use '{red.var}'")
    return Contraction(tuple(band), row, col, batch, before, red, update, after, a, b)


def nest_body(band: list[For] | tuple[For, ...]) -> tuple[Node, ...]:
    """The innermost band loop's body."""
    return band[-1].body


__all__ = ["Contraction", "NotAContraction", "Operand", "find_contraction"]
