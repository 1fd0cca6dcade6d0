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
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

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


@dataclass(frozen=True)
class _BufferPlan:
    position: int
    param: Buffer
    numpy_dtype: np.dtype
    defines: tuple[tuple[int, str], ...]      # (axis, symbol) the array's shape defines
    signature_text: str


class ArgumentBinder:
    """The calling convention of one function, prepared once; ``bind(args)`` per call.

    ``written`` names the buffers the function stores to: a written buffer may
    not share memory with another argument (the code assumes ``noalias``).
    """

    def __init__(self, function: Function, slots: Sequence[ParamSlot], written: set[str]):
        self.function = function
        self.fname = f"{function.name}()"
        self.written = written
        self.slots = list(slots)
        self.plans: list[_BufferPlan | None] = []
        defined: set[str] = {p.name for p in function.params if isinstance(p, Symbol)}
        for position, param in enumerate(function.params):
            if isinstance(param, Symbol):
                self.plans.append(None)
                continue
            defines = []
            for axis, dim in enumerate(param.shape):
                if len(dim.terms) == 1 and dim.constant == 0 and dim.terms[0][1] == 1 \
                        and isinstance(dim.terms[0][0], str) and dim.terms[0][0] not in defined:
                    defines.append((axis, dim.terms[0][0]))
                    defined.add(dim.terms[0][0])
            self.plans.append(_BufferPlan(position, param, param.dtype.numpy, tuple(defines),
                                          ", ".join(str(d) for d in param.shape)))
        self.undefined = [s.name for s in slots if s.kind == "symbol" and s.name not in defined]

    def bind(self, args: Sequence[Any]) -> BoundCall:
        """Check ``args`` and return the raw call values; raises ``ArgumentError``."""
        fname, params = self.fname, self.function.params
        if len(args) != len(params):
            names = ", ".join(p.name for p in params)
            raise ArgumentError(f"{fname} takes {len(params)} arguments ({names}), "
                                f"got {len(args)}")
        if self.undefined:
            raise ArgumentError(f"{fname}: symbol '{self.undefined[0]}' is not defined by any "
                                f"argument")
        arrays: dict[str, np.ndarray] = {}
        symbols: dict[str, int] = {}
        for position, (plan, param, value) in enumerate(zip(self.plans, params, args, strict=True)):
            if plan is None:
                symbols[param.name] = _symbol_value(value, param.name, position, fname)
                continue
            array = value if type(value) is np.ndarray else \
                _as_array(value, plan.param, plan.position, fname)
            if array.dtype != plan.numpy_dtype:
                raise ArgumentError(f"{fname}: argument {plan.position} ('{param.name}') has "
                                    f"dtype {array.dtype}; expected {plan.numpy_dtype} for "
                                    f"{plan.param.dtype}")
            if array.ndim != plan.param.rank:
                raise ArgumentError(f"{fname}: argument {plan.position} ('{param.name}') has "
                                    f"rank {array.ndim}; expected {plan.param.rank} "
                                    f"(shape [{plan.signature_text}])")
            if param.name in self.written and not array.flags.writeable:
                raise ArgumentError(f"{fname}: argument {plan.position} ('{param.name}') is "
                                    f"written but the array is read-only")
            for axis, symbol in plan.defines:
                symbols[symbol] = array.shape[axis]
            arrays[param.name] = array
        _check_shapes(self.function, arrays, symbols, fname)
        if len(arrays) > 1 and self.written:
            _check_overlap(arrays, self.written, fname)

        bound = BoundCall([])
        for slot in self.slots:
            if slot.kind == "buffer":
                array = arrays[slot.name]
                if not array.flags.c_contiguous:
                    contiguous = np.ascontiguousarray(array)
                    if array.flags.writeable:
                        bound.copy_back.append((array, contiguous))
                    array = contiguous
                bound.keep_alive.append(array)
                bound.values.append(array.__array_interface__["data"][0])
            elif slot.kind == "symbol":
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

