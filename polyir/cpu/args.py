"""Call-time argument binding for native functions (the ``Function`` calling convention).

``bind_arguments(function, args)`` checks every argument before anything runs
and returns the raw values of the LLVM signature (``polyir.llvm.lower.signature``):
array data pointers, then ``i64`` symbols. Arrays are numpy arrays or torch CPU
tensors (used through ``Tensor.numpy()``, no copy); a 0-d buffer parameter also
takes a Python scalar. Wrong count, dtype, rank or shape raises
:class:`polyir.ArgumentError` and nothing is written.
"""
from __future__ import annotations

import ctypes
import numbers
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from polyir.errors import ArgumentError
from polyir.ir.affine import Aff
from polyir.ir.nodes import Buffer, Function, Symbol
from polyir.ir.types import DType, round_to_bf16
from polyir.llvm.lower import ParamSlot
from polyir.polyhedral.assumptions import check_symbol


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


def _byte_bounds(array: np.ndarray) -> tuple[int, int]:
    """First and one-past-last byte an array may touch (any strides)."""
    interface = array.__array_interface__
    low = high = interface["data"][0]
    for extent, stride in zip(array.shape, array.strides, strict=True):
        if stride < 0:
            low += stride * (extent - 1)
        else:
            high += stride * (extent - 1)
    return low, high + array.itemsize


OVERLAP_WORK = 1 << 16
"""Work bound handed to ``np.shares_memory``; past it, arguments count as overlapping."""


def _shares_bytes(one: np.ndarray, other: np.ndarray) -> bool:
    """Whether two arrays whose byte ranges meet share a byte (exact, bounded)."""
    try:
        # numpy's stubs list only -1 and 0, but any positive bound is documented
        return bool(np.shares_memory(one, other, max_work=OVERLAP_WORK))  # type: ignore[arg-type]
    except np.exceptions.TooHardError:
        return True


def _symbol_value(value: Any, name: str, position: int, fname: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise ArgumentError(f"{fname}: argument {position} (symbol '{name}') must be an int, "
                            f"got {type(value).__name__}")
    return check_symbol(int(value), name, f"{fname}: argument {position}")


@dataclass(frozen=True)
class _BufferPlan:
    position: int
    param: Buffer
    numpy_dtype: np.dtype
    typestr: str                              # numpy's __array_interface__ typestr
    itemsize: int
    defines: tuple[tuple[int, str], ...]      # (axis, symbol) the array's shape defines
    dims: tuple[int | str | Aff, ...]         # each dimension: constant, symbol or Aff
    signature_text: str
    written: bool


def _dimension(dim: Aff) -> int | str | Aff:
    if dim.is_constant:
        return dim.constant
    if len(dim.terms) == 1 and dim.constant == 0 and dim.terms[0][1] == 1 \
            and isinstance(dim.terms[0][0], str):
        return dim.terms[0][0]
    return dim


class FastBinding:
    """The words of calls that differ from a checked one only in their arrays'
    data (see :meth:`ArgumentBinder.fast_binding`): ``words(args)`` returns the
    raw values and what must stay alive during the call, or ``None`` when an
    array's shape or a symbol's value differs from the checked call's or a
    written array's bytes meet another argument's (the full :meth:`bind` then
    decides and reports)."""

    def __init__(self, binder: ArgumentBinder, template: list[int],
                 arrays: list[tuple[int, int]], scalars: list[tuple[int, int]], written: list[int],
                 fixed: list[tuple[int, Any]]):
        self.binder = binder
        self.template = template
        self.arrays = arrays
        self.scalars = scalars
        self.written = written
        self.fixed = fixed   # (position, shape) of each array, (position, value) of each symbol

    def words(self, args: Sequence[Any]) -> tuple[list[int], list[Any]] | None:
        for position, expected in self.fixed:
            value = args[position]
            if (value.shape if type(value) is np.ndarray else value) != expected:
                return None
        values = list(self.template)
        keep: list[Any] = []
        for word, position in self.arrays:
            values[word] = _address(args[position])
        if self.written:
            spans = [(values[word], values[word] + args[position].nbytes, position)
                     for word, position in self.arrays if args[position].nbytes]
            for low, high, position in spans:
                if position in self.written and any(
                        other != position and low < other_high and other_low < high
                        for other_low, other_high, other in spans):
                    return None
        for word, position in self.scalars:
            plan = self.binder.plans[position]
            assert plan is not None
            value = args[position]
            if type(value) is float and plan.param.dtype.is_float and plan.param.dtype is not DType.BF16:
                scalar = np.array(value, plan.numpy_dtype)
            else:
                scalar = _scalar(value, plan.param, position, self.binder.fname)
            keep.append(scalar)
            values[word] = _address(scalar)
        return values, keep


def _address(array: np.ndarray) -> int:
    """The data pointer of a C-contiguous array (a ctypes view of a writeable
    one is the cheapest way numpy offers)."""
    if array.flags.writeable and array.nbytes:
        return ctypes.addressof(ctypes.c_char.from_buffer(array))  # type: ignore[arg-type]
    return int(array.__array_interface__["data"][0])


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
            numpy_dtype = np.dtype(param.dtype.numpy)
            self.plans.append(_BufferPlan(position, param, numpy_dtype, numpy_dtype.str,
                                          numpy_dtype.itemsize, tuple(defines),
                                          tuple(_dimension(d) for d in param.shape),
                                          ", ".join(str(d) for d in param.shape),
                                          param.name in written))
        self.undefined = [s.name for s in slots if s.kind == "symbol" and s.name not in defined]
        # each LLVM parameter: (argument position, "") for a buffer, (-1, name) for a symbol
        self._slot_sources: list[tuple[int, str]] = []
        position_of = {p.name: k for k, p in enumerate(function.params)}
        for slot in self.slots:
            if slot.kind == "buffer":
                self._slot_sources.append((position_of[slot.name], ""))
            else:
                self._slot_sources.append((-1, slot.name))

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
        symbols: dict[str, int] = {}
        arrays: list[np.ndarray | None] = []
        pointers: list[int] = []
        interfaces: list[dict[str, Any] | None] = []
        for plan, param, value in zip(self.plans, params, args, strict=True):
            if plan is None:
                symbols[param.name] = _symbol_value(value, param.name, len(arrays), fname)
                arrays.append(None)
                pointers.append(0)
                interfaces.append(None)
                continue
            array = value if type(value) is np.ndarray else \
                _as_array(value, plan.param, plan.position, fname)
            interface = array.__array_interface__
            if interface["typestr"] != plan.typestr and array.dtype != plan.numpy_dtype:
                raise ArgumentError(f"{fname}: argument {plan.position} ('{param.name}') has "
                                    f"dtype {array.dtype}; expected {plan.numpy_dtype} for "
                                    f"{plan.param.dtype}")
            shape = interface["shape"]
            if len(shape) != plan.param.rank:
                raise ArgumentError(f"{fname}: argument {plan.position} ('{param.name}') has "
                                    f"rank {len(shape)}; expected {plan.param.rank} "
                                    f"(shape [{plan.signature_text}])")
            pointer, readonly = interface["data"]
            if plan.written and readonly:
                raise ArgumentError(f"{fname}: argument {plan.position} ('{param.name}') is "
                                    f"written but the array is read-only")
            for axis, symbol in plan.defines:
                symbols[symbol] = shape[axis]
            arrays.append(array)
            pointers.append(pointer)
            interfaces.append(interface)
        self._check_shapes(interfaces, symbols)
        if self.written and len(arrays) > 1:
            self._check_overlap(arrays, interfaces, pointers)

        bound = BoundCall([])
        for position, symbol in self._slot_sources:
            if position < 0:
                bound.values.append(symbols[symbol])
                continue
            given = arrays[position]
            described = interfaces[position]
            assert given is not None and described is not None
            pointer = pointers[position]
            if described["strides"] is not None and not given.flags.c_contiguous:
                contiguous = np.ascontiguousarray(given)
                if given.flags.writeable:
                    bound.copy_back.append((given, contiguous))
                given = contiguous
                pointer = contiguous.__array_interface__["data"][0]
            bound.keep_alive.append(given)
            bound.values.append(pointer)
        return bound

    def fast_binding(self, args: Sequence[Any]) -> FastBinding | None:
        """For calls like ``args`` (which :meth:`bind` has just accepted): a
        :class:`FastBinding` that only re-reads data pointers, valid for every
        call whose arguments have the same types, dtypes, shapes, writeable flags
        and int values, with arrays C-contiguous (the caller keys its cache on
        those); ``None`` for calls it does not cover (torch tensors, strided
        arrays, numpy scalars)."""
        bound = self.bind(args)
        template = list(bound.values)
        arrays: list[tuple[int, int]] = []      # (word, argument position) of each array
        scalars: list[tuple[int, int]] = []     # (word, argument position) of each 0-d float/int
        for word, (position, _) in enumerate(self._slot_sources):
            if position < 0:
                continue
            value = args[position]
            if type(value) is np.ndarray:
                if not value.flags.c_contiguous:
                    return None
                arrays.append((word, position))
            elif type(value) in (int, float):
                scalars.append((word, position))
            else:
                return None
        written = [position for _, position in arrays
                   if self.plans[position] is not None and self.plans[position].written]  # type: ignore[union-attr]
        shapes = [(position, args[position].shape) for _, position in arrays]
        symbols = [(position, args[position]) for position, plan in enumerate(self.plans)
                   if plan is None]
        return FastBinding(self, template, arrays, scalars, written if len(arrays) > 1 else [],
                           shapes + symbols)

    def prepare(self, shapes: Sequence[tuple[int, ...] | None],
                symbols: dict[str, int] | None = None) -> list[int | None]:
        """The raw call values for arguments of ``shapes`` (one per parameter;
        ``None`` for a ``Symbol`` parameter, whose value ``symbols`` gives): the
        symbol words filled in, ``None`` where each call puts a buffer's data
        pointer. Raises ``ArgumentError`` when the shapes do not fit the
        parameters or a symbol parameter has no value."""
        known: dict[str, int] = {}
        for plan, param, shape in zip(self.plans, self.function.params, shapes, strict=True):
            if plan is None:
                if symbols is None or param.name not in symbols:
                    raise ArgumentError(f"{self.fname}: prepared calls need the value of symbol "
                                        f"'{param.name}'")
                known[param.name] = _symbol_value(symbols[param.name], param.name,
                                                  self.function.params.index(param), self.fname)
                continue
            if shape is None:
                raise ArgumentError(f"{self.fname}: prepared calls need the shape of every "
                                    f"buffer ('{param.name}')")
            if len(shape) != plan.param.rank:
                raise ArgumentError(f"{self.fname}: argument {plan.position} "
                                    f"('{plan.param.name}') has rank {len(shape)}; expected "
                                    f"{plan.param.rank}")
            for axis, symbol in plan.defines:
                known[symbol] = shape[axis]
        if self.undefined:
            raise ArgumentError(f"{self.fname}: symbol '{self.undefined[0]}' is not defined by "
                                f"any argument")
        self._check_shapes([None if s is None else {"shape": tuple(s)} for s in shapes], known)
        return [known[symbol] if position < 0 else None
                for position, symbol in self._slot_sources]

    def _check_shapes(self, interfaces: Sequence[dict[str, Any] | None],
                      symbols: dict[str, int]) -> None:
        fname = self.fname
        for plan, interface in zip(self.plans, interfaces, strict=True):
            if plan is None or interface is None:
                continue
            actual = tuple(interface["shape"])
            expected = []
            for dim in plan.dims:
                if isinstance(dim, int):
                    expected.append(dim)
                elif isinstance(dim, str):
                    if dim not in symbols:
                        raise ArgumentError(f"{fname}: the shape of '{plan.param.name}' uses "
                                            f"symbol '{dim}' that no argument defines")
                    expected.append(symbols[dim])
                else:
                    try:
                        expected.append(dim.evaluate(symbols))
                    except KeyError as missing:
                        raise ArgumentError(f"{fname}: the shape of '{plan.param.name}' uses "
                                            f"symbol {missing} that no argument defines") from None
            if actual != tuple(expected):
                raise ArgumentError(f"{fname}: argument {plan.position} ('{plan.param.name}') "
                                    f"has shape {actual}; expected [{plan.signature_text}] = "
                                    f"{tuple(expected)}")
            if any(d < 0 for d in expected):
                raise ArgumentError(f"{fname}: negative size in the shape of "
                                    f"'{plan.param.name}': {tuple(expected)}")

    def _check_overlap(self, arrays: Sequence[np.ndarray | None],
                       interfaces: Sequence[dict[str, Any] | None],
                       pointers: Sequence[int]) -> None:
        """A written argument may share no byte with another argument.

        Byte ranges are compared first; where two ranges meet, numpy's exact
        solver (``np.shares_memory``) decides, so interleaved strided views of
        one array (``C[::2]`` and ``C[1::2]``) are accepted. A case too hard
        for the solver's work bound counts as overlapping."""
        ranges: list[tuple[int, int, str, bool, np.ndarray]] = []
        for plan, array, interface, pointer in zip(self.plans, arrays, interfaces, pointers,
                                                   strict=True):
            if plan is None or array is None or interface is None or array.size == 0:
                continue
            if interface["strides"] is None:
                low, high = pointer, pointer + array.size * plan.itemsize
            else:
                low, high = _byte_bounds(array)
            ranges.append((low, high, plan.param.name, plan.written, array))
        for i, (low, high, first, first_written, one) in enumerate(ranges):
            for other_low, other_high, second, second_written, other in ranges[i + 1:]:
                if (first_written or second_written) and low < other_high and other_low < high \
                        and _shares_bytes(one, other):
                    raise ArgumentError(f"{self.fname}: arguments '{first}' and '{second}' "
                                        f"overlap in memory; native code assumes distinct "
                                        f"buffers")
