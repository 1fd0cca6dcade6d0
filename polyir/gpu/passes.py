"""The registered ``gpu-map`` pass (see ``polyir.gpu.mapping``).

Pipeline form: ``gpu-map{block_sizes=32,8 shared=At,Bt max_grid_dims=2}``.
"""
from __future__ import annotations

from dataclasses import dataclass

from polyir.context import PassContext
from polyir.errors import CompileError
from polyir.gpu.mapping import MapOptions, map_module
from polyir.gpu.tensorcore import map_tensor_cores
from polyir.ir.nodes import Module
from polyir.passes import register_pass
from polyir.target import cuda
from polyir.tiling.gpu_tiles import TileConfig


def _remark(ctx: PassContext, where: str, why: str) -> None:
    ctx.remark("gpu-map", where, why)


@register_pass("gpu-map")
@dataclass(frozen=True)
class GpuMap:
    """Outline every top-level nest of the host functions into a GPU kernel and a
    launch; map parallel loops to blocks and threads (a loop reducing into
    elements its iterations share stays serial, with a remark:
    ``polyir.gpu.reductions``), place ``shared`` buffers
    in shared memory, insert the barriers dependences need.

    ``block_sizes``: threads per block (x, y, z), empty = automatic.
    ``shared``: local buffers to place in shared memory.
    ``max_grid_dims``: how many outer parallel loops may become grid dimensions.
    """

    block_sizes: tuple[int, ...] = ()
    shared: tuple[str, ...] = ()
    max_grid_dims: int = 3

    def __post_init__(self) -> None:
        MapOptions(self.block_sizes, self.shared, self.max_grid_dims)  # validates the options

    def run(self, module: Module, ctx: PassContext) -> Module:
        """Map for ``ctx.target`` (sm_90 when the pipeline does not compile for a GPU)."""
        target = ctx.target if ctx.target.kind == "cuda" else cuda(90)
        return map_module(module, MapOptions(self.block_sizes, self.shared, self.max_grid_dims, target),
                          report=lambda where, why: _remark(ctx, where, why))


@register_pass("gpu-tensorcore")
@dataclass(frozen=True)
class GpuTensorCore:
    """Map contractions (matmul, batched matmul, linear layers, after fusion)
    with f16/bf16 inputs and f32 accumulation onto tensor cores: block tile
    staged in shared memory, warp tiles of 16x16 fragments (``ldmatrix`` +
    ``mma.sync`` on sm_80+), the fused epilogue once per output element
    (``polyir.gpu.tensorcore``). Nests that are no such contraction are left
    for ``gpu-map``, with a remark saying why when they hold a reduction.

    f32 contractions go to CUDA-core register tiles staged in shared memory
    (``polyir.gpu.simt``; tensor cores would round them to tf32) unless
    ``f32=false``. Convolutions run as implicit GEMM
    (``polyir.gpu.implicit_gemm``); row reductions such as softmax run one
    block per row (``polyir.gpu.rows``).

    ``tile``: ``BM,BN,BK`` (empty: chosen by ``polyir.tiling.gpu_tiles.choose_tiles``
    from the target); ``warps``: ``WM,WN`` warps per block (with ``tile``);
    ``stages``: shared-memory pipeline stages of the A and B tiles (with
    ``tile``; 2 = double buffering).
    """

    tile: tuple[int, ...] = ()
    warps: tuple[int, ...] = ()
    stages: int = 2
    f32: bool = True

    def __post_init__(self) -> None:
        if self.tile or self.warps:
            try:
                self.config()
            except CompileError as error:
                raise ValueError(str(error)) from None

    def config(self) -> TileConfig | None:
        """The fixed tile configuration, or None to choose per nest."""
        if not self.tile and not self.warps:
            return None
        if len(self.tile) != 3 or len(self.warps) != 2:
            raise ValueError("gpu-tensorcore: tile needs BM,BN,BK and warps WM,WN (both or neither)")
        return TileConfig(*self.tile, *self.warps, self.stages)

    def run(self, module: Module, ctx: PassContext) -> Module:
        """Rewrite the contraction nests of every host function (sm_90 facts when
        the pipeline does not compile for a GPU); the same module when none."""
        target = ctx.target if ctx.target.kind == "cuda" else cuda(90)
        changed = False
        functions = []
        for function in module.functions:
            new = map_tensor_cores(function, target, self.config(), ctx, self.f32) \
                if function.kind == "host" else function
            changed |= new is not function
            functions.append(new)
        return Module(tuple(functions)) if changed else module
