"""Run compiled PTX through CuPy: load the module, bind arguments, launch.

``CudaProgram(ir, ptx, kernels)(*args)`` follows the entry function's calling
convention (``polyir.ir.nodes.Function``) and runs its body, which is a
sequence of ``Launch`` nodes, on the current CUDA device:

* CuPy arrays are used in place; torch CUDA tensors too (through
  ``__cuda_array_interface__``, no copy); numpy arrays (and torch CPU tensors)
  are copied to the device and back after the launches.
* Launches go to CuPy's current stream. Only a call with such host copies
  (or device-resident gather ids, below) synchronises; one on device arrays
  alone returns while its kernels run.
* bf16 buffers are 16-bit on the device; float32 host/CuPy arrays given for
  them are converted (rounded to bfloat16) on the way in and widened on the way
  out; torch ``bfloat16`` CUDA tensors, and uint16 CuPy arrays (bf16 bits),
  are used in place.
* Host-function locals become zero-filled device arrays.
* Before any launch, the bounds check (``polyir.cpu.bounds``, off with
  ``check_bounds=False``): affine accesses against the sizes, and each
  hoisted data-dependent subscript (gathers, embedding ids) evaluated on its
  index array, on the host copy where there is one, else on the device
  (CuPy reduces it to its minimum and maximum and only those two values come
  back: a call with device-resident ids then synchronises once). A violation
  raises :class:`polyir.BoundsError` and nothing runs.
* Data-dependent subscripts the host cannot hoist are checked in the kernels
  (``polyir.ptx.subscripts``): such kernels get a status buffer, allocated and
  zeroed once per program. After the launches of a call its status word is
  read back (one 4-byte device-to-host copy, which synchronises with the
  stream; only programs with such kernels pay it) and a nonzero word raises
  :class:`polyir.BoundsError` naming the function's data-dependent subscripts
  (outputs may be partly written, as on the CPU); the word is zeroed again.
* A launch whose grid has a dimension <= 0 runs nothing.
* The PTX is loaded with ``cupy.RawModule(path=...)`` (``code=`` would be CUDA
  C++ for NVRTC) from a temporary file, the driver JIT-compiling it.

Without CuPy or without a GPU, calling raises :class:`polyir.DeviceError`
saying which; importing this module never needs either.
"""
from __future__ import annotations

import numbers
import os
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from polyir.errors import ArgumentError, BoundsError, DeviceError
from polyir.ir.nodes import Buffer, Launch, Module, Symbol
from polyir.ir.types import DType, round_to_bf16
from polyir.llvm.lower import LoweredFunction
from polyir.polyhedral.assumptions import check_symbol
from polyir.ptx.subscripts import STATUS_BYTES, STATUS_PARAM

MAX_STATIC_SHARED = 48 * 1024


def require_cupy() -> Any:
    """The ``cupy`` module, once a usable GPU is known to exist."""
    try:
        import cupy
    except ImportError as error:
        raise DeviceError(f"running CUDA code needs CuPy, which is not installed ({error}); "
                          f"pip install 'polyir[gpu]' (cupy-cuda13x), or compile only (compile_for / .ptx)") from None
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as error:  # CUDARuntimeError without a driver
        raise DeviceError(f"CuPy is installed but no CUDA GPU is usable: {error}") from None
    if count < 1:
        raise DeviceError("CuPy is installed but there is no CUDA GPU")
    return cupy


@dataclass
class _Argument:
    """One entry-function buffer on the device, and how to give it back."""

    device: Any
    host: Any = None          # numpy array to copy results into, if any
    bf16_source: Any = None   # CuPy float32 array that a bf16 device copy stands for


@dataclass(frozen=True)
class _LaunchPlan:
    """The call-independent part of one launch: the loaded kernel, its block,
    where its symbols come from, and its parameter slots in order."""

    launch: Launch
    function: Any
    block: tuple[int, ...]
    symbols: list[tuple[str, str]]              # kernel symbol <- entry symbol
    shape_symbols: list[tuple[str, str, int]]   # kernel symbol <- dimension k of an entry buffer
    slots: list[tuple[bool, str]]   # (buffer?, entry buffer, kernel symbol or status parameter)


class CudaProgram:
    """A loaded PTX module plus the host function that launches its kernels."""

    def __init__(self, module: Module, ptx: str, kernels: dict[str, LoweredFunction],
                 bounds: Any = None):
        self.cupy = require_cupy()
        self.bounds = bounds
        self.module = module
        self.entry = module.entry
        self.kernels = kernels
        from polyir.gpu.mapping import is_launch_code
        for node in self.entry.body:
            if not is_launch_code(node):
                raise DeviceError(f"function '{self.entry.name}': host code other than "
                                  f"launches cannot run on the CUDA runtime ({type(node).__name__})")
        self._functions: dict[str, Any] = {}
        self._launch_plans: dict[int, _LaunchPlan] = {}
        # the status buffer of kernels that check data-dependent subscripts
        self._status = None
        if any(slot.kind == "extra" and slot.name == STATUS_PARAM
               for lowered in kernels.values() for slot in lowered.params):
            self._status = self.cupy.zeros(STATUS_BYTES // 4, dtype=np.int32)
        # each buffer parameter: (name, rank, its dimensions (k, size expression))
        self._shapes = [(p.name, p.rank, list(enumerate(p.shape)))
                        for p in self.entry.params if isinstance(p, Buffer)]
        # the dimensions that define a size symbol by themselves: (k, symbol)
        self._shapes_define = {p.name: _defining_dimensions(p)
                               for p in self.entry.params if isinstance(p, Buffer)}
        # RawModule(code=...) means CUDA C++ for NVRTC; PTX is loaded from a file.
        # Loading is lazy in CuPy, so every kernel is fetched before the file goes.
        with tempfile.TemporaryDirectory(prefix="polyir-ptx-") as folder:
            path = os.path.join(folder, "module.ptx")
            with open(path, "w") as handle:
                handle.write(ptx)
            try:
                self.raw = self.cupy.RawModule(path=path)
                for name in kernels:
                    self._functions[name] = self.raw.get_function(name)
            except Exception as error:
                raise DeviceError(f"the CUDA driver could not load the PTX: {error}") from None

    def function(self, name: str, shared_bytes: int) -> Any:
        fn = self._functions.get(name)
        if fn is None:
            try:
                fn = self.raw.get_function(name)
            except Exception as error:
                raise DeviceError(f"kernel '{name}' not found in the PTX module: {error}") from None
            self._functions[name] = fn
        if shared_bytes > MAX_STATIC_SHARED:
            fn.max_dynamic_shared_size_bytes = shared_bytes
        return fn

    # ------------------------------------------------------------ calling
    def __call__(self, *args: Any) -> None:
        """Run the entry function on ``args`` (see the module docstring).

        Launches go to CuPy's current stream and the call returns without
        waiting for them, unless some argument has a host copy to update
        (numpy arrays, torch CPU tensors): then it synchronises and copies back."""
        cp = self.cupy
        buffers, symbols = self._bind(args)
        if self.bounds is not None and self.bounds.needed:   # before any launch
            self.bounds.check_arrays(symbols, self._gather_sources(buffers), cp)
        for local in self.entry.locals:
            shape = tuple(d.evaluate(symbols) for d in local.shape)
            buffers[local.name] = _Argument(cp.zeros(shape, dtype=_device_dtype(local.dtype)))
        self._run_host(self.entry.body, buffers, symbols)
        if any(arg.host is not None for arg in buffers.values()):
            cp.cuda.get_current_stream().synchronize()
        for arg in buffers.values():
            if arg.bf16_source is not None:   # device to device: stays in stream order
                widened = (arg.device.astype(cp.uint32) << 16).view(cp.float32)
                arg.bf16_source[...] = widened
                if arg.host is not None:
                    np.copyto(arg.host, cp.asnumpy(widened).reshape(arg.host.shape))
            elif arg.host is not None:
                np.copyto(arg.host, cp.asnumpy(arg.device).reshape(arg.host.shape))
        if self._status is not None:
            self._check_status()

    def _check_status(self) -> None:
        """Raise :class:`polyir.BoundsError` when a kernel found a data-dependent
        subscript outside its buffer (the status word is nonzero); zero it again."""
        assert self._status is not None
        word = int(self.cupy.asnumpy(self._status[:1])[0])   # synchronises with the stream
        if word == 0:
            return
        self._status.fill(0)
        from polyir.cpu.bounds import data_dependent_subscripts
        function = self.bounds.function if self.bounds is not None else self.entry
        raise BoundsError(f"{self.entry.name}(): a data-dependent subscript took a value outside "
                          f"its buffer (checked in the kernel: outputs may be partly written); "
                          f"the function's data-dependent subscripts: "
                          + "; ".join(data_dependent_subscripts(function)))

    def _gather_sources(self, buffers: dict[str, _Argument]) -> dict[str, Any]:
        """The arrays the bounds check reads data-dependent subscripts from: the
        host copy where there is one (no device round trip), else the device
        array (CuPy reduces it; a bf16 torch tensor, never an index, is left out)."""
        names = {gather.source.name for gather in self.bounds.gathers} if self.bounds else set()
        found: dict[str, Any] = {}
        for name in names:
            arg = buffers.get(name)
            if arg is None:
                continue
            if arg.host is not None:
                found[name] = arg.host
            elif not isinstance(arg.device, _TorchBF16):
                found[name] = arg.device
        return found

    def _run_host(self, nodes: Sequence[Any], buffers: dict[str, _Argument],
                  symbols: dict[str, int]) -> None:
        for node in nodes:
            if isinstance(node, Launch):
                self._launch(node, buffers, symbols)
            elif all(c.holds(symbols) for c in node.conditions):
                self._run_host(node.then_body, buffers, symbols)
            else:
                self._run_host(node.else_body, buffers, symbols)

    def _launch_plan(self, launch: Launch) -> _LaunchPlan:
        """What a launch needs that does not change between calls (cached per launch)."""
        plan = self._launch_plans.get(id(launch))
        if plan is not None and plan.launch is launch:
            return plan
        kernel = self.module.function(launch.kernel)
        by_param = dict(zip((p.name for p in kernel.params), launch.args, strict=False))
        symbols = [(p.name, by_param[p.name]) for p in kernel.params if isinstance(p, Symbol)]
        shape_symbols = []   # symbols that only appear in kernel parameter shapes
        for param in kernel.params:
            if isinstance(param, Buffer):
                for k, name in _defining_dimensions(param):
                    shape_symbols.append((name, by_param[param.name], k))
        slots = []
        for slot in self.kernels[launch.kernel].params:
            if slot.kind == "extra" and slot.name == STATUS_PARAM:
                slots.append((True, STATUS_PARAM))
                continue
            if slot.kind not in ("buffer", "symbol"):
                raise DeviceError(f"kernel '{launch.kernel}': unexpected extra parameter {slot.name}")
            slots.append((slot.kind == "buffer", by_param[slot.name] if slot.kind == "buffer"
                          else slot.name))
        plan = _LaunchPlan(launch, self.function(launch.kernel, launch.shared_bytes),
                           tuple(launch.block), symbols, shape_symbols, slots)
        self._launch_plans[id(launch)] = plan
        return plan

    def _launch(self, launch: Launch, buffers: dict[str, _Argument], symbols: dict[str, int]) -> None:
        grid = tuple(int(g.evaluate(symbols)) for g in launch.grid)
        if min(grid) <= 0:
            return
        plan = self._launch_plan(launch)
        env = {name: symbols[value] for name, value in plan.symbols}
        for name, buffer, k in plan.shape_symbols:
            if name not in env:
                shape = buffers[buffer].device.shape
                if k < len(shape):
                    env[name] = int(shape[k])
        values: list[Any] = []
        for is_buffer, name in plan.slots:
            if name == STATUS_PARAM:
                values.append(self._status)
            elif is_buffer:
                device = buffers[name].device
                values.append(device.pointer if isinstance(device, _TorchBF16) else device)
            else:
                values.append(np.int64(env[name]))
        try:
            plan.function(grid, plan.block, tuple(values), shared_mem=launch.shared_bytes)
        except Exception as error:
            raise DeviceError(f"launch of kernel '{launch.kernel}' grid {grid} block "
                              f"{launch.block} failed: {error}") from None

    def _bind(self, args: Sequence[Any]) -> tuple[dict[str, _Argument], dict[str, int]]:
        entry = self.entry
        if len(args) != len(entry.params):
            raise ArgumentError(f"{entry.name}: expected {len(entry.params)} arguments "
                                f"({', '.join(p.name for p in entry.params)}), got {len(args)}")
        buffers: dict[str, _Argument] = {}
        symbols: dict[str, int] = {}
        for position, (param, value) in enumerate(zip(entry.params, args, strict=False)):
            if isinstance(param, Symbol):
                if isinstance(value, bool) or not isinstance(value, (numbers.Integral, np.integer)):
                    raise ArgumentError(f"{entry.name}: argument {position} ('{param.name}') must "
                                        f"be an int, got {type(value).__name__}")
                symbols[param.name] = check_symbol(int(value), param.name,
                                                   f"{entry.name}: argument {position}")
            else:
                buffers[param.name] = self._device_argument(param, value, position)
        for name, rank, _ in self._shapes:
            shape = buffers[name].device.shape
            if len(shape) != rank:
                raise ArgumentError(f"{entry.name}: '{name}' has rank {len(shape)}, expected {rank}")
            for k, symbol in self._shapes_define[name]:
                symbols.setdefault(symbol, int(shape[k]))
        for name, _, dims in self._shapes:
            shape = buffers[name].device.shape
            for k, dim in dims:
                try:
                    expected = dim.evaluate(symbols)
                except KeyError as missing:
                    raise ArgumentError(f"{entry.name}: size symbol {missing} of "
                                        f"'{name}' is not defined by any argument") from None
                if expected != shape[k]:
                    raise ArgumentError(f"{entry.name}: '{name}' dimension {k} is {shape[k]}, "
                                        f"expected {dim} = {expected}")
        return buffers, symbols

    def _device_argument(self, param: Buffer, value: Any, position: int) -> _Argument:
        cp = self.cupy
        name = f"{self.entry.name}: argument {position} ('{param.name}')"
        expected = _device_dtype(param.dtype)
        if type(value).__module__.startswith("torch"):
            value = value.detach()  # __cuda_array_interface__ refuses tensors that need grad
            if value.device.type == "cuda":
                if param.dtype is DType.BF16 and str(value.dtype) == "torch.bfloat16":
                    return _Argument(_TorchBF16(value))
                value = cp.asarray(value)  # __cuda_array_interface__: no copy
            else:
                value = value.numpy()
        if isinstance(value, (numbers.Number, np.generic)) and param.rank == 0:
            value = np.asarray(value, dtype=param.dtype.numpy)
        if isinstance(value, cp.ndarray):
            if param.dtype is DType.BF16 and np.dtype(value.dtype) != expected:
                _check_dtype(value.dtype, np.dtype(np.float32), name)
                return _Argument(_to_bf16_bits(cp, value), bf16_source=value)
            _check_dtype(value.dtype, expected, name)   # uint16 for bf16: its bits, in place
            if not value.flags.c_contiguous:
                raise ArgumentError(f"{name}: device arrays must be C-contiguous")
            return _Argument(value)
        if isinstance(value, np.ndarray):
            if param.dtype is DType.BF16:
                _check_dtype(value.dtype, np.dtype(np.float32), name)
                device = cp.asarray(np.ascontiguousarray(value).reshape(value.shape))  # keep rank 0
                return _Argument(_to_bf16_bits(cp, device), host=value, bf16_source=device)
            _check_dtype(value.dtype, expected, name)
            # ascontiguousarray makes a 0-d array 1-d: keep the rank
            return _Argument(cp.asarray(np.ascontiguousarray(value).reshape(value.shape)), host=value)
        raise ArgumentError(f"{name} must be a CuPy array, torch tensor or numpy array of "
                            f"{param.dtype}, got {type(value).__name__}")


class _TorchBF16:
    """A torch bfloat16 CUDA tensor passed by pointer (CuPy has no bfloat16)."""

    def __init__(self, tensor: Any):
        if not tensor.is_contiguous():
            raise ArgumentError("bfloat16 torch tensors must be contiguous")
        self.tensor = tensor
        self.shape = tuple(tensor.shape)

    @property
    def pointer(self) -> np.uint64:
        """The device address, as the 64-bit kernel parameter CuPy passes by value."""
        return np.uint64(self.tensor.data_ptr())


def _defining_dimensions(param: Buffer) -> list[tuple[int, str]]:
    """``(k, symbol)`` for each dimension of ``param`` that is a size symbol alone
    (so an array's shape defines the symbol)."""
    found = []
    for k, dim in enumerate(param.shape):
        if len(dim.terms) != 1 or dim.constant != 0:
            continue
        atom, coefficient = dim.terms[0]
        if coefficient == 1 and isinstance(atom, str):
            found.append((k, atom))
    return found


def _device_dtype(dtype: DType) -> np.dtype:
    return np.dtype(np.uint16) if dtype is DType.BF16 else dtype.numpy


def _check_dtype(actual: np.dtype, expected: np.dtype, name: str) -> None:
    if np.dtype(actual) != expected:
        raise ArgumentError(f"{name} has dtype {actual}, expected {expected}")


def _to_bf16_bits(cp: Any, array: Any) -> Any:
    """bfloat16 bits (uint16) of a float32 CuPy array, rounded to nearest even."""
    host = cp.asnumpy(array)
    bits = (round_to_bf16(host).view(np.uint32) >> 16).astype(np.uint16)
    return cp.asarray(bits)


__all__ = ["CudaProgram", "require_cupy"]
