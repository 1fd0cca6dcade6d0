"""Structural and type checks of IR (docs/ir.md, "Semantics").

``verify(module)`` raises :class:`polyir.VerifyError` whose ``where`` names the
function and the statement (loop, barrier, launch) at fault, with its
``line:column`` when the node was parsed. ``expr_dtype(expr, buffers)`` is the
typing rule for value expressions, reusable by other components.
"""
from __future__ import annotations

import numbers
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

import numpy as np

from polyir.errors import VerifyError
from polyir.ir.affine import Aff
from polyir.ir.fragments import MMA_SHAPES
from polyir.ir.nodes import (
    BINOPS,
    CALLS,
    COMPARES,
    GPU_MAPPINGS,
    Assign,
    Barrier,
    BinOp,
    Buffer,
    Call,
    Cast,
    Compare,
    Const,
    Expr,
    For,
    FragmentFill,
    FragmentLoad,
    FragmentMMA,
    FragmentStore,
    Function,
    If,
    Index,
    Launch,
    Load,
    Module,
    Node,
    Select,
    Statement,
    Symbol,
    Var,
)
from polyir.ir.parser import RESERVED_WORDS, index_to_aff
from polyir.ir.types import INDEX, DType, MemorySpace
from polyir.ir.walk import FRAGMENT_NODES

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_FLOAT_ONLY = frozenset(CALLS) - {"neg", "not", "abs", "max", "min"}
"""Math functions defined on floating-point values only."""


# ------------------------------------------------------------------- typing
def expr_dtype(expr: Expr, buffers: Mapping[str, Buffer]) -> DType:
    """The dtype of a value expression; ``Var`` is i64 and ``Compare`` bool.

    Raises ``VerifyError`` (without ``where``) for an unknown buffer, a rank
    mismatch, or operands whose dtypes do not fit the operation.
    """
    return _Typer(buffers, None).dtype(expr)


class _Typer:
    """Types value expressions; with ``names`` set, also checks that every
    ``Var`` and affine variable is one of them."""

    def __init__(self, buffers: Mapping[str, Buffer], names: frozenset[str] | None):
        self.buffers = buffers
        self.names = names

    def dtype(self, expr: Expr) -> DType:
        if isinstance(expr, Const):
            _check_const(expr)
            return expr.dtype
        if isinstance(expr, Var):
            if self.names is not None:
                self.check_name(expr.name)
            return INDEX
        if isinstance(expr, Load):
            buffer = self.buffer(expr.buffer, "loads from")
            self.indices(buffer, expr.indices)
            return buffer.dtype
        if isinstance(expr, BinOp):
            if expr.op not in BINOPS:
                raise VerifyError(f"unknown binary operator '{expr.op}'")
            lhs, rhs = self.dtype(expr.lhs), self.dtype(expr.rhs)
            if lhs is not rhs:
                raise VerifyError(f"dtype mismatch in '{expr.op}': {lhs} and {rhs} (use cast)")
            if expr.op in ("and", "or"):
                if lhs is not DType.BOOL:
                    raise VerifyError(f"'{expr.op}' needs bool operands, found {lhs}")
            elif lhs is DType.BOOL:
                raise VerifyError(f"arithmetic '{expr.op}' on bool operands")
            return lhs
        if isinstance(expr, Compare):
            if expr.op not in COMPARES:
                raise VerifyError(f"unknown comparison '{expr.op}'")
            lhs, rhs = self.dtype(expr.lhs), self.dtype(expr.rhs)
            if lhs is not rhs:
                raise VerifyError(f"dtype mismatch in comparison '{expr.op}': {lhs} and {rhs} (use cast)")
            return DType.BOOL
        if isinstance(expr, Call):
            return self.call(expr)
        if isinstance(expr, Select):
            cond = self.dtype(expr.cond)
            if cond is not DType.BOOL:
                raise VerifyError(f"select condition must be bool, found {cond}")
            a, b = self.dtype(expr.if_true), self.dtype(expr.if_false)
            if a is not b:
                raise VerifyError(f"dtype mismatch in select branches: {a} and {b} (use cast)")
            return a
        if isinstance(expr, Cast):
            if not isinstance(expr.dtype, DType):
                raise VerifyError(f"cast to a non-dtype {expr.dtype!r}")
            self.dtype(expr.value)
            return expr.dtype
        raise VerifyError(f"not a value expression: {expr!r}")

    def call(self, expr: Call) -> DType:
        if expr.fn not in CALLS:
            raise VerifyError(f"unknown function '{expr.fn}'")
        if len(expr.args) != CALLS[expr.fn]:
            raise VerifyError(f"{expr.fn} takes {CALLS[expr.fn]} argument(s), found {len(expr.args)}")
        types = [self.dtype(a) for a in expr.args]
        if any(t is not types[0] for t in types):
            raise VerifyError(f"dtype mismatch in {expr.fn}: {', '.join(map(str, types))} (use cast)")
        dtype = types[0]
        if expr.fn == "not":
            if dtype is not DType.BOOL:
                raise VerifyError(f"'not' needs a bool operand, found {dtype}")
        elif expr.fn in _FLOAT_ONLY:
            if not dtype.is_float:
                raise VerifyError(f"{expr.fn} needs floating-point operands, found {dtype}")
        elif dtype is DType.BOOL:
            name = "unary '-'" if expr.fn == "neg" else expr.fn
            raise VerifyError(f"{name} on a bool operand")
        return dtype

    def buffer(self, name: str, verb: str) -> Buffer:
        buffer = self.buffers.get(name)
        if buffer is None:
            raise VerifyError(f"undefined buffer '{name}'")
        if self.names is not None and buffer.space is MemorySpace.FRAGMENT:
            raise VerifyError(f"an ordinary statement {verb} fragment '{name}'; use fragment operations")
        return buffer

    def indices(self, buffer: Buffer, indices: tuple[Index, ...]) -> None:
        if len(indices) != buffer.rank:
            raise VerifyError(f"buffer '{buffer.name}' has rank {buffer.rank} but is subscripted "
                              f"with {len(indices)} index(es)")
        for index in indices:
            if isinstance(index, Aff):
                if self.names is not None:
                    self.affine(index, "a subscript")
                continue
            dtype = self.dtype(index)
            if not dtype.is_int:
                raise VerifyError(f"subscript of '{buffer.name}' must be an integer, found {dtype}")
            aff = index_to_aff(index)
            if aff is not None:
                raise VerifyError(f"subscript of '{buffer.name}' is affine but not an Aff: write it as "
                                  f"Aff '{aff}'")

    def check_name(self, name: str) -> None:
        assert self.names is not None
        if name not in self.names:
            if name in self.buffers:
                raise VerifyError(f"buffer '{name}' used as a variable")
            raise VerifyError(f"undefined variable '{name}'")

    def affine(self, aff: Aff, what: str) -> None:
        """Every variable of ``aff`` is an enclosing loop variable or a symbol."""
        for name in sorted(aff.variables()):
            if self.names is not None and name not in self.names:
                if name in self.buffers:
                    raise VerifyError(f"{what} uses buffer '{name}' as a variable")
                raise VerifyError(f"{what} uses undefined variable '{name}'")


def _check_const(const: Const) -> None:
    value, dtype = const.value, const.dtype
    if not isinstance(dtype, DType):
        raise VerifyError(f"constant {value!r} has a non-dtype type {dtype!r}")
    is_bool = isinstance(value, (bool, np.bool_))
    is_int = not is_bool and isinstance(value, numbers.Integral)
    is_real = not is_bool and isinstance(value, numbers.Real)
    if dtype is DType.BOOL:
        ok = is_bool
    elif dtype.is_int:
        ok = is_int
    else:
        ok = is_real
    if ok and dtype.is_int:
        ok = -(2 ** (dtype.bits - 1)) <= int(value) < 2 ** (dtype.bits - 1)
    if not ok:
        raise VerifyError(f"constant {value!r} does not fit dtype {dtype}")


# ----------------------------------------------------------------- verifier
def verify(module: Module) -> None:
    """Check ``module``; raises ``VerifyError`` naming the function and statement."""
    kernels = {}
    seen: set[str] = set()
    for function in module.functions:
        where = _where(function, None)
        _check_identifier(function.name, "function name", where)
        if function.name in seen:
            raise VerifyError(f"duplicate function name '{function.name}'", where)
        seen.add(function.name)
        if function.kind not in ("host", "kernel"):
            raise VerifyError(f"function kind must be 'host' or 'kernel', not {function.kind!r}", where)
        if function.kind == "kernel":
            kernels[function.name] = function
    for function in module.functions:
        _FunctionChecker(function, kernels).run()


def _where(function: Function, what: str | None, node: object = None) -> str:
    text = f"function '{function.name}'"
    if what:
        text += f", {what}"
    loc = getattr(node if node is not None else function, "loc", None)
    if loc is not None:
        text += f" at {loc}"
    return text


def _check_identifier(name: object, what: str, where: str) -> None:
    if not isinstance(name, str) or not _IDENTIFIER.match(name):
        raise VerifyError(f"{what} {name!r} is not an identifier", where)
    if name in RESERVED_WORDS:
        raise VerifyError(f"{what} '{name}' is a reserved word", where)


@dataclass
class _FunctionChecker:
    function: Function
    kernels: Mapping[str, Function]
    statement_names: set[str] = field(default_factory=set)
    thread_loops: set[str] = field(default_factory=set)
    loop_vars: dict[str, For] = field(default_factory=dict)
    declared: set[str] = field(default_factory=set)   # every buffer name declared so far

    def run(self) -> None:
        function = self.function
        self.buffers: dict[str, Buffer] = {}
        self.symbols: set[str] = set()
        for param in function.params:
            where = _where(function, f"parameter '{getattr(param, 'name', param)}'", param)
            if not isinstance(param, (Buffer, Symbol)):
                raise VerifyError(f"parameter is neither a Buffer nor a Symbol: {param!r}", where)
            _check_identifier(param.name, "parameter name", where)
            if param.name in self.buffers or param.name in self.symbols:
                raise VerifyError(f"duplicate parameter name '{param.name}'", where)
            if isinstance(param, Symbol):
                self.symbols.add(param.name)
            else:
                self.buffers[param.name] = param
        self.symbols |= set(function.symbols)
        for name in sorted(self.symbols):
            _check_identifier(name, "symbol", _where(function, None))
            if name in self.buffers:
                raise VerifyError(f"'{name}' is both a buffer and a size symbol", _where(function, None))
        for param in function.params:
            if isinstance(param, Buffer):
                self.buffer_type(param, f"parameter '{param.name}'")
        for local in function.locals:
            where = _where(function, f"local '{getattr(local, 'name', local)}'", local)
            if not isinstance(local, Buffer):
                raise VerifyError(f"local is not a Buffer: {local!r}", where)
            _check_identifier(local.name, "local buffer name", where)
            if local.name in self.buffers or local.name in self.symbols:
                raise VerifyError(f"duplicate buffer name '{local.name}'", where)
            self.buffers[local.name] = local
            self.buffer_type(local, f"local '{local.name}'")
        self.declared = set(self.buffers)
        self.block(function.body, ())

    def buffer_type(self, buffer: Buffer, what: str) -> None:
        where = _where(self.function, what, buffer)
        if not isinstance(buffer.dtype, DType) or not isinstance(buffer.space, MemorySpace):
            raise VerifyError(f"buffer '{buffer.name}' has a bad dtype or memory space", where)
        for dim in buffer.shape:
            if not isinstance(dim, Aff):
                raise VerifyError(f"dimension {dim!r} of '{buffer.name}' is not affine", where)
            try:
                _Typer(self.buffers, frozenset(self.symbols)).affine(dim, f"dimension of '{buffer.name}'")
            except VerifyError as error:
                raise VerifyError(error.message, where) from None
        if buffer.space is MemorySpace.FRAGMENT:
            if buffer.rank != 2 or not all(d.is_constant and d.constant > 0 for d in buffer.shape):
                raise VerifyError(f"fragment '{buffer.name}' needs a constant 2-d shape", where)

    # -- nodes ---------------------------------------------------------------------
    def block(self, nodes: Iterable[Node], scope: tuple[str, ...]) -> None:
        for node in nodes:
            self.node(node, scope)

    def typer(self, scope: tuple[str, ...]) -> _Typer:
        return _Typer(self.buffers, frozenset(scope) | self.symbols)

    def named(self, node: Statement, kind: str) -> str:
        name = node.name
        where = _where(self.function, f"{kind} '{name}'", node)
        _check_identifier(name, "statement name", where)
        if name in self.statement_names:
            raise VerifyError(f"duplicate statement name '{name}'", where)
        self.statement_names.add(name)
        return where

    def node(self, node: Node, scope: tuple[str, ...]) -> None:
        if isinstance(node, Assign):
            where = self.named(node, "statement")
            self.checked(where, self.assign, node, scope)
        elif isinstance(node, For):
            self.for_loop(node, scope)
        elif isinstance(node, If):
            where = _where(self.function, "if", node)
            typer = self.typer(scope)
            for condition in node.conditions:
                self.checked(where, typer.affine, condition.lhs, "a condition")
                self.checked(where, typer.affine, condition.rhs, "a condition")
            self.block(node.then_body, scope)
            self.block(node.else_body, scope)
        elif isinstance(node, Barrier):
            # Before outlining, GPU-mapped IR in a host function may hold barriers
            # inside its thread-mapped loops.
            if self.function.kind != "kernel" and not self.thread_loops.intersection(scope):
                raise VerifyError("barrier outside a kernel function and outside any thread-mapped loop",
                                  _where(self.function, "barrier", node))
        elif isinstance(node, FRAGMENT_NODES):
            where = self.named(node, "statement")
            self.checked(where, self.fragment_op, node, scope)
        elif isinstance(node, Launch):
            where = _where(self.function, f"launch of '{node.kernel}'", node)
            self.checked(where, self.launch, node, scope)
        else:
            raise VerifyError(f"not an IR node: {node!r}", _where(self.function, None))

    @staticmethod
    def checked(where: str, check: Callable[..., None], *args: object) -> None:
        """Run ``check(*args)``, giving a ``VerifyError`` from it this ``where``."""
        try:
            check(*args)
        except VerifyError as error:
            if error.where:
                raise
            raise VerifyError(error.message, where) from None

    def assign(self, node: Assign, scope: tuple[str, ...]) -> None:
        typer = self.typer(scope)
        buffer = typer.buffer(node.buffer, "stores to")
        typer.indices(buffer, node.indices)
        value = typer.dtype(node.value)
        if value is not buffer.dtype:
            raise VerifyError(f"stores a {value} value into {buffer.dtype} buffer '{buffer.name}' (use cast)")

    def for_loop(self, node: For, scope: tuple[str, ...]) -> None:
        where = _where(self.function, f"loop '{node.var}'", node)
        _check_identifier(node.var, "loop variable", where)
        if node.var in scope:
            raise VerifyError(f"loop variable '{node.var}' shadows an enclosing loop variable", where)
        if node.var in self.symbols:
            raise VerifyError(f"loop variable '{node.var}' shadows a size symbol", where)
        if node.var in self.buffers:
            raise VerifyError(f"loop variable '{node.var}' has the name of a buffer", where)
        other = self.loop_vars.get(node.var)
        if other is not None:
            at = f" (at {other.loc})" if other.loc is not None else ""
            raise VerifyError(f"loop variable '{node.var}' is already used by another loop{at}; loop "
                              f"variables must be unique in a function (rename one, or use "
                              f"polyir.ir.names.unique_loop_vars)", where)
        self.loop_vars[node.var] = node
        if not node.lower or not node.upper:
            raise VerifyError(f"loop '{node.var}' has an empty {'lower' if not node.lower else 'upper'} bound",
                              where)
        typer = self.typer(scope)
        for bound in node.lower + node.upper:
            if not isinstance(bound, Aff):
                raise VerifyError(f"loop bound {bound!r} is not affine", where)
            self.checked(where, typer.affine, bound, "a loop bound")
        if isinstance(node.step, bool) or not isinstance(node.step, int) or node.step < 1:
            raise VerifyError(f"loop step must be an integer >= 1, found {node.step!r}", where)
        for attribute in ("unroll", "vectorize"):
            factor = getattr(node, attribute)
            if isinstance(factor, bool) or not isinstance(factor, int) or factor < 0:
                raise VerifyError(f"{attribute} factor must be an integer >= 0, found {factor!r}", where)
        if node.mapping is not None and node.mapping not in GPU_MAPPINGS:
            raise VerifyError(f"unknown GPU mapping {node.mapping!r}; expected one of "
                              f"{', '.join(GPU_MAPPINGS)}", where)
        if node.mapping is not None and node.mapping.startswith("thread."):
            self.thread_loops.add(node.var)
        for local in node.locals:
            self.loop_local(node, local)
        try:
            self.block(node.body, scope + (node.var,))
        finally:
            for local in node.locals:
                self.buffers.pop(local.name, None)

    def loop_local(self, loop: For, local: Buffer) -> None:
        """A loop-scoped local: a new buffer name whose shape uses symbols only;
        visible in the loop's body (and nowhere else)."""
        where = _where(self.function, f"local '{getattr(local, 'name', local)}' of loop '{loop.var}'",
                       local)
        if not isinstance(local, Buffer):
            raise VerifyError(f"loop local is not a Buffer: {local!r}", where)
        _check_identifier(local.name, "local buffer name", where)
        if local.name in self.declared or local.name in self.symbols or local.name in self.loop_vars:
            raise VerifyError(f"duplicate buffer name '{local.name}'", where)
        self.buffer_type(local, f"local '{local.name}' of loop '{loop.var}'")
        self.declared.add(local.name)
        self.buffers[local.name] = local

    # -- GPU nodes -----------------------------------------------------------------
    def fragment(self, name: str, role: str, key: str) -> Buffer:
        buffer = self.buffers.get(name)
        if buffer is None:
            raise VerifyError(f"undefined fragment '{name}'")
        if buffer.space is not MemorySpace.FRAGMENT:
            raise VerifyError(f"'{name}' is not in fragment space (it is @{buffer.space})")
        shape = MMA_SHAPES[key]
        rows, cols = shape.role_shape(role)
        dims = tuple(d.constant if d.is_constant else None for d in buffer.shape)
        if dims != (rows, cols):
            raise VerifyError(f"fragment '{name}' has shape {list(dims)} but role '{role}' of {key} "
                              f"needs [{rows}, {cols}]")
        if buffer.dtype is not shape.role_dtype(role):
            raise VerifyError(f"fragment '{name}' has dtype {buffer.dtype} but role '{role}' of {key} "
                              f"needs {shape.role_dtype(role)}")
        return buffer

    @staticmethod
    def shape_key(key: str) -> None:
        if key not in MMA_SHAPES:
            raise VerifyError(f"unknown MMA shape '{key}'; expected one of {', '.join(MMA_SHAPES)}")

    def tile(self, buffer_name: str, indices: tuple[Aff, ...], layout: str, dtype: DType,
             scope: tuple[str, ...]) -> None:
        typer = self.typer(scope)
        buffer = typer.buffer(buffer_name, "tiles")
        if buffer.space is MemorySpace.FRAGMENT:
            raise VerifyError(f"tile buffer '{buffer_name}' is itself a fragment")
        if buffer.rank < 2:
            raise VerifyError(f"tile buffer '{buffer_name}' needs rank >= 2, has rank {buffer.rank}")
        if not all(isinstance(i, Aff) for i in indices):
            raise VerifyError(f"tile origin in '{buffer_name}' must be affine")
        typer.indices(buffer, indices)
        if layout not in ("row", "col"):
            raise VerifyError(f"layout must be 'row' or 'col', not {layout!r}")
        if buffer.dtype is not dtype:
            raise VerifyError(f"tile buffer '{buffer_name}' has dtype {buffer.dtype}, fragment needs {dtype}")

    def fragment_op(self, node: Node, scope: tuple[str, ...]) -> None:
        if isinstance(node, FragmentFill):
            buffer = self.buffers.get(node.fragment)
            if buffer is None:
                raise VerifyError(f"undefined fragment '{node.fragment}'")
            if buffer.space is not MemorySpace.FRAGMENT:
                raise VerifyError(f"'{node.fragment}' is not in fragment space (it is @{buffer.space})")
            value = self.typer(scope).dtype(node.value)
            if value is not buffer.dtype:
                raise VerifyError(f"fills {buffer.dtype} fragment '{node.fragment}' with a {value} value")
        elif isinstance(node, FragmentLoad):
            self.shape_key(node.shape)
            if node.role not in ("a", "b", "acc"):
                raise VerifyError(f"fragment role must be a, b or acc, not {node.role!r}")
            fragment = self.fragment(node.fragment, node.role, node.shape)
            self.tile(node.buffer, node.indices, node.layout, fragment.dtype, scope)
        elif isinstance(node, FragmentMMA):
            self.shape_key(node.shape)
            self.fragment(node.a, "a", node.shape)
            self.fragment(node.b, "b", node.shape)
            self.fragment(node.acc, "acc", node.shape)
            self.fragment(node.result, "acc", node.shape)
        elif isinstance(node, FragmentStore):
            self.shape_key(node.shape)
            fragment = self.fragment(node.fragment, "acc", node.shape)
            self.tile(node.buffer, node.indices, node.layout, fragment.dtype, scope)

    def launch(self, node: Launch, scope: tuple[str, ...]) -> None:
        if self.function.kind == "kernel":
            raise VerifyError("launch inside a kernel function")
        kernel = self.kernels.get(node.kernel)
        if kernel is None:
            raise VerifyError(f"launch of unknown kernel '{node.kernel}'")
        if len(node.args) != len(kernel.params):
            raise VerifyError(f"kernel '{node.kernel}' takes {len(kernel.params)} argument(s), "
                              f"launch passes {len(node.args)}")
        if len(node.grid) != 3 or len(node.block) != 3:
            raise VerifyError("grid and block need 3 sizes each")
        typer = self.typer(scope)
        for size in node.grid:
            if not isinstance(size, Aff):
                raise VerifyError(f"grid size {size!r} is not affine")
            typer.affine(size, "a grid size")
        for threads in node.block:
            if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
                raise VerifyError(f"block sizes must be integers >= 1, found {threads!r}")
        if isinstance(node.shared_bytes, bool) or not isinstance(node.shared_bytes, int) \
                or node.shared_bytes < 0:
            raise VerifyError(f"shared bytes must be an integer >= 0, found {node.shared_bytes!r}")
        names = frozenset(scope) | self.symbols
        for arg, param in zip(node.args, kernel.params, strict=True):
            if isinstance(param, Symbol):
                if arg not in names:
                    raise VerifyError(f"argument '{arg}' for symbol '{param.name}' of '{node.kernel}' "
                                      f"is not a symbol or loop variable here")
                continue
            buffer = self.buffers.get(arg)
            if buffer is None:
                raise VerifyError(f"argument '{arg}' for buffer '{param.name}' of '{node.kernel}' "
                                  f"is not a buffer here")
            if buffer.dtype is not param.dtype or buffer.rank != param.rank:
                raise VerifyError(f"argument '{arg}' ({buffer.dtype}, rank {buffer.rank}) does not match "
                                  f"'{param.name}' ({param.dtype}, rank {param.rank}) of '{node.kernel}'")
