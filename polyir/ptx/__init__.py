"""The CUDA backend: NVPTX lowering hooks, tensor-core intrinsics, device math,
PTX emission (``build_cuda``) and the CuPy runtime.

``polyir.ptx.build.build_cuda(module, target)`` is what ``polyir.driver.build``
calls for CUDA targets; see docs/gpu.md.
"""
from __future__ import annotations
