"""Math functions for NVPTX without libdevice, in f32 and f64.

The NVPTX backend cannot select ``llvm.exp``, ``llvm.log``, ``llvm.sin``,
``llvm.pow`` or a call to ``erf`` (there is no libm on the device), so these
are emitted inline from plain arithmetic:

* ``exp``/``exp2``: ``x = n*ln2 + r`` (Cody-Waite, ``|r| <= ln2/2``), a Taylor
  polynomial for ``e^r``, and ``2^n`` built from exponent bits in two halves
  (so results near overflow and in the subnormal range are right).
* ``log``/``log2``: ``x = m * 2^e`` from the bits (subnormals scaled first),
  ``m`` in ``[sqrt(1/2), sqrt(2))``, ``log m = 2 atanh((m-1)/(m+1))`` by its
  odd series; 0 -> -inf, negative -> NaN, inf -> inf.
* ``sin``/``cos``: reduction by ``pi/2`` in three parts, Taylor on
  ``[-pi/4, pi/4]``, quadrant select (accurate for ``|x|`` up to about 1e5).
* ``tanh``: ``expm1(2|x|)`` by series for ``|x| < 0.55`` (no cancellation),
  ``1 - 2/(exp(2|x|)+1)`` above; sign restored.
* ``erf``: Taylor series for ``|x| < 0.5``, Abramowitz-Stegun 7.1.26 above
  (absolute error 1.5e-7: f32-accurate; for f64 this is the one function
  with f32 accuracy only).
* ``sigmoid = 1/(1+exp(-x))``; ``pow(a, b) = exp(b log|a|)`` with the C
  special cases (``b == 0`` -> 1, negative ``a`` with integer ``b`` -> sign by
  parity, otherwise NaN; ``a == 0``).

``sqrt``, ``rsqrt``, ``abs``, ``floor``, ``ceil``, ``max``, ``min`` keep the
shared lowering's LLVM intrinsics, which NVPTX selects.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from decimal import Decimal
from fractions import Fraction
from typing import TYPE_CHECKING

from llvmlite import ir

from polyir.llvm.hooks import I32, I64

if TYPE_CHECKING:
    from polyir.llvm.lower import FunctionLowerer

HANDLED = ("exp", "exp2", "log", "log2", "sin", "cos", "tanh", "erf", "sigmoid", "pow")


class _Math:
    """Emits one math function at the lowerer's builder, for ``float`` or ``double``."""

    def __init__(self, lowerer: FunctionLowerer, typ: ir.Type):
        self.lw = lowerer
        self.b = lowerer.builder
        self.t = typ
        self.f64 = isinstance(typ, ir.DoubleType)
        self.int = I64 if self.f64 else I32
        self.mant = 52 if self.f64 else 23
        self.bias = 1023 if self.f64 else 127
        self.sfx = "f64" if self.f64 else "f32"

    # ----------------------------------------------------------- helpers
    def c(self, value: float) -> ir.Constant:
        return ir.Constant(self.t, value)

    def ci(self, value: int) -> ir.Constant:
        return ir.Constant(self.int, value)

    def intrinsic(self, name: str, *args: ir.Value) -> ir.Value:
        fn = self.lw.intrinsic(f"llvm.{name}.{self.sfx}", self.t, [self.t] * len(args))
        return self.b.call(fn, list(args))

    def fma(self, a: ir.Value, b: ir.Value, c: ir.Value) -> ir.Value:
        return self.intrinsic("fma", a, b, c)

    def horner(self, x: ir.Value, coeffs: Sequence[float]) -> ir.Value:
        """``sum(coeffs[k] * x**k)``."""
        acc = self.c(coeffs[-1])
        for coeff in reversed(coeffs[:-1]):
            acc = self.fma(acc, x, self.c(coeff))
        return acc

    def lt(self, a: ir.Value, b: ir.Value) -> ir.Value:
        return self.b.fcmp_ordered("<", a, b)

    def select(self, cond: ir.Value, a: ir.Value, b: ir.Value) -> ir.Value:
        return self.b.select(cond, a, b)

    def pow2i(self, n: ir.Value) -> ir.Value:
        """``2.0 ** n`` for an integer ``n`` in the normal exponent range."""
        bits = self.b.shl(self.b.add(n, self.ci(self.bias)), self.ci(self.mant))
        return self.b.bitcast(bits, self.t)

    # --------------------------------------------------------- functions
    def exp_reduced(self, n: ir.Value, r: ir.Value) -> ir.Value:
        """``2**n * e**r`` for integer-valued float ``n`` and ``|r| <= ln2/2``."""
        degree = 14 if self.f64 else 8
        poly = self.horner(r, [1.0 / math.factorial(k) for k in range(degree + 1)])
        limit = 1100 if self.f64 else 160
        n = self.intrinsic("minnum", self.intrinsic("maxnum", n, self.c(-limit)), self.c(limit))
        ni = self.b.fptosi(n, self.int)
        half = self.b.ashr(ni, self.ci(1))
        rest = self.b.sub(ni, half)
        return self.b.fmul(self.b.fmul(poly, self.pow2i(half)), self.pow2i(rest))

    def exp(self, x: ir.Value) -> ir.Value:
        n = self.intrinsic("rint", self.b.fmul(x, self.c(1.0 / math.log(2.0))))
        ln2_hi, ln2_lo = _split(LN2, self.f64)
        r = self.fma(n, self.c(-ln2_hi), x)
        r = self.fma(n, self.c(-ln2_lo), r)
        result = self.exp_reduced(n, r)
        return self._exp_edges(x, result, 709.8 if self.f64 else 88.73, -745.2 if self.f64 else -103.98)

    def exp2(self, x: ir.Value) -> ir.Value:
        n = self.intrinsic("rint", x)
        r = self.b.fmul(self.b.fsub(x, n), self.c(math.log(2.0)))
        result = self.exp_reduced(n, r)
        return self._exp_edges(x, result, 1024.0 if self.f64 else 128.0, -1075.0 if self.f64 else -150.0)

    def _exp_edges(self, x: ir.Value, result: ir.Value, high: float, low: float) -> ir.Value:
        result = self.select(self.b.fcmp_ordered(">", x, self.c(high)), self.c(math.inf), result)
        result = self.select(self.lt(x, self.c(low)), self.c(0.0), result)
        return self.select(self.b.fcmp_unordered("uno", x, x), x, result)

    def log(self, x: ir.Value) -> ir.Value:
        b = self.b
        tiny = self.lt(x, self.c(2.0 ** (-1022 if self.f64 else -126)))
        scale = 64 if self.f64 else 32
        scaled = self.select(tiny, b.fmul(x, self.c(2.0 ** scale)), x)
        bits = b.bitcast(scaled, self.int)
        exponent = b.sub(b.lshr(bits, self.ci(self.mant)), self.ci(self.bias))
        mantissa_bits = b.or_(b.and_(bits, self.ci((1 << self.mant) - 1)), self.ci(self.bias << self.mant))
        m = b.bitcast(mantissa_bits, self.t)  # in [1, 2)
        big = b.fcmp_ordered(">", m, self.c(math.sqrt(2.0)))
        m = self.select(big, b.fmul(m, self.c(0.5)), m)
        exponent = self.select(big, b.add(exponent, self.ci(1)), exponent)
        exponent = self.select(tiny, b.sub(exponent, self.ci(scale)), exponent)
        s = b.fdiv(b.fsub(m, self.c(1.0)), b.fadd(m, self.c(1.0)))
        s2 = b.fmul(s, s)
        terms = 10 if self.f64 else 5
        series = self.horner(s2, [2.0 / (2 * k + 1) for k in range(terms)])
        e = b.sitofp(exponent, self.t)
        ln2_hi, ln2_lo = _split(LN2, self.f64)
        result = self.fma(e, self.c(ln2_hi), self.fma(e, self.c(ln2_lo), b.fmul(s, series)))
        result = self.select(b.fcmp_ordered("==", x, self.c(0.0)), self.c(-math.inf), result)
        result = self.select(self.lt(x, self.c(0.0)), self.c(math.nan), result)
        result = self.select(b.fcmp_ordered("==", x, self.c(math.inf)), x, result)
        return self.select(b.fcmp_unordered("uno", x, x), x, result)

    def sincos(self, x: ir.Value, cosine: bool) -> ir.Value:
        b = self.b
        k = self.intrinsic("rint", b.fmul(x, self.c(2.0 / math.pi)))
        parts = _split3(HALF_PI, self.f64)
        r = x
        for part in parts:
            r = self.fma(k, self.c(-part), r)
        r2 = b.fmul(r, r)
        terms = 10 if self.f64 else 6
        sin_r = b.fmul(r, self.horner(r2, [(-1) ** j / math.factorial(2 * j + 1) for j in range(terms)]))
        cos_r = self.horner(r2, [(-1) ** j / math.factorial(2 * j) for j in range(terms)])
        quadrant = b.fptosi(k, I64)
        if cosine:
            quadrant = b.add(quadrant, ir.Constant(I64, 1))
        q = b.and_(quadrant, ir.Constant(I64, 3))
        use_cos = b.icmp_unsigned("==", b.and_(q, ir.Constant(I64, 1)), ir.Constant(I64, 1))
        negate = b.icmp_unsigned("==", b.and_(q, ir.Constant(I64, 2)), ir.Constant(I64, 2))
        value = self.select(use_cos, cos_r, sin_r)
        return self.select(negate, b.fneg(value), value)

    def tanh(self, x: ir.Value) -> ir.Value:
        b = self.b
        ax = self.intrinsic("fabs", x)
        y = b.fmul(ax, self.c(2.0))
        degree = 20 if self.f64 else 12
        expm1 = b.fmul(y, self.horner(y, [1.0 / math.factorial(k + 1) for k in range(degree)]))
        small = b.fdiv(expm1, b.fadd(expm1, self.c(2.0)))
        large = b.fsub(self.c(1.0), b.fdiv(self.c(2.0), b.fadd(self.exp(y), self.c(1.0))))
        t = self.select(self.lt(ax, self.c(0.55)), small, large)
        return self.intrinsic("copysign", t, x)

    def erf(self, x: ir.Value) -> ir.Value:
        b = self.b
        ax = self.intrinsic("fabs", x)
        x2 = b.fmul(x, x)
        terms = 12 if self.f64 else 7
        coeffs = [2 / math.sqrt(math.pi) * (-1) ** n / (math.factorial(n) * (2 * n + 1)) for n in range(terms)]
        small = b.fmul(x, self.horner(x2, coeffs))
        t = b.fdiv(self.c(1.0), self.fma(self.c(0.3275911), ax, self.c(1.0)))
        poly = b.fmul(t, self.horner(t, [0.254829592, -0.284496736, 1.421413741, -1.453152027, 1.061405429]))
        tail = b.fsub(self.c(1.0), b.fmul(poly, self.exp(b.fneg(x2))))
        large = self.intrinsic("copysign", tail, x)
        return self.select(self.lt(ax, self.c(0.5)), small, large)

    def sigmoid(self, x: ir.Value) -> ir.Value:
        one = self.c(1.0)
        return self.b.fdiv(one, self.b.fadd(one, self.exp(self.b.fneg(x))))

    def pow(self, a: ir.Value, e: ir.Value) -> ir.Value:
        b = self.b
        magnitude = self.exp(b.fmul(e, self.log(self.intrinsic("fabs", a))))
        integral = b.fcmp_ordered("==", self.intrinsic("trunc", e), e)
        half = b.fmul(e, self.c(0.5))
        odd = b.and_(integral, b.fcmp_ordered("!=", self.intrinsic("trunc", half), half))
        negative = self.lt(a, self.c(0.0))
        signed = self.select(odd, b.fneg(magnitude), magnitude)
        result = self.select(negative, self.select(integral, signed, self.c(math.nan)), magnitude)
        return self.select(b.fcmp_ordered("==", e, self.c(0.0)), self.c(1.0), result)


LN2 = Fraction(Decimal("0.6931471805599453094172321214581765680755001343602552541206800095"))
"""ln 2 to 64 digits."""


def _split(value: Fraction, f64: bool) -> tuple[float, float]:
    """``value = hi + lo`` (to about twice the bits of the type) with ``hi``
    short enough that ``n * hi`` is exact."""
    bits = 32 if f64 else 12
    hi = Fraction(math.floor(value * 2 ** bits), 2 ** bits)
    return float(hi), float(value - hi)


HALF_PI = Fraction(Decimal("1.5707963267948966192313216916397514420985846996875529104874722961"))
"""pi/2 to 64 digits (a double holds only 53 bits of it; f64 reduction needs more)."""


def _split3(value: Fraction, f64: bool) -> tuple[float, float, float]:
    """``value = hi + mid + lo`` (to about 3x the bits of the type), with ``hi``
    and ``mid`` short enough that ``k * hi`` and ``k * mid`` are exact."""
    bits = 30 if f64 else 11
    hi = Fraction(math.floor(value * 2 ** bits), 2 ** bits)
    mid = Fraction(math.floor((value - hi) * 2 ** (2 * bits)), 2 ** (2 * bits))
    return float(hi), float(mid), float(value - hi - mid)


def emit_math(lowerer: FunctionLowerer, fn: str, args: Sequence[ir.Value]) -> ir.Value | None:
    """The value of math function ``fn`` on float ``args``; ``None`` when the
    shared lowering's default is selectable on NVPTX."""
    if fn not in HANDLED:
        return None
    m = _Math(lowerer, args[0].type)
    if fn in ("sin", "cos"):
        return m.sincos(args[0], cosine=fn == "cos")
    if fn == "log2":
        return lowerer.builder.fmul(m.log(args[0]), m.c(1.0 / math.log(2.0)))
    method = getattr(m, fn)
    return method(*args)


__all__ = ["emit_math", "HANDLED"]
