"""Call-time argument binding for native functions (the ``Function`` calling convention).

``bind_arguments(function, args)`` checks every argument before anything runs
and returns the raw values of the LLVM signature (``polyir.llvm.lower.signature``):
array data pointers, then ``i64`` symbols. Arrays are numpy arrays or torch CPU
tensors (used through ``Tensor.numpy()``, no copy); a 0-d buffer parameter also
takes a Python scalar. Wrong count, dtype, rank or shape raises
:class:`polyir.ArgumentError` and nothing is written.
"""
from __future__ import annotations

import numbers
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from polyir.errors import ArgumentError
from polyir.ir.nodes import Buffer, Function, Symbol
from polyir.ir.types import DType, round_to_bf16
from polyir.llvm.lower import ParamSlot


@dataclass
class BoundCall:
    """Raw argument values plus what must happen around the call."""

    values: list[int]
    keep_alive: list[np.ndarray] = field(default_factory=list)
    copy_back: list[tuple[np.ndarray, np.ndarray]] = field(default_factory=list)

    def finish(self) -> None:
        """Copy results of non-contiguous arguments back into the caller's arrays."""
        for original, contiguous in self.copy_back:
            np.copyto(original, contiguous)


def _as_array(value: Any, param: Buffer, position: int, fname: str) -> np.ndarray:
    expected = param.dtype.numpy
    if isinstance(value, np.ndarray):
        return value
    module = type(value).__module__
    if module.startswith("torch"):
        if getattr(value, "device", None) is not None and value.device.type != "cpu":
            raise ArgumentError(f"{fname}: argument {position} ('{param.name}') is a torch "
                                f"tensor on {value.device}; the CPU backend needs CPU tensors")
        try:
            return value.detach().numpy()
        except (TypeError, RuntimeError) as error:
            raise ArgumentError(f"{fname}: argument {position} ('{param.name}'): torch tensor "
                                f"of dtype {value.dtype} has no numpy view ({error}); "
                                f"expected {expected}") from None
    if param.rank == 0 and isinstance(value, (numbers.Number, np.generic)) \
            and not isinstance(value, np.ndarray):
        return _scalar(value, param, position, fname)
    raise ArgumentError(f"{fname}: argument {position} ('{param.name}') must be a numpy array "
                        f"or torch CPU tensor of {param.dtype}, got {type(value).__name__}")


def _scalar(value: Any, param: Buffer, position: int, fname: str) -> np.ndarray:
    dtype = param.dtype
    if isinstance(value, np.generic):
        if value.dtype != dtype.numpy:
            raise ArgumentError(f"{fname}: argument {position} ('{param.name}') is a "
                                f"{value.dtype} scalar; expected {dtype.numpy} for {dtype}")
        return np.array(value)
    if dtype.is_float:
        ok = isinstance(value, (int, float)) and not isinstance(value, complex)
    elif dtype.is_int:
        ok = isinstance(value, int) and not isinstance(value, bool)
    else:
        ok = isinstance(value, (bool, np.bool_))
    if not ok:
        raise ArgumentError(f"{fname}: argument {position} ('{param.name}') is a "
                            f"{type(value).__name__}; expected a {dtype} scalar")
    try:
        array = np.array(value, dtype=dtype.numpy)
    except OverflowError:
        raise ArgumentError(f"{fname}: argument {position} ('{param.name}') = {value!r} "
                            f"does not fit in {dtype}") from None
    if dtype.is_int and int(array) != value:
        raise ArgumentError(f"{fname}: argument {position} ('{param.name}') = {value!r} "
                            f"does not fit in {dtype}")
    if dtype is DType.BF16:
        array = np.array(round_to_bf16(array), dtype=np.float32)
    return array


def _symbol_value(value: Any, name: str, position: int, fname: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise ArgumentError(f"{fname}: argument {position} (symbol '{name}') must be an int, "
                            f"got {type(value).__name__}")
    return int(value)


def bind_arguments(function: Function, slots: Sequence[ParamSlot], args: Sequence[Any],
                   written: set[str]) -> BoundCall:
    """Check ``args`` against ``function`` and return the raw call values.

    ``written`` names the buffers the function stores to: a written buffer may
    not share memory with another argument (the code assumes ``noalias``).
    """
    fname = f"{function.name}()"
    if len(args) != len(function.params):
        names = ", ".join(p.name for p in function.params)
        raise ArgumentError(f"{fname} takes {len(function.params)} arguments ({names}), "
                            f"got {len(args)}")
    arrays: dict[str, np.ndarray] = {}
    symbols: dict[str, int] = {}
    for position, (param, value) in enumerate(zip(function.params, args)):
        if isinstance(param, Symbol):
            symbols[param.name] = _symbol_value(value, param.name, position, fname)
            continue
        array = _as_array(value, param, position, fname)
        if array.dtype != param.dtype.numpy:
            raise ArgumentError(f"{fname}: argument {position} ('{param.name}') has dtype "
                                f"{array.dtype}; expected {param.dtype.numpy} for {param.dtype}")
        if array.ndim != param.rank:
            raise ArgumentError(f"{fname}: argument {position} ('{param.name}') has rank "
                                f"{array.ndim}; expected {param.rank} "
                                f"(shape [{', '.join(map(str, param.shape))}])")
        arrays[param.name] = array
    # symbols defined by a dimension that is exactly one symbol
    for param in function.params:
        if isinstance(param, Buffer):
            for axis, dim in enumerate(param.shape):
                if len(dim.terms) == 1 and dim.constant == 0 and dim.terms[0][1] == 1 \
                        and isinstance(dim.terms[0][0], str) and dim.terms[0][0] not in symbols:
                    symbols[dim.terms[0][0]] = int(arrays[param.name].shape[axis])
    _check_shapes(function, arrays, symbols, fname)
    _check_overlap(arrays, written, fname)

    bound = BoundCall([])
    for slot in slots:
        if slot.kind == "buffer":
            array = arrays[slot.name]
            if not array.flags.c_contiguous:
                contiguous = np.ascontiguousarray(array)
                if array.flags.writeable:
                    bound.copy_back.append((array, contiguous))
                array = contiguous
            bound.keep_alive.append(array)
            bound.values.append(array.ctypes.data)
        elif slot.kind == "symbol":
            if slot.name not in symbols:
                raise ArgumentError(f"{fname}: symbol '{slot.name}' is not defined by any "
                                    f"argument")
            bound.values.append(symbols[slot.name])
    return bound


def _check_shapes(function: Function, arrays: dict[str, np.ndarray], symbols: dict[str, int],
                  fname: str) -> None:
    for position, param in enumerate(function.params):
        if not isinstance(param, Buffer):
            continue
        actual = arrays[param.name].shape
        try:
            expected = tuple(dim.evaluate(symbols) for dim in param.shape)
        except KeyError as missing:
            raise ArgumentError(f"{fname}: the shape of '{param.name}' uses symbol {missing} "
                                f"that no argument defines") from None
        if tuple(actual) != expected:
            dims = ", ".join(str(d) for d in param.shape)
            raise ArgumentError(f"{fname}: argument {position} ('{param.name}') has shape "
                                f"{tuple(actual)}; expected [{dims}] = {expected}")
        if any(d < 0 for d in expected):
            raise ArgumentError(f"{fname}: negative size in the shape of '{param.name}': "
                                f"{expected}")


def _check_overlap(arrays: dict[str, np.ndarray], written: set[str], fname: str) -> None:
    names = [n for n, a in arrays.items() if a.size > 0]
    for i, first in enumerate(names):
        for second in names[i + 1:]:
            if (first in written or second in written) \
                    and np.may_share_memory(arrays[first], arrays[second]):
                raise ArgumentError(f"{fname}: arguments '{first}' and '{second}' overlap in "
                                    f"memory; native code assumes distinct buffers")

