"""Compile value expressions and buffer accesses to Python source.

Values are tracked as :class:`Val`: the source text, the IR type, and whether
the Python value is already *clean*: rounded to float32 for f32-computed types
(f32, f16, bf16), wrapped to the type's width for integers. Operations make
dirty values; :meth:`ExprCompiler.clean` emits the rounding or wrapping into a
temporary only where the next consumer needs it (a float32 store rounds by
itself, integer ``+ - *`` commute with wrap-around).

``select`` and the right operand of ``and``/``or`` are evaluated lazily, as in
C, so a guarded load such as ``select(i > 0, A[i - 1], 0.0)`` never faults.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from polyir.ir.affine import Aff
from polyir.ir.interp.emit import F32_COMPUTED, Block, Names, aff_code, is_simple, linear_split
from polyir.ir.interp.errors import InterpretError
from polyir.ir.interp.scalar import FLOAT_CALLS, round_bf16, round_f16, round_f32, wrap_int
from polyir.ir.nodes import (
    Barrier,
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
    Launch,
    Load,
    Select,
    Var,
)
from polyir.ir.types import DType, MemorySpace
from polyir.ir.walk import STATEMENT_NODES

_INT_BITS = {DType.I8: 8, DType.I32: 32, DType.I64: 64}


@dataclass
class Val:
    code: str
    dtype: DType
    clean: bool = True


@dataclass
class LoopContext:
    """The innermost sequential loop around the code being compiled: accesses
    linear in its variable get their offsets (and, when executed on every
    iteration, their bounds checks) hoisted in front of the loop."""

    var: str
    outer_scope: frozenset[str]
    first: str                 # Python name of the first value of the variable
    last: str                  # Python name of the last value (set when checks exist)
    prelude: Block = field(default_factory=Block)      # offsets, always computed
    checks: Block = field(default_factory=Block)       # run when the loop is not empty
    offsets: dict[object, str] = field(default_factory=dict)
    checked: set[object] = field(default_factory=set)
    conditional: int = 0


@dataclass
class BufferInfo:
    buffer: Buffer
    py: str                    # memoryview name
    dims: list[str]            # names of dimension sizes
    strides: list[str]         # names (or "1") of row-major strides


class ExprCompiler:
    """Expression and access compilation; statements live in ``codegen``."""

    def __init__(self, function_name: str, buffers: dict[str, BufferInfo], names: Names,
                 nodes: list[tuple[str, object]], check_bounds: bool, detect_races: bool = False):
        self.function_name = function_name
        self.buffers = buffers
        self.names = names
        self.nodes = nodes
        self.check_bounds = check_bounds
        self.detect_races = detect_races
        self.in_gpu = False         # compiling per-thread GPU code
        self.private: set[str] = set()   # buffers private to one thread (not race-checked)
        self.scope: set[str] = set()
        self.loop: LoopContext | None = None
        self.block = Block()
        self.node = -1             # index in ``nodes`` of the statement being compiled
        self.lazy = 0              # >0 inside select branches / and-or right operands
        self._temps = 0

    # ------------------------------------------------------------ helpers
    def temp(self, prefix: str = "_t") -> str:
        self._temps += 1
        return f"{prefix}{self._temps}"

    def emit(self, text: str) -> None:
        self.block.emit(text, self.node)

    def error(self, message: str) -> InterpretError:
        kind, node = self.nodes[self.node] if self.node >= 0 else ("", None)
        where = describe(self.function_name, node)
        return InterpretError(f"{where}: {message}")

    def var_code(self, name: str) -> str:
        if name not in self.scope:
            raise self.error(f"variable '{name}' is not bound here (not a loop variable or symbol)")
        return self.names.var(name)

    def var_code_at(self, var: str, value_code: str) -> Callable[[str], str]:
        """Variable codes with ``var`` replaced by ``value_code``."""
        def code(name: str) -> str:
            return value_code if name == var else self.var_code(name)
        return code

    def aff(self, aff: Aff) -> str:
        return aff_code(aff, self.var_code)

    def clean(self, val: Val) -> Val:
        if val.clean:
            return val
        t = self.temp()
        if val.dtype in F32_COMPUTED:
            self.emit(f"_rf[0] = {val.code}")
            self.emit(f"{t} = _rf[0]")
        elif val.dtype in _INT_BITS:
            half = 1 << (_INT_BITS[val.dtype] - 1)
            self.emit(f"{t} = (({val.code} + {half}) & {2 * half - 1}) - {half}")
        else:
            self.emit(f"{t} = {val.code}")
        return Val(t, val.dtype, True)

    def atom(self, val: Val) -> Val:
        """A value whose code is a name or literal (safe to use twice)."""
        if is_simple(val.code):
            return val
        t = self.temp()
        self.emit(f"{t} = {val.code}")
        return Val(t, val.dtype, val.clean)

    def clean_atom(self, val: Val) -> Val:
        return self.atom(self.clean(val))

    def sub_block(self, expr: Expr) -> tuple[Block, Val]:
        """Compile ``expr`` lazily into a separate block."""
        saved, self.block = self.block, Block()
        self.lazy += 1
        try:
            val = self.clean(self.expr(expr))
            return self.block, val
        finally:
            self.block = saved
            self.lazy -= 1

    # -------------------------------------------------------- expressions
    def expr(self, e: Expr) -> Val:
        if isinstance(e, Const):
            return Val(const_code(e.value, e.dtype), e.dtype, True)
        if isinstance(e, Var):
            return Val(self.var_code(e.name), DType.I64, True)
        if isinstance(e, Load):
            info = self.buffer(e.buffer)
            offset = self.access(info, e.indices)
            return Val(f"{info.py}[{offset}]", info.buffer.dtype, True)
        if isinstance(e, BinOp):
            return self.binop(e)
        if isinstance(e, Compare):
            lhs, rhs = self.clean(self.expr(e.lhs)), self.clean(self.expr(e.rhs))
            return Val(f"({lhs.code} {e.op} {rhs.code})", DType.BOOL, True)
        if isinstance(e, Call):
            return self.call(e)
        if isinstance(e, Select):
            return self.select(e)
        if isinstance(e, Cast):
            return self.cast(self.expr(e.value), e.dtype)
        raise self.error(f"unknown expression {e!r}")

    def binop(self, e: BinOp) -> Val:
        if e.op in ("and", "or"):
            lhs = self.clean_atom(self.expr(e.lhs))
            block, rhs = self.sub_block(e.rhs)
            if not block.lines:
                return Val(f"({lhs.code} {e.op} {rhs.code})", DType.BOOL, True)
            t = self.temp()
            self.emit(f"{t} = {lhs.code}")
            self.emit(f"if {'' if e.op == 'and' else 'not '}{t}:")
            block.emit(f"{t} = {rhs.code}", self.node)
            self.block.extend(block, 1)
            return Val(t, DType.BOOL, True)
        lhs = self.expr(e.lhs)
        rhs = self.expr(e.rhs)
        dtype = lhs.dtype
        if dtype.is_float:
            lhs, rhs = self.clean(lhs), self.clean(rhs)
            exact = dtype is DType.F64
            if e.op in ("+", "-", "*"):
                return Val(f"({lhs.code} {e.op} {rhs.code})", dtype, exact)
            if e.op == "/":
                rhs = self.atom(rhs)
                lhs = self.atom(lhs)
                return Val(f"({lhs.code} / {rhs.code} if {rhs.code} else _fdiv0({lhs.code}, {rhs.code}))",
                           dtype, exact)
            if e.op == "%":
                return Val(f"_frem({lhs.code}, {rhs.code})", dtype, exact)
        elif dtype in _INT_BITS:
            if e.op in ("+", "-", "*"):
                return Val(f"({lhs.code} {e.op} {rhs.code})", dtype, False)
            lhs, rhs = self.clean(lhs), self.clean(rhs)
            if e.op == "/":
                return Val(f"_int_div({lhs.code}, {rhs.code})", dtype, False)
            if e.op == "%":
                return Val(f"_int_rem({lhs.code}, {rhs.code})", dtype, False)
        elif dtype is DType.BOOL and e.op in ("+", "-", "*"):
            raise self.error(f"arithmetic '{e.op}' on bool values")
        raise self.error(f"operator '{e.op}' is not defined on {dtype}")

    def call(self, e: Call) -> Val:
        args = [self.expr(a) for a in e.args]
        dtype = args[0].dtype
        fn = e.fn
        if fn == "not":
            return Val(f"(not {self.clean(args[0]).code})", DType.BOOL, True)
        if fn == "neg":
            if dtype.is_float:
                return Val(f"(-{args[0].code})", dtype, args[0].clean)
            return Val(f"(-{args[0].code})", dtype, False)
        if fn == "abs":
            x = self.clean(args[0])
            return Val(f"abs({x.code})", dtype, dtype.is_float)
        if fn in ("max", "min"):
            a, b = (self.clean_atom(v) for v in args)
            op = ">" if fn == "max" else "<"
            if dtype.is_float:
                return Val(f"({a.code} if {a.code} {op} {b.code} or {b.code} != {b.code} else {b.code})",
                           dtype, True)
            return Val(f"({a.code} if {a.code} {op}= {b.code} else {b.code})", dtype, True)
        if dtype in _INT_BITS:
            if fn in ("floor", "ceil"):
                return args[0]
            if fn == "pow":
                a, b = (self.clean(v) for v in args)
                return Val(f"_int_pow({a.code}, {b.code}, {_INT_BITS[dtype]})", dtype, True)
            raise self.error(f"'{fn}' needs a float argument, not {dtype}")
        if fn not in FLOAT_CALLS or not dtype.is_float:
            raise self.error(f"unknown function '{fn}' on {dtype}")
        codes = ", ".join(self.clean(a).code for a in args)
        exact = dtype is DType.F64 or fn in ("floor", "ceil")
        return Val(f"{FLOAT_CALLS[fn]}({codes})", dtype, exact)

    def select(self, e: Select) -> Val:
        cond = self.clean_atom(self.expr(e.cond))
        true_block, a = self.sub_block(e.if_true)
        false_block, b = self.sub_block(e.if_false)
        if b.dtype != a.dtype:
            b = self.cast_in(false_block, b, a.dtype)
        if not true_block.lines and not false_block.lines:
            return Val(f"({a.code} if {cond.code} else {b.code})", a.dtype, True)
        t = self.temp()
        true_block.emit(f"{t} = {a.code}", self.node)
        false_block.emit(f"{t} = {b.code}", self.node)
        self.emit(f"if {cond.code}:")
        self.block.extend(true_block, 1)
        self.emit("else:")
        self.block.extend(false_block, 1)
        return Val(t, a.dtype, True)

    def cast_in(self, block: Block, val: Val, dtype: DType) -> Val:
        saved, self.block = self.block, block
        try:
            return self.clean(self.cast(val, dtype))
        finally:
            self.block = saved

    def cast(self, val: Val, dtype: DType) -> Val:
        """``val`` converted to ``dtype`` (float->int truncates, wraps on narrowing)."""
        src = val.dtype
        if src == dtype:
            return val
        val = self.clean(val)
        x = val.code
        if src.is_float:
            if dtype is DType.F64:
                return Val(x, dtype, True)
            if dtype is DType.F32:
                return Val(x, dtype, src is not DType.F64)
            if dtype is DType.F16:
                return Val(f"_round_f16({x})", dtype, True)
            if dtype is DType.BF16:
                return Val(f"_round_bf16({x})", dtype, True)
            if dtype in _INT_BITS:
                return Val(f"_f2i({x}, {_INT_BITS[dtype]})", dtype, True)
            return Val(f"({x} != 0.0)", dtype, True)
        if src in _INT_BITS:
            if dtype.is_float:
                helper = {DType.F64: "_i2f64", DType.F32: "_i2f32", DType.F16: "_i2f16",
                          DType.BF16: "_i2bf16"}[dtype]
                return Val(f"{helper}({x})", dtype, True)
            if dtype in _INT_BITS:
                return Val(x, dtype, _INT_BITS[dtype] >= _INT_BITS[src])
            return Val(f"({x} != 0)", dtype, True)
        # from bool
        if dtype.is_float:
            return Val(f"(1.0 if {x} else 0.0)", dtype, True)
        return Val(f"(1 if {x} else 0)", dtype, True)

    # ------------------------------------------------------------ accesses
    def buffer(self, name: str) -> BufferInfo:
        try:
            return self.buffers[name]
        except KeyError:
            raise self.error(f"unknown buffer '{name}'") from None

    def access(self, info: BufferInfo, indices: tuple[Index, ...], write: bool = False) -> str:
        """Source of the flat offset of ``info[indices]``, with its bounds check emitted
        (and, in GPU code with race detection, the access logged)."""
        offset = self.offset(info, indices)
        if self.detect_races and self.in_gpu and info.buffer.name not in self.private:
            offset = self.atom(Val(offset, DType.I64)).code
            is_global = info.buffer.space is not MemorySpace.SHARED
            self.emit(f"_acc(({self.node}, {info.buffer.name!r}, {offset}, {int(write)}, {int(is_global)}))")
        return offset

    def offset(self, info: BufferInfo, indices: tuple[Index, ...]) -> str:
        rank = info.buffer.rank
        if len(indices) != rank:
            raise self.error(f"buffer '{info.buffer.name}' has rank {rank}, accessed with "
                             f"{len(indices)} indices")
        if rank == 0:
            return "0"
        affine = tuple(i for i in indices if isinstance(i, Aff))
        if len(affine) == len(indices):
            hoisted = self.hoisted_access(info, affine)
            if hoisted is not None:
                return hoisted
            codes = [self.aff(i) for i in affine]
        else:
            codes = []
            for index in indices:
                if isinstance(index, Aff):
                    codes.append(self.aff(index))
                else:
                    val = self.clean(self.expr(index))
                    if val.dtype not in _INT_BITS:
                        raise self.error(f"subscript of '{info.buffer.name}' has type {val.dtype}")
                    codes.append(val.code)
        codes = [self.atom(Val(c, DType.I64)).code for c in codes] if self.check_bounds else codes
        if self.check_bounds:
            self.emit_check(self.block, info, codes)
        return offset_code(codes, info.strides)

    def emit_check(self, block: Block, info: BufferInfo, codes: list[str], indent: int = 0) -> None:
        cond = " and ".join(f"0 <= {c} < {d}" for c, d in zip(codes, info.dims, strict=True))
        block.emit(f"if not ({cond}): _oob({self.node}, {info.buffer.name!r}, "
                   f"({''.join(d + ', ' for d in codes)}), ({''.join(d + ', ' for d in info.dims)}))", self.node, indent)

    def hoisted_access(self, info: BufferInfo, indices: tuple[Aff, ...]) -> str | None:
        loop = self.loop
        if loop is None:
            return None
        allowed = loop.outer_scope | {loop.var}
        splits = []
        for index in indices:
            if not index.variables() <= allowed:
                return None
            split = linear_split(index, loop.var)
            if split is None:
                return None
            splits.append(split)
        key = (info.buffer.name, indices)
        name = loop.offsets.get(key)
        if name is None:
            name = self.temp("_o")
            loop.offsets[key] = name
            bases = [aff_code(base, self.var_code) for base, _ in splits]
            loop.prelude.emit(f"{name} = {offset_code(bases, info.strides)}", self.node)
        if self.check_bounds:
            if loop.conditional or self.lazy:
                codes = [self.atom(Val(self.aff(i), DType.I64)).code for i in indices]
                self.emit_check(self.block, info, codes)
            elif key not in loop.checked:
                loop.checked.add(key)
                moves = any(c for _, c in splits)
                for point in (loop.first, loop.last) if moves else (loop.first,):
                    codes = [aff_code(i, self.var_code_at(loop.var, point)) for i in indices]
                    self.emit_check(loop.checks, info, codes)
        coeff_terms = [(c, s) for (_, c), s in zip(splits, info.strides, strict=True) if c]
        var = self.names.var(loop.var)
        if not coeff_terms:
            return name
        if coeff_terms == [(1, "1")]:
            return f"{name} + {var}"
        coeff = " + ".join(s if c == 1 else str(c) if s == "1" else f"{c}*{s}" for c, s in coeff_terms)
        return f"{name} + {var}*({coeff})" if len(coeff_terms) > 1 else f"{name} + {var}*{coeff}"


def offset_code(codes: list[str], strides: list[str]) -> str:
    terms = [c if s == "1" else f"{c}*{s}" for c, s in zip(codes, strides, strict=True) if c != "0"]
    return " + ".join(terms) if terms else "0"


def const_code(value: int | float | bool, dtype: DType) -> str:
    """A Python literal for a constant, already rounded/wrapped to its type."""
    if dtype is DType.BOOL:
        return "True" if value else "False"
    if dtype.is_float:
        x = float(value)
        if dtype is DType.F32:
            x = round_f32(x)
        elif dtype is DType.F16:
            x = round_f16(x)
        elif dtype is DType.BF16:
            x = round_bf16(x)
        if x != x:
            return "_NAN"
        if x in (float("inf"), float("-inf")):
            return "_INF" if x > 0 else "(-_INF)"
        text = repr(x)
        return f"({text})" if x < 0 or text.startswith("-") else text
    x = wrap_int(int(value), _INT_BITS[dtype])
    return f"({x})" if x < 0 else str(x)


def describe(function_name: str, node: object) -> str:
    """``function f, statement S1 at 3:5`` for error messages."""
    text = f"function {function_name}"
    if isinstance(node, STATEMENT_NODES):
        text += f", statement {node.name}"
    elif isinstance(node, For):
        text += f", loop {node.var}"
    elif isinstance(node, If):
        text += ", if"
    elif isinstance(node, Barrier):
        text += ", barrier"
    elif isinstance(node, Launch):
        text += f", launch {node.kernel}"
    loc = getattr(node, "loc", None)
    if loc is not None:
        text += f" at {loc}"
    return text
