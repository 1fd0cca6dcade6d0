"""Value expressions -> LLVM instructions (a mixin of ``FunctionLowerer``).

Every expression is lowered to its *compute* value (see ``hooks.compute_type``)
together with its polyir dtype. Semantics follow docs/ir.md: no implicit
promotion, integer ``/`` and ``%`` truncate, float ``max``/``min`` ignore a NaN
operand (``llvm.maxnum``), float -> int casts truncate toward zero (saturating,
NaN -> 0, so no poison), bool is 0/1.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, cast

import numpy as np
from llvmlite import ir

from polyir.errors import CompileError
from polyir.ir.affine import Aff
from polyir.ir.nodes import BinOp, Call, Cast, Compare, Const, Load, Select, Var
from polyir.ir.types import DType, round_to_bf16
from polyir.llvm.hooks import F32, F64, I1, I32, I64, compute_type

if TYPE_CHECKING:
    from polyir.ir.nodes import Function
    from polyir.llvm.hooks import LoweringHooks
    from polyir.llvm.lower import BufferBinding, FunctionLowerer

_FLOAT_INTRINSICS = ("exp", "exp2", "log", "log2", "sqrt", "sin", "cos", "floor", "ceil",
                     "tanh")


def constant(dtype: DType, value: int | float | bool) -> ir.Constant:
    """A compute-type constant of ``dtype`` (f16/bf16 values are rounded first)."""
    typ = compute_type(dtype)
    if dtype is DType.BOOL:
        return ir.Constant(I1, 1 if value else 0)
    if dtype.is_int:
        bits = dtype.bits
        wrapped = int(value) & ((1 << bits) - 1)
        return ir.Constant(typ, wrapped - (1 << bits) if wrapped >> (bits - 1) else wrapped)
    number = float(value)
    with np.errstate(over="ignore"):     # a constant beyond the type's range is an infinity
        if dtype is DType.F16:
            number = float(np.float16(number))
        elif dtype is DType.BF16:
            number = float(round_to_bf16(np.array([number], dtype=np.float32))[0])
        elif dtype is DType.F32:
            number = float(np.float32(number))
    return ir.Constant(typ, number)


class ExprLowering:
    """Expression lowering; needs ``builder``, ``hooks``, ``vars``, ``load``,
    ``intrinsic`` and ``declare`` from the host class."""

    builder: ir.IRBuilder
    hooks: LoweringHooks
    vars: dict[str, ir.Value]
    function: Function
    buffers: dict[str, BufferBinding]

    def aff(self, a: Aff) -> ir.Value: ...
    def load(self, name: str, indices: Sequence[object]) -> ir.Value: ...
    def intrinsic(self, name: str, ret: ir.Type, args: Sequence[ir.Type]) -> ir.Function: ...
    def declare(self, name: str, ret: ir.Type, args: Sequence[ir.Type]) -> ir.Function: ...

    # ------------------------------------------------------------ public
    def expr(self, e: object) -> ir.Value:
        """The compute value of expression ``e``."""
        return self.typed_expr(e)[0]

    def typed_expr(self, e: object) -> tuple[ir.Value, DType]:
        """``(value, dtype)`` of expression ``e``."""
        if isinstance(e, Const):
            return constant(e.dtype, e.value), e.dtype
        if isinstance(e, Var):
            return self.var(e.name), DType.I64
        if isinstance(e, Aff):
            return self.aff(e), DType.I64
        if isinstance(e, Load):
            binding = self.buffers.get(e.buffer)
            if binding is None:
                raise CompileError(f"function '{self.function.name}': load of unknown "
                                   f"buffer '{e.buffer}'")
            return self.load(e.buffer, e.indices), binding.buffer.dtype
        if isinstance(e, BinOp):
            return self._binop(e)
        if isinstance(e, Compare):
            return self._compare(e), DType.BOOL
        if isinstance(e, Call):
            return self._call(e)
        if isinstance(e, Select):
            cond, cond_type = self.typed_expr(e.cond)
            a, a_type = self.typed_expr(e.if_true)
            b, b_type = self.typed_expr(e.if_false)
            self._same(a_type, b_type, "select")
            if cond_type is not DType.BOOL:
                raise CompileError(f"select condition of type {cond_type}, expected bool")
            return self.builder.select(cond, a, b), a_type
        if isinstance(e, Cast):
            value, source = self.typed_expr(e.value)
            return self.cast(value, source, e.dtype), e.dtype
        raise CompileError(f"cannot lower expression {e!r}")

    def var(self, name: str) -> ir.Value:
        value = self.vars.get(name)
        if value is None:
            raise CompileError(f"function '{self.function.name}': unbound variable "
                               f"'{name}'")
        return value

    def index_value(self, index: object) -> ir.Value:
        """A subscript (``Aff`` or integer expression) as i64."""
        if isinstance(index, Aff):
            return self.aff(index)
        value, dtype = self.typed_expr(index)
        if dtype is DType.BOOL:
            return self.builder.zext(value, I64)
        if not dtype.is_int:
            raise CompileError(f"subscript of type {dtype}; expected an integer")
        return value if dtype is DType.I64 else self.builder.sext(value, I64)

    def round_bf16(self, value: ir.Value) -> ir.Value:
        """A float rounded to bfloat16 (ties to even), kept as float; NaN unchanged."""
        b = self.builder
        bits = b.bitcast(value, I32)
        lsb = b.and_(b.lshr(bits, ir.Constant(I32, 16)), ir.Constant(I32, 1))
        rounded = b.add(bits, b.add(lsb, ir.Constant(I32, 0x7FFF)))
        masked = b.and_(rounded, ir.Constant(I32, 0xFFFF0000 - (1 << 32)))
        result = b.bitcast(masked, F32)
        is_nan = b.fcmp_unordered("uno", value, value)
        return b.select(is_nan, value, result)

    def cast(self, value: ir.Value, source: DType, target: DType) -> ir.Value:
        """Convert a compute value of ``source`` to ``target``."""
        b = self.builder
        typ = compute_type(target)
        if source is target:
            return value
        if target is DType.BOOL:
            if source.is_float:
                return b.fcmp_unordered("!=", value, ir.Constant(value.type, 0.0))
            return b.icmp_unsigned("!=", value, ir.Constant(value.type, 0))
        if source is DType.BOOL:
            return b.uitofp(value, typ) if target.is_float else b.zext(value, typ)
        if source.is_int and target.is_int:
            if target.bits > source.bits:
                return b.sext(value, typ)
            return b.trunc(value, typ) if target.bits < source.bits else value
        if source.is_int:
            if target in (DType.F16, DType.BF16):
                # through double (exact for |x| < 2**53): one rounding to 11 / 8 bits
                return self._round_float(b.sitofp(value, F64), target)
            return b.sitofp(value, typ)
        if target.is_int:
            name = f"llvm.fptosi.sat.i{target.bits}.{_suffix(value.type)}"
            return b.call(self.intrinsic(name, typ, [value.type]), [value])
        if target in (DType.F16, DType.BF16):
            return self._round_float(value, target)
        if value.type != typ:
            value = b.fpext(value, typ) if typ == F64 else b.fptrunc(value, typ)
        return value

    # ----------------------------------------------------------- private
    def _round_float(self, value: ir.Value, dtype: DType) -> ir.Value:
        """A float or double rounded once to f16/bf16, as a float compute value."""
        b = self.builder
        if dtype is DType.F16:
            if value.type == F64:
                value = self._round_to_odd_f32(value)
            return b.fpext(b.fptrunc(value, ir.HalfType()), F32)
        if value.type == F32:
            return self.round_bf16(value)
        # double -> bf16: round to odd at float precision, then to nearest bf16; float
        # has 16 more significand bits than bf16 at every exponent (subnormals too),
        # so this is the correct rounding of the double, below the normal range too
        return self.round_bf16(self._round_to_odd_f32(value))

    def _round_to_odd_f32(self, value: ir.Value) -> ir.Value:
        """A double as float rounded to odd: rounding that to half precision is the
        correct rounding of the double (and needs no ``__truncdfhf2`` libcall)."""
        b = self.builder
        nearest = b.fptrunc(value, F32)
        back = b.fpext(nearest, F64)
        fabs = self.intrinsic("llvm.fabs.f64", F64, [F64])
        away = b.fcmp_ordered(">", b.call(fabs, [back]), b.call(fabs, [value]))
        bits = b.bitcast(nearest, I32)
        toward_zero = b.select(away, b.sub(bits, ir.Constant(I32, 1)), bits)
        inexact = b.fcmp_ordered("!=", back, value)
        odd = b.select(inexact, b.or_(toward_zero, ir.Constant(I32, 1)), bits)
        return b.bitcast(odd, F32)

    @staticmethod
    def _same(a: DType, b: DType, what: str) -> None:
        if a is not b:
            raise CompileError(f"{what} on {a} and {b}: operands must have the same dtype")

    def _binop(self, e: BinOp) -> tuple[ir.Value, DType]:
        lhs, dtype = self.typed_expr(e.lhs)
        rhs, rhs_type = self.typed_expr(e.rhs)
        self._same(dtype, rhs_type, f"'{e.op}'")
        b = self.builder
        if e.op in ("and", "or"):
            if dtype is not DType.BOOL:
                raise CompileError(f"'{e.op}' on {dtype}; expected bool")
            return (b.and_(lhs, rhs) if e.op == "and" else b.or_(lhs, rhs)), dtype
        if dtype.is_float:
            op = {"+": b.fadd, "-": b.fsub, "*": b.fmul, "/": b.fdiv, "%": b.frem}[e.op]
            return op(lhs, rhs, flags=self.hooks.float_flags), dtype
        if dtype is DType.BOOL:
            raise CompileError(f"arithmetic '{e.op}' on bool")
        if e.op in ("+", "-", "*"):
            op = {"+": b.add, "-": b.sub, "*": b.mul}[e.op]
            return op(lhs, rhs), dtype
        return self._int_divide(e.op, lhs, rhs), dtype

    def _int_divide(self, op: str, lhs: ir.Value, rhs: ir.Value) -> ir.Value:
        """Truncating ``/`` or ``%`` that never traps: x/0 == x%0 == 0, MIN/-1 wraps."""
        b = self.builder
        typ = lhs.type
        zero, one, minus_one = (ir.Constant(typ, v) for v in (0, 1, -1))
        is_zero = b.icmp_signed("==", rhs, zero)
        is_minus_one = b.icmp_signed("==", rhs, minus_one)
        safe = b.select(b.or_(is_zero, is_minus_one), one, rhs)
        if op == "/":
            quotient = b.sdiv(lhs, safe)
            negated = b.sub(zero, lhs)
            return b.select(is_zero, zero, b.select(is_minus_one, negated, quotient))
        remainder = b.srem(lhs, safe)
        return b.select(b.or_(is_zero, is_minus_one), zero, remainder)

    def _compare(self, e: Compare) -> ir.Value:
        lhs, dtype = self.typed_expr(e.lhs)
        rhs, rhs_type = self.typed_expr(e.rhs)
        self._same(dtype, rhs_type, f"'{e.op}'")
        b = self.builder
        if dtype.is_float:
            if e.op == "!=":
                return b.fcmp_unordered("!=", lhs, rhs)
            return b.fcmp_ordered(e.op, lhs, rhs)
        if dtype is DType.BOOL:
            return b.icmp_unsigned(e.op, lhs, rhs)
        return b.icmp_signed(e.op, lhs, rhs)

    def _call(self, e: Call) -> tuple[ir.Value, DType]:
        typed = [self.typed_expr(a) for a in e.args]
        args = [v for v, _ in typed]
        dtype = typed[0][1]
        for _, other in typed[1:]:
            self._same(dtype, other, f"{e.fn}()")
        b = self.builder
        fn = e.fn
        if fn == "not":
            if dtype is not DType.BOOL:
                raise CompileError(f"not() on {dtype}; expected bool")
            return b.xor(args[0], ir.Constant(I1, 1)), dtype
        if dtype.is_float:
            custom = self.hooks.math_call(cast("FunctionLowerer", self), fn, args, dtype)
            if custom is not None:
                return custom, dtype
            return self._float_call(fn, args), dtype
        if dtype is DType.BOOL:
            raise CompileError(f"{fn}() on bool")
        typ = args[0].type
        width = typ.width
        if fn == "neg":
            return b.sub(ir.Constant(typ, 0), args[0]), dtype
        if fn == "abs":
            return b.call(self.intrinsic(f"llvm.abs.i{width}", typ, [typ, I1]),
                          [args[0], ir.Constant(I1, 0)]), dtype
        if fn in ("max", "min"):
            name = f"llvm.{'smax' if fn == 'max' else 'smin'}.i{width}"
            return b.call(self.intrinsic(name, typ, [typ, typ]), args), dtype
        if fn == "pow":
            return b.call(self._int_pow_function(typ), args), dtype
        raise CompileError(f"{fn}() on integer type {dtype}; expected a float type")

    def _int_pow_function(self, typ: ir.IntType) -> ir.Function:
        """``polyir.ipow.iN(a, b)``: wrapping power by squaring; a negative exponent
        gives 0 unless ``|a| == 1`` (as the interpreter; ``0 ** -1`` gives 0)."""
        name = f"polyir.ipow.i{typ.width}"
        module = self.builder.module
        existing = module.globals.get(name)
        if existing is not None:
            return existing
        function = ir.Function(module, ir.FunctionType(typ, [typ, typ]), name)
        function.linkage = "internal"
        base, exponent = function.args
        b = ir.IRBuilder(function.append_basic_block("entry"))
        zero, one, minus_one = (ir.Constant(typ, v) for v in (0, 1, -1))
        negative = function.append_basic_block("negative")
        loop = function.append_basic_block("loop")
        done = function.append_basic_block("done")
        b.cbranch(b.icmp_signed("<", exponent, zero), negative, loop)
        b.position_at_end(negative)
        odd = b.icmp_unsigned("!=", b.and_(exponent, one), zero)
        b.ret(b.select(b.icmp_signed("==", base, one), one,
                       b.select(b.icmp_signed("==", base, minus_one),
                                b.select(odd, minus_one, one), zero)))
        entry = function.entry_basic_block
        b.position_at_end(loop)
        result = b.phi(typ)
        power = b.phi(typ)
        remaining = b.phi(typ)
        result.add_incoming(one, entry)
        power.add_incoming(base, entry)
        remaining.add_incoming(exponent, entry)
        bit = b.icmp_unsigned("!=", b.and_(remaining, one), zero)
        next_result = b.select(bit, b.mul(result, power), result)
        next_power = b.mul(power, power)
        next_remaining = b.lshr(remaining, one)
        result.add_incoming(next_result, loop)
        power.add_incoming(next_power, loop)
        remaining.add_incoming(next_remaining, loop)
        b.cbranch(b.icmp_unsigned("!=", next_remaining, zero), loop, done)
        b.position_at_end(done)
        b.ret(b.select(b.icmp_signed("==", exponent, zero), one, next_result))
        return function

    def _float_call(self, fn: str, args: Sequence[ir.Value]) -> ir.Value:
        """Default float math: LLVM intrinsics, libm's erf/erff."""
        b = self.builder
        typ = args[0].type
        suffix = _suffix(typ)
        one = ir.Constant(typ, 1.0)

        flags = self.hooks.float_flags

        def intrinsic(name: str, values: Sequence[ir.Value]) -> ir.Value:
            callee = self.intrinsic(f"llvm.{name}.{suffix}", typ, [typ] * len(values))
            return b.call(callee, list(values), fastmath=flags)

        if fn in _FLOAT_INTRINSICS:
            return intrinsic(fn, args)
        if fn == "neg":
            return b.fneg(args[0], flags=flags)
        if fn == "abs":
            return intrinsic("fabs", args)
        if fn in ("max", "min") and "nsz" not in flags:
            # Exactly the interpreter's rule (docs/ir.md): ``a`` when ``a > b`` (``<`` for
            # min) or ``b`` is NaN, else ``b``; llvm.maxnum leaves max(+0, -0) unspecified.
            a, c = args
            wins = b.fcmp_ordered(">" if fn == "max" else "<", a, c, flags=flags)
            return b.select(b.or_(wins, b.fcmp_unordered("uno", c, c, flags=flags)), a, c)
        if fn == "max":
            return intrinsic("maxnum", args)
        if fn == "min":
            return intrinsic("minnum", args)
        if fn == "pow":
            return intrinsic("pow", args)
        if fn == "rsqrt":
            return b.fdiv(one, intrinsic("sqrt", args))
        if fn == "sigmoid":
            return b.fdiv(one, b.fadd(one, intrinsic("exp", [b.fneg(args[0])])))
        if fn == "erf":
            callee = self.declare("erff" if typ == F32 else "erf", typ, [typ])
            return b.call(callee, list(args))
        raise CompileError(f"unknown math function {fn}()")


def _suffix(typ: ir.Type) -> str:
    """The intrinsic suffix of a float type or a vector of floats (``f32``, ``v16f32``)."""
    if isinstance(typ, ir.VectorType):
        return f"v{typ.count}{_suffix(typ.element)}"
    return "f64" if isinstance(typ, ir.DoubleType) else "f32"
