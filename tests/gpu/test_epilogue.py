"""Tensor-core epilogues in registers (``polyir.gpu.tensorcore``, ``polyir.ptx.staging``).

Oracles: the lane layout the IR epilogue uses against the formula the
``mma.sync`` lowering emits (on ints, every lane and register); the mapped IR
against the unmapped IR in the interpreter (forward, reverse, shuffled, race
detection on) at odd sizes with partial tiles and several fragments per warp;
the PTX: assembled by ``ptxas`` for sm_80 and sm_90, its shared memory (from
``ptxas -v``) exactly the A and B stages, shared memory read only by
``ldmatrix``, no spills;
and a tile read by a lane that does not hold the element keeps shared memory.
"""
from __future__ import annotations

import re

import numpy as np
import pytest

from polyir.context import PassContext
from polyir.driver import build, compile_ir
from polyir.gpu.tensorcore import acc_position
from polyir.ir.affine import Aff
from polyir.ir.nodes import Launch
from polyir.ir.parser import parse
from polyir.ir.printer import print_module
from polyir.ir.walk import walk_nodes
from polyir.passes import transform
from polyir.ptx.mma_sync import acc_element
from polyir.ptx.staging import register_staged
from polyir.target import cuda
from polyir.tiling.gpu_tiles import TileConfig
from tests.gpu.ptxas import resource_usage
from tests.gpu.test_tensorcore import _check_equivalent, _matmul_ir


def _linear_ir(m: int, n: int, k: int, dtype: str = "f16") -> str:
    """``relu(x @ w.T + bias) + x[:, :n]`` as the ATen lowering writes it."""
    return f"""
func forward(arg0_1: {dtype}[{m}, {k}], arg1_1: {dtype}[{n}, {k}], arg2_1: {dtype}[{n}],
             out0: {dtype}[{m}, {n}]) {{
  local addmm: {dtype}[{m}, {n}]
  local addmm_acc: f32[{m}, {n}]
  local relu: {dtype}[{m}, {n}]
  for i = 0 to {m} {{
    for i_1 = 0 to {n} {{
      S0: addmm_acc[i, i_1] = cast<f32>(arg2_1[i_1])
      for r = 0 to {k} {{
        S1: addmm_acc[i, i_1] = addmm_acc[i, i_1] + cast<f32>(arg0_1[i, r]) * cast<f32>(arg1_1[i_1, r])
      }}
      S2: addmm[i, i_1] = cast<{dtype}>(addmm_acc[i, i_1])
    }}
  }}
  for i_2 = 0 to {m} {{
    for i_3 = 0 to {n} {{
      S3: relu[i_2, i_3] = cast<{dtype}>(select(cast<f32>(addmm[i_2, i_3]) < 0.0, 0.0, cast<f32>(addmm[i_2, i_3])))
    }}
  }}
  for i_4 = 0 to {m} {{
    for i_5 = 0 to {n} {{
      S4: out0[i_4, i_5] = cast<{dtype}>(cast<f32>(relu[i_4, i_5]) + cast<f32>(arg0_1[i_4, i_5]))
    }}
  }}
}}
"""


def _fused(text: str):
    return transform(parse(text), "fuse,shrink-buffers,mark-parallel", ctx=PassContext(cuda(90)))


def test_epilogue_lanes_are_the_mma_c_layout() -> None:
    lane = Aff.var("l")
    for value in range(32):
        for half in range(2):
            for q in range(4):
                row, col = acc_position(half, q, lane)
                got = (row.evaluate({"l": value}), col.evaluate({"l": value}))
                assert got == acc_element(half, q, value), (value, half, q)
    # every element of the 16x16 tile is held by exactly one (lane, register)
    held = {acc_element(h, q, v) for v in range(32) for h in range(2) for q in range(4)}
    assert held == {(r, c) for r in range(16) for c in range(16)}


@pytest.mark.parametrize("dtype,tile", [
    ("f16", "gpu-tensorcore{tile=32,32,16 warps=1,1}"),    # 2x2 fragments per warp
    ("bf16", "gpu-tensorcore{tile=64,32,32 warps=2,1}"),   # two warps along m
])
def test_register_epilogue_equals_unmapped_with_partial_tiles(dtype, tile) -> None:
    m, n, k = 37, 29, 40
    module = _fused(_linear_ir(m, n, k, dtype))
    mapped = transform(module, f"{tile},gpu-map", target="cuda:sm_80")
    kernels = [f for f in mapped.functions if f.kind == "kernel"]
    assert len(kernels) == 1 and set(register_staged(kernels[0], 80)) == {"tc_Cs"}
    rng = np.random.default_rng(3)
    cast = np.float16 if dtype == "f16" else np.float32   # small ints: exact in bf16 too
    arrays = [rng.integers(-3, 4, (m, k)).astype(cast), rng.integers(-3, 4, (n, k)).astype(cast),
              rng.integers(-3, 4, (n,)).astype(cast), np.zeros((m, n), cast)]
    if dtype == "bf16":
        from polyir.ir.types import round_to_bf16
        arrays = [round_to_bf16(a.astype(np.float32)) for a in arrays]
    _check_equivalent(module, mapped, arrays)


@pytest.mark.parametrize("sm", [80, 90])
@pytest.mark.parametrize("case", ["matmul", "linear"])
def test_epilogue_reads_the_accumulator_registers(case, sm) -> None:
    if case == "matmul":
        module, config = transform(parse(_matmul_ir("f16", "row", "col")), "mark-parallel"), \
            TileConfig(128, 128, 32, 2, 4)
    else:
        module, config = _fused(_linear_ir(200, 136, 72)), TileConfig(64, 64, 32, 2, 2)
    tile = f"gpu-tensorcore{{tile={config.bm},{config.bn},{config.bk} " \
           f"warps={config.warps_m},{config.warps_n}}}"
    exe = compile_ir(module, cuda(sm), pipeline=f"{tile},gpu-map")
    (kernel,) = [f for f in exe.ir.functions if f.kind == "kernel"]
    assert set(register_staged(kernel, sm)) == {"tc_Cs"}
    assert ".extern .func llvm." not in exe.ptx
    # shared memory is read only by ldmatrix (A and B), never by the epilogue
    # (LLVM 22's PTX types registers b32, so an f32 load shows as ld.shared.b32)
    assert "ldmatrix" in exe.ptx and not re.search(r"\bld\.shared\.", exe.ptx)
    assert "mma.sync.aligned.m16n8k16" in exe.ptx
    (usage,) = resource_usage(exe.ptx, f"sm_{sm}").values()
    assert usage["spill_stores"] == 0 and usage["spill_loads"] == 0, usage
    assert usage["registers"] <= 255
    (launch,) = [n for n in walk_nodes(exe.ir.entry.body) if isinstance(n, Launch)]
    # exactly the two stages of A and B tiles, statically or dynamically
    assert max(usage["shared"], launch.shared_bytes) == config.shared_bytes()
    assert config.shared_bytes(staged=True) > config.shared_bytes()


def test_a_tile_read_by_other_lanes_stays_in_shared_memory() -> None:
    module = _fused(_linear_ir(20, 24, 40))
    mapped = transform(module, "gpu-tensorcore{tile=16,16,16 warps=1,1},gpu-map",
                       target="cuda:sm_80")
    text = print_module(mapped)
    mine = "tc_Cs[(tc_t % 32) // 4 + 16*(tc_t // 32), 2*((tc_t % 32) % 4)]"
    assert mine in text
    # the element two columns on belongs to the next lane: no register holds it here
    other = parse(text.replace(mine, "tc_Cs[(tc_t % 32) // 4 + 16*(tc_t // 32), "
                                     "2*((tc_t % 32) % 4) + 2]", 1))
    (kernel,) = [f for f in other.functions if f.kind == "kernel"]
    assert register_staged(kernel, 80) == {}
    exe = build(other, "cuda:sm_80")
    assert re.search(r"\bld\.shared\.", exe.ptx)   # the epilogue reads the staging tile
    (usage,) = resource_usage(exe.ptx, "sm_80").values()
    assert usage["shared"] >= 16 * 20 * 4
    # and on sm_75 (WMMA, opaque layout) nothing is staged either
    (same,) = [f for f in mapped.functions if f.kind == "kernel"]
    assert register_staged(same, 75) == {} and set(register_staged(same, 80)) == {"tc_Cs"}
