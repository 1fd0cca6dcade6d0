"""Tensor-core mapping of contractions: block tile, warp tile, MMA tile.

:func:`map_contraction` rewrites one recognised contraction nest
(``polyir.gpu.contraction``) with 16-bit inputs into a nest mapped by hand
(block loops around one thread loop, docs/ir.md), which ``gpu-map`` outlines
as it is::

    for bz gpu=block.z { for by gpu=block.y { for bx gpu=block.x {    # block tile
      for t = 0 to 32*W gpu=thread.x {                                # W warps
        fc_.. = fragment_fill(0.0)                                    # warp tile: FMxFN
        for kt = 0 to ceil(K / BK) {                                  #   16x16 accumulators
          for e = t to |A tile| step 32*W {                           # cooperative copy,
            if (in bounds) As[e // C, e % C] = A[...] else As[..] = 0 # zero-fill at the edges
          }
          (the same for Bs)
          barrier
          for each k16 step, warp (wm, wn):                          # MMA tile
            fa_x = fragment_load<a>(As[...]); fb_y = fragment_load<b>(Bs[...])
            fc_x_y = fragment_mma(fa_x, fb_y, fc_x_y)
          barrier
        }
        fragment_store(Cs[warp's tile], fc_..)                        # f32 staging tile
        barrier
        for each element (i, j, half, q) lane t % 32 holds in the C layout:  # epilogue
          if (row < M and col < N) {                                  #  in registers
            before...; acc = acc + Cs[row, col]; after...             # one store of C
          }
      }
    }}}

``As``/``Bs`` keep the operand's global layout (a transposed operand is
loaded with the ``col`` fragment layout), each row padded by 8 halves (16 B)
against bank conflicts; ``Cs`` is padded by 4 floats. The fragment loads read
shared memory at 16-B aligned rows, so the NVPTX lowering uses ``ldmatrix`` +
``mma.sync.m16n8k16`` (``polyir.ptx.mma_sync``). The statements fusion put
around the reduction (bias, activation, residual, casts) run once per output
element on the finished accumulator, then store C once: each lane finishes
the elements it holds in the ``mma.m16n8k16`` C layout (:func:`acc_position`),
so in the IR it reads back only what its own warp's ``fragment_store`` wrote
(the barrier keeps the interpreter's race model, which sees a warp-wide store,
satisfied), and the NVPTX lowering reads those loads straight from the
accumulator registers and allocates no ``Cs`` at all
(``polyir.ptx.mma_sync.register_staged``): the epilogue never goes through
shared memory.

Semantics: every output element gets ``init + sum_k a*b`` where the original
computed ``(..((init + a0*b0) + a1*b1) ..)``: the f32 sum is reassociated (as
in every tiled GEMM and cuBLAS); with exactly representable data (small
integers) both are equal, which the tests use as the oracle.
"""
from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from polyir.errors import CompileError
from polyir.gpu.contraction import Contraction, NotAContraction, Operand, find_contraction
from polyir.gpu.implicit_gemm import ImplicitGemm, find_convolution
from polyir.ir.affine import Aff, Constraint
from polyir.ir.names import claim_name, names_in
from polyir.ir.nodes import (
    Assign,
    Barrier,
    BinOp,
    Buffer,
    Cast,
    Const,
    For,
    FragmentFill,
    FragmentLoad,
    FragmentMMA,
    FragmentStore,
    Function,
    If,
    Load,
    Node,
)
from polyir.ir.types import DType, MemorySpace
from polyir.ir.walk import substitute, walk_nodes
from polyir.target import Target
from polyir.tiling.bands import renamed_copy
from polyir.tiling.gpu_tiles import PAD_F32, PAD_HALVES, TileConfig, choose_tiles

if TYPE_CHECKING:
    from polyir.context import PassContext

MMA_KEYS = {DType.F16: "m16n16k16.f16.f32", DType.BF16: "m16n16k16.bf16.f32"}


def _item_loop(e: str, t: str, total: int, threads: int, body: tuple[Node, ...]) -> For:
    """Items ``0 .. total-1``, item ``e`` by thread ``e % threads``."""
    return For(e, (Aff.var(t),), (Aff.const(total),), body, step=threads)


def guarded_copy(tile: str, source: Operand, rows: int, cols: int, threads: int,
                 t: str, e: str, origin: tuple[Aff, Aff], extents: tuple[Aff, Aff],
                 lead: tuple[Aff, ...], names: set[str]) -> For:
    """``tile[0:rows, 0:cols] = source[lead..., origin + (r, c)]``, zero outside
    ``extents``; element ``e`` of the tile is copied by thread ``e % threads``."""
    ev = Aff.var(e)
    r, c = ev // cols, ev % cols
    g_row, g_col = origin[0] + r, origin[1] + c
    load = Load(source.buffer, (*lead, g_row, g_col))
    zero = Cast(source.dtype, Const(0.0, DType.F32))
    guard = If((Constraint(g_row, "<", extents[0]), Constraint(g_col, "<", extents[1])),
               (Assign(claim_name("TC", names), tile, (r, c), load),),
               (Assign(claim_name("TZ", names), tile, (r, c), zero),))
    return _item_loop(e, t, rows * cols, threads, (guard,))


def gathered_copy(tile: str, conv: ImplicitGemm, role: str, rows: int, cols: int, threads: int,
                  t: str, e: str, origin: tuple[Aff, Aff], extents: tuple[Aff, Aff],
                  names: set[str]) -> For:
    """``tile[0:rows, 0:cols]`` = the implicit GEMM's operand ``role`` at
    ``origin``, element by element (thread ``e % threads`` copies element
    ``e``), read from the convolution's own input or weights
    (:meth:`ImplicitGemm.gather`) and 0 outside ``extents`` or the input
    (the zero padding): no im2col buffer."""
    ev = Aff.var(e)
    r, c = ev // cols, ev % cols
    g_row, g_col = origin[0] + r, origin[1] + c
    operand = conv.a if role == "a" else conv.b
    at = (g_col, g_row) if role == "a" and operand.layout == "col" else (g_row, g_col)
    indices, inside = conv.gather(role, *at)
    zero = Cast(operand.dtype, Const(0.0, DType.F32))
    guard = If((Constraint(g_row, "<", extents[0]), Constraint(g_col, "<", extents[1]), *inside),
               (Assign(claim_name("TC", names), tile, (r, c), Load(operand.buffer, indices)),),
               (Assign(claim_name("TZ", names), tile, (r, c), zero),))
    return _item_loop(e, t, rows * cols, threads, (guard,))


VECTOR = 8
"""Elements of one 16-byte chunk of a 16-bit tile."""


def gathered_row_copy(tile: str, conv: ImplicitGemm, rows: int, cols: int, threads: int,
                      t: str, e: str, v: str, origin: tuple[Aff, Aff], extents: tuple[Aff, Aff],
                      names: set[str]) -> For:
    """The A tile of a convolution with stride 1 along the width, stored
    ``[k, m]``, by 16-byte chunks of 8 outputs: a chunk inside one output
    row and inside the input is one ``parallel vectorize=8`` loop over
    consecutive input elements (a ``cp.async`` when aligned); any other chunk
    is gathered element by element with zero-fill."""
    per_row = cols // VECTOR
    ev, vv = Aff.var(e), Aff.var(v)
    r, c = ev // per_row, (ev % per_row) * VECTOR
    g_k, g_m = origin[0] + r, origin[1] + c
    indices, inside = conv.row_chunk(g_m, g_k, VECTOR)
    *lead, last = indices
    whole = For(v, (Aff.const(0),), (Aff.const(VECTOR),),
                (Assign(claim_name("TC", names), tile, (r, c + vv),
                        Load(conv.a.buffer, (*lead, last + vv))),),
                parallel=True, vectorize=VECTOR)
    v2 = claim_name(v, names)
    vv2 = Aff.var(v2)
    one, exists = conv.gather("a", g_m + vv2, g_k)
    zero = Cast(conv.a.dtype, Const(0.0, DType.F32))
    edge = For(v2, (Aff.const(0),), (Aff.const(VECTOR),), (
        If((Constraint(g_k, "<", extents[0]), Constraint(g_m + vv2, "<", extents[1]), *exists),
           (Assign(claim_name("TC", names), tile, (r, c + vv2), Load(conv.a.buffer, one)),),
           (Assign(claim_name("TZ", names), tile, (r, c + vv2), zero),)),), unroll=1)   # a loop: the cold edge path stays small
    chunk = If((Constraint(g_k, "<", extents[0]), Constraint(g_m + VECTOR, "<=", extents[1]),
                *inside), (whole,), (edge,))
    return _item_loop(e, t, rows * per_row, threads, (chunk,))


def chunked_copy(tile: str, source: Operand, rows: int, cols: int, threads: int,
                 t: str, e: str, v: str, origin: tuple[Aff, Aff], extents: tuple[Aff, Aff],
                 lead: tuple[Aff, ...], names: set[str]) -> For:
    """The same copy by 16-byte chunks (``cols`` a multiple of 8): thread
    ``e % threads`` copies chunk ``e``; a chunk wholly inside ``extents`` is
    one ``parallel vectorize=8`` loop (the NVPTX lowering makes it one
    ``cp.async`` of 16 bytes when both addresses are 16-byte aligned, else
    plain copies); a chunk across the edge is copied element by element with
    zero-fill."""
    per_row = cols // VECTOR
    ev, vv = Aff.var(e), Aff.var(v)
    r, c = ev // per_row, (ev % per_row) * VECTOR
    g_row, g_col = origin[0] + r, origin[1] + c
    whole = For(v, (Aff.const(0),), (Aff.const(VECTOR),),
                (Assign(claim_name("TC", names), tile, (r, c + vv),
                        Load(source.buffer, (*lead, g_row, g_col + vv))),),
                parallel=True, vectorize=VECTOR)
    v2 = claim_name(v, names)
    vv2 = Aff.var(v2)
    zero = Cast(source.dtype, Const(0.0, DType.F32))
    edge = For(v2, (Aff.const(0),), (Aff.const(VECTOR),), (
        If((Constraint(g_row, "<", extents[0]), Constraint(g_col + vv2, "<", extents[1])),
           (Assign(claim_name("TC", names), tile, (r, c + vv2),
                   Load(source.buffer, (*lead, g_row, g_col + vv2))),),
           (Assign(claim_name("TZ", names), tile, (r, c + vv2), zero),)),), unroll=1)   # a loop: the cold edge path stays small
    chunk = If((Constraint(g_row, "<", extents[0]), Constraint(g_col + VECTOR, "<=", extents[1])),
               (whole,), (edge,))
    return _item_loop(e, t, rows * per_row, threads, (chunk,))


def gathered_chunk_copy(tile: str, conv: ImplicitGemm, rows: int, cols: int, threads: int,
                        t: str, e_hint: str, v_hint: str, origin: tuple[Aff, Aff],
                        extents: tuple[Aff, Aff], names: set[str]) -> If:
    """The B tile (weights, ``[oc, k]``) of a convolution by 16-byte chunks
    along ``k``: the weights are contiguous in ``k = (ic, kh, kw)``, so a
    chunk is 8 consecutive elements (one ``cp.async``: ``polyir.ptx.cpasync``
    folds the gather's subscripts into one offset). A tile inside
    ``extents`` is copied with no checks; the others chunk by chunk, a chunk
    across the edge element by element with zero-fill."""
    per_row = cols // VECTOR

    def chunks(checked: bool) -> For:
        e, v = claim_name(e_hint, names), claim_name(v_hint, names)
        ev, vv = Aff.var(e), Aff.var(v)
        r, c = ev // per_row, (ev % per_row) * VECTOR
        g_n, g_k = origin[0] + r, origin[1] + c
        at, _ = conv.gather("b", g_n, g_k + vv)
        whole = For(v, (Aff.const(0),), (Aff.const(VECTOR),),
                    (Assign(claim_name("TC", names), tile, (r, c + vv), Load(conv.b.buffer, at)),),
                    parallel=True, vectorize=VECTOR)
        if not checked:
            return _item_loop(e, t, rows * per_row, threads, (whole,))
        v2 = claim_name(v_hint, names)
        vv2 = Aff.var(v2)
        one, _ = conv.gather("b", g_n, g_k + vv2)
        zero = Cast(conv.b.dtype, Const(0.0, DType.F32))
        edge = For(v2, (Aff.const(0),), (Aff.const(VECTOR),), (
            If((Constraint(g_n, "<", extents[0]), Constraint(g_k + vv2, "<", extents[1])),
               (Assign(claim_name("TC", names), tile, (r, c + vv2), Load(conv.b.buffer, one)),),
               (Assign(claim_name("TZ", names), tile, (r, c + vv2), zero),)),), unroll=1)
        chunk = If((Constraint(g_n, "<", extents[0]), Constraint(g_k + VECTOR, "<=", extents[1])),
                   (whole,), (edge,))
        return _item_loop(e, t, rows * per_row, threads, (chunk,))

    inside = (Constraint(origin[0] + rows, "<=", extents[0]),
              Constraint(origin[1] + cols, "<=", extents[1]))
    return If(inside, (chunks(False),), (chunks(True),))


def split_copy(tile: str, source: Operand, rows: int, cols: int, threads: int, t: str,
               e_hint: str, v_hint: str, origin: tuple[Aff, Aff], extents: tuple[Aff, Aff],
               lead: tuple[Aff, ...], names: set[str]) -> If:
    """:func:`chunked_copy` split by the whole tile (one uniform branch per
    K tile): a tile inside ``extents`` (every tile but the edge ones) is
    copied chunk by chunk with no bounds check, the others by the checked,
    zero-filling copy."""
    e, vv = claim_name(e_hint, names), claim_name(v_hint, names)
    item = Aff.var(e)
    r, c = item // (cols // VECTOR), (item % (cols // VECTOR)) * VECTOR
    whole = For(vv, (Aff.const(0),), (Aff.const(VECTOR),),
                (Assign(claim_name("TC", names), tile, (r, c + Aff.var(vv)),
                        Load(source.buffer, (*lead, origin[0] + r, origin[1] + c + Aff.var(vv)))),),
                parallel=True, vectorize=VECTOR)
    inside = (Constraint(origin[0] + rows, "<=", extents[0]),
              Constraint(origin[1] + cols, "<=", extents[1]))
    fast = _item_loop(e, t, rows * (cols // VECTOR), threads, (whole,))
    checked = chunked_copy(tile, source, rows, cols, threads, t, claim_name(e_hint, names),
                           claim_name(v_hint, names), origin, extents, lead, names)
    return If(inside, (fast,), (checked,))


def map_contraction(function: Function, contraction: Contraction | ImplicitGemm, config: TileConfig
                    ) -> tuple[Node, list[Buffer]]:
    """The hand-mapped nest replacing ``contraction`` and the shared/fragment
    buffers it needs (to add to ``function.locals``)."""
    dtype = contraction.input_dtype
    key = MMA_KEYS.get(dtype)
    if key is None:
        raise CompileError(f"function '{function.name}': no tensor-core shape for {dtype} inputs")
    names = names_in(function)
    bm, bn, bk = config.bm, config.bn, config.bk
    threads = config.threads
    bx, by, t, kt = (claim_name(n, names) for n in ("tc_bx", "tc_by", "tc_t", "tc_kt"))
    bz = claim_name("tc_bz", names) if contraction.batch else None
    m, n, k = contraction.m, contraction.n, contraction.k
    a, b = contraction.a, contraction.b
    batch_map = {contraction.batch: Aff.var(bz)} if contraction.batch and bz else {}
    a_lead = tuple(i.substitute(batch_map) for i in a.lead)
    b_lead = tuple(i.substitute(batch_map) for i in b.lead)

    # shared tiles in the operands' own layouts, rows padded; two stages each
    a_rows, a_cols = (bm, bk) if a.layout == "row" else (bk, bm)
    b_rows, b_cols = (bk, bn) if b.layout == "row" else (bn, bk)
    stages = config.stages
    a_tiles = [claim_name(f"tc_As{s}", names) for s in range(stages)]
    b_tiles = [claim_name(f"tc_Bs{s}", names) for s in range(stages)]
    c_tile = claim_name("tc_Cs", names)
    shared = [Buffer(x, dtype, (Aff.const(a_rows), Aff.const(a_cols + PAD_HALVES)),
                     MemorySpace.SHARED) for x in a_tiles]
    shared += [Buffer(x, dtype, (Aff.const(b_rows), Aff.const(b_cols + PAD_HALVES)),
                      MemorySpace.SHARED) for x in b_tiles]
    shared.append(Buffer(c_tile, DType.F32, (Aff.const(bm), Aff.const(bn + PAD_F32)),
                         MemorySpace.SHARED))
    row0 = Aff.var(by) * bm
    col0 = Aff.var(bx) * bn

    def copies(stage: int, k_tile: Aff) -> tuple[Node, Node]:
        """Copies of K tile ``k_tile`` of A and B into ``stage``."""
        k0 = k_tile * bk
        a_origin, a_ext = ((row0, k0), (m, k)) if a.layout == "row" else ((k0, row0), (k, m))
        b_origin, b_ext = ((k0, col0), (k, n)) if b.layout == "row" else ((col0, k0), (n, k))
        if isinstance(contraction, ImplicitGemm):   # packed on the fly from the input
            a_copy = gathered_row_copy(
                a_tiles[stage], contraction, a_rows, a_cols, threads, t,
                claim_name("tc_ea", names), claim_name("tc_va", names), a_origin, a_ext, names
            ) if a.layout == "col" else gathered_copy(
                a_tiles[stage], contraction, "a", a_rows, a_cols, threads, t,
                claim_name("tc_ea", names), a_origin, a_ext, names)
            b_copy = gathered_chunk_copy(
                b_tiles[stage], contraction, b_rows, b_cols, threads, t, "tc_eb", "tc_vb",
                b_origin, b_ext, names
            ) if b.layout == "col" else gathered_copy(
                b_tiles[stage], contraction, "b", b_rows, b_cols, threads, t,
                claim_name("tc_eb", names), b_origin, b_ext, names)
            return a_copy, b_copy
        return (split_copy(a_tiles[stage], a, a_rows, a_cols, threads, t, "tc_ea", "tc_va",
                           a_origin, a_ext, a_lead, names),
                split_copy(b_tiles[stage], b, b_rows, b_cols, threads, t, "tc_eb", "tc_vb",
                           b_origin, b_ext, b_lead, names))

    # warp tile: warp w = t // 32 at (w // warps_n, w % warps_n)
    warp = Aff.var(t) // 32
    wm = Aff.var(t) // (32 * config.warps_n)
    wn = warp % config.warps_n if config.warps_n > 1 else Aff.const(0)
    fm, fn = config.warp_m // 16, config.warp_n // 16
    frag_a = [claim_name(f"tc_fa{i}", names) for i in range(fm)]
    frag_b = [claim_name(f"tc_fb{j}", names) for j in range(fn)]
    frag_c = [[claim_name(f"tc_fc{i}_{j}", names) for j in range(fn)] for i in range(fm)]
    fragments = [Buffer(x, dtype, (Aff.const(16), Aff.const(16)), MemorySpace.FRAGMENT)
                 for x in (*frag_a, *frag_b)]
    fragments += [Buffer(x, DType.F32, (Aff.const(16), Aff.const(16)), MemorySpace.FRAGMENT)
                  for row in frag_c for x in row]
    fills: list[Node] = [FragmentFill(claim_name("TF", names), x, Const(0.0, DType.F32))
                         for row in frag_c for x in row]
    def compute(stage: int) -> list[Node]:
        """The MMAs of one K tile held in ``stage``."""
        nodes: list[Node] = []
        for kk in range(0, bk, 16):
            for i, fa in enumerate(frag_a):
                mo = wm * config.warp_m + 16 * i
                origin = (mo, Aff.const(kk)) if a.layout == "row" else (Aff.const(kk), mo)
                nodes.append(FragmentLoad(claim_name("TA", names), fa, "a", key, a_tiles[stage],
                                          origin, a.layout))
            for j, fb in enumerate(frag_b):
                no = wn * config.warp_n + 16 * j
                origin = (Aff.const(kk), no) if b.layout == "row" else (no, Aff.const(kk))
                nodes.append(FragmentLoad(claim_name("TB", names), fb, "b", key, b_tiles[stage],
                                          origin, b.layout))
            for i, fa in enumerate(frag_a):
                for j, fb in enumerate(frag_b):
                    nodes.append(FragmentMMA(claim_name("TM", names), frag_c[i][j], fa, fb,
                                             frag_c[i][j], key))
        return nodes

    # A pipeline of S stages: while the MMAs read stage j, the copies of the
    # next S - 1 K tiles are in flight into the other stages (cp.async,
    # polyir.ptx.cpasync: each barrier commits the copies since the previous
    # one and waits until S - 2 groups are left in flight). The K loop is
    # unrolled by S so every stage is a buffer of its own; the prologue fills
    # stages 0..S-2, one barrier after each, so that every copy is read S - 1
    # barriers after it is issued. K tiles past the end are zero-filled, so
    # the loop needs no tail.
    kp = Aff.var(kt)
    k_tiles = (k + (bk - 1)) // bk
    body: list[Node] = []
    for j in range(stages):
        body += [*copies((j + stages - 1) % stages, kp * stages + (j + stages - 1)),
                 *compute(j), Barrier()]
    k_loop = For(kt, (Aff.const(0),), ((k_tiles + (stages - 1)) // stages,), tuple(body))
    prologue: list[Node] = []
    for stage in range(stages - 1):
        prologue += [*copies(stage, Aff.const(stage)), Barrier()]
    stores: list[Node] = []
    for i in range(fm):
        for j in range(fn):
            origin = (wm * config.warp_m + 16 * i, wn * config.warp_n + 16 * j)
            stores.append(FragmentStore(claim_name("TS", names), c_tile, origin, frag_c[i][j],
                                        key, "row"))

    # epilogue in registers: each lane finishes exactly the accumulator
    # elements it holds in the m16n8k16 C layout (:func:`acc_position`), reading
    # them from the staging tile at the positions its own fragment_store wrote;
    # the NVPTX lowering reads those loads from the fragment registers and
    # drops the tile (``polyir.ptx.mma_sync.register_staged``).
    band_locals = tuple(replace(buf, space=MemorySpace.LOCAL) if buf.space is MemorySpace.GLOBAL
                        else buf for lp in contraction.band for buf in lp.locals)
    for buf in band_locals:
        if not all(d.is_constant for d in buf.shape):
            raise CompileError(f"function '{function.name}': local '{buf.name}' of the "
                               f"contraction has a symbolic shape")
    lane = Aff.var(t) % 32
    epilogue: list[Node] = []
    for i in range(fm):
        for j in range(fn):
            for half in range(2):
                for q in range(4):
                    dr, dc = acc_position(half, q, lane)
                    r = wm * config.warp_m + 16 * i + dr
                    c = wn * config.warp_n + 16 * j + dc
                    epilogue.append(_epilogue_element(contraction, c_tile, r, c, row0, col0,
                                                      batch_map, band_locals, names))
    thread_loop = For(t, (Aff.const(0),), (Aff.const(threads),),
                      (*fills, *prologue, k_loop, *stores, Barrier(), *epilogue),
                      mapping="thread.x")
    nest: Node = For(bx, (Aff.const(0),), ((n + (bn - 1)) // bn,), (thread_loop,),
                     mapping="block.x")
    nest = For(by, (Aff.const(0),), ((m + (bm - 1)) // bm,), (nest,), mapping="block.y")
    if bz is not None:
        extent = contraction.batch_extent
        assert extent is not None
        nest = For(bz, (Aff.const(0),), (extent,), (nest,), mapping="block.z")
    return nest, shared + fragments




def acc_position(half: int, q: int, lane: Aff) -> tuple[Aff, Aff]:
    """(row, column) in a 16x16 accumulator tile of register ``4*half + q`` of
    ``lane``: the m16n8 C layout of n8 half ``half`` (PTX ISA; the same formula
    as ``polyir.ptx.mma_sync.acc_element``, which the tests compare)."""
    g = lane // 4
    return g + 8 * (q // 2), (lane % 4) * 2 + 8 * half + q % 2


def _epilogue_element(contraction: Contraction | ImplicitGemm, c_tile: str, r: Aff, c: Aff, row0: Aff, col0: Aff,
                      batch_map: dict[str, Aff], band_locals: tuple[Buffer, ...],
                      names: set[str]) -> Node:
    """The statements fusion put around the reduction, for the output element
    at tile position ``(r, c)``, on its finished sum ``c_tile[r, c]``; guarded
    by the matrix edges, in a one-trip loop that scopes the band's locals;
    every name fresh (one copy per element a lane holds)."""
    mapping = {**contraction.output_map(row0 + r, col0 + c), **batch_map}
    update = contraction.update
    acc_indices = tuple(i.substitute(mapping) if isinstance(i, Aff) else i for i in update.indices)
    total = Assign(update.name, update.buffer, acc_indices,
                   BinOp("+", Load(update.buffer, acc_indices), Load(c_tile, (r, c))),
                   update.loc)
    body = (*substitute(contraction.before, mapping), total,
            *substitute(contraction.after, mapping))
    in_tile = If((Constraint(row0 + r, "<", contraction.m),
                  Constraint(col0 + c, "<", contraction.n)), body)
    element: Node = in_tile if not band_locals else For(
        "tc_ec", (Aff.const(0),), (Aff.const(1),), (in_tile,), locals=band_locals)
    (copy,), _ = renamed_copy((element,), names)   # fresh statement, loop and local names
    return copy


def map_tensor_cores(function: Function, target: Target, config: TileConfig | None,
                     ctx: PassContext | None = None, f32: bool = True) -> Function:
    """``function`` with every top-level contraction nest with 16-bit inputs
    mapped onto tensor cores (``config``, or :func:`choose_tiles` per nest),
    and with ``f32`` every f32 one onto CUDA-core register tiles
    (``polyir.gpu.simt``); the same object when there is none. Remarks (``gpu-tensorcore``) say why a
    nest holding a reduction was left alone."""
    if target.sm < 80 and target.sm != 0:
        if ctx is not None:
            ctx.remark("gpu-tensorcore", f"function '{function.name}'",
                       f"{target.name} has no mma.sync m16n8k16 path (sm_80+)")
        return function
    body: list[Node] = []
    added: list[Buffer] = []
    changed = False
    for node in function.body:
        if not isinstance(node, For) or node.mapping is not None:
            body.append(node)
            continue
        current = replace(function, locals=function.locals + tuple(added))
        contraction: Contraction | ImplicitGemm
        try:
            contraction = _find(current, node)
        except NotAContraction as why:
            mapped = _map_rows(current, node, ctx)
            if mapped is not None:
                body.append(mapped[0])
                added += mapped[1]
                changed = True
                continue
            if ctx is not None and _has_reduction(node):
                ctx.remark("gpu-tensorcore", f"function '{function.name}', loop '{node.var}'",
                           f"not mapped to tensor cores: {why}")
            body.append(node)
            continue
        where = f"function '{function.name}', loop '{node.var}'"
        kind = "convolution (implicit GEMM)" if isinstance(contraction, ImplicitGemm) \
            else "contraction"
        what = f"{kind} {contraction.a.buffer} x {contraction.b.buffer} " \
               f"({contraction.input_dtype})"
        if contraction.input_dtype is DType.F32:
            if not f32:
                if ctx is not None:
                    ctx.remark("gpu-tensorcore", where, f"{what} left to gpu-map (f32=false; "
                               f"tensor cores would round f32 to tf32)")
                body.append(node)
                continue
            from polyir.gpu.simt import choose_simt_tiles, map_contraction_simt
            simt = choose_simt_tiles(target.sm_count, _constant(contraction.m),
                                     _constant(contraction.n))
            nest, buffers = map_contraction_simt(current, contraction, simt)
            if ctx is not None:
                ctx.remark("gpu-tensorcore", where, f"{what} mapped to CUDA cores (no tf32: it "
                           f"would change f32 results): tile {simt}", kind="applied")
        elif contraction.input_dtype in MMA_KEYS:
            chosen = config or choose_tiles(target, _constant(contraction.m),
                                            _constant(contraction.n),
                                            _constant(contraction.batch_extent)
                                            if contraction.batch else 1)
            nest, buffers = map_contraction(current, contraction, chosen)
            if ctx is not None:
                ctx.remark("gpu-tensorcore", where, f"{what} mapped: tile {chosen}",
                           kind="applied")
        else:
            if ctx is not None:
                ctx.remark("gpu-tensorcore", where, f"{what}: no tensor-core shape for "
                           f"{contraction.input_dtype}")
            body.append(node)
            continue
        body.append(nest)
        added += buffers
        changed = True
    if not changed:
        return function
    return replace(function, body=tuple(body), locals=function.locals + tuple(added))


def _map_rows(function: Function, nest: Node, ctx: PassContext | None
              ) -> tuple[Node, list[Buffer]] | None:
    """``nest`` as a row-reduction nest mapped one block per row
    (``polyir.gpu.rows``), or None when it is none."""
    from polyir.gpu.rows import NotRows, find_rows, map_rows, threads_for
    try:
        rows = find_rows(function, nest)
    except NotRows:
        return None
    if ctx is not None:
        ctx.remark("gpu-tensorcore", f"function '{function.name}', loop '{rows.band[0].var}'",
                   f"row reductions ({len(rows.reductions)}) mapped: one block of "
                   f"{threads_for(rows)} threads per row, shares combined in shared memory",
                   kind="applied")
    return map_rows(function, rows)


def _find(function: Function, nest: Node) -> Contraction | ImplicitGemm:
    """The contraction or convolution ``nest`` computes (NotAContraction: why
    it is neither, the contraction's reason first)."""
    try:
        return find_contraction(function, nest)
    except NotAContraction as why:
        try:
            return find_convolution(function, nest)
        except NotAContraction as conv:
            raise NotAContraction(f"{why}; as a convolution: {conv}") from None


def _constant(aff: Aff | None) -> int | None:
    return aff.constant if aff is not None and aff.is_constant else None


def _has_reduction(node: Node) -> bool:
    return any(isinstance(n, For) and not n.parallel for n in walk_nodes((node,))) and \
        any(isinstance(n, For) and n.parallel for n in walk_nodes((node,)))


__all__ = ["map_contraction", "map_tensor_cores", "acc_position", "MMA_KEYS"]
