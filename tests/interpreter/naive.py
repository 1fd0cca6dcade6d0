"""A deliberately simple tree-walking evaluator for host functions (no GPU).

An independent second implementation of docs/ir.md used to cross-check the
compiled interpreter: values are numpy scalars (float32 arithmetic is numpy's
float32 arithmetic), every integer operation wraps immediately, indices are
evaluated with ``Aff.evaluate``. Slow and obviously correct is the point.
"""
from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np

from polyir.ir.affine import Aff
from polyir.ir.nodes import (
    Assign,
    BinOp,
    Buffer,
    Call,
    Cast,
    Compare,
    Const,
    For,
    Function,
    If,
    Load,
    Select,
    Symbol,
    Var,
)
from polyir.ir.types import DType

_BITS = {DType.I8: 8, DType.I32: 32, DType.I64: 64}
_COMPUTE = {DType.F16: np.float32, DType.BF16: np.float32, DType.F32: np.float32, DType.F64: np.float64}


def wrap(x: int, dtype: DType) -> int:
    bits = _BITS[dtype]
    return int(np.array([x % (1 << bits)], dtype=np.uint64).astype(np.int64)[0]) if bits == 64 else \
        int(np.array([x % (1 << bits)], dtype=np.int64).astype(f"int{bits}")[0])


def typed(value: Any, dtype: DType) -> Any:
    if dtype.is_float:
        return _COMPUTE[dtype](value)
    if dtype is DType.BOOL:
        return bool(value)
    return wrap(int(value), dtype)


def dtype_of(e: Any, buffers: dict[str, Buffer]) -> DType:
    if isinstance(e, Const):
        return e.dtype
    if isinstance(e, Var):
        return DType.I64
    if isinstance(e, Load):
        return buffers[e.buffer].dtype
    if isinstance(e, (Compare,)) or (isinstance(e, BinOp) and e.op in ("and", "or")):
        return DType.BOOL
    if isinstance(e, Call):
        return DType.BOOL if e.fn == "not" else dtype_of(e.args[0], buffers)
    if isinstance(e, Select):
        return dtype_of(e.if_true, buffers)
    if isinstance(e, Cast):
        return e.dtype
    return dtype_of(e.lhs, buffers)


def exact_round(value: Fraction, precision: int, min_exp: int, max_finite: Fraction) -> float:
    """Round a rational to a binary format (nearest, ties to even), with exact arithmetic."""
    if value == 0:
        return 0.0
    magnitude = abs(value)
    exponent = magnitude.numerator.bit_length() - magnitude.denominator.bit_length()
    if Fraction(2) ** exponent > magnitude:
        exponent -= 1
    quantum = Fraction(2) ** (max(exponent, min_exp) - (precision - 1))
    rounded = round(magnitude / quantum) * quantum
    if rounded > max_finite:
        return math.copysign(math.inf, value)
    return math.copysign(float(rounded), value)


def to_bf16(value: Any) -> np.float32:
    """Exact single rounding of a float or int to bfloat16 (held in float32)."""
    if isinstance(value, (float, np.floating)) and not math.isfinite(value):
        return np.float32(value)
    max_bf16 = (2 - Fraction(1, 2 ** 7)) * Fraction(2) ** 127
    return np.float32(exact_round(Fraction(value if isinstance(value, int) else float(value)),
                                  8, -126, max_bf16))


def cast(value: Any, src: DType, dst: DType) -> Any:
    if dst is DType.BOOL:
        return bool(value != 0)
    if src is DType.BOOL:
        value = int(value)
    if dst.is_float:
        if src.is_float:
            v = np.float64(value) if src is DType.F64 else np.float32(value)
        else:
            v = np.array([int(value)], dtype=np.int64)[0]
        if dst is DType.F16 and not src.is_float:
            return np.float32(exact_round(Fraction(int(value)), 11, -14, Fraction(65504)))
        if dst is DType.F16:
            return np.float32(np.float16(v))
        if dst is DType.BF16:
            return to_bf16(int(value) if src.is_int or src is DType.BOOL else v)
        return _COMPUTE[dst](v)
    if src.is_float:
        f = float(value)
        if math.isnan(f):
            return 0
        bits = _BITS[dst]
        return int(max(-(2 ** (bits - 1)), min(2 ** (bits - 1) - 1, math.trunc(f) if abs(f) < 2**70 else
                                               (2**70 if f > 0 else -2**70))))
    return wrap(int(value), dst)


class Naive:
    def __init__(self, fn: Function):
        self.fn = fn
        self.buffers = fn.buffers

    def run(self, *args: Any) -> None:
        arrays: dict[str, np.ndarray] = {}
        env: dict[str, int] = {}
        for p, a in zip(self.fn.params, args, strict=True):
            if isinstance(p, Symbol):
                env[p.name] = int(a)
            else:
                arrays[p.name] = a
                for dim, size in zip(p.shape, a.shape, strict=True):
                    if len(dim.terms) == 1 and dim.constant == 0 and dim.terms[0][1] == 1:
                        env.setdefault(dim.terms[0][0], size)
        for b in self.fn.locals:
            arrays[b.name] = np.zeros(tuple(d.evaluate(env) for d in b.shape), b.dtype.numpy)
        self.arrays = arrays
        with np.errstate(all="ignore"):
            self.body(self.fn.body, env)

    def body(self, nodes: Any, env: dict[str, int]) -> None:
        for node in nodes:
            if isinstance(node, For):
                lo = max(a.evaluate(env) for a in node.lower)
                hi = min(a.evaluate(env) for a in node.upper)
                for v in range(lo, hi, node.step):
                    self.body(node.body, {**env, node.var: v})
            elif isinstance(node, If):
                ok = all(c.holds(env) for c in node.conditions)
                self.body(node.then_body if ok else node.else_body, env)
            elif isinstance(node, Assign):
                buf = self.buffers[node.buffer]
                value = self.expr(node.value, env)
                vt = dtype_of(node.value, self.buffers)
                if vt != buf.dtype:
                    value = cast(value, vt, buf.dtype)
                index = self.index(node.buffer, node.indices, env)
                if buf.dtype is DType.BF16:
                    value = to_bf16(np.float32(value))
                self.arrays[node.buffer][index] = value
            else:
                raise NotImplementedError(type(node).__name__)

    def index(self, name: str, indices: Any, env: dict[str, int]) -> tuple[int, ...]:
        shape = self.arrays[name].shape
        index = tuple(i.evaluate(env) if isinstance(i, Aff) else int(self.expr(i, env)) for i in indices)
        if not all(0 <= i < d for i, d in zip(index, shape, strict=True)):
            raise IndexError(f"{name}{list(index)} outside {shape}")
        return index

    def expr(self, e: Any, env: dict[str, int]) -> Any:
        if isinstance(e, Const):
            return cast(e.value, DType.F64 if e.dtype.is_float else DType.I64, e.dtype) \
                if e.dtype is not DType.BOOL else bool(e.value)
        if isinstance(e, Var):
            return env[e.name]
        if isinstance(e, Load):
            dtype = self.buffers[e.buffer].dtype
            return typed(self.arrays[e.buffer][self.index(e.buffer, e.indices, env)], dtype)
        if isinstance(e, Select):
            return self.expr(e.if_true if self.expr(e.cond, env) else e.if_false, env)
        if isinstance(e, Cast):
            return cast(self.expr(e.value, env), dtype_of(e.value, self.buffers), e.dtype)
        if isinstance(e, Compare):
            a, b = self.expr(e.lhs, env), self.expr(e.rhs, env)
            return bool({"<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b, "==": a == b,
                         "!=": a != b}[e.op])
        dtype = dtype_of(e, self.buffers)
        if isinstance(e, BinOp):
            if e.op == "and":
                return bool(self.expr(e.lhs, env)) and bool(self.expr(e.rhs, env))
            if e.op == "or":
                return bool(self.expr(e.lhs, env)) or bool(self.expr(e.rhs, env))
            a, b = self.expr(e.lhs, env), self.expr(e.rhs, env)
            if dtype.is_float:
                return {"+": lambda: a + b, "-": lambda: a - b, "*": lambda: a * b, "/": lambda: a / b,
                        "%": lambda: np.fmod(a, b)}[e.op]()
            if e.op in ("/", "%"):
                rem = int(np.fmod(np.int64(a), np.int64(b))) if b != 0 else None
                if rem is None:
                    raise ZeroDivisionError
                return wrap(rem if e.op == "%" else (a - rem) // b, dtype)
            return wrap({"+": a + b, "-": a - b, "*": a * b}[e.op], dtype)
        assert isinstance(e, Call)
        args = [self.expr(a, env) for a in e.args]
        if e.fn == "not":
            return not args[0]
        if dtype.is_float:
            t = _COMPUTE[dtype]
            f = {"neg": np.negative, "abs": np.abs, "max": np.fmax, "min": np.fmin, "exp": np.exp,
                 "exp2": np.exp2, "log": np.log, "log2": np.log2, "sqrt": np.sqrt,
                 "rsqrt": lambda x: 1 / np.sqrt(x), "tanh": np.tanh, "sigmoid": lambda x: 1 / (1 + np.exp(-x)),
                 "sin": np.sin, "cos": np.cos, "floor": np.floor, "ceil": np.ceil, "pow": np.power,
                 "erf": lambda x: math.erf(x)}[e.fn]
            if e.fn in ("neg", "abs", "max", "min", "floor", "ceil"):
                return t(f(*args))
            return t(f(*(np.float64(a) for a in args)))
        ints = {"neg": lambda a: -a, "abs": abs, "max": max, "min": min}
        return wrap(ints[e.fn](*args), dtype)
