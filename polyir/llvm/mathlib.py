"""Branch-free float32 ``exp``, ``tanh`` and ``erf`` in plain LLVM instructions.

A call to libm's ``expf``/``tanhf`` stops the loop vectoriser (LLVM has no
vector libm on a plain Linux host). These versions are straight-line code
(selects, no calls), so loops that use them vectorise. Each operation is a
separate float32 instruction (no fused multiply-add), so results do not
depend on the target's FMA support; with ``contract=True`` (the CPU
backend's fast math, which contracts the user's own arithmetic too) the
multiplies and adds carry LLVM's ``contract`` flag and become FMAs where the
target has them: about a quarter fewer instructions per ``exp`` (the
polynomial's Horner steps and the reduction's two products), results within
the same error bound (the fused steps round once instead of twice).

* ``exp``: Cody-Waite reduction ``x = n*ln2 + r``, ``|r| <= ln2/2``, a degree-6
  minimax polynomial (coefficients from Cephes ``expf``), then ``2**n`` applied
  in two steps so that results in the subnormal range and up to ``FLT_MAX``
  are right. Max error about 1 ulp; ``exp(nan) = nan``, ``exp(-inf) = 0``.
* ``tanh``: ``x + x**3 * P(x**2)`` for ``|x| < 0.625`` (Cephes ``tanhf``),
  else ``sign(x) * (1 - 2 / (exp(2|x|) + 1))``. Max error about 2 ulp.
* ``erf`` (GELU's): ``x * A(x**2)`` for ``|x| <= 1`` (a degree-5 polynomial),
  else ``sign(x) * (1 - exp(-x**2) * B(1/|x|))`` with ``|x|`` clamped to 4
  (``erf`` rounds to 1 from 3.92 on; ``B``: degree 8, ``erfc(x) * exp(x**2)``).
  Both polynomials are least-squares Chebyshev fits made for this module in
  float64 (``erf``/``erfcx`` of SciPy as the reference, then converted to
  powers); max error about 2.5 ulp (at the smallest ``|x|``, from the float32
  Horner steps); ``erf(nan) = nan``, ``erf(+-inf) = +-1``.
"""
from __future__ import annotations

from llvmlite import ir

F32 = ir.FloatType()
I32 = ir.IntType(32)

_LOG2E = 1.44269504088896341
_LN2_HI = 0.693359375
_LN2_LO = -2.12194440e-4
_EXP_POLY = (1.9875691500e-4, 1.3981999507e-3, 8.3334519073e-3, 4.1665795894e-2,
             1.6666665459e-1, 5.0000001201e-1)
_TANH_POLY = (-5.70498872745e-3, 2.06390887954e-2, -5.37397155531e-2, 1.33314422036e-1,
              -3.33332819422e-1)


_ERF_SMALL = (-0.000565085366459047, 0.004919779510441301, -0.026710286848889077,
              0.11279986891923963, -0.3761226447264691, 1.1283790789901427)
"""``erf(x) / x`` as a polynomial in ``x**2`` on ``[0, 1]``, highest power first."""
_ERFCX_LARGE = (-0.010101200123647102, 0.031210265643070476, 0.019393974902541813,
                -0.23832473793206546, 0.49552461993489455, -0.47149458432670543,
                0.04208581329898148, 0.5590167016708911, 0.0002726598208445674)
"""``erfc(x) * exp(x**2)`` as a polynomial in ``1/x`` on ``[1, 4]``, highest power first."""


def _const(value: float) -> ir.Constant:
    return ir.Constant(F32, value)


def _intrinsic(b: ir.IRBuilder, name: str, args: list[ir.Value]) -> ir.Value:
    module = b.module
    fn = module.globals.get(name)
    if fn is None:
        fn = ir.Function(module, ir.FunctionType(F32, [F32] * len(args)), name)
    return b.call(fn, args)


def _horner(b: ir.IRBuilder, x: ir.Value, coefficients: tuple[float, ...],
            flags: tuple[str, ...] = ()) -> ir.Value:
    result: ir.Value = _const(coefficients[0])
    for c in coefficients[1:]:
        result = b.fadd(b.fmul(result, x, flags=flags), _const(c), flags=flags)
    return result


def _pow2(b: ir.IRBuilder, n: ir.Value) -> ir.Value:
    """``2.0**n`` for an i32 ``n`` in ``[-126, 127]`` by building the bits."""
    biased = b.add(n, ir.Constant(I32, 127))
    return b.bitcast(b.shl(biased, ir.Constant(I32, 23)), F32)


def emit_exp_f32(b: ir.IRBuilder, x: ir.Value, contract: bool = False) -> ir.Value:
    """``exp(x)`` for a float32 ``x`` (see the module docstring)."""
    f = ("contract",) if contract else ()
    # clamp so that n stays in [-151, 129]; results outside saturate to 0 / inf
    clamped = _intrinsic(b, "llvm.minnum.f32", [x, _const(89.0)])
    clamped = _intrinsic(b, "llvm.maxnum.f32", [clamped, _const(-104.0)])
    n_float = _intrinsic(b, "llvm.rint.f32", [b.fmul(clamped, _const(_LOG2E))])
    r = b.fsub(clamped, b.fmul(n_float, _const(_LN2_HI), flags=f), flags=f)
    r = b.fsub(r, b.fmul(n_float, _const(_LN2_LO), flags=f), flags=f)
    r2 = b.fmul(r, r)
    poly = b.fmul(_horner(b, r, _EXP_POLY, f), r2, flags=f)
    poly = b.fadd(b.fadd(poly, r, flags=f), _const(1.0))
    n = b.fptosi(n_float, I32)
    # 2**n as 2**half * 2**(n - half): both factors stay normal
    half = b.ashr(n, ir.Constant(I32, 1))
    result = b.fmul(b.fmul(poly, _pow2(b, half)), _pow2(b, b.sub(n, half)))
    overflow = b.fcmp_ordered(">", x, _const(88.72283935546875))
    result = b.select(overflow, _const(float("inf")), result)
    is_nan = b.fcmp_unordered("uno", x, x)
    return b.select(is_nan, x, result)


def emit_tanh_f32(b: ir.IRBuilder, x: ir.Value, contract: bool = False) -> ir.Value:
    """``tanh(x)`` for a float32 ``x`` (see the module docstring)."""
    magnitude = _intrinsic(b, "llvm.fabs.f32", [x])
    z = b.fmul(x, x)
    small = b.fadd(b.fmul(b.fmul(_horner(b, z, _TANH_POLY), z), x), x)
    e = emit_exp_f32(b, b.fmul(magnitude, _const(2.0)), contract)
    large = b.fsub(_const(1.0), b.fdiv(_const(2.0), b.fadd(e, _const(1.0))))
    large = _intrinsic(b, "llvm.copysign.f32", [large, x])
    use_small = b.fcmp_unordered("<", magnitude, _const(0.625))
    return b.select(use_small, small, large)


def emit_erf_f32(b: ir.IRBuilder, x: ir.Value, contract: bool = False) -> ir.Value:
    """``erf(x)`` for a float32 ``x`` (see the module docstring)."""
    f = ("contract",) if contract else ()
    magnitude = _intrinsic(b, "llvm.fabs.f32", [x])
    small = b.fmul(x, _horner(b, b.fmul(x, x), _ERF_SMALL, f))
    clamped = _intrinsic(b, "llvm.minnum.f32", [magnitude, _const(4.0)])
    clamped = _intrinsic(b, "llvm.maxnum.f32", [clamped, _const(1.0)])
    tail = b.fmul(emit_exp_f32(b, b.fneg(b.fmul(clamped, clamped)), contract),
                  _horner(b, b.fdiv(_const(1.0), clamped), _ERFCX_LARGE, f))
    large = _intrinsic(b, "llvm.copysign.f32", [b.fsub(_const(1.0), tail), x])
    use_small = b.fcmp_unordered("<=", magnitude, _const(1.0))   # NaN: x * A(nan) = nan
    return b.select(use_small, small, large)
