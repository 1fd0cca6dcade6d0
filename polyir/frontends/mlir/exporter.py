"""polyir IR (host functions) as affine MLIR text.

The output uses ``func``, ``affine``, ``arith``, ``math`` and ``memref`` and
is accepted by ``mlir-opt``; ``import_mlir`` reads it back to the same
meaning. How polyir maps onto MLIR:

* a buffer parameter is a ``memref`` argument (``?`` for a dimension that is
  not a constant, with ``{polyir.shape = "N, 2*N + 3"}`` recording polyir's
  shape); a ``Symbol`` parameter an ``index`` argument (``{polyir.name =
  "N"}`` when a shape names it, so the link survives mlir-opt's renaming); a size symbol read
  from a shape is ``memref.dim`` of a dimension that is exactly that symbol;
* 0-d locals are ``memref.alloca``, other locals ``memref.alloc`` (freed
  before ``return``), at function entry; loop-scoped locals (``For.locals``)
  the same way at the top of the loop body, freed at its end;
* ``for`` is ``affine.for`` with max/min bound maps; ``parallel``, ``unroll``
  and ``vectorize`` ride along as discardable attributes
  ``{polyir.parallel, polyir.unroll = 4 : i64}``; ``if`` is ``affine.if``
  with an integer set; affine subscripts are ``affine.load``/``affine.store``,
  gathers ``memref.load``/``memref.store``;
* each statement's expression becomes a chain of ``arith``/``math`` ops (one
  op per distinct sub-expression). f16 and bf16 values are computed in f32
  and rounded (``arith.truncf``) only where polyir rounds them: on a store
  and on a ``cast``. Float-to-int casts saturate and give 0 for NaN, as in
  polyir. ``sigmoid`` is ``1 / (1 + exp(-x))``.

Refused with ``ExportError``: kernels, launches, barriers, fragment
operations, GPU-mapped loops and shared or fragment buffers (GPU-mapped IR
is out of scope), and a size symbol that no argument dimension or ``Symbol``
parameter defines.
"""
from __future__ import annotations

import math
import struct
from collections.abc import Iterable, Sequence

from polyir.errors import ExportError
from polyir.ir.affine import Aff, FloorDiv, Mod
from polyir.ir.interp.scalar import round_bf16, round_f16, round_f32
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
    Module,
    Node,
    Select,
    Symbol,
    Var,
)
from polyir.ir.types import DType, MemorySpace
from polyir.ir.verifier import expr_dtype

_ELEMENT = {DType.F16: "f16", DType.BF16: "bf16", DType.F32: "f32", DType.F64: "f64",
            DType.I8: "i8", DType.I32: "i32", DType.I64: "i64", DType.BOOL: "i1"}
_HALF = (DType.F16, DType.BF16)
_MATH = {"exp": "math.exp", "exp2": "math.exp2", "log": "math.log", "log2": "math.log2",
         "sqrt": "math.sqrt", "rsqrt": "math.rsqrt", "tanh": "math.tanh", "erf": "math.erf",
         "sin": "math.sin", "cos": "math.cos", "floor": "math.floor", "ceil": "math.ceil"}
_FLOAT_BINARY = {"+": "arith.addf", "-": "arith.subf", "*": "arith.mulf", "/": "arith.divf",
                 "%": "arith.remf"}
_INT_BINARY = {"+": "arith.addi", "-": "arith.subi", "*": "arith.muli", "/": "arith.divsi",
               "%": "arith.remsi", "and": "arith.andi", "or": "arith.ori"}
_CMPF = {"<": "olt", "<=": "ole", ">": "ogt", ">=": "oge", "==": "oeq", "!=": "une"}
_CMPI = {"<": "slt", "<=": "sle", ">": "sgt", ">=": "sge", "==": "eq", "!=": "ne"}
_CMPI_BOOL = {"<": "ult", "<=": "ule", ">": "ugt", ">=": "uge", "==": "eq", "!=": "ne"}


def export_mlir(module: Module) -> str:
    """``module`` as affine MLIR text (a ``module { func.func ... }``).

    Takes verified host IR; raises ``ExportError`` naming the function and
    the construct for anything GPU-mapped (see the module docstring) and
    ``VerifyError`` for invalid IR. Returns the text, ending in a newline.
    """
    from polyir.ir.verifier import verify
    verify(module)
    bodies = [_FunctionExporter(function).run() for function in module.functions]
    return "module {\n" + "\n".join(bodies) + "}\n"


def element_type(dtype: DType) -> str:
    """The MLIR element type of a polyir dtype (bool is ``i1``)."""
    return _ELEMENT[dtype]


def memref_type(buffer: Buffer) -> str:
    """``memref<4x?xf32>``: constant dimensions as numbers, others as ``?``."""
    dims = "".join(f"{d.constant if d.is_constant else '?'}x" for d in buffer.shape)
    return f"memref<{dims}{_ELEMENT[buffer.dtype]}>"


def _compute(dtype: DType) -> DType:
    """The type a value of ``dtype`` is computed in (f16/bf16 in f32, as polyir does)."""
    return DType.F32 if dtype in _HALF else dtype


def float_literal(value: float, dtype: DType) -> str:
    """An MLIR float literal that parses to exactly ``value`` in ``dtype``
    (f32 or f64): decimal when finite, the bit pattern otherwise."""
    if math.isnan(value) or math.isinf(value):
        if dtype is DType.F64:
            return "0x" + struct.pack(">d", value).hex().upper()
        return "0x" + struct.pack(">f", value).hex().upper()
    text = repr(float(value))
    mantissa, _, exponent = text.partition("e")
    if "." not in mantissa:
        mantissa += ".0"
    return f"{mantissa}e{exponent}" if exponent else mantissa


def _affine_text(aff: Aff, names: dict[str, str]) -> str:
    """``aff`` in MLIR affine syntax, each variable written as ``names[var]``."""
    parts: list[str] = []
    for atom, coeff in aff.terms:
        if isinstance(atom, str):
            atom_text = names[atom]
        elif isinstance(atom, FloorDiv):
            atom_text = f"({_affine_text(atom.expr, names)}) floordiv {atom.divisor}"
        else:
            assert isinstance(atom, Mod)
            atom_text = f"({_affine_text(atom.expr, names)}) mod {atom.divisor}"
        if not isinstance(atom, str):
            atom_text = f"({atom_text})"
        if not parts:
            parts.append(atom_text if coeff == 1 else f"{atom_text} * {coeff}")
        else:
            magnitude = abs(coeff)
            term = atom_text if magnitude == 1 else f"{atom_text} * {magnitude}"
            parts.append(f" + {term}" if coeff > 0 else f" - {term}")
    if not parts:
        return str(aff.constant)
    if aff.constant > 0:
        parts.append(f" + {aff.constant}")
    elif aff.constant < 0:
        parts.append(f" - {-aff.constant}")
    return "".join(parts)


def _single_variable(aff: Aff) -> str | None:
    """The variable when ``aff`` is exactly one variable, else None."""
    if len(aff.terms) == 1 and aff.constant == 0 and aff.terms[0][1] == 1:
        atom = aff.terms[0][0]
        if isinstance(atom, str):
            return atom
    return None


class _FunctionExporter:
    def __init__(self, function: Function):
        self.function = function
        self.lines: list[str] = []
        self.depth = 2
        self.used: set[str] = set()
        self.ssa: dict[str, str] = {}          # polyir variable -> SSA name
        self.loop_vars: list[str] = []          # enclosing loops, outermost first
        self.index_constants: dict[int, str] = {}
        self.prologue: list[str] = []
        self.cache: dict[tuple[Expr, str], str] = {}
        self.buffers = function.buffers
        self.counter = 0

    def refuse(self, what: str) -> ExportError:
        return ExportError(f"function '{self.function.name}': cannot export {what} to affine MLIR "
                           f"(GPU-mapped IR is out of scope)")

    # ----------------------------------------------------------------- output
    def emit(self, text: str) -> None:
        self.lines.append("  " * self.depth + text)

    def fresh(self, hint: str) -> str:
        name, count = f"%{hint}", 0
        while name in self.used:
            count += 1
            name = f"%{hint}_{count}"
        self.used.add(name)
        return name

    def temp(self) -> str:
        self.counter += 1
        return self.fresh(str(self.counter - 1))

    def op(self, text: str) -> str:
        """Emit ``%t = text``; returns ``%t``."""
        result = self.temp()
        self.emit(f"{result} = {text}")
        return result

    # --------------------------------------------------------------- function
    def run(self) -> str:
        function = self.function
        if function.kind != "host":
            raise self.refuse(f"{function.kind} function '{function.name}'")
        args = []
        in_shapes = {v for p in function.params if isinstance(p, Buffer) for d in p.shape for v in d.variables()}
        for param in function.params:
            name = self.fresh(param.name)
            self.ssa[param.name] = name
            if isinstance(param, Symbol):
                # polyir.shape names it: keep the name when mlir-opt renames the argument
                attrs = f' {{polyir.name = "{param.name}"}}' if param.name in in_shapes else ""
                args.append(f"{name}: index{attrs}")
                continue
            self.check_space(param)
            attrs = ""
            if not all(d.is_constant for d in param.shape):
                attrs = f' {{polyir.shape = "{", ".join(str(d) for d in param.shape)}"}}'
            args.append(f"{name}: {memref_type(param)}{attrs}")
        header = f"  func.func @{function.name}({', '.join(args)}) {{"
        self.define_symbols()
        freed = self.allocate_locals(function.locals)
        self.block(function.body)
        for name, buffer in freed:
            self.emit(f"memref.dealloc {name} : {memref_type(buffer)}")
        self.emit("return")
        return "\n".join([header, *self.prologue, *self.lines, "  }"]) + "\n"

    def check_space(self, buffer: Buffer) -> None:
        if buffer.space not in (MemorySpace.GLOBAL, MemorySpace.LOCAL):
            raise self.refuse(f"@{buffer.space} buffer '{buffer.name}'")

    def index_constant(self, value: int) -> str:
        if value not in self.index_constants:
            hint = f"c{value}" if value >= 0 else f"c_{-value}"
            name = self.fresh(hint)
            # at function entry, so that every block may use it
            self.prologue.append(f"    {name} = arith.constant {value} : index")
            self.index_constants[value] = name
        return self.index_constants[value]

    def define_symbols(self) -> None:
        explicit = {p.name for p in self.function.params if isinstance(p, Symbol)}
        for symbol in self.function.symbols:
            if symbol in explicit:
                continue
            for param in self.function.params:
                if not isinstance(param, Buffer):
                    continue
                axis = next((k for k, d in enumerate(param.shape) if d == Aff.var(symbol)), None)
                if axis is not None:
                    constant = self.index_constant(axis)
                    name = self.fresh(symbol)
                    self.emit(f"{name} = memref.dim {self.ssa[param.name]}, {constant} : {memref_type(param)}")
                    self.ssa[symbol] = name
                    break
            else:
                raise ExportError(f"function '{self.function.name}': size symbol '{symbol}' is not a "
                                  f"whole dimension of any argument")

    def allocate_locals(self, buffers: Iterable[Buffer]) -> list[tuple[str, Buffer]]:
        """Allocate ``buffers`` here; returns the ones to free at the end of the block."""
        freed = []
        for buffer in buffers:
            self.check_space(buffer)
            name = self.fresh(buffer.name)
            self.ssa[buffer.name] = name
            sizes = [self.index_of(d) for d in buffer.shape if not d.is_constant]
            if buffer.rank == 0:
                self.emit(f"{name} = memref.alloca() : {memref_type(buffer)}")
            else:
                self.emit(f"{name} = memref.alloc({', '.join(sizes)}) : {memref_type(buffer)}")
                freed.append((name, buffer))
        return freed

    # ------------------------------------------------------------- affine maps
    def operands(self, affs: Iterable[Aff]) -> tuple[list[str], list[str]]:
        """Loop variables (dims) and symbols used by ``affs``, each sorted."""
        names: set[str] = set()
        for aff in affs:
            names |= aff.variables()
        dims = [v for v in self.loop_vars if v in names]
        syms = sorted(names - set(dims))
        return dims, syms

    def map_text(self, affs: Sequence[Aff]) -> tuple[str, str]:
        """``affine_map<(d0)[s0] -> (...)>`` and its ``(%i)[%N]`` operands."""
        dims, syms = self.operands(affs)
        names = {v: f"d{k}" for k, v in enumerate(dims)} | {v: f"s{k}" for k, v in enumerate(syms)}
        space = f"({', '.join(names[v] for v in dims)})"
        if syms:
            space += f"[{', '.join(names[v] for v in syms)}]"
        results = ", ".join(_affine_text(a, names) for a in affs)
        operands = f"({', '.join(self.ssa[v] for v in dims)})"
        if syms:
            operands += f"[{', '.join(self.ssa[v] for v in syms)}]"
        return f"affine_map<{space} -> ({results})>", operands

    def index_of(self, aff: Aff) -> str:
        """An ``index`` SSA value equal to ``aff``."""
        if aff.is_constant:
            return self.index_constant(aff.constant)
        variable = _single_variable(aff)
        if variable is not None:
            return self.ssa[variable]
        amap, operands = self.map_text([aff])
        return self.op(f"affine.apply {amap}{operands}")

    def bound(self, affs: tuple[Aff, ...], keyword: str) -> str:
        if len(affs) == 1:
            (aff,) = affs
            if aff.is_constant:
                return str(aff.constant)
            variable = _single_variable(aff)
            if variable is not None and variable not in self.loop_vars:
                return self.ssa[variable]
        amap, operands = self.map_text(affs)
        prefix = f"{keyword} " if len(affs) > 1 else ""
        return f"{prefix}{amap}{operands}"

    def access(self, buffer: Buffer, indices: tuple[Index, ...]) -> tuple[str, str]:
        """``("affine", "%A[%i + 1, %j]")`` or ``("memref", "%A[%0, %1]")`` for a gather."""
        if all(isinstance(i, Aff) for i in indices):
            affs = [i for i in indices if isinstance(i, Aff)]
            names = {v: self.ssa[v] for a in affs for v in a.variables()}
            return "affine", f"{self.ssa[buffer.name]}[{', '.join(_affine_text(a, names) for a in affs)}]"
        operands = []
        for index in indices:
            if isinstance(index, Aff):
                operands.append(self.index_of(index))
            else:
                value = self.value(index)
                operands.append(self.op(f"arith.index_cast {value} : {_ELEMENT[self.dtype(index)]} to index"))
        return "memref", f"{self.ssa[buffer.name]}[{', '.join(operands)}]"

    # ------------------------------------------------------------------ nodes
    def block(self, nodes: Sequence[Node]) -> None:
        for node in nodes:
            self.node(node)

    def node(self, node: Node) -> None:
        if isinstance(node, Assign):
            self.assign(node)
        elif isinstance(node, For):
            self.loop(node)
        elif isinstance(node, If):
            self.condition(node)
        else:
            raise self.refuse(type(node).__name__.lower())

    def assign(self, node: Assign) -> None:
        self.cache = {}
        buffer = self.buffers[node.buffer]
        value = self.value(node.value)
        if buffer.dtype in _HALF:
            value = self.op(f"arith.truncf {value} : f32 to {_ELEMENT[buffer.dtype]}")
        kind, where = self.access(buffer, node.indices)
        self.emit(f"{kind}.store {value}, {where} : {memref_type(buffer)}")

    def loop(self, node: For) -> None:
        if node.mapping is not None:
            raise self.refuse(f"loop '{node.var}' mapped to {node.mapping}")
        lower = self.bound(node.lower, "max")
        upper = self.bound(node.upper, "min")
        var = self.fresh(node.var)
        step = f" step {node.step}" if node.step != 1 else ""
        self.emit(f"affine.for {var} = {lower} to {upper}{step} {{")
        saved = self.ssa.get(node.var)
        self.ssa[node.var] = var
        self.loop_vars.append(node.var)
        self.depth += 1
        # loop-scoped locals (``For.locals`` where the IR has them): fresh in every iteration
        freed = self.allocate_locals(getattr(node, "locals", ()))
        self.block(node.body)
        for name, buffer in freed:
            self.emit(f"memref.dealloc {name} : {memref_type(buffer)}")
        self.depth -= 1
        self.loop_vars.pop()
        if saved is not None:
            self.ssa[node.var] = saved
        attrs = (["polyir.parallel"] if node.parallel else []) + \
            [f"polyir.{k} = {getattr(node, k)} : i64" for k in ("unroll", "vectorize") if getattr(node, k)]
        self.emit("}" + (f" {{{', '.join(attrs)}}}" if attrs else ""))

    def condition(self, node: If) -> None:
        if not node.conditions:
            self.block(node.then_body)
            return
        forms = [c.as_nonnegative() for c in node.conditions]
        affs = [e for e, _ in forms]
        dims, syms = self.operands(affs)
        names = {v: f"d{k}" for k, v in enumerate(dims)} | {v: f"s{k}" for k, v in enumerate(syms)}
        space = f"({', '.join(names[v] for v in dims)})" + (f"[{', '.join(names[v] for v in syms)}]" if syms else "")
        constraints = ", ".join(f"{_affine_text(e, names)} {'==' if eq else '>='} 0" for e, eq in forms)
        operands = f"({', '.join(self.ssa[v] for v in dims)})"
        if syms:
            operands += f"[{', '.join(self.ssa[v] for v in syms)}]"
        self.emit(f"affine.if affine_set<{space} : ({constraints})>{operands} {{")
        self.depth += 1
        self.block(node.then_body)
        self.depth -= 1
        if node.else_body:
            self.emit("} else {")
            self.depth += 1
            self.block(node.else_body)
            self.depth -= 1
        self.emit("}")

    # ------------------------------------------------------------ expressions
    def dtype(self, expr: Expr) -> DType:
        return expr_dtype(expr, self.buffers)

    def value(self, expr: Expr) -> str:
        """The SSA value of ``expr`` in its compute type (f32 for f16/bf16)."""
        key = (expr, "value")
        if key not in self.cache:
            self.cache[key] = self.compute(expr)
        return self.cache[key]

    def constant(self, value: float | int | bool, dtype: DType) -> str:
        key = (Const(value, dtype), "value")
        if key not in self.cache:
            self.cache[key] = self.compute(Const(value, dtype))
        return self.cache[key]

    def compute(self, expr: Expr) -> str:
        if isinstance(expr, Const):
            return self.literal(expr)
        if isinstance(expr, Var):
            return self.op(f"arith.index_cast {self.ssa[expr.name]} : index to i64")
        if isinstance(expr, Load):
            buffer = self.buffers[expr.buffer]
            kind, where = self.access(buffer, expr.indices)
            loaded = self.op(f"{kind}.load {where} : {memref_type(buffer)}")
            if buffer.dtype in _HALF:
                return self.op(f"arith.extf {loaded} : {_ELEMENT[buffer.dtype]} to f32")
            return loaded
        if isinstance(expr, BinOp):
            dtype = _compute(self.dtype(expr.lhs))
            lhs, rhs = self.value(expr.lhs), self.value(expr.rhs)
            table = _FLOAT_BINARY if dtype.is_float else _INT_BINARY
            return self.op(f"{table[expr.op]} {lhs}, {rhs} : {_ELEMENT[dtype]}")
        if isinstance(expr, Compare):
            return self.compare(expr.op, expr.lhs, expr.rhs)
        if isinstance(expr, Call):
            return self.call(expr)
        if isinstance(expr, Select):
            cond = self.value(expr.cond)
            a, b = self.value(expr.if_true), self.value(expr.if_false)
            return self.op(f"arith.select {cond}, {a}, {b} : {_ELEMENT[_compute(self.dtype(expr.if_true))]}")
        assert isinstance(expr, Cast)
        return self.cast(self.value(expr.value), self.dtype(expr.value), expr.dtype)

    def literal(self, const: Const) -> str:
        dtype = const.dtype
        if dtype is DType.BOOL:
            return self.op(f"arith.constant {'true' if const.value else 'false'}")
        if dtype.is_int:
            return self.op(f"arith.constant {int(const.value)} : {_ELEMENT[dtype]}")
        value = float(const.value)
        if dtype is DType.F16:
            value = round_f16(value)
        elif dtype is DType.BF16:
            value = round_bf16(value)
        elif dtype is DType.F32:
            value = round_f32(value)
        compute = _compute(dtype)
        return self.op(f"arith.constant {float_literal(value, compute)} : {_ELEMENT[compute]}")

    def compare(self, op: str, lhs_expr: Expr, rhs_expr: Expr) -> str:
        dtype = self.dtype(lhs_expr)
        lhs, rhs = self.value(lhs_expr), self.value(rhs_expr)
        if dtype.is_float:
            return self.op(f"arith.cmpf {_CMPF[op]}, {lhs}, {rhs} : {_ELEMENT[_compute(dtype)]}")
        table = _CMPI_BOOL if dtype is DType.BOOL else _CMPI
        return self.op(f"arith.cmpi {table[op]}, {lhs}, {rhs} : {_ELEMENT[dtype]}")

    def call(self, expr: Call) -> str:
        dtype = self.dtype(expr.args[0])
        type_ = _ELEMENT[_compute(dtype)]
        args = [self.value(a) for a in expr.args]
        fn = expr.fn
        if fn == "not":
            return self.op(f"arith.xori {args[0]}, {self.constant(True, DType.BOOL)} : i1")
        if fn == "neg":
            if dtype.is_float:
                return self.op(f"arith.negf {args[0]} : {type_}")
            return self.op(f"arith.subi {self.constant(0, dtype)}, {args[0]} : {type_}")
        if fn == "abs":
            return self.op(f"math.{'absf' if dtype.is_float else 'absi'} {args[0]} : {type_}")
        if fn in ("max", "min"):
            name = f"arith.{fn}numf" if dtype.is_float else f"arith.{fn}si"
            return self.op(f"{name} {args[0]}, {args[1]} : {type_}")
        if fn == "pow":
            return self.op(f"math.powf {args[0]}, {args[1]} : {type_}")
        if fn == "sigmoid":
            one = self.constant(1.0, _compute(dtype))
            negated = self.op(f"arith.negf {args[0]} : {type_}")
            exp = self.op(f"math.exp {negated} : {type_}")
            denominator = self.op(f"arith.addf {one}, {exp} : {type_}")
            return self.op(f"arith.divf {one}, {denominator} : {type_}")
        if fn in _MATH:
            return self.op(f"{_MATH[fn]} {args[0]} : {type_}")
        raise ExportError(f"function '{self.function.name}': call '{fn}' has no MLIR equivalent")

    def cast(self, value: str, source: DType, target: DType) -> str:
        """``value`` (in ``source``'s compute type) converted as polyir's ``cast`` does."""
        if source is target:
            return value
        src, dst = _compute(source), _compute(target)
        if source.is_float and target.is_float:
            if target in _HALF:
                narrow = self.op(f"arith.truncf {value} : {_ELEMENT[src]} to {_ELEMENT[target]}")
                return self.op(f"arith.extf {narrow} : {_ELEMENT[target]} to f32")
            if src is dst:
                return value
            verb = "extf" if dst is DType.F64 else "truncf"
            return self.op(f"arith.{verb} {value} : {_ELEMENT[src]} to {_ELEMENT[dst]}")
        if source.is_float:
            if target is DType.BOOL:
                zero = self.constant(0.0, src)
                return self.op(f"arith.cmpf une, {value}, {zero} : {_ELEMENT[src]}")
            return self.saturating_fptosi(value, src, target)
        if source is DType.BOOL:
            verb = "uitofp" if target.is_float else "extui"
            return self.op(f"arith.{verb} {value} : i1 to {_ELEMENT[dst]}")
        if target is DType.BOOL:
            return self.op(f"arith.cmpi ne, {value}, {self.constant(0, source)} : {_ELEMENT[source]}")
        if target.is_float:
            if target in _HALF:
                narrow = self.op(f"arith.sitofp {value} : {_ELEMENT[source]} to {_ELEMENT[target]}")
                return self.op(f"arith.extf {narrow} : {_ELEMENT[target]} to f32")
            return self.op(f"arith.sitofp {value} : {_ELEMENT[source]} to {_ELEMENT[dst]}")
        verb = "extsi" if target.bits > source.bits else "trunci"
        return self.op(f"arith.{verb} {value} : {_ELEMENT[source]} to {_ELEMENT[target]}")

    def saturating_fptosi(self, value: str, src: DType, target: DType) -> str:
        """polyir's float->int cast: truncate, saturate out of range, 0 for NaN."""
        lo, hi = -(1 << (target.bits - 1)), (1 << (target.bits - 1)) - 1
        rounded = round_f32 if src is DType.F32 else float
        ftype, itype = _ELEMENT[src], _ELEMENT[target]
        truncated = self.op(f"arith.fptosi {value} : {ftype} to {itype}")
        too_big = self.op(f"arith.cmpf oge, {value}, {self.constant(rounded(float(hi)), src)} : {ftype}")
        too_small = self.op(f"arith.cmpf ole, {value}, {self.constant(rounded(float(lo)), src)} : {ftype}")
        is_nan = self.op(f"arith.cmpf uno, {value}, {value} : {ftype}")
        high = self.op(f"arith.select {too_big}, {self.constant(hi, target)}, {truncated} : {itype}")
        low = self.op(f"arith.select {too_small}, {self.constant(lo, target)}, {high} : {itype}")
        return self.op(f"arith.select {is_nan}, {self.constant(0, target)}, {low} : {itype}")

