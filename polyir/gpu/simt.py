"""f32 contractions on CUDA cores: shared-memory block tiles and register tiles.

Tensor cores would round f32 inputs to tf32 and change results, so an f32
contraction (``polyir.gpu.contraction``) is mapped with the same block level
as ``polyir.gpu.tensorcore`` (A and B tiles copied into shared memory by all
threads, zero-filled at the edges, rows padded by one float against bank
conflicts) and a *register tile* per thread instead of fragments::

    for by gpu=block.y { for bx gpu=block.x { for t = 0 to (BM/TM)*(BN/TN) gpu=thread.x {
      acc[0:TM, 0:TN] = 0                              # @local: registers
      for kt = 0 to ceil(K / BK) {
        copy As, Bs; barrier
        for kk = 0 to BK { for a, b (unrolled): acc[a, b] += As[ty + (BM/TM)*a, kk] * Bs[kk, tx + (BN/TN)*b] }
        barrier
      }
      for a, b (unrolled): if (row < M and col < N) { before...; acc0 = acc0 + acc[a, b]; after... }
    }}}

Thread ``t`` is ``(ty, tx) = (t // (BN/TN), t % (BN/TN))``; its outputs are
strided (``tx + (BN/TN)*b``) so that a warp's reads of ``Bs`` and its stores
of C are consecutive. The epilogue reads the accumulators from registers
directly. Like the tensor-core path, each output's f32 sum is reassociated
(``init + sum`` instead of ``init + a0*b0 + ...``).
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from polyir.errors import CompileError
from polyir.gpu.contraction import Contraction
from polyir.gpu.implicit_gemm import ImplicitGemm
from polyir.gpu.tensorcore import gathered_copy, guarded_copy
from polyir.ir.affine import Aff, Constraint
from polyir.ir.names import claim_name, names_in
from polyir.ir.nodes import Assign, Barrier, BinOp, Buffer, Const, For, Function, If, Load, Node
from polyir.ir.types import DType, MemorySpace
from polyir.ir.walk import substitute

PAD_F32_TILE = 1
"""Padding (floats) of each shared tile row: rows one word apart fall on different banks."""


@dataclass(frozen=True)
class SimtConfig:
    """Block tile ``bm x bn x bk``; each thread a ``tm x tn`` register tile."""

    bm: int = 64
    bn: int = 64
    bk: int = 16
    tm: int = 4
    tn: int = 4

    def __post_init__(self) -> None:
        if min(self.bm, self.bn, self.bk, self.tm, self.tn) <= 0 or self.bm % self.tm \
                or self.bn % self.tn:
            raise CompileError(f"f32 tile {self}: sizes must be positive, bm a multiple of tm "
                               f"and bn of tn")
        if self.threads > 1024:
            raise CompileError(f"f32 tile {self}: {self.threads} threads per block, at most 1024")

    @property
    def threads(self) -> int:
        return (self.bm // self.tm) * (self.bn // self.tn)

    def shared_bytes(self) -> int:
        return 4 * (self.bm * (self.bk + PAD_F32_TILE) + self.bk * (self.bn + PAD_F32_TILE))

    def __str__(self) -> str:
        return f"{self.bm}x{self.bn}x{self.bk} threads {self.tm}x{self.tn}"


def choose_simt_tiles(sm_count: int, m: int | None, n: int | None) -> SimtConfig:
    """64x64 tiles of 4x4 per thread; 32x32 tiles of 2x2 when 64x64 tiles
    would leave most SMs idle."""
    if m is not None and n is not None and -(-m // 64) * -(-n // 64) < sm_count:
        return SimtConfig(32, 32, 16, 2, 2)
    return SimtConfig()


def map_contraction_simt(function: Function, contraction: Contraction | ImplicitGemm,
                         config: SimtConfig
                         ) -> tuple[Node, list[Buffer]]:
    """The hand-mapped nest replacing the f32 ``contraction`` and the buffers
    it needs (to add to ``function.locals``)."""
    if contraction.input_dtype is not DType.F32:
        raise CompileError(f"function '{function.name}': the CUDA-core path takes f32 "
                           f"operands, not {contraction.input_dtype}")
    names = names_in(function)
    bm, bn, bk, tm, tn = config.bm, config.bn, config.bk, config.tm, config.tn
    threads = config.threads
    bx, by, t, kt, kk = (claim_name(x, names) for x in ("tc_bx", "tc_by", "tc_t", "tc_kt",
                                                        "tc_kk"))
    bz = claim_name("tc_bz", names) if contraction.batch else None
    m, n, k = contraction.m, contraction.n, contraction.k
    a, b = contraction.a, contraction.b
    batch_map = {contraction.batch: Aff.var(bz)} if contraction.batch and bz else {}
    a_lead = tuple(i.substitute(batch_map) for i in a.lead)
    b_lead = tuple(i.substitute(batch_map) for i in b.lead)
    a_rows, a_cols = (bm, bk) if a.layout == "row" else (bk, bm)
    b_rows, b_cols = (bk, bn) if b.layout == "row" else (bn, bk)
    a_tile, b_tile, regs = (claim_name(x, names) for x in ("tc_As", "tc_Bs", "tc_acc"))
    buffers = [Buffer(a_tile, DType.F32, (Aff.const(a_rows), Aff.const(a_cols + PAD_F32_TILE)),
                      MemorySpace.SHARED),
               Buffer(b_tile, DType.F32, (Aff.const(b_rows), Aff.const(b_cols + PAD_F32_TILE)),
                      MemorySpace.SHARED),
               Buffer(regs, DType.F32, (Aff.const(tm), Aff.const(tn)), MemorySpace.LOCAL)]
    row0, col0, k0 = Aff.var(by) * bm, Aff.var(bx) * bn, Aff.var(kt) * bk
    a_origin, a_ext = ((row0, k0), (m, k)) if a.layout == "row" else ((k0, row0), (k, m))
    b_origin, b_ext = ((k0, col0), (k, n)) if b.layout == "row" else ((col0, k0), (n, k))
    if isinstance(contraction, ImplicitGemm):   # packed on the fly from the input
        a_copy = gathered_copy(a_tile, contraction, "a", a_rows, a_cols, threads, t,
                               claim_name("tc_ea", names), a_origin, a_ext, names)
        b_copy = gathered_copy(b_tile, contraction, "b", b_rows, b_cols, threads, t,
                               claim_name("tc_eb", names), b_origin, b_ext, names)
    else:
        a_copy = guarded_copy(a_tile, a, a_rows, a_cols, threads, t, claim_name("tc_ea", names),
                              a_origin, a_ext, a_lead, names)
        b_copy = guarded_copy(b_tile, b, b_rows, b_cols, threads, t, claim_name("tc_eb", names),
                              b_origin, b_ext, b_lead, names)
    across = bn // tn
    ty, tx = Aff.var(t) // across, Aff.var(t) % across
    step_m, step_n = bm // tm, bn // tn

    def tile_loops(body_of: Callable[[Aff, Aff], tuple[Node, ...]], prefix: str,
                   locals_: tuple[Buffer, ...] = ()) -> For:
        ia, ib = claim_name(f"{prefix}a", names), claim_name(f"{prefix}b", names)
        inner = For(ib, (Aff.const(0),), (Aff.const(tn),), body_of(Aff.var(ia), Aff.var(ib)),
                    unroll=tn, locals=locals_)
        return For(ia, (Aff.const(0),), (Aff.const(tm),), (inner,), unroll=tm)

    zero = tile_loops(lambda ia, ib: (Assign(claim_name("TR", names), regs, (ia, ib),
                                             Const(0.0, DType.F32)),), "tc_z")
    kv = Aff.var(kk)

    def a_at(ia: Aff) -> Load:
        row = ty + step_m * ia
        return Load(a_tile, (row, kv) if a.layout == "row" else (kv, row))

    def b_at(ib: Aff) -> Load:
        col = tx + step_n * ib
        return Load(b_tile, (kv, col) if b.layout == "row" else (col, kv))

    fma = tile_loops(lambda ia, ib: (Assign(
        claim_name("TR", names), regs, (ia, ib),
        BinOp("+", Load(regs, (ia, ib)), BinOp("*", a_at(ia), b_at(ib)))),), "tc_m")
    k_inner = For(kk, (Aff.const(0),), (Aff.const(bk),), (fma,))
    k_loop = For(kt, (Aff.const(0),), ((k + (bk - 1)) // bk,),
                 (a_copy, b_copy, Barrier(), k_inner, Barrier()))

    band_locals = tuple(replace(buf, space=MemorySpace.LOCAL) if buf.space is MemorySpace.GLOBAL
                        else buf for lp in contraction.band for buf in lp.locals)
    update = contraction.update

    def epilogue_body(ia: Aff, ib: Aff) -> tuple[Node, ...]:
        row, col = row0 + ty + step_m * ia, col0 + tx + step_n * ib
        mapping = {**contraction.output_map(row, col), **batch_map}
        acc_indices = tuple(i.substitute(mapping) if isinstance(i, Aff) else i
                            for i in update.indices)
        total = Assign(update.name, update.buffer, acc_indices,
                       BinOp("+", Load(update.buffer, acc_indices), Load(regs, (ia, ib))),
                       update.loc)
        body = (*substitute(contraction.before, mapping), total,
                *substitute(contraction.after, mapping))
        return (If((Constraint(row, "<", m), Constraint(col, "<", n)), body),)

    epilogue = tile_loops(epilogue_body, "tc_e", band_locals)
    thread_loop = For(t, (Aff.const(0),), (Aff.const(threads),), (zero, k_loop, epilogue),
                      mapping="thread.x")
    nest: Node = For(bx, (Aff.const(0),), ((n + (bn - 1)) // bn,), (thread_loop,),
                     mapping="block.x")
    nest = For(by, (Aff.const(0),), ((m + (bm - 1)) // bm,), (nest,), mapping="block.y")
    if bz is not None:
        extent = contraction.batch_extent
        assert extent is not None
        nest = For(bz, (Aff.const(0),), (extent,), (nest,), mapping="block.z")
    return nest, buffers


__all__ = ["SimtConfig", "choose_simt_tiles", "map_contraction_simt", "PAD_F32_TILE"]
