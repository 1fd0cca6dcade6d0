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
  ``UnsupportedOp``, ``IllegalTransform``, ``PassError``, ``ArgumentError``,
  ``MissingDependency`` (an optional package is missing: names the extra)
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, overload

from polyir.errors import (
    ArgumentError,
    BoundsError,
    CompileError,
    DeviceError,
    IllegalTransform,
    MissingDependency,
    ParseError,
    PassError,
    PolyirError,
    UnsupportedOp,
    UnsupportedSyntax,
    VerifyError,
)

if TYPE_CHECKING:  # the real types, without importing torch or the compiler at `import polyir`
    from collections.abc import Callable, Sequence
    from types import ModuleType

    import torch

    from polyir.context import PassContext
    from polyir.frontends.fx import CompiledModel
    from polyir.frontends.pykernel import Kernel
    from polyir.ir.nodes import Function, Module
    from polyir.passes import DumpTarget
    from polyir.report.explain import Explanation
    from polyir.target import Target

__version__ = "0.1.0"

__all__ = [
    "kernel", "compile", "parse", "interpret", "transform", "explain", "verify",
    "PolyirError", "ParseError", "VerifyError", "UnsupportedSyntax", "UnsupportedOp",
    "IllegalTransform", "PassError", "ArgumentError", "BoundsError", "CompileError", "DeviceError",
    "MissingDependency",
]


def parse(text: str, source_name: str = "<text>") -> Module:
    """Parse IR text into a ``Module``; raises ``ParseError`` with line and column."""
    from polyir.ir.parser import parse as _parse
    return _parse(text, source_name)


def verify(module: Module) -> None:
    """Check ``module``; raises ``VerifyError`` naming the statement and problem."""
    from polyir.ir.verifier import verify as _verify
    _verify(module)


def interpret(ir: Module | Function, *args: Any, parallel_order: str = "forward", seed: int = 0,
              function: str | None = None, check_bounds: bool = True, detect_races: bool = False) -> None:
    """Run IR on numpy arrays, in place; see ``polyir.ir.interpreter.interpret``."""
    from polyir.ir.interpreter import interpret as _interpret
    _interpret(ir, *args, parallel_order=parallel_order, seed=seed, function=function,
               check_bounds=check_bounds, detect_races=detect_races)


def transform(ir: Module, pipeline: str | Sequence[Any], verify_each: bool = False,
              dump_after_each: DumpTarget = None, *, target: Target | str | None = None,
              ctx: PassContext | None = None) -> Module:
    """Run a pass pipeline such as ``"simplify-bounds,tile{loops=i,j sizes=32,32}"``;
    see ``polyir.passes.transform``."""
    from polyir.passes import transform as _transform
    return _transform(ir, pipeline, verify_each, dump_after_each, target=target, ctx=ctx)


def explain(ir: Module | Function | str, pipeline: str | Sequence[Any],
            target: Target | str | None = None) -> Explanation:
    """Run a pipeline pass by pass and report what each did and why not; see ``polyir.report.explain``."""
    from polyir.report.explain import explain as _explain
    return _explain(ir, pipeline, target)


@overload
def kernel(func: Callable[..., Any], /) -> Kernel: ...


@overload
def kernel(func: None = None, /, *, target: Target | str | None = "cpu", pipeline: str | None = None,
           specialize: bool = False, fast_math: bool = False,
           check_bounds: bool = True) -> Callable[[Callable[..., Any]], Kernel]: ...


def kernel(func: Callable[..., Any] | None = None, /, *, target: Target | str | None = "cpu",
           pipeline: str | None = None, specialize: bool = False, fast_math: bool = False,
           check_bounds: bool = True) -> Kernel | Callable[[Callable[..., Any]], Kernel]:
    """Decorator compiling a plain Python loop nest: ``@polyir.kernel`` or
    ``@polyir.kernel(target=..., ...)``; see ``polyir.frontends.pykernel.kernel``."""
    from polyir.frontends.pykernel import Kernel as _Kernel

    def wrap(f: Callable[..., Any]) -> Kernel:
        return _Kernel(f, target=target, pipeline=pipeline, specialize=specialize,
                       fast_math=fast_math, check_bounds=check_bounds)
    return wrap if func is None else wrap(func)


def compile(model: torch.nn.Module, example_inputs: torch.Tensor | Sequence[Any], *,  # noqa: A001
            target: Target | str = "cpu", fallback: bool = True, pipeline: str | None = None,
            fast_math: bool = True, dynamic: bool = False, check_bounds: bool = True) -> CompiledModel:
    """Compile a torch ``nn.Module`` or ``fx.GraphModule`` for ``example_inputs``;
    see ``polyir.frontends.fx.compile_model``."""
    from polyir.extras import requiring

    with requiring("polyir.compile"):
        from polyir.frontends.fx import compile_model
    return compile_model(model, example_inputs, target=target, fallback=fallback, pipeline=pipeline,
                         fast_math=fast_math, dynamic=dynamic, check_bounds=check_bounds)


def __getattr__(name: str) -> ModuleType:
    """``polyir.jax`` (it imports JAX) and ``polyir.draw`` (matplotlib) are imported on first use."""
    if name in ("jax", "draw"):
        import importlib

        from polyir.extras import requiring
        with requiring(f"polyir.{name}"):
            return importlib.import_module(f"polyir.{name}")
    raise AttributeError(f"module 'polyir' has no attribute {name!r}")
