"""The ATen side of the lowering context: torch dtypes, fx example values.

Tensor values, expressions and the nest builders are framework-neutral and
live in :mod:`polyir.frontends.lowering.context` (re-exported here, so the
rules import one module); this module adds what needs torch: dtype
conversion, a node's example value, and :meth:`LoweringContext.result`, which
takes a result's shape and dtype from its fx node. When compiling with
dynamic shapes the shapes hold torch ``SymInt`` values for the dynamic sizes:
the context is made with a :class:`polyir.frontends.aten.symbolic.SymbolTable`,
which turns them into symbolic extents where they reach the IR.
"""
from __future__ import annotations

from typing import Any

import torch

from polyir.errors import UnsupportedOp
from polyir.frontends.lowering.context import (
    IndexMap,
    Operand,
    Scalar,
    Shape,
    TensorValue,
    accumulator_dtype,
    aff_value,
    broadcast_index,
    const,
    expr_dtype,
    extreme,
    normalize_dim,
)
from polyir.frontends.lowering.context import (
    LoweringContext as NeutralLoweringContext,
)
from polyir.ir.types import DType

__all__ = ["IndexMap", "LoweringContext", "Operand", "Scalar", "Shape", "TensorValue",
           "accumulator_dtype", "aff_value", "broadcast_index", "const", "dtype_of",
           "expr_dtype", "extreme", "is_supported_dtype", "node_meta", "normalize_dim",
           "packet", "torch_dtype_of"]

# ------------------------------------------------------------------- dtypes
_TORCH_TO_DTYPE = {
    torch.float16: DType.F16, torch.bfloat16: DType.BF16, torch.float32: DType.F32,
    torch.float64: DType.F64, torch.int8: DType.I8, torch.int32: DType.I32,
    torch.int64: DType.I64, torch.bool: DType.BOOL,
}
_DTYPE_TO_TORCH = {v: k for k, v in _TORCH_TO_DTYPE.items()}


def dtype_of(torch_dtype: torch.dtype) -> DType:
    """The polyir type of a torch dtype; ``KeyError`` when polyir has none."""
    return _TORCH_TO_DTYPE[torch_dtype]


def torch_dtype_of(dtype: DType) -> torch.dtype:
    return _DTYPE_TO_TORCH[dtype]


def is_supported_dtype(torch_dtype: torch.dtype) -> bool:
    return torch_dtype in _TORCH_TO_DTYPE


class LoweringContext(NeutralLoweringContext):
    """The neutral context, with results sized and typed from fx nodes."""

    def result(self, node: torch.fx.Node, index: int | None = None,
               dtype: DType | None = None) -> TensorValue:
        """The buffer output ``index`` of ``node`` is written to.

        Shape and dtype come from the node's example value. A graph output
        gets its output parameter (once); anything else a fresh local.
        """
        meta = node_meta(node, index)
        hint = node.name if index is None else f"{node.name}_{index}"
        return self.result_for((node.name, index or 0), hint, self.dims(meta.shape),
                               dtype or dtype_of(meta.dtype))


def node_meta(node: torch.fx.Node, index: int | None = None) -> Any:
    """The example value (a fake tensor) of ``node``, or of its output ``index``."""
    meta = node.meta.get("val")
    if meta is None:
        raise UnsupportedOp(str(node.target), node.name, "no example value recorded")
    if index is not None and isinstance(meta, (tuple, list)):
        return meta[index]
    return meta


def packet(node: torch.fx.Node) -> Any:
    """The overload packet of ``node``'s operator (``aten.add`` for ``aten.add.Tensor``)."""
    return getattr(node.target, "overloadpacket", node.target)
