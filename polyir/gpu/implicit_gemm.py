"""Convolutions found in the IR, as implicit GEMM (``polyir.gpu.tensorcore`` maps them).

What the ATen lowering (``polyir.frontends.lowering.conv``, groups = 1) and
fusion leave for a 2-d convolution, channels first, is

    for n, oc, oh, ow parallel {
      before...                                  # e.g. acc[] = cast<f32>(bias[oc])
      for ic { for kh { for kw {                 # the reduction, constant extents
        if (ih >= 0, ih < H, iw >= 0, iw < W) {  # zero padding (some may be absent)
          acc[..] = acc[..] + cast<f32>(X[n, ic, ih, iw]) * cast<f32>(Wt[oc, ic, kh, kw])
        }
      }}}
      after...
    }

with ``ih = sh*oh + dh*kh + ch`` and ``iw = sw*ow + dw*kw + cw`` (stride,
dilation, minus the low padding). :func:`find_convolution` recognises it and
returns an :class:`ImplicitGemm`: the GEMM ``[N*OH*OW, K] x [K, OC]`` with
``K = IC*KH*KW``, row ``m = (n*OH + oh)*OW + ow`` and reduction index
``k = (ic*KH + kh)*KW + kw`` (the weights' own order, so ``B`` is the
weights read as ``[OC, K]``). The mapping packs the A tile straight from
``X`` into shared memory (``gather``): element ``(m, k)`` is
``X[n, ic, ih, iw]`` where it lies inside the input and 0 elsewhere (the
padding is this zero-fill; no im2col buffer exists anywhere).

Conditions: all sizes constant; the band exactly the four loops ``n, oc,
oh, ow`` (any order), the reduction exactly ``ic, kh, kw`` (any order; a
kernel extent of 1 may have lost its loop, its weight subscript then 0),
from 0, step 1 (``parallel`` or not: a sum in any order); the guard's
conditions each one of the four input bounds (they are all checked by the
gather, which then changes nothing where the
original had fewer: those were true anyway); ``acc`` f32 and not subscripted
by the reduction; nothing in the nest writes ``X`` or ``Wt``; the statements
around the reduction do not use its variables. The f32 sum is reassociated,
as in every GEMM.
"""
from __future__ import annotations

from dataclasses import dataclass

from polyir.gpu.contraction import NotAContraction, Operand, _simple_loop, _strip
from polyir.gpu.rewrite import used_variables
from polyir.ir.affine import Aff, Constraint
from polyir.ir.nodes import Assign, BinOp, For, Function, If, Load, Node
from polyir.ir.types import DType
from polyir.ir.walk import buffer_accesses, loads


@dataclass(frozen=True)
class ImplicitGemm:
    """A recognised convolution nest seen as a GEMM (module docstring).

    ``sizes``: ``n, oc, oh, ow, ic, kh, kw, h, w``; ``spatial``: ``(sh, dh,
    ch), (sw, dw, cw)``; ``band_vars``: the loop variables of ``n, oc, oh, ow``.
    """

    band: tuple[For, ...]
    before: tuple[Node, ...]
    update: Assign
    after: tuple[Node, ...]
    a: Operand
    b: Operand
    sizes: dict[str, int]
    spatial: tuple[tuple[int, int, int], tuple[int, int, int]]
    band_vars: tuple[str, str, str, str]
    batch: None = None
    batch_extent: None = None

    @property
    def m(self) -> Aff:
        s = self.sizes
        return Aff.const(s["n"] * s["oh"] * s["ow"])

    @property
    def n(self) -> Aff:
        return Aff.const(self.sizes["oc"])

    @property
    def k(self) -> Aff:
        s = self.sizes
        return Aff.const(s["ic"] * s["kh"] * s["kw"])

    @property
    def input_dtype(self) -> DType:
        return self.a.dtype

    def output_map(self, row: Aff, col: Aff) -> dict[str, Aff]:
        """The band variables at GEMM element ``(row, col)``."""
        s = self.sizes
        n, oc, oh, ow = self.band_vars
        return {n: row // (s["oh"] * s["ow"]), oh: (row // s["ow"]) % s["oh"],
                ow: row % s["ow"], oc: col}

    def gather(self, role: str, row: Aff, col: Aff) -> tuple[tuple[Aff, ...], tuple[Constraint, ...]]:
        """Subscripts of the element ``(row, col)`` of operand ``role`` (``a``:
        ``(m, k)``, ``b``: ``(oc, k)``, whatever the tile's layout) and the
        conditions under which it exists (outside them the tile holds 0)."""
        s = self.sizes
        ic, kh, kw = col // (s["kh"] * s["kw"]), (col // s["kw"]) % s["kh"], col % s["kw"]
        if role == "b":
            return (row, ic, kh, kw), ()
        n, oh, ow = self.output_map(row, Aff.const(0))[self.band_vars[0]], \
            (row // s["ow"]) % s["oh"], row % s["ow"]
        (sh, dh, ch), (sw, dw, cw) = self.spatial
        ih, iw = oh * sh + kh * dh + ch, ow * sw + kw * dw + cw
        return (n, ic, ih, iw), _bounds(ih, iw, s["h"], s["w"])


    def row_chunk(self, m: Aff, k: Aff, width: int
                  ) -> tuple[tuple[Aff, ...], tuple[Constraint, ...]]:
        """For A with stride 1 along the width: the subscripts of element
        ``(m, k)`` with the width subscript last and the conditions under which
        the ``width`` elements ``(m .. m + width - 1, k)`` are all inside one
        output row and the input (then they are consecutive in ``X``)."""
        s = self.sizes
        indices, _ = self.gather("a", m, k)
        ow = m % s["ow"]
        ih, iw = indices[2], indices[3]
        inside = (Constraint(ow + width, "<=", Aff.const(s["ow"])),
                  Constraint(ih, ">=", Aff.const(0)), Constraint(ih, "<", Aff.const(s["h"])),
                  Constraint(iw, ">=", Aff.const(0)),
                  Constraint(iw + width, "<=", Aff.const(s["w"])))
        return indices, inside


def _bounds(ih: Aff, iw: Aff, h: int, w: int) -> tuple[Constraint, ...]:
    zero = Aff.const(0)
    return (Constraint(ih, ">=", zero), Constraint(ih, "<", Aff.const(h)),
            Constraint(iw, ">=", zero), Constraint(iw, "<", Aff.const(w)))


def _linear(index: Aff, outer: str, inner: str | None) -> tuple[int, int, int]:
    """``(s, d, c)`` with ``index == s*outer + d*inner + c`` (``inner`` None:
    a kernel extent of 1, ``d`` = 1), or NotAContraction."""
    def at(o: int, i: int) -> int:
        values = {outer: Aff.const(o), **({inner: Aff.const(i)} if inner else {})}
        return index.substitute(values).constant

    c = at(0, 0)
    s, d = at(1, 0) - c, (at(0, 1) - c if inner else 1)
    inner_part = Aff.var(inner) * d if inner else Aff.const(0)
    if index != Aff.var(outer) * s + inner_part + c or s <= 0 or d <= 0:
        raise NotAContraction(f"input subscript '{index}' is not stride*{outer} + "
                              f"dilation*{inner} + offset")
    return s, d, c


def find_convolution(function: Function, nest: Node) -> ImplicitGemm:
    """The convolution ``nest`` computes; NotAContraction saying why otherwise."""
    symbols = set(function.symbols)
    band: list[For] = []
    loop: Node = nest
    while isinstance(loop, For) and loop.parallel and len(band) < 4:
        why = _simple_loop(loop, symbols)
        if why:
            raise NotAContraction(why)
        band.append(loop)
        loop = loop.body[0] if len(loop.body) == 1 else loop
        if loop is band[-1]:
            break
    if len(band) != 4 or not all(lp.upper[0].is_constant for lp in band):
        raise NotAContraction("not four parallel loops of constant extent (a convolution band)")
    body = band[-1].body
    reductions = [n for n in body if isinstance(n, For)]
    if len(reductions) != 1 or not all(isinstance(n, (Assign, For)) for n in body):
        raise NotAContraction("the band's body is not statements around one reduction nest")
    position = body.index(reductions[0])
    before, after = body[:position], body[position + 1:]
    red: list[For] = []
    inner: Node = reductions[0]
    while isinstance(inner, For):
        why = _simple_loop(inner, symbols)
        # a reduction loop may be marked parallel (one trip, or a guard that lets
        # one iteration through): summing it in any order is still the sum
        if why or inner.locals or not inner.upper[0].is_constant:
            raise NotAContraction(why or f"reduction loop '{inner.var}' has locals or a "
                                         f"symbolic extent")
        red.append(inner)
        if len(inner.body) != 1:
            raise NotAContraction(f"reduction loop '{inner.var}' holds more than one node")
        inner = inner.body[0]
    if not 1 <= len(red) <= 3:
        raise NotAContraction("not one to three reduction loops (a 2-d convolution)")
    guard: tuple[Constraint, ...] = ()
    if isinstance(inner, If):
        if inner.else_body or len(inner.then_body) != 1:
            raise NotAContraction("the reduction's guard has an else branch or several statements")
        guard, inner = inner.conditions, inner.then_body[0]
    if not isinstance(inner, Assign):
        raise NotAContraction("the reduction's body is not one statement")
    update = inner
    return _from_update(function, band, red, guard, before, after, update)


def _from_update(function: Function, band: list[For], red: list[For], guard: tuple[Constraint, ...],
                 before: tuple[Node, ...], after: tuple[Node, ...], update: Assign) -> ImplicitGemm:
    buffers = function.buffers
    acc = buffers.get(update.buffer)
    value = update.value
    target = Load(update.buffer, update.indices)
    product = None
    if acc is not None and acc.dtype is DType.F32 and isinstance(value, BinOp) and value.op == "+":
        product = value.rhs if value.lhs == target else value.lhs if value.rhs == target else None
    if not isinstance(product, BinOp) or product.op != "*":
        raise NotAContraction(f"statement {update.name} is not 'acc = acc + x * y' on an f32 acc")
    red_vars = {lp.var for lp in red}
    if not all(isinstance(i, Aff) and not (i.variables() & red_vars) for i in update.indices):
        raise NotAContraction(f"statement {update.name}: accumulator subscripts use the reduction")
    x, y = _strip(product.lhs), _strip(product.rhs)
    if x is None or y is None or len(x.indices) != 4 or len(y.indices) != 4:
        raise NotAContraction(f"statement {update.name}: the product is not of two 4-d loads")
    if buffers[x.buffer].rank != 4 or not all(isinstance(i, Aff) for i in (*x.indices, *y.indices)):
        raise NotAContraction("operands are not 4-d with affine subscripts")
    if buffers[y.buffer].dtype is not buffers[x.buffer].dtype:
        raise NotAContraction("input and weights have different types")
    if isinstance(y.indices[2], Aff) and len(y.indices[2].variables()) > 1:
        x, y = y, x   # the input is the operand with the strided subscripts
    xi = [i for i in x.indices if isinstance(i, Aff)]
    yi = [i for i in y.indices if isinstance(i, Aff)]
    # a kernel extent of 1 leaves its loop out and its weight subscript 0
    one = [next(iter(i.variables())) if len(i.variables()) == 1 and i == Aff.var(
        next(iter(i.variables()))) else "" if i == Aff.const(0) else None for i in yi]
    if None in one or "" in one[:2]:
        raise NotAContraction(f"weights '{y.buffer}' are not indexed [oc, ic, kh, kw] by loop "
                              f"variables (or 0 for a kernel extent of 1)")
    oc, ic = str(one[0]), str(one[1])
    kh, kw = (one[2] or None), (one[3] or None)
    band_vars = {lp.var for lp in band}
    if {ic, kh, kw} - {None} != red_vars or oc not in band_vars:
        raise NotAContraction(f"weights '{y.buffer}' are not [oc, ic, kh, kw] of the nest")
    if xi[0] != Aff.var(next(iter(xi[0].variables() or {""}))) or xi[1] != Aff.var(ic):
        raise NotAContraction(f"input '{x.buffer}' is not [n, ic, ...]")
    n = next(iter(xi[0].variables()))
    oh_set, ow_set = xi[2].variables() - {kh}, xi[3].variables() - {kw}
    wshape = [d.constant if d.is_constant else 0 for d in buffers[y.buffer].shape]
    if len(oh_set) != 1 or len(ow_set) != 1:
        raise NotAContraction(f"input '{x.buffer}': spatial subscripts are not output + kernel")
    oh, ow = next(iter(oh_set)), next(iter(ow_set))
    if {n, oc, oh, ow} != band_vars:
        raise NotAContraction("the band is not the loops n, oc, oh, ow")
    spatial = (_linear(xi[2], oh, kh), _linear(xi[3], ow, kw))
    extent = {lp.var: lp.upper[0].constant for lp in band + red}
    if (kh is None and wshape[2] != 1) or (kw is None and wshape[3] != 1):
        raise NotAContraction(f"weights '{y.buffer}': a kernel dimension without its loop")
    shape = [d.constant if d.is_constant else None for d in buffers[x.buffer].shape]
    if None in shape or buffers[x.buffer].rank != 4:
        raise NotAContraction(f"input '{x.buffer}' has a symbolic shape")
    sizes = {"n": extent[n], "oc": extent[oc], "oh": extent[oh], "ow": extent[ow],
             "ic": extent[ic], "kh": extent[kh] if kh else 1, "kw": extent[kw] if kw else 1,
             "h": int(shape[2] or 0), "w": int(shape[3] or 0)}
    allowed = {c.as_nonnegative() for c in _bounds(xi[2], xi[3], sizes["h"], sizes["w"])}
    if any(c.as_nonnegative() not in allowed for c in guard):
        raise NotAContraction("the reduction's guard is not the input bounds (padding)")
    nest_body = band[-1].body
    _, written = buffer_accesses(nest_body)
    if x.buffer in written or y.buffer in written:
        raise NotAContraction("the nest writes one of its operands")
    if any(ld.buffer == update.buffer for ld in (*loads(product.lhs), *loads(product.rhs))):
        raise NotAContraction("the product reads the accumulator")
    if red_vars & used_variables(before + after):
        raise NotAContraction("statements outside the reduction use its variables")
    dtype = buffers[x.buffer].dtype
    # stride 1 along the width: A stored [k, m] in shared memory, m contiguous
    # as in the input, so 8 outputs of one row are one 16-byte copy
    a = Operand(x.buffer, dtype, "col" if spatial[1][0] == 1 else "row", ())
    b = Operand(y.buffer, dtype, "col", ())
    return ImplicitGemm(tuple(band), before, update, after, a, b, sizes, spatial,
                        (n, oc, oh, ow))


__all__ = ["ImplicitGemm", "find_convolution"]
