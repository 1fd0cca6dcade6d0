"""MLIR interop: affine MLIR in and out of polyir IR.

* ``import_mlir(text, source_name)`` parses ``func``/``affine``/``arith``/
  ``math``/``memref`` MLIR (with xDSL, the ``polyir[mlir]`` extra) into a
  ``Module``; see ``importer.py`` for how SSA values become statements.
* ``export_mlir(module)`` prints host IR as affine MLIR text that ``mlir-opt``
  accepts (no extra needed).
* ``polyir.frontends.mlir.tools`` finds ``mlir-opt`` and ``mlir-runner``, runs
  MLIR pass pipelines and runs MLIR functions on numpy arrays.

See docs/mlir.md.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from polyir.ir.nodes import Module

__all__ = ["import_mlir", "export_mlir"]


def import_mlir(text: str, source_name: str = "<mlir>") -> Module:
    """Parse affine MLIR text into a polyir ``Module``; see ``importer.import_mlir``."""
    try:
        from polyir.frontends.mlir.importer import import_mlir as _import
    except ImportError as error:  # xdsl missing
        from polyir.errors import PolyirError
        raise PolyirError(f"reading MLIR needs xDSL: pip install 'polyir[mlir]' ({error})") from None
    return _import(text, source_name)


def export_mlir(module: Module) -> str:
    """Print host IR as affine MLIR text; see ``exporter.export_mlir``."""
    from polyir.frontends.mlir.exporter import export_mlir as _export
    return _export(module)
