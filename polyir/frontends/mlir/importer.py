"""Affine MLIR (``func``, ``affine``, ``arith``, ``math``, ``memref``) into polyir IR.

xDSL parses the text (see ``_xdsl.py``); this module walks the operations
and builds polyir's buffer-based statements from MLIR's SSA values:

* a chain of pure operations becomes one value expression, inlined where it
  is used (``%p = mulf %a, %b; %s = addf %c, %p; store %s`` is one statement);
* ``iter_args`` of ``affine.for`` (reductions) and results of ``affine.if``
  become 0-d local buffers: assigned before the loop / in each branch,
  updated at ``affine.yield``, read after;
* a value that reads memory is evaluated where it is defined, not where it is
  used: when a store (or a loop or ``if`` that stores) to a buffer it reads
  comes between, the value is first saved in a scalar temporary (a 0-d
  local). Values with large expressions (more than ``_BIG_EXPRESSION``
  nodes) that are used several times or inside an inner loop are also saved
  once instead of being recomputed;
* dynamic memref dimensions of arguments become size symbols, named after the
  ``memref.dim`` result that reads them (or ``A_d0``), unless the argument
  carries ``{polyir.shape = "N, 2*N + 3"}`` (written by the exporter, with
  ``{polyir.name = "N"}`` on the ``index`` argument a shape refers to);
  ``index`` arguments become ``Symbol`` parameters, scalar arguments 0-d
  buffers; ``memref.alloc``/``alloca`` become function locals.

Anything else raises :class:`polyir.errors.UnsupportedMLIR` naming the
operation and its line and column.
"""
from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from xdsl.dialects import builtin
from xdsl.ir import Block, Operation, Region, SSAValue
from xdsl.utils.exceptions import ParseError as XdslParseError
from xdsl.utils.exceptions import VerifyException

from polyir.errors import ParseError, UnsupportedMLIR, VerifyError
from polyir.frontends.mlir import values as V
from polyir.frontends.mlir.signature import _IDENTIFIER, _count_uses, _Names, _Refusal, _SignatureImporter
from polyir.frontends.mlir.values import IndexValue, MemrefValue, NotSupported, ScalarValue, Value
from polyir.ir.affine import Aff, Constraint
from polyir.ir.nodes import (
    Assign,
    Buffer,
    Call,
    Expr,
    For,
    Function,
    If,
    Load,
    Module,
    Node,
    SourceLoc,
)
from polyir.ir.parser import RESERVED_WORDS, index_to_aff
from polyir.ir.types import INDEX

_UNPARSED_OP = re.compile(r"Operation (\S+) (is not registered|does not have a custom format)")
_BIG_EXPRESSION = 5
"""A value used more than once whose expression has more nodes than this is
computed once into a temporary."""


def import_mlir(text: str, source_name: str = "<mlir>") -> Module:
    """Parse affine MLIR text into a polyir ``Module`` (one host function per
    ``func.func`` with a body; declarations are skipped).

    Raises ``polyir.ParseError`` (line, column) for text that is not MLIR,
    ``UnsupportedMLIR`` for an operation, type or attribute outside the
    subset (named, with line and column), and ``VerifyError`` for MLIR that
    xDSL's verifier rejects.
    """
    from polyir.frontends.mlir._xdsl import LocatedParser, make_context
    from polyir.ir.verifier import verify

    parser = LocatedParser(make_context(), text, source_name)
    try:
        xmodule = parser.parse_module()
    except XdslParseError as error:
        location = error.span.get_location()
        message = str(error).strip().splitlines()[-1].strip()
        unparsed = _UNPARSED_OP.search(message)
        if unparsed:
            name = unparsed.group(1)
            line, column = _position(text, text.rfind(name, 0, error.span.start + 1))
            detail = ("not an operation of the imported dialects" if "registered" in unparsed.group(2)
                      else "outside the imported subset")
            raise UnsupportedMLIR(name, line, column, _WHY_NOT.get(name, detail), source_name) from None
        raise ParseError(message, location.line, location.col, source_name) from None
    except NotImplementedError as error:   # xDSL's parser has no semi-affine expressions
        start = parser.open[-1] if parser.open else parser._current_token.span
        location = start.get_location()
        found = re.match(r'\s*(?:%[^=]*=\s*)?"?([\w.]+)', text[start.start:])
        raise UnsupportedMLIR(found.group(1) if found else "?", location.line, location.col,
                              f"semi-affine map (a product or division by a symbol): {error}",
                              source_name) from None
    try:
        xmodule.verify()
    except VerifyException as error:
        raise VerifyError(f"invalid MLIR: {error}", source_name) from None

    def locate(op: Operation) -> tuple[int, int]:
        start = parser.starts.get(id(op))
        if start is None:
            return (0, 0)
        location = start.get_location()
        return (location.line, location.col)

    functions: list[Function] = []
    for op in xmodule.ops:
        if op.name != "func.func":
            line, column = locate(op)
            raise UnsupportedMLIR(op.name, line, column, "only func.func is imported at module level",
                                  source_name)
        if not op.regions[0].blocks:
            continue   # a declaration: nothing to import (calls to it are refused)
        functions.append(_FunctionImporter(op, locate, source_name).run())
    if not functions:
        raise UnsupportedMLIR("builtin.module", 1, 1, "the module has no function", source_name)
    module = Module(tuple(functions))
    verify(module)
    return module


def _position(text: str, offset: int) -> tuple[int, int]:
    """1-based line and column of ``offset`` in ``text``."""
    offset = max(offset, 0)
    line = text.count("\n", 0, offset) + 1
    return line, offset - (text.rfind("\n", 0, offset) + 1) + 1


class _FunctionImporter(_SignatureImporter):
    def __init__(self, op: Operation, locate: Callable[[Operation], tuple[int, int]], source: str):
        self.op, self.locate, self.source = op, locate, source
        self.names = _Names()
        self.values: dict[SSAValue, Value] = {}
        self.remaining: dict[SSAValue, int] = {}
        self.pending: list[SSAValue] = []       # values whose expression reads memory
        self.locals: list[Buffer] = []
        self.symbols: list[str] = []
        self.index_args: set[str] = set()
        self.block: list[Node] = []
        self.statements = 0

    # ------------------------------------------------------------ entry point
    def run(self) -> Function:
        try:
            return self._function()
        except _Refusal as refusal:
            line, column = self.locate(refusal.op)
            raise UnsupportedMLIR(refusal.op.name, line, column, refusal.detail, self.source) from None

    def _function(self) -> Function:
        op: Any = self.op
        if not op.body.blocks:
            raise _Refusal(op, "a function declaration (no body) cannot be imported")
        if len(op.body.blocks) > 1:
            raise _Refusal(op, "a function body with several blocks (unstructured control flow)")
        if op.function_type.outputs.data:
            raise _Refusal(op, "functions with results are not imported; write results to a memref argument")
        name = op.sym_name.data
        if not _IDENTIFIER.match(name) or name in RESERVED_WORDS:
            name = "f_" + re.sub(r"\W", "_", name)
        block = op.body.block
        params = self._params(op, block)
        body = self._convert_block(block, None)
        return Function(name, tuple(params), body, tuple(self.locals), loc=self._loc(op))

    def _loc(self, op: Operation) -> SourceLoc | None:
        line, column = self.locate(op)
        return SourceLoc(line, column) if line else None

    # ----------------------------------------------------------------- values
    def _define(self, result: SSAValue, value: Value) -> None:
        self.values[result] = value
        uses = _count_uses(result)
        self.remaining[result] = uses
        expr = value.expr if isinstance(value, (ScalarValue, IndexValue)) else None
        if expr is None or uses == 0:
            return
        if isinstance(value, IndexValue) and value.aff is not None:
            return
        big = V.size(expr) > _BIG_EXPRESSION
        if (uses > 1 and big) or (big and self._used_in_inner_loop(result)):
            self._materialize(result)
        elif V.reads(expr):
            self.pending.append(result)

    @staticmethod
    def _used_in_inner_loop(result: SSAValue) -> bool:
        home = result.owner.parent_block() if isinstance(result.owner, Operation) else result.owner
        for use in result.uses:
            op: Operation | None = use.operation
            while op is not None and op.parent_block() is not home:
                if op.name == "affine.for":
                    return True
                op = op.parent_op()
        return False

    def _materialize(self, result: SSAValue) -> None:
        """Evaluate ``result`` here into a fresh 0-d temporary; uses read the temporary."""
        value = self.values[result]
        assert isinstance(value, (ScalarValue, IndexValue))
        dtype = value.dtype if isinstance(value, ScalarValue) else INDEX
        name = self.names.fresh(result.name_hint, "t")
        self.locals.append(Buffer(name, dtype, ()))
        self._emit_assign(name, (), value.expr)
        self.values[result] = ScalarValue(Load(name, ()), dtype) if isinstance(value, ScalarValue) \
            else IndexValue(Load(name, ()))
        if result in self.pending:
            self.pending.remove(result)

    def _before_write(self, buffers: set[str]) -> None:
        """Save the live values that read ``buffers`` before they are overwritten."""
        for result in list(self.pending):
            if self.remaining.get(result, 0) <= 0:
                self.pending.remove(result)
                continue
            value = self.values[result]
            expr = value.expr if isinstance(value, (ScalarValue, IndexValue)) else None
            if expr is not None and V.reads(expr, buffers):
                self._materialize(result)

    def _emit_assign(self, buffer: str, indices: tuple[Any, ...], value: Expr, op: Operation | None = None) -> None:
        name = f"S{self.statements}"
        self.statements += 1
        self.block.append(Assign(name, buffer, indices, value, loc=self._loc(op) if op is not None else None))

    def _value(self, op: Operation, ssa: SSAValue) -> Value:
        try:
            return self.values[ssa]
        except KeyError:
            raise _Refusal(op, "uses a value polyir could not import") from None

    def _index(self, op: Operation, ssa: SSAValue) -> IndexValue:
        value = self._value(op, ssa)
        if not isinstance(value, IndexValue):
            raise _Refusal(op, "expected an index value")
        return value

    def _memref(self, op: Operation, ssa: SSAValue) -> Buffer:
        value = self._value(op, ssa)
        if not isinstance(value, MemrefValue):
            raise _Refusal(op, "expected a memref")
        return value.buffer

    def _as_scalar(self, op: Operation, ssa: SSAValue) -> ScalarValue:
        value = self._value(op, ssa)
        if isinstance(value, ScalarValue):
            return value
        if isinstance(value, IndexValue):
            return ScalarValue(value.expr, INDEX)
        raise _Refusal(op, "a memref used as a scalar value")

    # ----------------------------------------------------------------- blocks
    def _convert_block(self, block: Block, on_yield: Callable[[Operation], None] | None) -> tuple[Node, ...]:
        saved, self.block = self.block, []
        try:
            for op in block.ops:
                for operand in op.operands:
                    self.remaining[operand] = self.remaining.get(operand, 0) - 1
                if op.name == "affine.yield":
                    if on_yield is not None:
                        on_yield(op)
                    elif op.operands:
                        raise _Refusal(op, "affine.yield with values outside a loop or if")
                    continue
                self._convert(op)
            return tuple(self.block)
        finally:
            self.block = saved

    def _convert_region(self, region: Region, on_yield: Callable[[Operation], None]) -> tuple[Node, ...]:
        if not region.blocks:
            return ()
        if len(region.blocks) > 1:
            raise _Refusal(region.parent_op() or self.op, "a region with several blocks")
        return self._convert_block(region.block, on_yield)

    def _convert(self, op: Operation) -> None:
        name = op.name
        handler = _HANDLERS.get(name)
        if handler is not None:
            handler(self, op)
            return
        if name.startswith(("arith.", "math.")):
            self._pure(op)
            return
        if name == "func.return":
            if op.operands:
                raise _Refusal(op, "returning values is not imported")
            return
        raise _Refusal(op, _WHY_NOT.get(name, "outside the imported subset (func, affine, arith, math, memref)"))

    # ------------------------------------------------------------ pure values
    def _pure(self, op: Any) -> None:
        if len(op.results) != 1:
            raise _Refusal(op, "an operation with several results")
        result = op.results[0]
        dtype = self._dtype(op, result.type)
        if op.name == "arith.constant":
            value_attr = op.value
            constant = self._attempt(op, lambda: V.constant_value(value_attr, dtype))
            if isinstance(result.type, builtin.IndexType):
                self._define(result, IndexValue.affine(Aff.const(int(constant.value))))
            else:
                self._define(result, ScalarValue(constant, dtype))
            return
        if isinstance(result.type, builtin.IndexType) and op.name in _INDEX_AFFINE:
            affine = self._index_affine(op)
            if affine is not None:
                self._define(result, affine)
                return
        args = [self._as_scalar(op, operand) for operand in op.operands]
        attrs: dict[str, Any] = {}
        if op.name in ("arith.cmpf", "arith.cmpi"):
            table = _CMPF_NAMES if op.name == "arith.cmpf" else _CMPI_NAMES
            attrs["predicate"] = table[op.predicate.value.data]
        expr = self._attempt(op, lambda: V.scalar_op(op.name, args, dtype, attrs))
        if isinstance(result.type, builtin.IndexType):
            self._define(result, IndexValue(expr, index_to_aff(expr)))
        else:
            self._define(result, ScalarValue(expr, dtype))

    def _attempt(self, op: Operation, build: Callable[[], Any]) -> Any:
        try:
            return build()
        except NotSupported as reason:
            raise _Refusal(op, str(reason)) from None

    def _index_affine(self, op: Operation) -> IndexValue | None:
        """``index`` arithmetic that stays affine (or a min/max of affine values)."""
        a, b = (self._index(op, operand) for operand in op.operands)
        if a.aff is None or b.aff is None:
            return None
        name = op.name
        if name == "arith.addi":
            return IndexValue.affine(a.aff + b.aff)
        if name == "arith.subi":
            return IndexValue.affine(a.aff - b.aff)
        if name == "arith.muli" and (a.aff.is_constant or b.aff.is_constant):
            return IndexValue.affine(a.aff * b.aff)
        if name in ("arith.floordivsi", "arith.ceildivsi") and b.aff.is_constant and b.aff.constant > 0:
            k = b.aff.constant
            return IndexValue.affine(a.aff // k if name == "arith.floordivsi" else (a.aff + (k - 1)) // k)
        if name in ("arith.minsi", "arith.maxsi"):
            kind = "min" if name == "arith.minsi" else "max"
            return IndexValue(Call(kind, (a.expr, b.expr)), None, (kind, (a.aff, b.aff)))
        return None

    # ------------------------------------------------------------------ affine
    def _map_operands(self, op: Operation, operands: Iterable[SSAValue]) -> list[IndexValue]:
        return [self._index(op, operand) for operand in operands]

    def _apply(self, op: Any) -> None:
        amap = op.map.data
        operands = self._map_operands(op, op.mapOperands)
        self._define(op.results[0], V.apply_map(amap.results[0], operands, amap.num_dims))

    def _min_max(self, op: Any) -> None:
        kind = "min" if op.name == "affine.min" else "max"
        amap = op.map.data
        operands = self._map_operands(op, op.operands)
        results = [V.apply_map(e, operands, amap.num_dims) for e in amap.results]
        expr = results[0].expr
        for other in results[1:]:
            expr = Call(kind, (expr, other.expr))
        if len(results) == 1:
            self._define(op.results[0], results[0])
        elif all(r.aff is not None for r in results):
            affs = tuple(r.aff for r in results if r.aff is not None)
            self._define(op.results[0], IndexValue(expr, None, (kind, affs)))
        else:
            self._define(op.results[0], IndexValue(expr))

    def _access(self, op: Any, amap: Any, operands: Sequence[SSAValue]) -> tuple[Any, ...]:
        values = self._map_operands(op, operands)
        return tuple(V.subscript_of(V.apply_map(e, values, amap.num_dims)) for e in amap.results)

    def _load(self, op: Any) -> None:
        buffer = self._memref(op, op.memref)
        if op.name == "affine.load":
            indices = self._access(op, op.map.data, op.indices)
        else:
            indices = tuple(V.subscript_of(self._index(op, i)) for i in op.indices)
        load = Load(buffer.name, indices)
        if isinstance(op.results[0].type, builtin.IndexType):
            self._define(op.results[0], IndexValue(load))
        else:
            self._define(op.results[0], ScalarValue(load, buffer.dtype))

    def _store(self, op: Any) -> None:
        buffer = self._memref(op, op.memref)
        if op.name == "affine.store":
            indices = self._access(op, op.map.data, op.indices)
        else:
            indices = tuple(V.subscript_of(self._index(op, i)) for i in op.indices)
        self._before_write({buffer.name})
        value = self._as_scalar(op, op.value)
        self._emit_assign(buffer.name, indices, value.expr, op)

    def _written(self, op: Operation) -> set[str]:
        """Buffers stored to anywhere inside ``op`` (known before converting it)."""
        found: set[str] = set()
        for inner in op.walk():
            if inner.name in ("affine.store", "memref.store"):
                memref = inner.operands[1]
                while memref not in self.values and isinstance(memref.owner, Operation) \
                        and memref.owner.name == "memref.cast":
                    memref = memref.owner.operands[0]     # an alias made inside ``op``
                value = self.values.get(memref)
                if isinstance(value, MemrefValue):
                    found.add(value.buffer.name)
        return found

    def _temporaries(self, op: Operation, results: Sequence[SSAValue], hints: Sequence[str | None]) -> list[Buffer]:
        temps = []
        for result, hint in zip(results, hints, strict=True):
            if isinstance(result.type, builtin.MemRefType):
                raise _Refusal(op, "a memref carried through iter_args or yielded from an if")
            dtype = self._dtype(op, result.type)
            temps.append(Buffer(self.names.fresh(hint, "acc" if op.name == "affine.for" else "r"), dtype, ()))
        self.locals.extend(temps)
        return temps

    def _yield_into(self, temps: Sequence[Buffer]) -> Callable[[Operation], None]:
        names = {t.name for t in temps}

        def on_yield(op: Operation) -> None:
            exprs = [self._as_scalar(op, operand).expr for operand in op.operands]
            # a parallel assignment: values reading another temporary are saved first
            for k, expr in enumerate(exprs):
                if len(exprs) > 1 and V.reads(expr, names - {temps[k].name}):
                    saved = self.names.fresh(None, "t")
                    self.locals.append(Buffer(saved, temps[k].dtype, ()))
                    self._emit_assign(saved, (), expr)
                    exprs[k] = Load(saved, ())
            self._before_write(names)
            for temp, expr in zip(temps, exprs, strict=True):
                if expr != Load(temp.name, ()):
                    self._emit_assign(temp.name, (), expr, op)
        return on_yield

    def _for(self, op: Any) -> None:
        lower_map, upper_map = op.lowerBoundMap.data, op.upperBoundMap.data
        lower = self._attempt(op, lambda: V.bound_affs(
            lower_map.results, self._map_operands(op, op.lowerBoundOperands), lower_map.num_dims, upper=False))
        upper = self._attempt(op, lambda: V.bound_affs(
            upper_map.results, self._map_operands(op, op.upperBoundOperands), upper_map.num_dims, upper=True))
        step = int(op.step.value.data)
        iv, *carried = op.body.block.args
        temps = self._temporaries(op, op.results, [a.name_hint for a in carried])
        self._before_write(self._written(op))
        for temp, init in zip(temps, op.inits, strict=True):
            self._emit_assign(temp.name, (), self._as_scalar(op, init).expr, op)
        var = self.names.fresh(iv.name_hint, "i")
        self.values[iv] = IndexValue.affine(Aff.var(var))
        self.remaining[iv] = _count_uses(iv)
        self._define_results(carried, temps)
        body = self._convert_region(op.body, self._yield_into(temps))
        attrs = op.attributes
        unroll, vectorize = (attrs.get(f"polyir.{key}") for key in ("unroll", "vectorize"))
        self.block.append(For(var, lower, upper, body, step, parallel="polyir.parallel" in attrs,
                              unroll=int(unroll.value.data) if isinstance(unroll, builtin.IntegerAttr) else 0,
                              vectorize=int(vectorize.value.data) if isinstance(vectorize, builtin.IntegerAttr)
                              else 0, loc=self._loc(op)))
        self._define_results(op.results, temps)

    def _define_results(self, results: Sequence[SSAValue], temps: Sequence[Buffer]) -> None:
        for result, temp in zip(results, temps, strict=True):
            load = Load(temp.name, ())
            self._define(result, IndexValue(load) if isinstance(result.type, builtin.IndexType)
                         else ScalarValue(load, temp.dtype))

    def _if(self, op: Any) -> None:
        integer_set = op.condition.data
        operands = self._map_operands(op, op.args)

        def operand(is_symbol: bool, position: int) -> Aff:
            value = operands[integer_set.num_dims + position if is_symbol else position]
            if value.aff is None:
                raise NotSupported("the condition uses a value that is not affine in loop variables "
                                   "and size symbols")
            return value.aff

        def constraints() -> list[Constraint]:
            return [Constraint(V.affine_to_aff(c.lhs, operand), c.kind.value, V.affine_to_aff(c.rhs, operand))
                    for c in integer_set.constraints]

        conditions = self._attempt(op, constraints)
        temps = self._temporaries(op, op.results, [r.name_hint for r in op.results])
        self._before_write(self._written(op))
        then_body = self._convert_region(op.then_region, self._yield_into(temps))
        else_body = self._convert_region(op.else_region, self._yield_into(temps))
        if conditions:
            self.block.append(If(tuple(conditions), then_body, else_body, loc=self._loc(op)))
        else:
            self.block.extend(then_body)
        self._define_results(op.results, temps)

    # ------------------------------------------------------------------ memref
    def _alloc(self, op: Any) -> None:
        type_ = op.results[0].type
        self._check_layout(op, type_)
        if op.symbol_operands:
            raise _Refusal(op, "allocation with layout symbols")
        dynamic = iter(op.dynamic_sizes)
        shape = []
        for extent in type_.get_shape():
            if extent != builtin.DYNAMIC_INDEX:
                shape.append(Aff.const(extent))
                continue
            size = self._index(op, next(dynamic))
            if size.aff is None or not size.aff.variables() <= set(self.symbols):
                raise _Refusal(op, "a dynamic size must be affine in the size symbols (polyir locals are "
                                   "function-wide, so it cannot depend on loop variables or loaded values)")
            shape.append(size.aff)
        name = self.names.fresh(op.results[0].name_hint, "buf")
        buffer = Buffer(name, self._element_dtype(op, type_), tuple(shape))
        self.locals.append(buffer)
        self._define(op.results[0], MemrefValue(buffer))

    def _dim(self, op: Any) -> None:
        buffer = self._memref(op, op.source)
        index = self._index(op, op.index)
        if index.aff is None or not index.aff.is_constant or not 0 <= index.aff.constant < buffer.rank:
            raise _Refusal(op, "memref.dim needs a constant dimension within the rank")
        self._define(op.results[0], IndexValue.affine(buffer.shape[index.aff.constant]))

    def _cast(self, op: Any) -> None:
        buffer = self._memref(op, op.source)
        if not isinstance(op.results[0].type, builtin.MemRefType):
            raise _Refusal(op, "a cast to an unranked memref")
        self._define(op.results[0], MemrefValue(buffer))

    def _dealloc(self, op: Operation) -> None:
        """Locals live until the function returns; nothing to do."""


_HANDLERS: dict[str, Callable[[_FunctionImporter, Any], None]] = {
    "affine.for": _FunctionImporter._for,
    "affine.if": _FunctionImporter._if,
    "affine.load": _FunctionImporter._load,
    "memref.load": _FunctionImporter._load,
    "affine.store": _FunctionImporter._store,
    "memref.store": _FunctionImporter._store,
    "affine.apply": _FunctionImporter._apply,
    "affine.min": _FunctionImporter._min_max,
    "affine.max": _FunctionImporter._min_max,
    "memref.alloc": _FunctionImporter._alloc,
    "memref.alloca": _FunctionImporter._alloc,
    "memref.dealloc": _FunctionImporter._dealloc,
    "memref.dim": _FunctionImporter._dim,
    "memref.cast": _FunctionImporter._cast,
}
_INDEX_AFFINE = ("arith.addi", "arith.subi", "arith.muli", "arith.floordivsi", "arith.ceildivsi",
                 "arith.minsi", "arith.maxsi")
_WHY_NOT = {
    "affine.parallel": "use affine.for (polyir marks parallel loops with the {polyir.parallel} attribute)",
    "affine.vector_load": "vector types are not imported",
    "affine.vector_store": "vector types are not imported",
    "func.call": "calls are not imported (inline the callee first)",
    "memref.copy": "write the copy as an affine.for nest",
    "memref.subview": "views are not imported",
}
_CMPF_NAMES = ["false", "oeq", "ogt", "oge", "olt", "ole", "one", "ord", "ueq", "ugt", "uge",
               "ult", "ule", "une", "uno", "true"]
_CMPI_NAMES = ["eq", "ne", "slt", "sle", "sgt", "sge", "ult", "ule", "ugt", "uge"]
