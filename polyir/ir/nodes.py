"""The polyir IR: a loop tree over named buffers.

Every node is a frozen dataclass; transformations build new nodes (use
``dataclasses.replace``). ``loc`` fields hold the text position a node was
parsed from; they never take part in equality.

Value expressions (``Expr``) are statically typed:

* ``Const(value, dtype)``        a literal.
* ``Var(name)``                  a loop variable or size symbol, typed ``i64``.
* ``Load(buffer, indices)``      an element of a buffer (0-d: ``indices == ()``).
* ``BinOp(op, lhs, rhs)``        ``+ - * / %`` (same dtype both sides; on
                                 integers ``/`` and ``%`` truncate toward zero as
                                 in C), ``and``/``or`` on bool.
* ``Compare(op, lhs, rhs)``      ``< <= > >= == !=``; result ``bool``.
* ``Call(fn, args)``             math functions, see ``CALLS``.
* ``Select(cond, a, b)``         ``cond ? a : b``.
* ``Cast(dtype, value)``         conversion (float->int truncates toward zero).

A subscript (``Index``) is an :class:`Aff` when affine, or an ``Expr`` (a
gather such as ``E[idx[i], j]``) only when it is not expressible as an
``Aff``; analyses treat the latter conservatively.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Union

from polyir.ir.affine import Aff, Constraint
from polyir.ir.types import DType, MemorySpace


@dataclass(frozen=True)
class SourceLoc:
    """A position in a text: 1-based line and column."""

    line: int
    column: int

    def __str__(self) -> str:
        return f"{self.line}:{self.column}"


def _loc() -> SourceLoc | None:
    return field(default=None, compare=False, repr=False)


# ---------------------------------------------------------------- expressions
@dataclass(frozen=True)
class Const:
    value: Union[int, float, bool]
    dtype: DType


@dataclass(frozen=True)
class Var:
    """A loop variable or size symbol used as an ``i64`` value."""

    name: str


@dataclass(frozen=True)
class Load:
    buffer: str
    indices: tuple[Index, ...]


BINOPS = ("+", "-", "*", "/", "%", "and", "or")
COMPARES = ("<", "<=", ">", ">=", "==", "!=")
# name -> number of arguments. ``neg``/``not`` are unary minus and logical not.
CALLS: dict[str, int] = {
    "neg": 1, "not": 1, "abs": 1, "exp": 1, "exp2": 1, "log": 1, "log2": 1,
    "sqrt": 1, "rsqrt": 1, "tanh": 1, "erf": 1, "sigmoid": 1, "sin": 1, "cos": 1,
    "floor": 1, "ceil": 1, "max": 2, "min": 2, "pow": 2,
}


@dataclass(frozen=True)
class BinOp:
    op: str
    lhs: Expr
    rhs: Expr


@dataclass(frozen=True)
class Compare:
    op: str
    lhs: Expr
    rhs: Expr


@dataclass(frozen=True)
class Call:
    fn: str
    args: tuple[Expr, ...]


@dataclass(frozen=True)
class Select:
    cond: Expr
    if_true: Expr
    if_false: Expr


@dataclass(frozen=True)
class Cast:
    dtype: DType
    value: Expr


Expr = Union[Const, Var, Load, BinOp, Compare, Call, Select, Cast]
Index = Union[Aff, Expr]


# ------------------------------------------------------------------ statements
@dataclass(frozen=True)
class Assign:
    """``name: buffer[indices] = value``; one polyhedral statement."""

    name: str
    buffer: str
    indices: tuple[Index, ...]
    value: Expr
    loc: SourceLoc | None = _loc()


@dataclass(frozen=True)
class For:
    """``for var = max(lower) to min(upper) step step``; ``upper`` is exclusive.

    ``step`` is a positive constant. ``mapping`` is a GPU dimension such as
    ``"block.x"`` or ``"thread.y"`` (see ``GPU_MAPPINGS``); a mapped loop is
    parallel by definition. ``unroll``/``vectorize`` are factors, 0 for none.

    ``locals`` are *loop-scoped* buffers: each iteration of the loop has its
    own, fresh copy (its contents undefined at the start of the iteration), so
    a buffer declared inside a parallel loop is private to each iteration by
    construction. Their shapes may use symbols only (not loop variables). The
    polyhedral layer models them as expanded along the enclosing loops.
    """

    var: str
    lower: tuple[Aff, ...]
    upper: tuple[Aff, ...]
    body: tuple[Node, ...]
    step: int = 1
    parallel: bool = False
    mapping: str | None = None
    unroll: int = 0
    vectorize: int = 0
    locals: tuple[Buffer, ...] = ()
    loc: SourceLoc | None = _loc()


GPU_MAPPINGS = ("block.x", "block.y", "block.z", "thread.x", "thread.y", "thread.z")


@dataclass(frozen=True)
class If:
    """Runs ``then_body`` when every constraint holds, else ``else_body``."""

    conditions: tuple[Constraint, ...]
    then_body: tuple[Node, ...]
    else_body: tuple[Node, ...] = ()
    loc: SourceLoc | None = _loc()


@dataclass(frozen=True)
class Barrier:
    """Block-wide barrier (``__syncthreads``) inside ``thread``-mapped loops."""

    loc: SourceLoc | None = _loc()


# Tensor-core fragment operations. A fragment is a buffer in
# ``MemorySpace.FRAGMENT`` with a 2-d shape (rows x cols of its role) held
# by a whole warp; ``shape`` names an entry of ``polyir.ir.fragments.MMA_SHAPES``.
@dataclass(frozen=True)
class FragmentFill:
    name: str
    fragment: str
    value: Expr
    loc: SourceLoc | None = _loc()


@dataclass(frozen=True)
class FragmentLoad:
    """Load a tile whose top-left element is ``buffer[indices]`` into ``fragment``.

    ``role`` is ``"a"``, ``"b"`` or ``"acc"``; ``layout`` is ``"row"`` or ``"col"``
    (how the tile lies in ``buffer``: the last dimension is contiguous).
    """

    name: str
    fragment: str
    role: str
    shape: str
    buffer: str
    indices: tuple[Aff, ...]
    layout: str = "row"
    loc: SourceLoc | None = _loc()


@dataclass(frozen=True)
class FragmentMMA:
    """``result = a @ b + acc`` on whole fragments."""

    name: str
    result: str
    a: str
    b: str
    acc: str
    shape: str
    loc: SourceLoc | None = _loc()


@dataclass(frozen=True)
class FragmentStore:
    name: str
    buffer: str
    indices: tuple[Aff, ...]
    fragment: str
    shape: str
    layout: str = "row"
    loc: SourceLoc | None = _loc()


@dataclass(frozen=True)
class Launch:
    """Host-side launch of kernel function ``kernel`` on a grid of blocks.

    ``args`` name the caller's buffers and symbols passed, in order, to the
    kernel's parameters. ``grid`` sizes may depend on symbols.
    """

    kernel: str
    grid: tuple[Aff, Aff, Aff]
    block: tuple[int, int, int]
    args: tuple[str, ...]
    shared_bytes: int = 0
    loc: SourceLoc | None = _loc()


Statement = Union[Assign, FragmentFill, FragmentLoad, FragmentMMA, FragmentStore]
Node = Union[Assign, For, If, Barrier, FragmentFill, FragmentLoad, FragmentMMA,
             FragmentStore, Launch]


# ------------------------------------------------------------ functions/module
@dataclass(frozen=True)
class Buffer:
    """A named array. A 0-d buffer (``shape == ()``) is a scalar."""

    name: str
    dtype: DType
    shape: tuple[Aff, ...]
    space: MemorySpace = MemorySpace.GLOBAL
    loc: SourceLoc | None = _loc()

    @property
    def rank(self) -> int:
        return len(self.shape)


@dataclass(frozen=True)
class Symbol:
    """An integer size parameter passed explicitly by the caller."""

    name: str
    loc: SourceLoc | None = _loc()


Param = Union[Buffer, Symbol]


@dataclass(frozen=True)
class Function:
    """A function: parameters, local buffers, body.

    Calling convention (interpreter and every backend): positional arguments
    match ``params`` in order; a buffer parameter takes an array (a 0-d
    parameter also takes a Python scalar, passed by value); a ``Symbol``
    parameter takes an int. Symbols that appear only in parameter shapes are
    not passed: they are read from the arrays' shapes (a dimension that is
    exactly one symbol defines it; every dimension is checked).
    ``kind`` is ``"host"`` or ``"kernel"`` (a GPU kernel, run through ``Launch``).
    """

    name: str
    params: tuple[Param, ...]
    body: tuple[Node, ...]
    locals: tuple[Buffer, ...] = ()
    kind: str = "host"
    loc: SourceLoc | None = _loc()

    @property
    def buffers(self) -> dict[str, Buffer]:
        """Every buffer of the function by name: parameters, function locals and
        loop-scoped locals (``For.locals``; buffer names are unique in a function)."""
        found = {p.name: p for p in self.params if isinstance(p, Buffer)}
        found.update({b.name: b for b in self.locals})
        found.update({b.name: b for b in self.loop_locals})
        return found

    @functools.cached_property
    def loop_locals(self) -> tuple[Buffer, ...]:
        """The loop-scoped locals of every loop of the body, in pre-order."""
        found: list[Buffer] = []
        stack: list[Node] = list(reversed(self.body))
        while stack:
            node = stack.pop()
            if isinstance(node, For):
                found.extend(node.locals)
                stack.extend(reversed(node.body))
            elif isinstance(node, If):
                stack.extend(reversed(node.else_body))
                stack.extend(reversed(node.then_body))
        return tuple(found)

    @property
    def symbols(self) -> tuple[str, ...]:
        """Explicit symbol parameters, then symbols used in parameter shapes, in order."""
        names = [p.name for p in self.params if isinstance(p, Symbol)]
        for p in self.params:
            if isinstance(p, Buffer):
                for dim in p.shape:
                    for v in sorted(dim.variables()):
                        if v not in names:
                            names.append(v)
        return tuple(names)


@dataclass(frozen=True)
class Module:
    """A list of functions; the entry is the first ``host`` function."""

    functions: tuple[Function, ...]

    @property
    def entry(self) -> Function:
        for f in self.functions:
            if f.kind == "host":
                return f
        raise ValueError("module has no host function")

    def function(self, name: str) -> Function:
        for f in self.functions:
            if f.name == name:
                return f
        raise KeyError(name)

    def __str__(self) -> str:
        from polyir.ir.printer import print_module
        return print_module(self)


def to_affine(expr: Index) -> Aff | None:
    """The ``Aff`` equal to a value expression built from ``Var``, integer
    ``Const`` (i64), ``+``, ``-``, ``*`` by a constant; else ``None``."""
    if isinstance(expr, Aff):
        return expr
    if isinstance(expr, Var):
        return Aff.var(expr.name)
    if isinstance(expr, Const) and expr.dtype is DType.I64 and not isinstance(expr.value, bool):
        return Aff.const(int(expr.value))
    if isinstance(expr, Call) and expr.fn == "neg":
        inner = to_affine(expr.args[0])
        return None if inner is None else -inner
    if isinstance(expr, BinOp) and expr.op in ("+", "-", "*"):
        lhs, rhs = to_affine(expr.lhs), to_affine(expr.rhs)
        if lhs is None or rhs is None:
            return None
        if expr.op == "+":
            return lhs + rhs
        if expr.op == "-":
            return lhs - rhs
        if lhs.is_constant or rhs.is_constant:
            return lhs * rhs
    return None
