"""The registered ``gpu-map`` pass (see ``polyir.gpu.mapping``).

Pipeline form: ``gpu-map{block_sizes=32,8 shared=At,Bt max_grid_dims=2}``.
"""
from __future__ import annotations

from dataclasses import dataclass

from polyir.context import PassContext
from polyir.gpu.mapping import MapOptions, map_module
from polyir.ir.nodes import Module
from polyir.passes import register_pass
from polyir.target import cuda


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
