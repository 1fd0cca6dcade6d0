"""MLIR's affine passes as a second opinion on the same programs.

:func:`compare` takes a polyir program and its arguments, runs it through
each pipeline and checks every result against polyir's interpreter on the
original program:

* an MLIR pipeline (``MLIR_PIPELINES``, e.g. ``-affine-loop-fusion``) runs on
  the exported MLIR; its output is imported back and interpreted (needs only
  ``mlir-opt``) and, where ``mlir-runner`` is installed, also lowered to LLVM
  and run natively;
* a polyir pipeline (``POLYIR_PIPELINES``) runs through ``polyir.transform``;
  the result is interpreted and, with ``mlir-runner``, exported and run.

Each :class:`Outcome` records how many top-level loop nests the function has
before and after (fewer = fused), the pass warnings, and whether every path
agreed with the interpreter. Adding polyir's own fusion to the comparison is
one line in ``POLYIR_PIPELINES``.

``python -m polyir.frontends.mlir.compare`` prints the fusion table of
docs/mlir.md.
"""
from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from polyir.ir.affine import Aff
from polyir.ir.nodes import Buffer, For, Function, Module, Symbol
from polyir.ir.types import DType
from polyir.ir.walk import substitute

MLIR_PIPELINES: dict[str, tuple[str, ...]] = {
    "mlir-fuse": ("-affine-loop-fusion",),
    "mlir-tile": ("-affine-loop-tile=tile-size=4",),
    "mlir-fuse-tile": ("-affine-loop-fusion", "-affine-loop-tile=tile-size=4"),
}
"""Name -> mlir-opt passes."""

POLYIR_PIPELINES: dict[str, str] = {
    "polyir-reschedule": "reschedule",
    # "polyir-fuse": "fuse",            # once the fuse pass lands
    # "polyir-tile": "tile{sizes=4,4}",  # once the tile pass lands
}
"""Name -> polyir pipeline string (``polyir.transform``)."""


@dataclass(frozen=True)
class Outcome:
    """One pipeline on one program."""

    pipeline: str
    nests_before: int
    nests_after: int | None          # None when the pipeline refused
    warnings: tuple[str, ...] = ()
    interpreted: bool | None = None  # the transformed IR, interpreted, matches the original
    native: bool | None = None       # the transformed IR, run by mlir-runner, matches (None: not run)
    problem: str = ""                # the first difference, or why the pipeline refused

    @property
    def fused(self) -> bool:
        return self.nests_after is not None and self.nests_after < self.nests_before

    @property
    def correct(self) -> bool:
        return self.interpreted is True and self.native is not False


def sizes_of(function: Function, args: Sequence[Any]) -> dict[str, int]:
    """The value of every size symbol of ``function`` for these arguments."""
    sizes: dict[str, int] = {}
    for param, arg in zip(function.params, args, strict=True):
        if isinstance(param, Symbol):
            sizes[param.name] = int(arg)
        else:
            for dim, extent in zip(param.shape, np.shape(arg), strict=True):
                if len(dim.terms) == 1 and dim.terms[0][1] == 1 and isinstance(dim.terms[0][0], str) \
                        and dim.constant == 0:
                    sizes.setdefault(dim.terms[0][0], int(extent))
    return sizes


def specialize(module: Module, sizes: Mapping[str, int]) -> Module:
    """``module`` with the size symbols in ``sizes`` replaced by constants in
    shapes, bounds, subscripts, conditions and values (``Symbol`` parameters
    stay, unused, so the signature keeps its arguments). MLIR's fusion and
    tiling cost models want static shapes."""
    mapping = {name: Aff.const(value) for name, value in sizes.items()}

    def fixed(buffer: Buffer) -> Buffer:
        return replace(buffer, shape=tuple(d.substitute(mapping) for d in buffer.shape))

    functions = []
    for function in module.functions:
        params = tuple(fixed(p) if isinstance(p, Buffer) else p for p in function.params)
        functions.append(replace(function, params=params, locals=tuple(fixed(b) for b in function.locals),
                                 body=substitute(function.body, mapping)))
    return Module(tuple(functions))


def loop_nests(function: Function) -> int:
    """The number of top-level loop nests of ``function``."""
    return sum(isinstance(node, For) for node in function.body)


def _tolerance(dtype: DType) -> float:
    return 1e-2 if dtype in (DType.F16, DType.BF16) else 1e-5


def _difference(function: Function, expected: Sequence[Any], actual: Sequence[Any]) -> str:
    """'' when every buffer parameter agrees, else the first difference."""
    for param, a, b in zip(function.params, expected, actual, strict=True):
        if not isinstance(param, Buffer):
            continue
        a, b = np.asarray(a), np.asarray(b)
        if a.shape != b.shape:
            return f"{param.name}: shape {a.shape} vs {b.shape}"
        if param.dtype.is_float:
            tol = _tolerance(param.dtype)
            same = np.isclose(b.astype(np.float64), a.astype(np.float64), rtol=tol, atol=tol, equal_nan=True)
        else:
            same = a == b
        if not np.all(same):
            where = tuple(int(i) for i in np.argwhere(~np.asarray(same))[0])
            return f"{param.name}{list(where)}: expected {a[where]!r}, got {b[where]!r}"
    return ""


def _interpret(module: Module, args: Sequence[Any]) -> list[Any]:
    from polyir.ir.interpreter import interpret
    copies = [copy.deepcopy(a) for a in args]
    arrays = [np.array(a) if isinstance(p, Buffer) and not isinstance(a, np.ndarray) else a
              for p, a in zip(module.entry.params, copies, strict=True)]
    interpret(module, *arrays)
    return arrays


def _native(text: str, function: Function, args: Sequence[Any]) -> list[Any]:
    from polyir.frontends.mlir.tools import run_function
    arrays = [np.asarray(a) if isinstance(p, Buffer) else a
              for p, a in zip(function.params, args, strict=True)]
    return run_function(text, function.name, arrays)


def compare(module: Module, args: Sequence[Any], *,
            mlir_pipelines: Mapping[str, Sequence[str]] | None = None,
            polyir_pipelines: Mapping[str, str] | None = None,
            native: bool | None = None, static: bool = True) -> list[Outcome]:
    """Run ``module``'s entry on ``args`` through each pipeline; see the module docstring.

    ``args`` are the interpreter's arguments (not modified). ``native`` runs
    the transformed programs with ``mlir-runner`` too (default: when it is
    installed). ``static`` first replaces the size symbols by the sizes of
    ``args`` (``specialize``): MLIR's fusion leaves nests with symbolic
    bounds alone. MLIR pipelines need ``mlir-opt`` (``ToolMissing`` otherwise).
    Returns one ``Outcome`` per pipeline, MLIR ones first.
    """
    from polyir.errors import PolyirError
    from polyir.frontends.mlir import export_mlir
    from polyir.frontends.mlir.tools import ToolMissing, mlir_runner

    mlir_pipelines = MLIR_PIPELINES if mlir_pipelines is None else mlir_pipelines
    polyir_pipelines = POLYIR_PIPELINES if polyir_pipelines is None else polyir_pipelines
    if native is None:
        native = mlir_runner() is not None
    if static:
        module = specialize(module, sizes_of(module.entry, args))
    function = module.entry
    expected = _interpret(module, args)
    before = loop_nests(function)
    text = export_mlir(module)
    outcomes = []
    for name, passes in mlir_pipelines.items():
        try:
            outcomes.append(_mlir_outcome(name, passes, text, function, expected, args, before, native))
        except ToolMissing:
            raise
        except PolyirError as error:
            outcomes.append(Outcome(name, before, None, problem=f"failed: {error}"))
    for name, pipeline in polyir_pipelines.items():
        try:
            outcomes.append(_polyir_outcome(name, pipeline, module, expected, args, before, native))
        except PolyirError as error:
            outcomes.append(Outcome(name, before, None, problem=f"refused or failed: {error}"))
    return outcomes


def _mlir_outcome(name: str, passes: Sequence[str], text: str, function: Function, expected: list[Any],
                  args: Sequence[Any], before: int, native: bool) -> Outcome:
    from polyir.frontends.mlir import import_mlir
    from polyir.frontends.mlir.tools import transform
    result = transform(text, passes)
    after = import_mlir(result.text, f"<{name}>")
    problem = _difference(function, expected, _interpret(after, args))
    native_ok, native_problem = None, ""
    if native:
        native_problem = _difference(function, expected, _native(result.text, function, args))
        native_ok = not native_problem
    return Outcome(name, before, loop_nests(after.entry), result.warnings, not problem, native_ok,
                   problem or native_problem)


def _polyir_outcome(name: str, pipeline: str, module: Module, expected: list[Any], args: Sequence[Any],
                    before: int, native: bool) -> Outcome:
    from polyir.frontends.mlir import export_mlir
    from polyir.passes import transform
    transformed = transform(module, pipeline, verify_each=True)
    problem = _difference(module.entry, expected, _interpret(transformed, args))
    native_ok, native_problem = None, ""
    if native:
        native_problem = _difference(module.entry, expected,
                                     _native(export_mlir(transformed), transformed.entry, args))
        native_ok = not native_problem
    return Outcome(name, before, loop_nests(transformed.entry), (), not problem, native_ok,
                   problem or native_problem)


# ------------------------------------------------------------------ the table
_ELEMENTWISE_CHAIN = """
func.func @chain(%A: memref<16xf32>, %B: memref<16xf32>, %C: memref<16xf32>) {
  %T = memref.alloc() : memref<16xf32>
  affine.for %i = 0 to 16 {
    %a = affine.load %A[%i] : memref<16xf32>
    %e = math.exp %a : f32
    affine.store %e, %T[%i] : memref<16xf32>
  }
  affine.for %i = 0 to 16 {
    %t = affine.load %T[%i] : memref<16xf32>
    %b = affine.load %B[%i] : memref<16xf32>
    %s = arith.addf %t, %b : f32
    affine.store %s, %C[%i] : memref<16xf32>
  }
  memref.dealloc %T : memref<16xf32>
  return
}
"""

_SIBLINGS = """
func.func @siblings(%A: memref<8x8xf32>, %R: memref<8xf32>, %S: memref<8xf32>) {
  affine.for %i = 0 to 8 {
    %zero = arith.constant 0.0 : f32
    %sum = affine.for %j = 0 to 8 iter_args(%acc = %zero) -> (f32) {
      %a = affine.load %A[%i, %j] : memref<8x8xf32>
      %next = arith.addf %acc, %a : f32
      affine.yield %next : f32
    }
    affine.store %sum, %R[%i] : memref<8xf32>
  }
  affine.for %i = 0 to 8 {
    %ninf = arith.constant 0xFF800000 : f32
    %top = affine.for %j = 0 to 8 iter_args(%m = %ninf) -> (f32) {
      %a = affine.load %A[%i, %j] : memref<8x8xf32>
      %next = arith.maxnumf %m, %a : f32
      affine.yield %next : f32
    }
    affine.store %top, %S[%i] : memref<8xf32>
  }
  return
}
"""

_TILE_ILLEGAL = """
func shifted(A: f32[9]) {
  for i = 0 to 8 {
    for j = 0 to 8 {
      S0: A[i] = A[i + 1] * 0.5 + cast<f32>(j)
    }
  }
}
"""

TABLE_KERNELS = ("2mm", "gemver", "mvt", "atax", "bicg", "covariance", "correlation", "jacobi-1d")


def table_programs() -> list[tuple[str, Module, list[Any]]]:
    """The programs of the fusion table: two hand-written MLIR programs and
    corpus kernels, with fixed random arguments."""
    from polyir.frontends.mlir import import_mlir
    from polyir.frontends.pykernel import kernel
    from polyir.ir.parser import parse
    from polyir.testing import random_arguments
    from polyir.testing.corpus import corpus_kernel

    programs = []
    for name, text in (("chain (MLIR)", _ELEMENTWISE_CHAIN), ("siblings (MLIR)", _SIBLINGS)):
        module = import_mlir(text, name)
        programs.append((name, module, random_arguments(module, 0)))
    shifted = parse(_TILE_ILLEGAL)
    programs.append(("shifted (tiling illegal)", shifted, random_arguments(shifted, 0)))
    for name in TABLE_KERNELS:
        entry = corpus_kernel(name)
        args = entry.make_args(entry.sizes, np.random.default_rng(0))
        programs.append((name, kernel(entry.func, target="interpret").ir(*args), args))
    return programs


def _cell(outcome: Outcome) -> str:
    if outcome.nests_after is None:
        return "failed"
    verdict = "ok" if outcome.correct else "WRONG"
    warned = " (warned)" if outcome.warnings else ""
    return f"{outcome.nests_before} -> {outcome.nests_after}, {verdict}{warned}"


def fusion_table(native: bool | None = None) -> str:
    """A markdown table: for each program of ``table_programs()``, the
    top-level loop nests before -> after each pipeline, and whether the
    result matched polyir's interpreter on the same inputs."""
    programs = table_programs()
    rows = [(name, compare(module, args, native=native)) for name, module, args in programs]
    names = [o.pipeline for o in rows[0][1]]
    lines = ["| program | " + " | ".join(names) + " |", "|---" * (len(names) + 1) + "|"]
    for name, outcomes in rows:
        lines.append(f"| {name} | " + " | ".join(_cell(o) for o in outcomes) + " |")
    return "\n".join(lines)


if __name__ == "__main__":
    print(fusion_table())
