"""CPU lowering hooks: host math, fast-math flags, and parallel loops on OpenMP.

An outermost ``parallel`` loop is outlined and dispatched through the OpenMP
runtime when ``cores > 1`` and its estimated work pays for the dispatch
(``polyir.cpu.parallel``, ``polyir.cpu.policy``); with ``cores <= 1`` it is an
ordinary serial loop.
"""
from __future__ import annotations

from collections.abc import Sequence

from llvmlite import ir

from polyir.cpu.parallel import emit_parallel_loop
from polyir.ir.nodes import For
from polyir.ir.types import DType
from polyir.llvm.hooks import LoweringHooks
from polyir.llvm.lower import FunctionLowerer
from polyir.llvm.mathlib import emit_erf_f32, emit_exp_f32, emit_tanh_f32

FAST_MATH_FLAGS = ("contract", "reassoc", "nsz")
"""LLVM fast-math flags of float operations under ``fast_math=True``: FMA
contraction, reassociation (vectorised reductions) and no signed zeros. NaN
and infinity semantics stay exact (no ``nnan``/``ninf``/``afn``/``arcp``)."""


class CpuHooks(LoweringHooks):
    """Host CPU: address space 0, inline f32 math, parallel loops on OpenMP.

    ``cores``: threads of a dispatch (``<= 1``: every loop serial);
    ``min_parallel_work``: the work estimate above which a parallel loop runs
    on threads (``Target.min_parallel_work``); ``fast_math``: float operations
    carry :data:`FAST_MATH_FLAGS`; ``team_late_ns``, ``work_unit_ns``: the
    ``Target``'s (``polyir.cpu.policy.LateTeam``); ``shared_globals``: a
    kernel of a split build, which declares the runtime globals and leaves
    their definition to the entry module (``polyir.cpu.abi.runtime_global``);
    ``check_subscripts``: data-dependent subscripts checked in the loop
    (``LoweringHooks.check_subscripts``; ``build_cpu``'s ``check_bounds``);
    ``vector_bits``: the target's vector width, for jammed row blocks run
    across rows (``polyir.llvm.row_block``; 0: scalar).
    """

    returns_status = True

    def __init__(self, cores: int = 1, min_parallel_work: float = 0.0, fast_math: bool = False,
                 team_late_ns: int = 200_000, work_unit_ns: float = 0.1,
                 shared_globals: bool = False, check_subscripts: bool = False,
                 vector_bits: int = 0):
        self.cores = cores
        self.check_subscripts = check_subscripts
        self.min_parallel_work = min_parallel_work
        self.fast_math = fast_math
        self.team_late_ns = team_late_ns
        self.work_unit_ns = work_unit_ns
        self.shared_globals = shared_globals
        self.float_flags = FAST_MATH_FLAGS if fast_math else ()
        self.vector_bits = vector_bits

    def row_block_lanes(self, dtype: DType) -> int:
        """A jammed row block's sums run across rows in vectors of the target's
        width (``vector_bits``; 0: scalar code)."""
        bits = {DType.F32: 32, DType.F64: 64}.get(dtype)
        return self.vector_bits // bits if bits and self.vector_bits >= 2 * bits else 0

    def math_call(self, lowerer: FunctionLowerer, fn: str, args: Sequence[ir.Value],
                  dtype: DType) -> ir.Value | None:
        """float32 ``exp``/``tanh``/``sigmoid``/``erf`` inline (vectorisable; ``sigmoid`` in the
        form that neither overflows nor loses its tiny results); libm otherwise."""
        if dtype is DType.F64 or fn not in ("exp", "tanh", "sigmoid", "erf"):
            return None
        b = lowerer.builder
        contract = "contract" in self.float_flags    # fast math: FMAs inside exp too
        if fn == "exp":
            return emit_exp_f32(b, args[0], contract)
        if fn == "tanh":
            return emit_tanh_f32(b, args[0], contract)
        if fn == "erf":
            return emit_erf_f32(b, args[0], contract)
        # sigmoid(x) = 1 / (1 + e) for x >= 0, e / (1 + e) for x < 0, with e = exp(-|x|) <= 1:
        # no overflow, and tiny results (x < -87) stay right down to the subnormals
        x = args[0]
        one = ir.Constant(x.type, 1.0)
        e = emit_exp_f32(b, b.fneg(b.call(lowerer.intrinsic("llvm.fabs.f32", x.type, [x.type]), [x])),
                         contract)
        negative = b.fcmp_ordered("<", x, ir.Constant(x.type, 0.0))
        return b.fdiv(b.select(negative, e, one), b.fadd(one, e))

    def lower_parallel_loop(self, lowerer: FunctionLowerer, loop: For) -> None:
        if self.cores <= 1:
            lowerer.lower_serial_loop(loop)
            return
        emit_parallel_loop(lowerer, loop, self.cores, self.work_unit_ns)
