"""Where a compiled model's tensors live when it runs with ``target="cuda"``.

A call decides its placement from its tensor inputs:

* all on the CPU (or no tensor inputs): the *host* placement, as before:
  each segment's inputs go to the executable as numpy arrays, which the CUDA
  runtime copies to the GPU and its results back;
* all on one CUDA device: the *device* placement: inputs, intermediate values
  and results stay on that device as torch CUDA tensors, results are
  allocated there by torch and written in place by the kernels, and nothing
  is copied back or synchronised; the model's CPU parameters, buffers and
  graph constants are uploaded once and kept (:class:`DeviceCopies`), and a
  new copy is made only when the tensor changes (its version counter moves);
* anything else is a :class:`polyir.ArgumentError` naming the input.

All launches of a device call go to torch's current stream (CuPy's current
stream is made that stream for the call, see :meth:`CudaTensors.stream`), so
they are ordered with the eager steps and with what the caller runs next.
Handing a tensor to CuPy does not synchronise either: torch exports
``__cuda_array_interface__`` version 2, without the stream that would make
CuPy wait on it.

:class:`CudaTensors` is the one place that recognises, allocates and moves
CUDA tensors; tests without a GPU give a compiled model a stand-in
(``CompiledModel.device_tensors``).
"""
from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from polyir.errors import ArgumentError


class CudaTensors:
    """Recognises, allocates and uploads CUDA tensors (the seam tests replace)."""

    def __init__(self) -> None:
        self._streams: dict[int, Any] = {}

    def on_device(self, tensor: torch.Tensor) -> bool:
        """Whether ``tensor`` is on a CUDA device."""
        return tensor.device.type == "cuda"

    def device(self, tensor: torch.Tensor) -> torch.device:
        """The device ``tensor`` is on."""
        return tensor.device

    def upload(self, tensor: torch.Tensor, device: torch.device) -> torch.Tensor:
        """A contiguous copy of the CPU ``tensor`` on ``device``."""
        return tensor.detach().contiguous().to(device)

    def empty(self, shape: Sequence[int], dtype: torch.dtype, device: torch.device) -> torch.Tensor:
        """A new contiguous tensor on ``device``."""
        return torch.empty(tuple(shape), dtype=dtype, device=device)

    def argument(self, tensor: torch.Tensor) -> Any:
        """What a CUDA executable takes for the device ``tensor`` (the tensor
        itself: the runtime reads it through ``__cuda_array_interface__``)."""
        return tensor

    @contextlib.contextmanager
    def stream(self, device: torch.device) -> Iterator[None]:
        """Make CuPy launch on torch's current stream of ``device`` (and on
        that device) for the duration. Both default to the legacy default
        stream, which needs nothing; a stream the caller chose with
        ``torch.cuda.stream(...)`` is wrapped as a CuPy ``ExternalStream``."""
        import cupy
        handle = torch.cuda.current_stream(device).cuda_stream
        with cupy.cuda.Device(device.index if device.index is not None else 0):
            if handle == 0:
                yield
                return
            stream = self._streams.get(handle)
            if stream is None:
                stream = self._streams[handle] = cupy.cuda.ExternalStream(handle)
            with stream:
                yield


@dataclass
class _Copy:
    source: torch.Tensor   # the host tensor copied (compared by identity)
    version: int
    device: torch.device
    copy: torch.Tensor


class DeviceCopies:
    """Device copies of host tensors a model reads at every call (parameters,
    buffers, graph constants), made on first use and reused while the host
    tensor is unchanged. One copy per name: a tensor replaced under its name
    replaces its copy."""

    def __init__(self, tensors: CudaTensors) -> None:
        self.tensors = tensors
        self._copies: dict[str, _Copy] = {}

    def get(self, name: str, tensor: torch.Tensor, device: torch.device) -> torch.Tensor:
        """``tensor`` (the model's ``name``) on ``device``: itself when it is
        there, else its copy, uploaded now if the copy is missing or stale."""
        if self.tensors.on_device(tensor):
            return tensor
        known = self._copies.get(name)
        version = tensor._version
        if known is None or known.source is not tensor or known.version != version \
                or known.device != device:
            known = _Copy(tensor, version, device, self.tensors.upload(tensor, device))
            self._copies[name] = known
        return known.copy


def placement(tensors: CudaTensors, inputs: Sequence[torch.Tensor],
              state: Sequence[torch.Tensor], state_names: Sequence[str]) -> torch.device | None:
    """The device a CUDA plan's call runs on: ``None`` (host) when every tensor
    input is on the CPU, else the inputs' device. Raises ``ArgumentError``
    naming the first input on another device than input 0, or, for a host
    call, the first state tensor on a device (CPU state is uploaded for a
    device call, device state is not brought back for a host call)."""
    if inputs:
        first = inputs[0]
        where = tensors.device(first) if tensors.on_device(first) else None
        for index, tensor in enumerate(inputs[1:], start=1):
            there = tensors.device(tensor) if tensors.on_device(tensor) else None
            if there != where:
                raise ArgumentError(f"tensor input {index} is on {there or 'cpu'} but tensor input 0 "
                                    f"is on {where or 'cpu'}: a model compiled with target='cuda' "
                                    f"takes all its tensor inputs on one device")
        if where is not None:
            return where
    for name, tensor in zip(state_names, state, strict=True):
        if tensors.on_device(tensor):
            if inputs:
                raise ArgumentError(f"the model's '{name}' is on {tensors.device(tensor)} but the "
                                    f"tensor inputs are on the CPU: pass the inputs on that device")
            return tensors.device(tensor)
    return None


__all__ = ["CudaTensors", "DeviceCopies", "placement"]
