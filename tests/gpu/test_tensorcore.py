"""Tensor-core mapping of contractions (``gpu-tensorcore``) without a GPU.

Oracles:

* the register layouts of ``polyir.ptx.mma_sync`` (the very formulas the
  lowering emits, evaluated on ints) against an emulation of ``ldmatrix`` and
  ``mma.m16n8k16`` written from the PTX ISA's fragment tables, against numpy;
* the mapped IR against the unmapped IR in the interpreter (forward, reverse,
  shuffled parallel order, race detection on), on sizes that leave partial
  tiles, with small-integer data so that the reassociated f32 sum is exact;
* ``ptxas`` for sm_80 and sm_90 on every PTX, and ``ptxas -v``'s register and
  shared-memory figures against the target's limits.
"""
from __future__ import annotations

import re

import numpy as np
import pytest

from polyir.context import PassContext
from polyir.driver import compile_ir
from polyir.errors import CompileError
from polyir.gpu.contraction import NotAContraction, find_contraction
from polyir.ir.interpreter import interpret
from polyir.ir.nodes import For, FragmentLoad, FragmentMMA
from polyir.ir.parser import parse
from polyir.ir.types import round_to_bf16
from polyir.ir.verifier import verify
from polyir.ir.walk import walk_nodes
from polyir.passes import PipelineError, transform
from polyir.ptx.mma_sync import acc_element, ldmatrix_row_address, ldmatrix_trans
from polyir.target import cuda
from polyir.tiling.gpu_tiles import CANDIDATES, TileConfig, blocks_per_sm, choose_tiles
from tests.gpu.ptxas import assemble, resource_usage


# ------------------------------------------------------------ register layouts
def _ldmatrix_x4(stored: np.ndarray, role: str, layout: str) -> list[list[np.ndarray]]:
    """Emulated ``ldmatrix.sync.aligned.m8n8.x4[.trans].b16``: lane l supplies
    row address l % 8 of matrix l // 8; each lane receives, per matrix, the two
    elements (row l // 4, columns 2*(l % 4), +1) of that 8x8 matrix, or of its
    transpose with ``.trans``. Returns regs[lane][matrix] = 2 values."""
    rows = {}
    for lane in range(32):
        row, col = ldmatrix_row_address(role, layout, lane)
        rows[lane] = stored[row, col:col + 8]
    trans = ldmatrix_trans(role, layout)
    regs = []
    for lane in range(32):
        mine = []
        for matrix in range(4):
            tile = np.stack([rows[8 * matrix + r] for r in range(8)])
            if trans:
                tile = tile.T
            mine.append(tile[lane // 4, 2 * (lane % 4):2 * (lane % 4) + 2])
        regs.append(mine)
    return regs


def _mma_m16n8k16(a_regs, b_regs) -> np.ndarray:
    """Emulated mma.m16n8k16 with the ISA's A/B fragment tables: returns the
    16x8 product assembled from the per-lane registers (g = lane >> 2, t = lane % 4):
    a0 = A[g, 2t:2t+2], a1 = A[g+8, 2t:], a2 = A[g, 2t+8:], a3 = A[g+8, 2t+8:];
    b0 = B[2t:2t+2, g], b1 = B[2t+8:2t+10, g]."""
    a = np.zeros((16, 16))
    b = np.zeros((16, 8))
    for lane in range(32):
        g, t = lane // 4, lane % 4
        a[g, 2 * t:2 * t + 2] = a_regs[lane][0]
        a[g + 8, 2 * t:2 * t + 2] = a_regs[lane][1]
        a[g, 2 * t + 8:2 * t + 10] = a_regs[lane][2]
        a[g + 8, 2 * t + 8:2 * t + 10] = a_regs[lane][3]
        b[2 * t:2 * t + 2, g] = b_regs[lane][0]
        b[2 * t + 8:2 * t + 10, g] = b_regs[lane][1]
    return a @ b


def _c_layout(d: np.ndarray) -> list[list[float]]:
    """The m16n8 f32 C/D registers per lane from the ISA table: c0, c1 =
    D[g, 2t], D[g, 2t+1]; c2, c3 = D[g+8, 2t], D[g+8, 2t+1]."""
    return [[d[lane // 4, 2 * (lane % 4)], d[lane // 4, 2 * (lane % 4) + 1],
             d[lane // 4 + 8, 2 * (lane % 4)], d[lane // 4 + 8, 2 * (lane % 4) + 1]]
            for lane in range(32)]


@pytest.mark.parametrize("a_layout", ["row", "col"])
@pytest.mark.parametrize("b_layout", ["row", "col"])
def test_ldmatrix_mma_layouts_give_the_product(a_layout, b_layout) -> None:
    rng = np.random.default_rng(1)
    a = rng.integers(-4, 5, (16, 16)).astype(np.float64)
    b = rng.integers(-4, 5, (16, 16)).astype(np.float64)
    pad = 8  # a padded shared tile, as the mapping makes
    a_stored = np.zeros((16, 16 + pad))
    a_stored[:, :16] = a if a_layout == "row" else a.T
    b_stored = np.zeros((16, 16 + pad))
    b_stored[:, :16] = b if b_layout == "row" else b.T
    a_regs = _ldmatrix_x4(a_stored, "a", a_layout)
    b_regs = _ldmatrix_x4(b_stored, "b", b_layout)
    out = np.full((16, 16), np.nan)
    for half in range(2):  # n8 half j uses b registers 2j, 2j+1 (as the lowering does)
        d = _mma_m16n8k16(a_regs, [[lane[2 * half], lane[2 * half + 1]] for lane in b_regs])
        regs = _c_layout(d)
        for lane in range(32):
            for q in range(4):
                row, col = acc_element(half, q, lane)
                out[row, col] = regs[lane][q]
    np.testing.assert_array_equal(out, a @ b)


# ----------------------------------------------------------------- programs
def _matmul_ir(dtype: str = "f16", a_layout: str = "row", b_layout: str = "row",
               batch: bool = False, sizes: tuple[str, str, str] = ("M", "N", "K")) -> str:
    m, n, k = sizes
    lead = "Bt, " if batch else ""
    lv = "b, " if batch else ""
    a_shape = f"[{lead}{m}, {k}]" if a_layout == "row" else f"[{lead}{k}, {m}]"
    b_shape = f"[{lead}{k}, {n}]" if b_layout == "row" else f"[{lead}{n}, {k}]"
    a_at = f"A[{lv}i, r]" if a_layout == "row" else f"A[{lv}r, i]"
    b_at = f"B[{lv}r, j]" if b_layout == "row" else f"B[{lv}j, r]"
    c_shape = f"[{lead}{m}, {n}]"
    loops = f"for b = 0 to Bt {{ for i = 0 to {m} {{" if batch else f"for i = 0 to {m} {{"
    close = "} }" if batch else "}"
    return f"""
func mm(C: f32{c_shape}, A: {dtype}{a_shape}, B: {dtype}{b_shape}) {{
  {loops}
    for j = 0 to {n} {{
      for r = 0 to {k} {{
        S0: C[{lv}i, j] = C[{lv}i, j] + cast<f32>({a_at}) * cast<f32>({b_at})
      }}
    }}
  {close}
}}
"""


def _small_ints(shape, rng, dtype):
    values = rng.integers(-3, 4, shape).astype(np.float32)
    return values.astype(np.float16) if dtype == "f16" else round_to_bf16(values)


def _check_equivalent(module, mapped, arrays, orders=("forward", "reverse", "shuffle")) -> None:
    expected = [a.copy() for a in arrays]
    interpret(module, *expected)
    for order in orders:
        got = [a.copy() for a in arrays]
        interpret(mapped, *got, parallel_order=order, detect_races=True)
        for position, (g, w) in enumerate(zip(got, expected, strict=True)):
            np.testing.assert_array_equal(g, w, err_msg=f"argument {position}, order {order}")


TILE = "gpu-tensorcore{tile=32,32,16 warps=2,1}"


@pytest.mark.parametrize("dtype,a_layout,b_layout,batch,tile", [
    ("f16", "row", "row", False, TILE),
    ("f16", "col", "col", False, "gpu-tensorcore{tile=32,32,32 warps=1,2}"),
    ("bf16", "row", "col", False, TILE),
    ("bf16", "col", "row", True, "gpu-tensorcore{tile=16,32,16 warps=1,1}"),
    ("f16", "row", "col", False, "gpu-tensorcore{tile=32,32,16 warps=2,1 stages=3}"),
    ("bf16", "col", "col", True, "gpu-tensorcore{tile=32,16,16 warps=1,1 stages=4}"),
])
def test_mapped_matmul_equals_unmapped_with_partial_tiles(dtype, a_layout, b_layout, batch,
                                                          tile) -> None:
    module = transform(parse(_matmul_ir(dtype, a_layout, b_layout, batch)), "mark-parallel")
    mapped = transform(module, f"{tile},gpu-map", target="cuda:sm_80")
    verify(mapped)
    assert any(isinstance(n, FragmentMMA) for f in mapped.functions for n in walk_nodes(f.body))
    rng = np.random.default_rng(0)
    m, n, k, nb = 37, 45, 40, 2   # none a multiple of the tiles
    lead = (nb,) if batch else ()
    a = _small_ints(lead + ((m, k) if a_layout == "row" else (k, m)), rng, dtype)
    b = _small_ints(lead + ((k, n) if b_layout == "row" else (n, k)), rng, dtype)
    c = rng.integers(-3, 4, lead + (m, n)).astype(np.float32)
    _check_equivalent(module, mapped, [c, a, b])


LINEAR_RELU_RESIDUAL = """
func forward(arg0_1: f16[20, 40], arg1_1: f16[24, 40], arg2_1: f16[24], out0: f16[20, 24]) {
  local addmm: f16[20, 24]
  local addmm_acc: f32[20, 24]
  local relu: f16[20, 24]
  for i = 0 to 20 {
    for i_1 = 0 to 24 {
      S0: addmm_acc[i, i_1] = cast<f32>(arg2_1[i_1])
      for r = 0 to 40 {
        S1: addmm_acc[i, i_1] = addmm_acc[i, i_1] + cast<f32>(arg0_1[i, r]) * cast<f32>(arg1_1[i_1, r])
      }
      S2: addmm[i, i_1] = cast<f16>(addmm_acc[i, i_1])
    }
  }
  for i_2 = 0 to 20 {
    for i_3 = 0 to 24 {
      S3: relu[i_2, i_3] = cast<f16>(select(cast<f32>(addmm[i_2, i_3]) < 0.0, 0.0, cast<f32>(addmm[i_2, i_3])))
    }
  }
  for i_4 = 0 to 20 {
    for i_5 = 0 to 24 {
      S4: out0[i_4, i_5] = cast<f16>(cast<f32>(relu[i_4, i_5]) + cast<f32>(arg0_1[i_4, i_5]))
    }
  }
}
"""
"""What the ATen lowering (``polyir.frontends.aten``) makes of
``relu(linear(x)) + x[:, :24]`` in f16 with x 20x40 (kept as text: torch's
capture costs ~10 s)."""


def test_linear_layer_epilogue_runs_on_the_sums() -> None:
    """A linear layer with bias, relu and a residual, through fusion: one
    tensor-core kernel, the epilogue fused into it."""
    lowered = parse(LINEAR_RELU_RESIDUAL)
    ctx = PassContext(cuda(90))
    module = transform(lowered, "fuse,shrink-buffers,mark-parallel", ctx=ctx)
    mapped = transform(module, "gpu-tensorcore{tile=32,16,16 warps=2,1},gpu-map", ctx=ctx)
    applied = [r for r in ctx.remarks_of("gpu-tensorcore") if r.kind == "applied"]
    assert len(applied) == 1, ctx.remarks_of("gpu-tensorcore")
    kernels = [f for f in mapped.functions if f.kind == "kernel"]
    assert len(kernels) == 1  # bias, relu, residual and the cast run in the same kernel
    rng = np.random.default_rng(2)
    arrays = [rng.integers(-3, 4, (20, 40)).astype(np.float16),
              rng.integers(-3, 4, (24, 40)).astype(np.float16),
              rng.integers(-3, 4, (24,)).astype(np.float16),
              np.zeros((20, 24), np.float16)]
    _check_equivalent(module, mapped, arrays)


@pytest.mark.parametrize("sm", [80, 90])
def test_default_cuda_pipeline_maps_a_matmul_to_mma_sync(sm) -> None:
    exe = compile_ir(parse(_matmul_ir("f16")), cuda(sm))
    ptx = exe.ptx
    assert "ldmatrix.sync.aligned.m8n8.x4.shared.b16" in ptx
    assert "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16" in ptx  # row-major B
    assert "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32" in ptx
    assert "cp.async.cg.shared.global" in ptx and "cp.async.wait_all" in ptx
    assert "wmma" not in ptx
    assemble(ptx, (f"sm_{sm}",))


ASYNC_COPY = """
func main(Y: f16[32, 8], G: f16[32, 8]) {
  launch k grid(1, 1, 1) block(32, 1, 1) (Y, G)
}

kernel k(Y: f16[32, 8], G: f16[32, 8]) {
  local S: f16[32, 8] @shared
  for bx = 0 to 1 gpu=block.x {
    for t = 0 to 32 gpu=thread.x {
      for v = 0 to 8 parallel vectorize=8 {
        S0: S[t, v] = G[t, v]
      }
      READ
      barrier
      S2: Y[t, 0] = S[31 - t, 0]
    }
  }
}
"""


@pytest.mark.parametrize("read,asynchronous", [("", True), ("S1: Y[t, 1] = S[t, 1]", False),
                                               ("S1: Y[t, 1] = G[t, 1]", True)])
def test_cp_async_only_where_the_thread_does_not_read_before_a_barrier(read, asynchronous) -> None:
    from polyir.driver import build
    from polyir.ptx.cpasync import async_copy_loops

    module = parse(ASYNC_COPY.replace("READ", read))
    kernel = next(f for f in module.functions if f.kind == "kernel")
    assert bool(async_copy_loops(kernel)) is asynchronous
    exe = build(module, "cuda:sm_80")
    assert ("cp.async.cg.shared.global" in exe.ptx) is asynchronous
    assemble(exe.ptx, ("sm_80",))
    g = np.arange(256, dtype=np.float16).reshape(32, 8)
    y = np.zeros((32, 8), np.float16)
    interpret(module, y, g, detect_races=True)
    np.testing.assert_array_equal(y[:, 0], g[::-1, 0])


@pytest.mark.parametrize("config,dtype,sm", [(c, ("f16", "bf16")[i % 2], (80, 90)[i // 3 % 2])
                                             for i, c in enumerate(CANDIDATES)], ids=str)
def test_every_tile_candidate_assembles_within_limits(config: TileConfig, dtype, sm) -> None:
    tile = f"gpu-tensorcore{{tile={config.bm},{config.bn},{config.bk} " \
           f"warps={config.warps_m},{config.warps_n} stages={config.stages}}}"
    module = transform(parse(_matmul_ir(dtype, "row", "col")), "mark-parallel")
    target = cuda(sm)
    exe = compile_ir(module, target, pipeline=f"{tile},gpu-map")
    assert ".extern .func llvm." not in exe.ptx
    want = "bf16.bf16" if dtype == "bf16" else "f16.f16"
    assert f"mma.sync.aligned.m16n8k16.row.col.f32.{want}.f32" in exe.ptx
    (usage,) = resource_usage(exe.ptx, f"sm_{sm}").values()   # assembles it, too
    assert usage["spill_stores"] == 0 and usage["spill_loads"] == 0, usage
    assert usage["registers"] <= target.max_registers_per_thread
    assert usage["registers"] * config.threads <= target.registers_per_sm  # one block fits
    (launch,) = [n for n in walk_nodes(exe.ir.entry.body) if hasattr(n, "kernel")]
    shared = max(usage["shared"], launch.shared_bytes)
    assert config.shared_bytes() <= shared <= target.shared_memory_bytes  # all padded tiles


# ------------------------------------------------------------ recognition
def test_not_a_contraction_says_why() -> None:
    cases = {
        "fewer than two parallel loops": """
func f(C: f32[N], A: f16[N, K], B: f16[K]) {
  for i = 0 to N { for r = 0 to K { S0: C[i] = C[i] + cast<f32>(A[i, r]) * cast<f32>(B[r]) } }
}""",
        "different types": """
func f(C: f32[M, N], A: f16[M, K], B: f32[K, N]) {
  for i = 0 to M { for j = 0 to N { for r = 0 to K {
    S0: C[i, j] = C[i, j] + cast<f32>(A[i, r]) * B[r, j] } } }
}""",
        "both operands run along": """
func f(C: f32[M, N], A: f16[M, K], B: f16[M, K]) {
  for i = 0 to M { for j = 0 to N { for r = 0 to K {
    S0: C[i, j] = C[i, j] + cast<f32>(A[i, r]) * cast<f32>(B[i, r]) } } }
}""",
        "is not 'acc = acc + x * y'": """
func f(C: f32[M, N], A: f16[M, K], B: f16[K, N]) {
  for i = 0 to M { for j = 0 to N { for r = 0 to K {
    S0: C[i, j] = max(C[i, j], cast<f32>(A[i, r]) * cast<f32>(B[r, j])) } } }
}""",
    }
    for why, text in cases.items():
        function = transform(parse(text), "mark-parallel").entry
        with pytest.raises(NotAContraction, match=re.escape(why)):
            find_contraction(function, function.body[0])


def _f32_matmul_ir(a_layout: str = "row", b_layout: str = "row", batch: bool = False) -> str:
    return _matmul_ir("f32", a_layout, b_layout, batch).replace("cast<f32>(", "(")


@pytest.mark.parametrize("a_layout,b_layout,batch", [("row", "row", False), ("col", "col", True),
                                                     ("row", "col", False)])
def test_f32_contraction_on_cuda_core_register_tiles(a_layout, b_layout, batch) -> None:
    module = transform(parse(_f32_matmul_ir(a_layout, b_layout, batch)), "mark-parallel")
    ctx = PassContext(cuda(80))
    mapped = transform(module, "gpu-tensorcore,gpu-map", ctx=ctx)
    (remark,) = ctx.remarks_of("gpu-tensorcore")
    assert "mapped to CUDA cores" in remark.why and remark.kind == "applied"
    rng = np.random.default_rng(5)
    m, n, k, nb = 37, 45, 20, 2
    lead = (nb,) if batch else ()
    a = rng.integers(-3, 4, lead + ((m, k) if a_layout == "row" else (k, m))).astype(np.float32)
    b = rng.integers(-3, 4, lead + ((k, n) if b_layout == "row" else (n, k))).astype(np.float32)
    c = rng.integers(-3, 4, lead + (m, n)).astype(np.float32)
    _check_equivalent(module, mapped, [c, a, b], ("reverse", "shuffle"))
    exe = compile_ir(module, cuda(80))
    assemble(exe.ptx, ("sm_80",))
    (usage,) = resource_usage(exe.ptx, "sm_80").values()
    assert usage["stack"] == 0 and usage["spill_stores"] == 0, usage  # the tile is in registers


def test_f32_and_refused_nests_are_left_to_gpu_map_with_a_remark() -> None:
    module = transform(parse(_f32_matmul_ir()), "mark-parallel")
    ctx = PassContext(cuda(90))
    out = transform(module, "gpu-tensorcore{f32=false}", ctx=ctx)
    assert out == module
    (remark,) = ctx.remarks_of("gpu-tensorcore")
    assert "left to gpu-map (f32=false" in remark.why
    row_dot = """
func f(C: f32[M, N], A: f16[M, K], B: f16[M, K]) {
  for i = 0 to M { for j = 0 to N { for r = 0 to K {
    S0: C[i, j] = C[i, j] + cast<f32>(A[i, r]) * cast<f32>(B[i, r]) } } }
}"""
    ctx = PassContext(cuda(90))
    transform(transform(parse(row_dot), "mark-parallel"), "gpu-tensorcore", ctx=ctx)
    (remark,) = ctx.remarks_of("gpu-tensorcore")
    assert "not mapped to tensor cores" in remark.why and remark.kind == "missed"


def test_bad_tile_options_are_refused() -> None:
    with pytest.raises(PipelineError):
        transform(parse(_matmul_ir()), "gpu-tensorcore{tile=30,32,16 warps=2,1}")
    with pytest.raises(PipelineError):
        transform(parse(_matmul_ir()), "gpu-tensorcore{tile=32,32,16}")
    with pytest.raises(CompileError):
        TileConfig(64, 64, 8, 2, 2)


# ------------------------------------------------------------------ policy
def test_tile_policy_reads_the_target() -> None:
    big = choose_tiles(cuda(90), 4096, 4096)
    assert (big.bm, big.bn) == (128, 128)
    small = choose_tiles(cuda(90), 64, 64)
    assert small.bm * small.bn < big.bm * big.bn  # small problems get small tiles
    for config in CANDIDATES:
        assert blocks_per_sm(config, cuda(80)) >= 1
        assert config.shared_bytes() <= cuda(80).shared_memory_bytes
    assert choose_tiles(cuda(80), None, None).bm == 128  # symbolic sizes: the most intense tile


def test_mapped_loops_are_block_thread_and_fragment_levels() -> None:
    module = transform(parse(_matmul_ir()), "mark-parallel")
    mapped = transform(module, "gpu-tensorcore{tile=64,64,32 warps=2,2}", target="cuda:sm_90")
    (nest,) = [n for n in mapped.entry.body if isinstance(n, For)]
    mappings = [n.mapping for n in walk_nodes((nest,)) if isinstance(n, For) and n.mapping]
    assert mappings == ["block.y", "block.x", "thread.x"]
    loads = [n for n in walk_nodes((nest,)) if isinstance(n, FragmentLoad)]
    # 2 stages x 2 k16 steps x (2 a + 2 b fragments) per warp tile of 32x32
    assert len(loads) == 16
    assert {n.buffer for n in loads} == {"tc_As0", "tc_As1", "tc_Bs0", "tc_Bs1"}
    assert {mapped.entry.buffers[n.buffer].space.value for n in loads} == {"shared"}
    shared = {b.name: b for b in mapped.entry.locals if b.space.value == "shared"}
    assert [d.constant for d in shared["tc_As0"].shape] == [64, 40]  # 32 + 8 halves of padding
    vector = [n for n in walk_nodes((nest,)) if isinstance(n, For) and n.vectorize == 8]
    assert vector and all(n.parallel for n in vector)  # 16-byte chunk copies


# ------------------------------------------------------------ on a real GPU
def _gpu_sm() -> int:
    import cupy
    return 90 if int(cupy.cuda.Device().compute_capability) >= 90 else 80


@pytest.mark.gpu
@pytest.mark.parametrize("dtype,a_layout,b_layout,batch,tile", [
    ("f16", "row", "row", False, ""),
    ("f16", "col", "col", False, TILE),
    ("bf16", "row", "col", False, ""),
    ("bf16", "col", "row", True, "gpu-tensorcore{tile=64,64,32 warps=2,2}"),
    ("f16", "row", "row", False, "gpu-tensorcore{tile=128,128,32 warps=2,2 stages=4}"),
    ("bf16", "row", "col", True, "gpu-tensorcore{tile=64,128,32 warps=2,2 stages=3}"),
])
def test_tensor_core_matmul_on_the_gpu(dtype, a_layout, b_layout, batch, tile) -> None:
    module = transform(parse(_matmul_ir(dtype, a_layout, b_layout, batch)), "mark-parallel")
    pipeline = f"{tile},gpu-map" if tile else "gpu-tensorcore,gpu-map"
    exe = compile_ir(module, cuda(_gpu_sm()), pipeline=pipeline)
    assert "mma.sync.aligned.m16n8k16" in exe.ptx
    rng = np.random.default_rng(3)
    m, n, k, nb = 300, 200, 136, 3   # partial tiles in every dimension
    lead = (nb,) if batch else ()
    a = _small_ints(lead + ((m, k) if a_layout == "row" else (k, m)), rng, dtype)
    b = _small_ints(lead + ((k, n) if b_layout == "row" else (n, k)), rng, dtype)
    c = rng.integers(-3, 4, lead + (m, n)).astype(np.float32)
    a64 = a.astype(np.float64) if a_layout == "row" else np.swapaxes(a, -1, -2).astype(np.float64)
    b64 = b.astype(np.float64) if b_layout == "row" else np.swapaxes(b, -1, -2).astype(np.float64)
    expected = c + a64 @ b64
    a_in = a.astype(np.float32) if dtype == "bf16" else a
    b_in = b.astype(np.float32) if dtype == "bf16" else b
    exe(c, a_in, b_in)
    np.testing.assert_array_equal(c, expected)  # small integers: exact in any order


@pytest.mark.gpu
def test_linear_epilogue_on_the_gpu() -> None:
    mapped_exe = compile_ir(parse(LINEAR_RELU_RESIDUAL), cuda(_gpu_sm()))
    rng = np.random.default_rng(4)
    arrays = [rng.integers(-3, 4, (20, 40)).astype(np.float16),
              rng.integers(-3, 4, (24, 40)).astype(np.float16),
              rng.integers(-3, 4, (24,)).astype(np.float16),
              np.zeros((20, 24), np.float16)]
    expected = [x.copy() for x in arrays]
    interpret(parse(LINEAR_RELU_RESIDUAL), *expected)
    mapped_exe(*arrays)
    np.testing.assert_array_equal(arrays[3], expected[3])


@pytest.mark.gpu
def test_f32_register_tiles_on_the_gpu() -> None:
    exe = compile_ir(parse(_f32_matmul_ir("row", "col")), cuda(_gpu_sm()))
    rng = np.random.default_rng(6)
    m, n, k = 300, 200, 136
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((n, k)).astype(np.float32)
    c = rng.standard_normal((m, n)).astype(np.float32)
    expected = c + a.astype(np.float64) @ b.T.astype(np.float64)
    exe(c, a, b)
    np.testing.assert_allclose(c, expected, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("m,n,k", [(0, 5, 7), (5, 6, 0), (1, 1, 1)])
def test_zero_and_tiny_sizes(m, n, k) -> None:
    module = transform(parse(_matmul_ir("f16")), "mark-parallel")
    mapped = transform(module, f"{TILE},gpu-map", target="cuda:sm_80")
    rng = np.random.default_rng(8)
    arrays = [rng.integers(-3, 4, (m, n)).astype(np.float32),
              _small_ints((m, k), rng, "f16"), _small_ints((k, n), rng, "f16")]
    _check_equivalent(module, mapped, arrays, ("shuffle",))


@pytest.mark.parametrize("stages", [2, 3, 4])
def test_pipeline_stages_wait_for_each_copy_at_the_barrier_before_its_read(stages) -> None:
    """An ``S``-stage pipeline: every loop barrier commits one group and keeps
    ``S - 2`` in flight (each stage is read ``S - 1`` barriers after its copy
    is issued); the prologue's last barrier waits for all."""
    from polyir.ir.nodes import Barrier
    from polyir.ptx.cpasync import async_plan

    tile = f"gpu-tensorcore{{tile=64,64,32 warps=2,2 stages={stages}}}"
    mapped = transform(parse(_matmul_ir("f16")), f"mark-parallel,{tile},gpu-map",
                       target="cuda:sm_90")
    kernel = next(f for f in mapped.functions if f.kind == "kernel")
    plan = async_plan(kernel)
    barriers = [n for n in walk_nodes(kernel.body) if isinstance(n, Barrier)]
    assert len(barriers) == (stages - 1) + stages + 1   # prologue, K loop, before the epilogue
    waits = [plan.pending.get(id(b)) for b in barriers]
    assert waits[stages - 2] == 0                         # the pipeline is full
    assert waits[stages - 1: 2 * stages - 1] == [stages - 2] * stages
    # A and B, each an unchecked copy (whole tiles) and a checked one: all asynchronous
    assert len(plan.loops) == 2 * 2 * (2 * stages - 1)
    ptx = compile_ir(mapped, cuda(90), pipeline="").ptx
    assert ptx.count("cp.async.commit_group") == len(barriers)
    if stages > 2:
        assert f"cp.async.wait_group \t{stages - 2}" in ptx
    assemble(ptx, ("sm_90",))


@pytest.mark.gpu
@pytest.mark.parametrize("k", [100, 37])
def test_rows_not_16_byte_aligned_take_the_plain_copy_on_the_gpu(k) -> None:
    """K = 100 or 37 halves: rows of A start at 8-byte or 2-byte offsets, so
    those chunks cannot be one ``cp.async`` of 16 bytes and take the plain
    copy (the run-time alignment check); the result must not change."""
    exe = compile_ir(parse(_matmul_ir("f16")), cuda(_gpu_sm()))
    rng = np.random.default_rng(k)
    a = _small_ints((130, k), rng, "f16")
    b = _small_ints((k, 70), rng, "f16")
    c = rng.integers(-3, 4, (130, 70)).astype(np.float32)
    expected = c + a.astype(np.float64) @ b.astype(np.float64)
    exe(c, a, b)
    np.testing.assert_array_equal(c, expected)
