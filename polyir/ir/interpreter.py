"""The reference interpreter: runs polyir IR exactly, on numpy arrays, in place.

It is the oracle the other components are tested against. Each module is
compiled once (cached by object identity) to Python source, one Python
function per IR function, working on flat memoryviews with row-major strides,
and run with the semantics of ``docs/ir.md``:

* float32 arithmetic is exact float32 (each operation rounded once; see
  ``interp/scalar.py``), f64 is Python float, f16/bf16 are computed in float32
  and rounded on store; integers truncate ``/`` and ``%`` toward zero and wrap;
  math functions return IEEE inf/nan instead of raising.
* Loops marked ``parallel`` (and ``block.*``-mapped loops, i.e. grid blocks)
  run forward, reversed or shuffled (``parallel_order``), as do the threads
  within each phase of a block, so a wrong parallelism claim or a missing
  barrier changes the answer.
* Kernels run through ``launch``; GPU-mapped loop nests directly in a host
  function run as an implicit launch. Threads of a block run phase by phase
  between barriers; fragment operations run once per warp (see ``interp/gpu.py``).
* ``detect_races=True`` (off by default) also reports data races in GPU
  code: conflicting accesses of two threads between barriers, or of two
  blocks, including read-modify-write races that no iteration order reveals
  (see ``interp/races.py``). It makes GPU code 3-8x slower.
* Every access is bounds-checked (``check_bounds=True``); checks of accesses
  affine in the innermost loop variable are hoisted in front of that loop.

Semantic choices the docs leave open: ``select`` and the right operand of
``and``/``or`` are evaluated lazily (a guarded load never faults);
float->int casts give 0 for nan and saturate out of range; fragment MMA rounds
its inputs to the shape's types (tf32: 10 explicit bits, nearest even),
accumulates exactly (float64) and rounds once to the accumulator type; a
``barrier`` outside any GPU context is a no-op. In a mapped nest in a host
function, ``@shared`` locals are per block, ``@fragment`` per warp, ``@local``
per thread and global-space locals are shared by all threads.

Speed (CPU time on one core of the development machine, CPython 3.11; run
``python tests/interpreter/bench_interpreter.py``):

* gemm ``C += A @ B``, N x N x N, f32: about 6.3 M inner iterations/s, so
  N = 185 runs in about one second (N = 128: 0.33 s); f64: 8 M/s (N = 200).
* 2-d 5-point Jacobi f32: 2.7 M points/s (512 x 512 in 0.1 s).
* bounds checks cost nothing measurable when hoisted (accesses executed on
  every iteration of their innermost loop); checks that cannot be hoisted
  (accesses under an ``if`` inside the loop) cost about 75% on gemm
  (``check_bounds=False`` turns them off).
* GPU: tiled 8x8-block shared-memory matmul kernel, N = 64: 0.07 s; f16
  fragment-MMA kernel, 256 x 256 x 256: 0.3 s.
* compiling a module to Python: about 0.5-1.5 ms (cached by module identity).
"""
from __future__ import annotations

from typing import Any

from polyir.errors import ArgumentError
from polyir.ir.interp.binding import bind_arguments
from polyir.ir.interp.errors import InterpretError
from polyir.ir.interp.runtime import PARALLEL_ORDERS, Runtime, compile_module
from polyir.ir.nodes import Function, Module

__all__ = ["interpret", "InterpretError", "PARALLEL_ORDERS", "generated_source"]


def _as_module(ir: Module | Function) -> Module:
    if isinstance(ir, Module):
        return ir
    if isinstance(ir, Function):
        return Module((ir,))
    raise TypeError(f"interpret() takes a Module or Function, not {type(ir).__name__}")


def interpret(ir: Module | Function, *args: Any, parallel_order: str = "forward", seed: int = 0,
              function: str | None = None, check_bounds: bool = True,
              detect_races: bool = False) -> None:
    """Run ``ir``'s entry function (or the host function named ``function``) on ``args``.

    Arguments follow ``Function``'s calling convention: positional, one per
    parameter; numpy arrays (or CPU torch tensors) are updated in place; a 0-d
    buffer parameter also takes a Python scalar (by value); a ``Symbol``
    parameter takes an int; symbols used only in shapes are inferred from the
    arrays. bf16 buffers are float32 arrays (or torch bfloat16 tensors).

    ``parallel_order`` is ``"forward"``, ``"reverse"`` or ``"shuffle"`` (seeded
    by ``seed``). ``detect_races=True`` makes GPU code (kernels and mapped
    nests) report conflicting accesses of different threads between barriers,
    or of different blocks, as errors (see ``interp/races.py``). Raises ``polyir.ArgumentError`` for bad arguments (before
    anything is written) and :class:`InterpretError` for faults while running
    (out-of-bounds access, integer division by zero, divergent barrier, a
    kernel called directly, ...). Returns None.
    """
    if parallel_order not in PARALLEL_ORDERS:
        raise ValueError(f"parallel_order must be one of {PARALLEL_ORDERS}, not {parallel_order!r}")
    module = _as_module(ir)
    if function is None:
        try:
            fn = module.entry
        except ValueError:
            raise InterpretError("the module has no host function to run") from None
    else:
        try:
            fn = module.function(function)
        except KeyError:
            raise ArgumentError(f"no function named '{function}' in the module") from None
        if fn.kind == "kernel":
            raise InterpretError(f"'{function}' is a kernel: kernels run only through a launch "
                                 f"from a host function")
    compiled = compile_module(ir, module, check_bounds, detect_races)
    bound = bind_arguments(fn, args, compiled.written_buffers(fn))
    runtime = Runtime(compiled, parallel_order, seed, detect_races)
    entry = compiled.namespace["_host_" + fn.name]
    try:
        entry(runtime, *bound.values)
    except InterpretError:
        raise
    except Exception as exc:  # a fault inside generated code: say where
        raise compiled.translate(exc) from exc
    bound.finish()


def generated_source(ir: Module | Function, check_bounds: bool = True) -> str:
    """The Python source the interpreter runs for ``ir`` (for debugging)."""
    return compile_module(ir, _as_module(ir), check_bounds).source
