"""MLIR's own tools, when installed: ``mlir-opt`` and ``mlir-runner``.

* :func:`find_tool` looks for a tool on ``PATH`` (also as ``NAME-22`` and the
  like, as Debian's ``mlir-NN-tools`` packages install them) and under
  ``/usr/lib/llvm-*/bin``;
* :func:`run_mlir_opt` runs a pass pipeline on MLIR text and returns the result;
* :func:`run_function` runs one function of an MLIR module on numpy arrays
  through ``mlir-runner`` (lowered to LLVM by ``LOWERING``) and returns the
  final contents of its memref arguments, bit for bit.

Nothing here needs xDSL except :func:`run_function`, which reads the
function's signature with it. A tool that is missing raises ``ToolMissing``;
a tool that fails raises ``CompileError`` with its error output.
"""
from __future__ import annotations

import glob
import os
import re
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from polyir.errors import CompileError, PolyirError

LOWERING: tuple[str, ...] = (
    "-lower-affine", "-convert-scf-to-cf", "-convert-math-to-llvm", "-convert-math-to-libm",
    "-expand-strided-metadata", "-finalize-memref-to-llvm", "-convert-arith-to-llvm",
    "-convert-func-to-llvm", "-convert-cf-to-llvm", "-reconcile-unrealized-casts",
)
"""mlir-opt passes that lower the affine MLIR polyir writes to the LLVM dialect."""

_RUNNER_LIBRARIES = ("libmlir_c_runner_utils.so", "libmlir_runner_utils.so")
_TIMEOUT_S = 120
_ENTRY = "__polyir_main"


class ToolMissing(PolyirError):
    """An MLIR tool (mlir-opt, mlir-runner or its runtime libraries) is not installed."""


def find_tool(name: str) -> str | None:
    """The path of MLIR tool ``name`` (``mlir-opt``, ``mlir-runner``), or None."""
    found = shutil.which(name)
    if found:
        return found
    versioned = sorted(glob.glob(f"/usr/bin/{name}-[0-9]*") + glob.glob(f"/usr/lib/llvm-*/bin/{name}"),
                       key=_version, reverse=True)
    return versioned[0] if versioned else None


def _version(path: str) -> int:
    numbers = re.findall(r"(\d+)", path)
    return int(numbers[-1]) if numbers else 0


def mlir_opt() -> str | None:
    """``mlir-opt``, or None when it is not installed."""
    return find_tool("mlir-opt")


def mlir_runner() -> str | None:
    """``mlir-runner`` (``mlir-cpu-runner`` in older releases) with its runtime
    libraries, or None when either is missing."""
    runner = find_tool("mlir-runner") or find_tool("mlir-cpu-runner")
    if runner is None or not runner_libraries(runner):
        return None
    return runner


def runner_libraries(runner: str) -> list[str]:
    """The runtime libraries ``mlir-runner`` loads (for ``printMemrefI64``)."""
    real = os.path.realpath(runner)
    lib = os.path.join(os.path.dirname(os.path.dirname(real)), "lib")
    found = []
    for name in _RUNNER_LIBRARIES:
        candidates = sorted(glob.glob(os.path.join(lib, name + "*")), key=len)
        if not candidates:
            return []
        found.append(candidates[0])
    return found


def _require(tool: str | None, name: str) -> str:
    if tool is None:
        raise ToolMissing(f"{name} is not installed (Debian: apt-get install mlir-22-tools)")
    return tool


def run_mlir_opt(text: str, passes: Sequence[str] = ()) -> str:
    """``mlir-opt PASSES`` on ``text``; returns the printed result.

    With no passes this parses and verifies ``text`` (MLIR's own verifier).
    Raises ``ToolMissing`` without mlir-opt, ``CompileError`` with mlir-opt's
    messages when it rejects the input.
    """
    return transform(text, passes).text


@dataclass(frozen=True)
class Transformed:
    """What ``mlir-opt`` printed, and the warnings it gave (one per line).

    MLIR's passes do not all refuse what they cannot do legally: in MLIR 22,
    ``-affine-loop-tile`` tiles a band whose dependences forbid it without a
    word (tests/frontends/test_mlir_run.py has one), so a caller that cares
    about meaning checks the result (``polyir.frontends.mlir.compare``).
    """

    text: str
    warnings: tuple[str, ...]


def transform(text: str, passes: Sequence[str] = ()) -> Transformed:
    """``mlir-opt PASSES`` on ``text``, keeping its warnings; see ``run_mlir_opt``."""
    tool = _require(mlir_opt(), "mlir-opt")
    result = subprocess.run([tool, *passes, "-"], input=text, capture_output=True, text=True,
                            timeout=_TIMEOUT_S, check=False)
    if result.returncode != 0:
        raise CompileError(f"mlir-opt {' '.join(passes)} failed:\n{result.stderr.strip()}")
    warnings = tuple(line.split("warning:", 1)[1].strip() for line in result.stderr.splitlines()
                     if "warning:" in line)
    return Transformed(result.stdout, warnings)


# ------------------------------------------------------------------ running
@dataclass(frozen=True)
class _Param:
    kind: str                    # "memref", "index" or "scalar"
    type_text: str               # its MLIR type as written in the signature
    element: str = ""            # element type (memref and scalar)
    shape: tuple[int | None, ...] = ()


def _signature(text: str, function: str) -> list[_Param]:
    from xdsl.dialects import builtin

    from polyir.frontends.mlir._xdsl import LocatedParser, make_context
    module = LocatedParser(make_context(), text, "<mlir>").parse_module()
    for op in module.ops:
        if op.name == "func.func" and op.sym_name.data == function:
            inputs = op.function_type.inputs.data
            break
    else:
        raise CompileError(f"no function @{function} in the MLIR module")
    params = []
    for type_ in inputs:
        if isinstance(type_, builtin.MemRefType):
            shape = tuple(None if d == builtin.DYNAMIC_INDEX else d for d in type_.get_shape())
            params.append(_Param("memref", str(type_), str(type_.get_element_type()), shape))
        elif isinstance(type_, builtin.IndexType):
            params.append(_Param("index", "index"))
        else:
            params.append(_Param("scalar", str(type_), str(type_)))
    return params


def _raw_bits(array: np.ndarray, element: str) -> np.ndarray:
    """The bit patterns of ``array`` as stored in an MLIR memref of ``element``."""
    if element == "bf16":
        return (np.asarray(array, np.float32).view(np.uint32) >> 16).astype(np.uint16)
    numpy_type = {"f16": np.float16, "f32": np.float32, "f64": np.float64, "i8": np.int8,
                  "i32": np.int32, "i64": np.int64, "index": np.int64}[element]
    return np.ascontiguousarray(array, dtype=numpy_type)


def _dense(array: np.ndarray, element: str) -> str:
    if element == "i1":
        def nested(value: Any) -> str:
            if isinstance(value, list):
                return "[" + ", ".join(nested(v) for v in value) + "]"
            return "true" if value else "false"
        return f"dense<{nested(np.asarray(array, bool).tolist())}>"
    return f'dense<"0x{_raw_bits(array, element).tobytes().hex().upper()}">'


def _from_printed(values: list[int], element: str, shape: tuple[int, ...]) -> np.ndarray:
    raw = np.array(values, dtype=np.int64).reshape(shape)
    if element == "f64":
        return raw.view(np.float64)
    if element == "f32":
        return raw.astype(np.uint32).view(np.float32)
    if element == "f16":
        return raw.astype(np.uint16).view(np.float16)
    if element == "bf16":
        return (raw.astype(np.uint32) << 16).view(np.float32)
    if element == "i1":
        return raw.astype(bool)
    return raw.astype({"i8": np.int8, "i32": np.int32, "i64": np.int64, "index": np.int64}[element])


_TO_I64 = {"f64": ["arith.bitcast {v} : f64 to i64"],
           "f32": ["arith.bitcast {v} : f32 to i32", "arith.extui {v} : i32 to i64"],
           "f16": ["arith.bitcast {v} : f16 to i16", "arith.extui {v} : i16 to i64"],
           "bf16": ["arith.bitcast {v} : bf16 to i16", "arith.extui {v} : i16 to i64"],
           "i1": ["arith.extui {v} : i1 to i64"], "i8": ["arith.extsi {v} : i8 to i64"],
           "i32": ["arith.extsi {v} : i32 to i64"], "i64": [], "index": ["arith.index_cast {v} : index to i64"]}


def _wrapper(function: str, params: list[_Param], args: Sequence[Any]) -> tuple[str, list[tuple[int, str, tuple[int, ...]]]]:
    """Globals holding the arguments and an entry that calls ``function`` and
    prints every memref argument as i64 bit patterns."""
    from polyir.frontends.mlir.exporter import float_literal
    from polyir.ir.types import DType
    globals_: list[str] = []
    setup: list[str] = []
    prints: list[str] = []
    printed: list[tuple[int, str, tuple[int, ...]]] = []
    for k, (param, arg) in enumerate(zip(params, args, strict=True)):
        if param.kind == "index":
            setup.append(f"%a{k} = arith.constant {int(arg)} : index")
        elif param.kind == "scalar":
            value = np.asarray(arg).item()
            if param.element == "i1":
                setup.append(f"%a{k} = arith.constant {'true' if value else 'false'}")
            elif param.element.startswith(("f", "bf")):
                setup.append(f"%a{k} = arith.constant {float_literal(float(value), DType.F64)} : {param.element}")
            else:
                setup.append(f"%a{k} = arith.constant {int(value)} : {param.element}")
        else:
            array = np.asarray(arg)
            shape = tuple(int(n) for n in array.shape)
            static = f"memref<{''.join(f'{n}x' for n in shape)}{param.element}>"
            if array.size:
                globals_.append(f'  memref.global "private" @__polyir_g{k} : {static} = '
                                f'{_dense(array, param.element)}')
                setup.append(f"%g{k} = memref.get_global @__polyir_g{k} : {static}")
                printed.append((k, param.element, shape))
                prints.extend(_print_lines(k, static, param.element, shape))
            else:
                setup.append(f"%g{k} = memref.alloc() : {static}")
            setup.append(f"%a{k} = memref.cast %g{k} : {static} to {param.type_text}")
    types = ", ".join(p.type_text for p in params)
    call = f"func.call @{function}({', '.join(f'%a{k}' for k in range(len(params)))}) : ({types}) -> ()"
    entry = [f"  func.func @{_ENTRY}() {{", *(f"    {line}" for line in [*setup, call, *prints]),
             "    return", "  }"]
    declaration = "  func.func private @printMemrefI64(memref<*xi64>) attributes {llvm.emit_c_interface}"
    return "\n".join([*globals_, declaration, *entry]) + "\n", printed


def _print_lines(k: int, static: str, element: str, shape: tuple[int, ...]) -> list[str]:
    """Copy memref ``%g{k}`` into an i64 memref of its bit patterns and print it."""
    out = f"memref<{''.join(f'{n}x' for n in shape)}i64>"
    lines = [f"%o{k} = memref.alloc() : {out}"]
    ivs = [f"%p{k}_{d}" for d in range(len(shape))]
    for depth, (iv, n) in enumerate(zip(ivs, shape, strict=True)):
        lines.append("  " * depth + f"affine.for {iv} = 0 to {n} {{")
    indent = "  " * len(shape)
    subscript = f"[{', '.join(ivs)}]"
    lines.append(f"{indent}%v{k}_0 = affine.load %g{k}{subscript} : {static}")
    last = f"%v{k}_0"
    for step, template in enumerate(_TO_I64[element], start=1):
        lines.append(f"{indent}%v{k}_{step} = {template.format(v=last)}")
        last = f"%v{k}_{step}"
    lines.append(f"{indent}affine.store {last}, %o{k}{subscript} : {out}")
    for depth in reversed(range(len(shape))):
        lines.append("  " * depth + "}")
    lines.append(f"%u{k} = memref.cast %o{k} : {out} to memref<*xi64>")
    lines.append(f"func.call @printMemrefI64(%u{k}) : (memref<*xi64>) -> ()")
    lines.append(f"memref.dealloc %o{k} : {out}")
    return lines


def run_function(text: str, function: str, args: Sequence[Any]) -> list[Any]:
    """Run ``@function`` of MLIR module ``text`` on ``args`` with ``mlir-runner``.

    ``args`` follow the MLIR signature: numpy arrays for memrefs (bf16 as
    float32 arrays, as polyir holds them), ints for ``index``, Python numbers
    for scalars. Returns a list parallel to ``args``: the final contents of each
    memref argument (fresh arrays, bit-exact), None for the others; ``args``
    are not modified. Raises ``ToolMissing`` or ``CompileError``.
    """
    runner = _require(mlir_runner(), "mlir-runner")
    params = _signature(text, function)
    if len(params) != len(args):
        raise CompileError(f"@{function} takes {len(params)} arguments, got {len(args)}")
    transformed = run_mlir_opt(text).rstrip()
    if not transformed.endswith("}"):
        raise CompileError("mlir-opt printed no module")
    wrapper, printed = _wrapper(function, params, args)
    combined = transformed[:-1] + wrapper + "}\n"
    lowered = run_mlir_opt(combined, LOWERING)
    libraries = ",".join(runner_libraries(runner))
    result = subprocess.run([runner, "-e", _ENTRY, "-entry-point-result=void", f"-shared-libs={libraries}"],
                            input=lowered, capture_output=True, text=True, timeout=_TIMEOUT_S, check=False)
    if result.returncode != 0:
        raise CompileError(f"mlir-runner failed (status {result.returncode}):\n{result.stderr.strip()}")
    chunks = result.stdout.split("Unranked Memref")[1:]
    if len(chunks) != len(printed):
        raise CompileError(f"mlir-runner printed {len(chunks)} memrefs, expected {len(printed)}:\n{result.stdout}")
    outputs: list[Any] = [None] * len(args)
    for (k, element, shape), chunk in zip(printed, chunks, strict=True):
        data = chunk.split("data =", 1)[1]
        values = [int(v) for v in re.findall(r"-?\d+", data)]
        outputs[k] = _from_printed(values, element, shape)
    for k, param in enumerate(params):
        if param.kind == "memref" and outputs[k] is None:
            outputs[k] = np.asarray(args[k]).copy()
    return outputs
