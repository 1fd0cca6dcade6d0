"""Tensor-core (matrix-unit) shapes and types: one table, plain data."""
from __future__ import annotations

from dataclasses import dataclass

from polyir.ir.types import DType


@dataclass(frozen=True)
class MMAShape:
    """One warp-level matrix multiply-accumulate: ``D[m,n] = A[m,k] @ B[k,n] + C[m,n]``."""

    key: str
    m: int
    n: int
    k: int
    a_dtype: DType
    b_dtype: DType
    acc_dtype: DType
    min_sm: int

    def role_shape(self, role: str) -> tuple[int, int]:
        """Rows and columns of a fragment of ``role`` (``a``, ``b`` or ``acc``)."""
        return {"a": (self.m, self.k), "b": (self.k, self.n), "acc": (self.m, self.n)}[role]

    def role_dtype(self, role: str) -> DType:
        return {"a": self.a_dtype, "b": self.b_dtype, "acc": self.acc_dtype}[role]


MMA_SHAPES: dict[str, MMAShape] = {
    s.key: s
    for s in (
        MMAShape("m16n16k16.f16.f32", 16, 16, 16, DType.F16, DType.F16, DType.F32, 70),
        MMAShape("m16n16k16.bf16.f32", 16, 16, 16, DType.BF16, DType.BF16, DType.F32, 80),
        MMAShape("m16n16k8.tf32.f32", 16, 16, 8, DType.F32, DType.F32, DType.F32, 80),
    )
}
