"""polyir: a polyhedral compiler for deep-learning and loop-nest code.

The public API is small:

* ``polyir.kernel``                 compile plain Python loop nests
* ``polyir.compile``                compile a PyTorch model / fx graph
* ``polyir.jax.jit``                compile a JAX function (imports JAX on first use)
* ``polyir.parse``, ``str(module)``  the IR's text form
* ``polyir.interpret``              the reference interpreter
* ``polyir.transform``              run a pass pipeline
* ``polyir.explain``                run a pipeline and report each pass's remarks and changes
* ``polyir.draw``                   pictures of domains, dependences, schedules, tiles, fusion
* ``polyir.verify``                 check IR
* errors: ``ParseError``, ``VerifyError``, ``UnsupportedSyntax``,
  ``UnsupportedOp``, ``IllegalTransform``, ``PassError``, ``ArgumentError``
"""
from __future__ import annotations

from typing import Any

from polyir.errors import (
    ArgumentError,
    CompileError,
    DeviceError,
    IllegalTransform,
    ParseError,
    PassError,
    PolyirError,
    UnsupportedOp,
    UnsupportedSyntax,
    VerifyError,
)

__version__ = "0.1.0"

__all__ = [
    "kernel", "compile", "parse", "interpret", "transform", "explain", "verify",
    "PolyirError", "ParseError", "VerifyError", "UnsupportedSyntax", "UnsupportedOp",
    "IllegalTransform", "PassError", "ArgumentError", "CompileError", "DeviceError",
]


def parse(text: str, source_name: str = "<text>") -> Any:
    """Parse IR text into a ``Module``; raises ``ParseError`` with line and column."""
    from polyir.ir.parser import parse as _parse
    return _parse(text, source_name)


def verify(module: Any) -> None:
    """Check ``module``; raises ``VerifyError`` naming the statement and problem."""
    from polyir.ir.verifier import verify as _verify
    _verify(module)


def interpret(ir: Any, *args: Any, parallel_order: str = "forward", seed: int = 0,
              function: str | None = None, check_bounds: bool = True, detect_races: bool = False) -> Any:
    """Run IR on numpy arrays, in place; see ``polyir.ir.interpreter.interpret``."""
    from polyir.ir.interpreter import interpret as _interpret
    return _interpret(ir, *args, parallel_order=parallel_order, seed=seed, function=function,
                      check_bounds=check_bounds, detect_races=detect_races)


def transform(ir: Any, pipeline: str, **options: Any) -> Any:
    """Run a pass pipeline such as ``"simplify-bounds,tile{sizes=32,32}"``."""
    from polyir.passes import transform as _transform
    return _transform(ir, pipeline, **options)


def explain(ir: Any, pipeline: Any, target: Any = None) -> Any:
    """Run a pipeline pass by pass and report what each did and why not; see ``polyir.report.explain``."""
    from polyir.report.explain import explain as _explain
    return _explain(ir, pipeline, target)


def kernel(func: Any = None, **options: Any) -> Any:
    """Decorator compiling a plain Python loop nest; see ``polyir.frontends.pykernel``."""
    from polyir.frontends.pykernel import kernel as _kernel
    return _kernel(func, **options)


def compile(model: Any, example_inputs: Any, **options: Any) -> Any:  # noqa: A001
    """Compile a torch ``nn.Module`` or ``fx.GraphModule``; see ``polyir.frontends.fx``."""
    from polyir.frontends.fx import compile_model
    return compile_model(model, example_inputs, **options)


def __getattr__(name: str) -> Any:
    """``polyir.jax`` (it imports JAX) and ``polyir.draw`` (matplotlib) are imported on first use."""
    if name in ("jax", "draw"):
        import importlib
        return importlib.import_module(f"polyir.{name}")
    raise AttributeError(f"module 'polyir' has no attribute {name!r}")
