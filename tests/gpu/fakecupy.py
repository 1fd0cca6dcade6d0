"""A stand-in for CuPy that runs kernels in the reference interpreter.

It checks ``polyir.ptx.runtime`` without a GPU: argument binding, the order
of kernel parameters, launch guards, host locals, bf16 device storage,
copies back to numpy, and the status buffer of subscripts checked in the
kernel (an out-of-bounds access in the interpreter sets its status word, as
the PTX's own check would). "Device" arrays are numpy arrays of a subclass; a
"launch" runs the kernel's IR with the grid and block it was given, taking
arguments exactly as the PTX kernel would (bf16 as 16-bit patterns).

``counts`` tallies host->device copies (``asarray`` of a host value),
device->host copies (``asnumpy``) and stream synchronisations, so tests can
check that a call makes none.
"""
from __future__ import annotations

import collections
import types
from typing import Any

import numpy as np

from polyir.ir.interpreter import InterpretError, interpret
from polyir.ir.nodes import Buffer, Function, Launch, Module, Symbol
from polyir.ir.types import DType
from polyir.llvm.hooks import STATUS_SUBSCRIPT
from polyir.ptx.subscripts import STATUS_BYTES, STATUS_PARAM

counts: collections.Counter[str] = collections.Counter()
"""``to_device``, ``to_host`` and ``synchronize`` events since the last reset."""


class ndarray(np.ndarray):  # noqa: N801 (mirrors cupy.ndarray)
    """A "device" array."""

    def tolist(self) -> Any:
        counts["to_host"] += 1
        return np.asarray(self).tolist()


def asarray(value: Any, dtype: Any = None) -> ndarray:
    if isinstance(value, ndarray) and dtype is None:
        return value
    if not isinstance(value, ndarray):
        counts["to_device"] += 1
    return np.array(value, dtype=dtype, copy=True).view(ndarray)


def asnumpy(value: Any) -> np.ndarray:
    counts["to_host"] += 1
    return np.array(value, copy=True).view(np.ndarray)


def zeros(shape: Any, dtype: Any = np.float32) -> ndarray:
    return np.zeros(shape, dtype=dtype).view(ndarray)


class _Function:
    def __init__(self, module: Module, name: str, log: list[dict[str, Any]]):
        self.kernel = module.function(name)
        self.log = log
        self.max_dynamic_shared_size_bytes = 0

    def __call__(self, grid: tuple[int, ...], block: tuple[int, ...], args: tuple[Any, ...],
                 shared_mem: int = 0) -> None:
        kernel = self.kernel
        from polyir.llvm.lower import signature
        from polyir.ptx.nvptx import NvptxHooks
        slots = signature(kernel, NvptxHooks())
        status = None
        if len(args) == len(slots) + 1:   # the status buffer of checked subscripts
            slots = signature(kernel, NvptxHooks(check_subscripts=True))
            assert slots[-1].kind == "extra" and slots[-1].name == STATUS_PARAM, slots
            status = args[-1]
            assert isinstance(status, ndarray) and status.dtype == np.int32 and status.nbytes == STATUS_BYTES
        assert len(slots) == len(args), (slots, args)
        values: dict[str, Any] = {}
        for slot, value in zip(slots, args, strict=False):
            values[slot.name] = value
        call_args = []
        widened: list[tuple[np.ndarray, np.ndarray]] = []
        for param in kernel.params:
            value = values[param.name]
            if isinstance(param, Symbol):
                assert isinstance(value, np.int64), f"symbol {param.name} passed as {type(value)}"
                call_args.append(int(value))
            elif param.dtype is DType.BF16:
                assert value.dtype == np.uint16, f"bf16 buffer {param.name} must be 16-bit on the device"
                as_float = (value.astype(np.uint32) << 16).view(np.float32)
                widened.append((value, as_float))
                call_args.append(as_float)
            else:
                assert value.dtype == param.dtype.numpy, (param, value.dtype)
                call_args.append(value)
        host = Function("fake_host", kernel.params,
                        (Launch(kernel.name, tuple(_aff(g) for g in grid), tuple(block),  # type: ignore[arg-type]
                                tuple(p.name for p in kernel.params), shared_mem),))
        self.log.append({"kernel": kernel.name, "grid": tuple(grid), "block": tuple(block),
                         "shared_mem": shared_mem})
        try:
            interpret(Module((host, kernel)), *call_args, parallel_order="reverse")
        except InterpretError as error:   # the kernel's own check: record it as the PTX would
            if status is None or "out of bounds" not in str(error):
                raise
            status[0] = STATUS_SUBSCRIPT
        for device, as_float in widened:
            device[...] = (as_float.view(np.uint32) >> 16).astype(np.uint16)


def _aff(value: int) -> Any:
    from polyir.ir.affine import Aff
    return Aff.const(int(value))


class RawModule:
    """Holds the module's IR (set by the test) instead of loading PTX:
    ``by_ptx[ptx]`` when the test registered the PTX text, else ``current_ir``."""

    current_ir: Module | None = None
    by_ptx: dict[str, Module] = {}
    launches: list[dict[str, Any]] = []

    def __init__(self, code: str | None = None, *, path: str | None = None):
        assert code is None and path is not None, "PTX must be loaded from a file (code= is C++)"
        with open(path) as handle:
            ptx = handle.read()
        assert ptx.lstrip().startswith("//") and ".entry" in ptx
        module = RawModule.by_ptx.get(ptx, RawModule.current_ir)
        assert module is not None
        self.module = module

    def get_function(self, name: str) -> _Function:
        return _Function(self.module, name, RawModule.launches)


class _Stream:
    def synchronize(self) -> None:
        counts["synchronize"] += 1


class _Context:
    """``cupy.cuda.Device(i)`` / ``ExternalStream(ptr)``: records being entered."""

    entered: list[tuple[str, int]] = []

    def __init__(self, value: int):
        self.value = value

    def __enter__(self) -> _Context:
        _Context.entered.append((type(self).__name__, self.value))
        return self

    def __exit__(self, *exc: object) -> None:
        pass


class Device(_Context):
    pass


class ExternalStream(_Context, _Stream):
    pass


cuda = types.SimpleNamespace(
    runtime=types.SimpleNamespace(getDeviceCount=lambda: 1),
    get_current_stream=lambda: _Stream(),
    Device=Device,
    ExternalStream=ExternalStream,
)
uint32 = np.uint32
uint16 = np.uint16
float32 = np.float32
# the elementwise functions and reductions polyir.cpu.bounds evaluates gather ids with
add, subtract, multiply, where, trunc = np.add, np.subtract, np.multiply, np.where, np.trunc
less, less_equal, greater, greater_equal = np.less, np.less_equal, np.greater, np.greater_equal
equal, not_equal = np.equal, np.not_equal


def stack(values: Any) -> ndarray:
    return np.stack(values).view(ndarray)

__all__ = ["ndarray", "asarray", "asnumpy", "zeros", "RawModule", "cuda", "Buffer"]
