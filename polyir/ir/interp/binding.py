"""Argument binding: the calling convention of ``Function`` applied to Python values.

Every check happens before anything is written. Arrays that cannot be used
in place (f16, which the interpreter holds in float32; non-contiguous arrays;
torch bf16 tensors) are copied in and written back after the run.
"""
from __future__ import annotations

import numbers
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from polyir.errors import ArgumentError
from polyir.ir.interp.emit import STORAGE_FORMAT
from polyir.ir.interp.scalar import round_bf16, round_f16, wrap_int
from polyir.ir.nodes import Buffer, Function, Symbol
from polyir.ir.types import DType


@dataclass
class Bound:
    """Positional values for a generated function plus the copy-back work."""

    values: list[Any]
    symbols: dict[str, int]
    writebacks: list[Callable[[], None]] = field(default_factory=list)

    def finish(self) -> None:
        for writeback in self.writebacks:
            writeback()


def flat_view(array: np.ndarray, dtype: DType) -> memoryview:
    """A flat memoryview over a C-contiguous array, in ``dtype``'s storage format."""
    flat: Any = array.reshape(-1)
    return memoryview(flat).cast("B").cast(STORAGE_FORMAT[dtype])  # type: ignore[call-overload]


def _is_torch_tensor(value: Any) -> bool:
    return type(value).__module__.split(".")[0] == "torch" and hasattr(value, "numpy")


def _scalar_array(param: Buffer, value: Any, fail: Callable[[str], Exception]) -> np.ndarray:
    dtype = param.dtype
    if isinstance(value, (bool, np.bool_)):
        if dtype is not DType.BOOL:
            raise fail(f"expected a {dtype} scalar, got bool {value!r}")
        return np.array(bool(value))
    if dtype is DType.BOOL:
        raise fail(f"expected a bool scalar, got {type(value).__name__} {value!r}")
    if dtype.is_int:
        if not isinstance(value, numbers.Integral):
            raise fail(f"expected an integer ({dtype}) scalar, got {type(value).__name__} {value!r}")
        if wrap_int(int(value), dtype.bits) != int(value):
            raise fail(f"integer {value} does not fit in {dtype}")
        return np.array(int(value), dtype=dtype.numpy)
    if not isinstance(value, numbers.Real):
        raise fail(f"expected a {dtype} scalar, got {type(value).__name__} {value!r}")
    x = float(value)
    if dtype is DType.F16:
        x = round_f16(x)
    elif dtype is DType.BF16:
        x = round_bf16(x)
    storage = np.float32 if dtype in (DType.F16, DType.BF16) else dtype.numpy
    with np.errstate(over="ignore"):
        return np.array(x, dtype=storage)


def bind_symbols(fn: Function, shapes: dict[str, tuple[int, ...]], explicit: dict[str, int],
                 fail: Callable[[str, str], Exception]) -> dict[str, int]:
    """Symbol values from explicit ones and buffer shapes; checks every dimension.

    ``fail(param_name, message)`` builds the error to raise.
    """
    symbols = dict(explicit)
    buffers = [p for p in fn.params if isinstance(p, Buffer)]
    for p in buffers:
        for axis, dim in enumerate(p.shape):
            if len(dim.terms) == 1 and dim.constant == 0 and dim.terms[0][1] == 1 \
                    and isinstance(dim.terms[0][0], str):
                name = dim.terms[0][0]
                size = shapes[p.name][axis]
                if symbols.setdefault(name, size) != size:
                    raise fail(p.name, f"dimension {axis} is {size} but {name} = {symbols[name]} "
                                       f"(from another argument)")
    for p in buffers:
        for axis, dim in enumerate(p.shape):
            missing = sorted(dim.variables() - symbols.keys())
            if missing:
                raise fail(p.name, f"cannot infer symbol(s) {missing} of dimension {axis} ({dim}); "
                                   f"a symbol must be a whole dimension of some argument or a "
                                   f"Symbol parameter")
            expected = dim.evaluate(symbols)
            if expected != shapes[p.name][axis]:
                raise fail(p.name, f"dimension {axis} is {shapes[p.name][axis]}, expected {dim} = "
                                   f"{expected}")
    return symbols


def bind_arguments(fn: Function, args: tuple[Any, ...], written: set[str]) -> Bound:
    """Check and convert ``args`` for host function ``fn``; raises ``ArgumentError``."""
    params = fn.params
    if len(args) != len(params):
        names = ", ".join(p.name for p in params)
        raise ArgumentError(f"{fn.name}({names}) takes {len(params)} arguments, got {len(args)}")

    def fail_at(i: int) -> Callable[[str], ArgumentError]:
        def fail(message: str) -> ArgumentError:
            return ArgumentError(f"{fn.name}: argument {i} ('{params[i].name}'): {message}")
        return fail

    arrays: dict[str, np.ndarray] = {}
    originals: dict[str, Any] = {}
    explicit: dict[str, int] = {}
    for i, (param, value) in enumerate(zip(params, args, strict=True)):
        fail = fail_at(i)
        if isinstance(param, Symbol):
            if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
                raise fail(f"a symbol takes an int, got {type(value).__name__} {value!r}")
            explicit[param.name] = int(value)
            continue
        originals[param.name] = value
        if _is_torch_tensor(value):
            if value.device.type != "cpu":
                raise fail(f"tensor is on {value.device}; the interpreter needs CPU tensors")
            if str(value.dtype) == "torch.bfloat16":
                if param.dtype is not DType.BF16:
                    raise fail(f"expected {param.dtype}, got a bfloat16 tensor")
                value = value.detach().float().numpy()
            else:
                value = value.detach().numpy()
        if not isinstance(value, np.ndarray):
            if param.rank == 0 and isinstance(value, (numbers.Number, np.generic)):
                arrays[param.name] = _scalar_array(param, value, fail)
                originals[param.name] = None
                continue
            raise fail(f"expected an array, got {type(value).__name__}")
        if value.ndim != param.rank:
            raise fail(f"expected rank {param.rank} ({param.dtype}[{', '.join(map(str, param.shape))}]), "
                       f"got shape {value.shape}")
        if value.dtype != param.dtype.numpy:
            raise fail(f"expected dtype {param.dtype} (numpy {param.dtype.numpy}), got {value.dtype}")
        if param.name in written and not value.flags.writeable and originals[param.name] is not None:
            raise fail("array is read-only but the function writes it")
        arrays[param.name] = value
    shapes = {name: tuple(a.shape) for name, a in arrays.items()}

    def fail_named(name: str, message: str) -> ArgumentError:
        i = next(k for k, p in enumerate(params) if p.name == name)
        return fail_at(i)(message)

    symbols = bind_symbols(fn, shapes, explicit, fail_named)
    bound = Bound([], symbols)
    for param in params:
        if isinstance(param, Buffer):
            bound.values.append(_storage(param, arrays[param.name], originals[param.name],
                                         param.name in written, bound))
    bound.values.extend(symbols[s] for s in fn.symbols)
    return bound


def _storage(param: Buffer, array: np.ndarray, original: Any, written: bool, bound: Bound) -> memoryview:
    torch_bf16 = original is not None and _is_torch_tensor(original) \
        and str(original.dtype) == "torch.bfloat16"
    if param.dtype is DType.F16:
        work = array.astype(np.float32)
    elif not array.flags.c_contiguous:
        work = np.ascontiguousarray(array)
    else:
        work = array
    if written and torch_bf16:
        bound.writebacks.append(lambda: original.copy_(_torch_from(original, work)))
    elif written and work is not array:
        bound.writebacks.append(lambda: np.copyto(array, work, casting="unsafe"))
    return flat_view(work, param.dtype)


def _torch_from(tensor: Any, array: np.ndarray) -> Any:
    import torch  # only reached when the caller passed torch tensors
    return torch.from_numpy(np.ascontiguousarray(array)).to(tensor.dtype)
