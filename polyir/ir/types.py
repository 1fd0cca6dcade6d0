"""Element types and memory spaces of polyir buffers."""
from __future__ import annotations

import enum

import numpy as np


class DType(enum.Enum):
    """Element type of a buffer or of a value expression.

    ``bf16`` has no numpy type: on the host it is held in float32 arrays whose
    values are rounded to bfloat16 on every store (see :func:`round_to_dtype`).
    """

    F16 = "f16"
    BF16 = "bf16"
    F32 = "f32"
    F64 = "f64"
    I8 = "i8"
    I32 = "i32"
    I64 = "i64"
    BOOL = "bool"

    def __str__(self) -> str:
        return self.value

    @property
    def is_float(self) -> bool:
        return self in (DType.F16, DType.BF16, DType.F32, DType.F64)

    @property
    def is_int(self) -> bool:
        return self in (DType.I8, DType.I32, DType.I64)

    @property
    def bits(self) -> int:
        return _BITS[self]

    def storage_bytes(self, device: str = "cpu") -> int:
        """Bytes one element takes in memory on ``device`` (``"cpu"`` or ``"cuda"``):
        bf16 lives in float32 on the host (as numpy holds it) and in 16 bits on
        the GPU; bool takes one byte. The one rule every size estimate uses."""
        if self is DType.BF16 and device == "cpu":
            return 4
        return max(1, _BITS[self] // 8)

    @property
    def numpy(self) -> np.dtype:
        """The numpy dtype that holds this type on the host (float32 for bf16)."""
        return np.dtype(_NUMPY[self])

    @staticmethod
    def parse(text: str) -> DType:
        return DType(text)

    @staticmethod
    def from_numpy(dtype: np.dtype | type) -> DType:
        """The polyir type of a numpy dtype; raises KeyError for unsupported ones."""
        return _FROM_NUMPY[np.dtype(dtype)]


_BITS = {
    DType.F16: 16, DType.BF16: 16, DType.F32: 32, DType.F64: 64,
    DType.I8: 8, DType.I32: 32, DType.I64: 64, DType.BOOL: 1,
}
_NUMPY = {
    DType.F16: np.float16, DType.BF16: np.float32, DType.F32: np.float32,
    DType.F64: np.float64, DType.I8: np.int8, DType.I32: np.int32,
    DType.I64: np.int64, DType.BOOL: np.bool_,
}
_FROM_NUMPY = {
    np.dtype(np.float16): DType.F16, np.dtype(np.float32): DType.F32,
    np.dtype(np.float64): DType.F64, np.dtype(np.int8): DType.I8,
    np.dtype(np.int32): DType.I32, np.dtype(np.int64): DType.I64,
    np.dtype(np.bool_): DType.BOOL,
}

INDEX = DType.I64
"""The type of loop variables and size symbols when used as values."""


def round_to_bf16(values: np.ndarray) -> np.ndarray:
    """Round float32 values to the nearest bfloat16 (ties to even), kept as float32."""
    as_f32 = np.asarray(values, dtype=np.float32)
    bits = as_f32.view(np.uint32).astype(np.uint64)
    rounding = ((bits >> 16) & 1) + 0x7FFF
    rounded = ((bits + rounding) >> 16) << 16
    out = rounded.astype(np.uint32).view(np.float32)
    return np.where(np.isnan(as_f32), as_f32, out)


def round_to_dtype(values: np.ndarray, dtype: DType) -> np.ndarray:
    """Values as they are after a store to a buffer of ``dtype``."""
    if dtype is DType.BF16:
        return round_to_bf16(values)
    return np.asarray(values).astype(dtype.numpy)


class MemorySpace(enum.Enum):
    """Where a buffer lives. ``fragment`` is a warp-wide tensor-core fragment."""

    GLOBAL = "global"
    SHARED = "shared"
    LOCAL = "local"
    FRAGMENT = "fragment"

    def __str__(self) -> str:
        return self.value
