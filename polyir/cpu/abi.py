"""What a parallel loop's caller and its team share: the context struct, the
module globals, and small IR helpers (``polyir.cpu.parallel``, ``polyir.cpu.team``).

The context (a stack struct of the caller, passed to ``GOMP_parallel``) holds
the pointers of the buffers the loop uses, the values it reads (symbols,
enclosing loop variables), the i64 :data:`SCALARS`, then a (copies pointer,
element count) pair per privatised reduction.

Globals per entry function ``F``: ``F.min_work`` (double, the size policy's
threshold; set to infinity after ``fork()``), ``F.dispatches`` (dispatches
through the runtime), ``F.team`` (the team size of the latest one),
``F.deferred`` (loops run serially because the team came late recently, see
``polyir.cpu.policy``) and ``F.late_ns`` (the lateness that counts as late).
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from llvmlite import ir

from polyir.cpu.reductions import PrivateReduction
from polyir.ir.types import DType
from polyir.llvm.hooks import F64, I32, I64
from polyir.llvm.lower import FunctionLowerer

PTR = ir.PointerType()
VOID = ir.VoidType()
TEAM_FUNCTION = ir.FunctionType(VOID, [PTR])
"""``void team_fn(ptr ctx)``: what ``GOMP_parallel`` runs on each thread."""
SCALARS = ("lo", "trip", "parts", "counter", "status", "accumulated", "finished", "arrival")
"""The i64 fields of the context after the values: the loop's first value,
trip count and number of chunks; the chunk counter; the worst status; the
arrival counters of the gathers after the chunks (reductions) and at the end;
the latest time (ns) a team thread started."""


def global_names(llvm_name: str) -> dict[str, str]:
    """The names of the entry function's runtime globals (see the module docstring)."""
    return {kind: f"{llvm_name}.{kind}"
            for kind in ("min_work", "dispatches", "team", "deferred", "late_ns")}


@dataclass(frozen=True)
class Context:
    """Layout of the context struct the caller fills for the team."""

    shared: tuple[str, ...]
    values: tuple[str, ...]
    reductions: tuple[PrivateReduction, ...]

    @property
    def struct(self) -> ir.LiteralStructType:
        fields: list[ir.Type] = [PTR] * len(self.shared) \
            + [I64] * (len(self.values) + len(SCALARS))
        for _ in self.reductions:
            fields += [PTR, I64]
        return ir.LiteralStructType(fields)

    def scalar(self, name: str) -> int:
        """Index of one of :data:`SCALARS`."""
        return len(self.shared) + len(self.values) + SCALARS.index(name)

    def copies(self, position: int) -> int:
        """Index of reduction ``position``'s copies pointer (its count follows)."""
        return len(self.shared) + len(self.values) + len(SCALARS) + 2 * position


def global_i64(module: ir.Module, name: str, initial: int = 0) -> ir.GlobalVariable:
    """An i64 global of ``module`` (created once, starting at ``initial``)."""
    existing = module.globals.get(name)
    if existing is not None:
        return existing
    variable = ir.GlobalVariable(module, I64, name)
    variable.initializer = ir.Constant(I64, initial)
    return variable


def global_f64(module: ir.Module, name: str, initial: float) -> ir.GlobalVariable:
    """A double global of ``module`` (created once, starting at ``initial``)."""
    existing = module.globals.get(name)
    if existing is not None:
        return existing
    variable = ir.GlobalVariable(module, F64, name)
    variable.initializer = ir.Constant(F64, float(initial))
    return variable


def declare(module: ir.Module, name: str, ret: ir.Type, args: Sequence[ir.Type]) -> ir.Function:
    """An external function of ``module`` (declared once)."""
    existing = module.globals.get(name)
    if existing is not None:
        return existing
    return ir.Function(module, ir.FunctionType(ret, list(args)), name)


def field(builder: ir.IRBuilder, ctx: ir.Value, struct: ir.LiteralStructType,
          index: int) -> ir.Value:
    """Pointer to field ``index`` of the context ``ctx``."""
    return builder.gep(ctx, [ir.Constant(I32, 0), ir.Constant(I32, index)], inbounds=True,
                       source_etype=struct)


def storage_bytes(lowerer: FunctionLowerer, dtype: DType) -> int:
    """Bytes of one element of ``dtype`` in memory."""
    storage = lowerer.hooks.storage_type(dtype)
    if isinstance(storage, ir.IntType):
        return max(1, storage.width // 8)
    return {ir.HalfType: 2, ir.FloatType: 4, ir.DoubleType: 8}[type(storage)]


def now_ns(lowerer: FunctionLowerer) -> ir.Value:
    """``CLOCK_MONOTONIC`` in nanoseconds (i64), through libc's ``clock_gettime``."""
    b = lowerer.builder
    timespec = ir.LiteralStructType([I64, I64])
    slot = lowerer.entry_alloca(timespec, name="now")
    clock_gettime = declare(lowerer.llvm_module, "clock_gettime", I32, [I32, PTR])
    b.call(clock_gettime, [ir.Constant(I32, 1), slot])
    seconds = b.load(field(b, slot, timespec, 0), typ=I64)
    nanoseconds = b.load(field(b, slot, timespec, 1), typ=I64)
    return b.add(b.mul(seconds, ir.Constant(I64, 1_000_000_000)), nanoseconds)
