"""GPU mapping: kernel outlining, grid/block/thread mapping, shared memory, barriers.

``map_module(module, MapOptions(...))`` is the mechanism; the registered pass
``gpu-map`` (``polyir.gpu.passes``) exposes it to pipelines.
"""
from __future__ import annotations

from polyir.gpu.mapping import MapOptions, map_module

__all__ = ["MapOptions", "map_module"]
