"""C source for a polyir host function, for comparisons with C compilers (clang, Polly).

``c_function(func)`` writes ``func`` (untransformed: the program a user wrote, before
any polyir pass) as one C99 function with the same meaning as the interpreter gives it:

- buffer parameters become ``restrict`` pointers (polyir's functions take distinct
  arrays; ``restrict`` tells the C compiler the same), cast to pointers to
  variable-length rows, so ``A[i, j]`` reads ``A[i][j]`` as Polly's delinearisation
  expects; a 0-d parameter is a pointer to one element;
- every size symbol of ``func.symbols`` is an ``int64_t`` parameter after the buffers,
  in that order (:func:`symbol_values` computes them for a call);
- integer arithmetic wraps (compile with ``-fwrapv``), ``/`` and ``%`` on integers are
  C's, on floats IEEE division and ``fmod``; ``max``/``min`` return the other operand
  when one is NaN (``fmax``/``fmin``); float-to-integer casts truncate and saturate,
  NaN giving 0; affine ``//`` and ``%`` round toward minus infinity;
- locals are declared where the IR declares them (function or loop scope): 0-d and
  small constant-shape ones on the stack, the others with ``malloc``.

f16 and bf16 values, GPU nodes (launches, barriers, fragments) and parameters passed
by value are refused with :class:`CSourceError`, naming the construct.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from polyir.ir.affine import Aff, Constraint, FloorDiv, Mod
from polyir.ir.nodes import (
    Assign,
    BinOp,
    Buffer,
    Call,
    Cast,
    Compare,
    Const,
    Expr,
    For,
    Function,
    If,
    Index,
    Load,
    Node,
    Select,
    Symbol,
    Var,
)
from polyir.ir.types import DType
from polyir.ir.verifier import expr_dtype

C_TYPES = {DType.F32: "float", DType.F64: "double", DType.I8: "int8_t", DType.I32: "int32_t",
           DType.I64: "int64_t", DType.BOOL: "_Bool"}
"""The C type of each supported polyir dtype."""

STACK_BYTES = 1 << 16
"""Constant-shape locals up to this size live on the stack; larger ones are malloc'd."""

_PRELUDE = """#include <math.h>
#include <stdint.h>
#include <stdlib.h>

static inline int64_t polyir_floordiv(int64_t a, int64_t d) {
  return a >= 0 ? a / d : -((-a + d - 1) / d);
}
static inline int64_t polyir_mod(int64_t a, int64_t d) { return a - d * polyir_floordiv(a, d); }
static inline int64_t polyir_max(int64_t a, int64_t b) { return a > b ? a : b; }
static inline int64_t polyir_min(int64_t a, int64_t b) { return a < b ? a : b; }
static inline int64_t polyir_to_int(double x, int64_t lo, int64_t hi) {
  if (x != x) return 0;
  if (x >= (double)hi) return hi;
  if (x <= (double)lo) return lo;
  return (int64_t)x;
}
"""

_FLOAT_CALLS = {"exp": "exp", "exp2": "exp2", "log": "log", "log2": "log2", "sqrt": "sqrt",
                "tanh": "tanh", "erf": "erf", "sin": "sin", "cos": "cos", "floor": "floor",
                "ceil": "ceil", "pow": "pow", "abs": "fabs"}
_INT_RANGE = {DType.I8: (-(1 << 7), (1 << 7) - 1), DType.I32: (-(1 << 31), (1 << 31) - 1),
              DType.I64: (-(1 << 63), (1 << 63) - 1)}


class CSourceError(ValueError):
    """``func`` holds something this C writer does not translate; the message names it."""


def c_function(func: Function, name: str | None = None) -> str:
    """The C translation unit (prelude and one function ``name``, default ``func.name``)."""
    return _Writer(func).unit(name or func.name)


def symbol_values(func: Function, args: Sequence[Any]) -> list[int]:
    """The ``int64_t`` values, in ``func.symbols`` order, that a call of ``func`` with
    ``args`` (its positional arguments) gives its size symbols: explicit ``Symbol``
    parameters as passed, the others read from the first array dimension that is
    exactly that symbol."""
    values: dict[str, int] = {}
    for param, arg in zip(func.params, args, strict=True):
        if isinstance(param, Symbol):
            values[param.name] = int(arg)
            continue
        shape = np.shape(arg)
        for dim, extent in zip(param.shape, shape, strict=False):
            if len(dim.terms) == 1 and dim.constant == 0 and dim.terms[0][1] == 1 \
                    and isinstance(dim.terms[0][0], str):
                values.setdefault(dim.terms[0][0], int(extent))
    missing = [s for s in func.symbols if s not in values]
    if missing:
        raise CSourceError(f"{func.name}: symbols {missing} are not defined by any argument")
    return [values[s] for s in func.symbols]


class _Writer:
    def __init__(self, func: Function):
        self.func = func
        self.buffers = func.buffers
        self.lines: list[str] = []
        self.depth = 1

    # -- structure --------------------------------------------------------
    def unit(self, name: str) -> str:
        params: list[str] = []
        for param in self.func.params:
            if isinstance(param, Symbol):
                continue
            params.append(f"{self.ctype(param.dtype, param.name)} *restrict {param.name}_p")
        params.extend(f"int64_t {symbol}" for symbol in self.func.symbols)
        for param in self.func.params:
            if isinstance(param, Buffer):
                self.view(param, f"{param.name}_p")
        frees = [self.declare(buffer) for buffer in self.func.locals]
        self.block(self.func.body)
        self.frees(frees)
        body = "\n".join(self.lines)
        return f"{_PRELUDE}\nvoid {name}({', '.join(params) or 'void'}) {{\n{body}\n}}\n"

    def emit(self, line: str) -> None:
        self.lines.append("  " * self.depth + line)

    def ctype(self, dtype: DType, where: str) -> str:
        if dtype not in C_TYPES:
            raise CSourceError(f"{self.func.name}: {where} has dtype {dtype}, which has no C type here")
        return C_TYPES[dtype]

    def view(self, buffer: Buffer, pointer: str) -> None:
        """``buffer`` as a pointer to rows of its trailing extents (``pointer`` holds it)."""
        ctype = self.ctype(buffer.dtype, f"buffer {buffer.name}")
        if buffer.rank <= 1:
            self.emit(f"{ctype} *restrict {buffer.name} = {pointer};")
            return
        rows = "".join(f"[{self.aff(dim)}]" for dim in buffer.shape[1:])
        self.emit(f"{ctype} (*restrict {buffer.name}){rows} = ({ctype} (*){rows}){pointer};")

    def declare(self, buffer: Buffer) -> str | None:
        """Declare local ``buffer``; the pointer to free at the end of its scope, if any."""
        ctype = self.ctype(buffer.dtype, f"local {buffer.name}")
        if buffer.rank == 0:
            self.emit(f"{ctype} {buffer.name}[1];")
            return None
        if all(dim.is_constant() for dim in buffer.shape):
            count = math.prod(dim.constant for dim in buffer.shape)
            if count * np.dtype(buffer.dtype.numpy).itemsize <= STACK_BYTES:
                dims = "".join(f"[{dim.constant}]" for dim in buffer.shape)
                self.emit(f"{ctype} {buffer.name}{dims};")
                return None
        count = " * ".join(f"(size_t)({self.aff(dim)})" for dim in buffer.shape)
        storage = f"{buffer.name}_heap"
        self.emit(f"{ctype} *{storage} = malloc({count} * sizeof({ctype}) + 1);")
        self.view(buffer, storage)
        return storage

    def frees(self, pointers: list[str | None]) -> None:
        for pointer in pointers:
            if pointer is not None:
                self.emit(f"free({pointer});")

    def block(self, nodes: Sequence[Node]) -> None:
        for node in nodes:
            if isinstance(node, Assign):
                self.emit(f"{self.ref(node.buffer, node.indices)} = "
                          f"{self.value(node.value, self.buffers[node.buffer].dtype)};")
            elif isinstance(node, For):
                self.loop(node)
            elif isinstance(node, If):
                self.branch(node)
            else:
                raise CSourceError(f"{self.func.name}: {type(node).__name__} nodes have no C "
                                   "translation (host loop nests only)")

    def loop(self, node: For) -> None:
        lower = self.bound(node.lower, "polyir_max")
        upper = self.bound(node.upper, "polyir_min")
        var = node.var
        self.emit(f"for (int64_t {var} = {lower}; {var} < {upper}; {var} += {node.step}) {{")
        self.depth += 1
        frees = [self.declare(buffer) for buffer in node.locals]
        self.block(node.body)
        self.frees(frees)
        self.depth -= 1
        self.emit("}")

    def bound(self, affs: tuple[Aff, ...], combine: str) -> str:
        text = self.aff(affs[0])
        for aff in affs[1:]:
            text = f"{combine}({text}, {self.aff(aff)})"
        return text

    def branch(self, node: If) -> None:
        condition = " && ".join(self.constraint(c) for c in node.conditions) or "1"
        self.emit(f"if ({condition}) {{")
        self.depth += 1
        self.block(node.then_body)
        self.depth -= 1
        if node.else_body:
            self.emit("} else {")
            self.depth += 1
            self.block(node.else_body)
            self.depth -= 1
        self.emit("}")

    # -- affine parts -----------------------------------------------------
    def aff(self, aff: Aff) -> str:
        parts: list[str] = []
        for atom, coefficient in aff.terms:
            if isinstance(atom, FloorDiv):
                text = f"polyir_floordiv({self.aff(atom.expr)}, {atom.divisor})"
            elif isinstance(atom, Mod):
                text = f"polyir_mod({self.aff(atom.expr)}, {atom.divisor})"
            else:
                text = atom
            parts.append(text if coefficient == 1 else f"{coefficient}LL * {text}")
        if aff.constant or not parts:
            parts.append(f"{aff.constant}LL")
        return "(" + " + ".join(parts) + ")"

    def constraint(self, constraint: Constraint) -> str:
        return f"{self.aff(constraint.lhs)} {constraint.op} {self.aff(constraint.rhs)}"

    def ref(self, buffer: str, indices: tuple[Index, ...]) -> str:
        if not indices:
            return f"{buffer}[0]"
        return buffer + "".join(f"[{self.index(index)}]" for index in indices)

    def index(self, index: Index) -> str:
        if isinstance(index, Aff):
            return self.aff(index)
        return f"(int64_t)({self.expr(index)})"

    # -- values -----------------------------------------------------------
    def value(self, expr: Expr, dtype: DType) -> str:
        """``expr`` converted to ``dtype`` as an assignment to a ``dtype`` element does."""
        have = self.dtype(expr)
        text = self.expr(expr)
        return text if have is dtype else self.cast(text, have, dtype)

    def dtype(self, expr: Expr) -> DType:
        return expr_dtype(expr, self.buffers)

    def expr(self, expr: Expr) -> str:
        if isinstance(expr, Const):
            return self.const(expr)
        if isinstance(expr, Var):
            return expr.name
        if isinstance(expr, Load):
            return self.ref(expr.buffer, expr.indices)
        if isinstance(expr, BinOp):
            return self.binop(expr)
        if isinstance(expr, Compare):
            return f"({self.expr(expr.lhs)} {expr.op} {self.expr(expr.rhs)})"
        if isinstance(expr, Call):
            return self.call(expr)
        if isinstance(expr, Select):
            dtype = self.dtype(expr.if_true)
            return (f"({self.expr(expr.cond)} ? {self.expr(expr.if_true)} : "
                    f"{self.value(expr.if_false, dtype)})")
        if isinstance(expr, Cast):
            return self.cast(self.expr(expr.value), self.dtype(expr.value), expr.dtype)
        raise CSourceError(f"{self.func.name}: expression {type(expr).__name__} has no C translation")

    def const(self, expr: Const) -> str:
        dtype = expr.dtype
        ctype = self.ctype(dtype, f"constant {expr.value!r}")
        if dtype is DType.BOOL:
            return "1" if expr.value else "0"
        if dtype.is_int:
            return f"(({ctype}){int(expr.value)}LL)"
        value = float(expr.value)
        if math.isnan(value):
            text = "NAN"
        elif math.isinf(value):
            text = "INFINITY" if value > 0 else "-INFINITY"
        else:
            text = repr(value)
        return f"(({ctype}){text})"

    def binop(self, expr: BinOp) -> str:
        lhs, rhs = self.expr(expr.lhs), self.expr(expr.rhs)
        dtype = self.dtype(expr.lhs)
        if expr.op == "and":
            return f"({lhs} && {rhs})"
        if expr.op == "or":
            return f"({lhs} || {rhs})"
        if expr.op == "%" and dtype.is_float:
            return f"(({C_TYPES[dtype]})fmod({lhs}, {rhs}))"
        if dtype is DType.I8 and expr.op in ("+", "-", "*", "/", "%"):
            return f"((int8_t)({lhs} {expr.op} {rhs}))"
        return f"({lhs} {expr.op} {rhs})"

    def call(self, expr: Call) -> str:
        dtype = self.dtype(expr.args[0])
        args = [self.expr(a) for a in expr.args]
        fn = expr.fn
        ctype = self.ctype(dtype, f"call {fn}")
        if fn == "neg":
            return f"(-{args[0]})"
        if fn == "not":
            return f"(!{args[0]})"
        if fn in ("max", "min"):
            a, b = args
            op = ">" if fn == "max" else "<"
            if dtype.is_float:  # the other operand when one is NaN, as the interpreter
                return f"({{ {ctype} a_ = {a}, b_ = {b}; (a_ {op} b_ || b_ != b_) ? a_ : b_; }})"
            return f"({{ {ctype} a_ = {a}, b_ = {b}; (a_ {op}= b_) ? a_ : b_; }})"
        if dtype.is_int:
            if fn == "abs":
                return f"({{ {ctype} a_ = {args[0]}; ({ctype})(a_ < 0 ? -a_ : a_); }})"
            if fn in ("floor", "ceil"):
                return args[0]
            raise CSourceError(f"{self.func.name}: '{fn}' on {dtype} has no C translation here")
        suffix = "f" if dtype is DType.F32 else ""
        if fn == "sigmoid":
            return f"(({ctype})1 / (({ctype})1 + exp{suffix}(-{args[0]})))"
        if fn == "rsqrt":
            return f"(({ctype})1 / sqrt{suffix}({args[0]}))"
        if fn not in _FLOAT_CALLS:
            raise CSourceError(f"{self.func.name}: unknown function '{fn}'")
        return f"{_FLOAT_CALLS[fn]}{suffix}({', '.join(args)})"

    def cast(self, text: str, have: DType, want: DType) -> str:
        ctype = self.ctype(want, f"cast to {want}")
        self.ctype(have, f"cast from {have}")
        if have.is_float and want.is_int:
            lo, hi = _INT_RANGE[want]
            return f"(({ctype})polyir_to_int({text}, {lo}LL, {hi}LL))" if want is not DType.I64 \
                else f"polyir_to_int({text}, (-9223372036854775807LL - 1), 9223372036854775807LL)"
        if want is DType.BOOL:
            return f"(({text}) != 0)"
        return f"(({ctype})({text}))"


def argument_arrays(func: Function, args: Sequence[Any]) -> list[np.ndarray]:
    """The arrays a C call of ``func`` takes for ``args``: arrays as they are (C-contiguous
    required), scalars for 0-d parameters as fresh one-element arrays of the parameter's dtype."""
    arrays: list[np.ndarray] = []
    for param, arg in zip(func.params, args, strict=True):
        if isinstance(param, Symbol):
            continue
        if isinstance(arg, np.ndarray):
            if not arg.flags.c_contiguous:
                raise CSourceError(f"{func.name}: argument {param.name} is not C-contiguous")
            arrays.append(arg)
        else:
            arrays.append(np.array(arg, dtype=param.dtype.numpy))
    return arrays


def c_arguments(func: Function, args: Sequence[Any]) -> tuple[list[np.ndarray], list[int]]:
    """``(arrays, symbols)``: everything a C call of ``func`` on ``args`` passes."""
    return argument_arrays(func, args), symbol_values(func, args)


__all__ = ["C_TYPES", "CSourceError", "argument_arrays", "c_arguments", "c_function",
           "symbol_values"]
