"""Torch "CUDA" tensors without a GPU, for :mod:`polyir.frontends.fxdevice`.

:class:`FakeCudaTensors` stands in for ``CudaTensors``: its device tensors are
CPU tensors whose storage it made (``to_device``, ``upload`` or ``empty``),
said to be on ``cuda:0``; a CUDA executable gets them as zero-copy
``fakecupy.ndarray`` views, so kernels (run by tests/gpu/fakecupy.py) write
them in place. ``uploads`` records every host tensor uploaded.
"""
from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import torch

from polyir.frontends.fxdevice import CudaTensors
from tests.gpu import fakecupy

DEVICE = torch.device("cuda", 0)


class FakeCudaTensors(CudaTensors):
    """CPU tensors that count as CUDA tensors on :data:`DEVICE`."""

    def __init__(self) -> None:
        super().__init__()
        self._storages: dict[int, Any] = {}   # data pointer -> storage (kept alive)
        self.uploads: list[torch.Tensor] = []
        self.streams = 0

    def to_device(self, tensor: torch.Tensor) -> torch.Tensor:
        """A "device" copy of ``tensor``, made by the test (not counted)."""
        copy = tensor.detach().clone().contiguous()
        self._storages[copy.untyped_storage().data_ptr()] = copy.untyped_storage()
        return copy

    def on_device(self, tensor: torch.Tensor) -> bool:
        return tensor.untyped_storage().data_ptr() in self._storages

    def device(self, tensor: torch.Tensor) -> torch.device:
        return DEVICE if self.on_device(tensor) else tensor.device

    def upload(self, tensor: torch.Tensor, device: torch.device) -> torch.Tensor:
        assert device == DEVICE
        self.uploads.append(tensor)
        return self.to_device(tensor)

    def empty(self, shape: Sequence[int], dtype: torch.dtype, device: torch.device) -> torch.Tensor:
        assert device == DEVICE
        return self.to_device(torch.empty(tuple(shape), dtype=dtype))

    def argument(self, tensor: torch.Tensor) -> Any:
        assert self.on_device(tensor), "a host tensor given to a device segment"
        if tensor.dtype == torch.bfloat16:   # CuPy has no bfloat16: its bits, as uint16
            return tensor.detach().view(torch.int16).numpy().view(np.uint16).view(fakecupy.ndarray)
        return tensor.detach().numpy().view(fakecupy.ndarray)

    @contextlib.contextmanager
    def stream(self, device: torch.device) -> Iterator[None]:
        self.streams += 1
        yield
