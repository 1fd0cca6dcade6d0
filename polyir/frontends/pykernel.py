"""``@polyir.kernel``: compile plain Python loop nests and run them in place.

Usage::

    @polyir.kernel
    def gemm(C, A, B, alpha, beta):
        n, m = C.shape
        for i in range(n):
            for j in range(m):
                C[i, j] *= beta
                for k in range(A.shape[1]):
                    C[i, j] += alpha * A[i, k] * B[k, j]

    gemm(C, A, B, 1.5, 0.5)          # compiles for these dtypes/ranks, runs in place
    gemm.ir(C, A, B, 1.5, 0.5)       # the IR Module (entry params = Python params)
    gemm.compile_for(C, A, B, 1.5, 0.5, target="cpu")   # the artifact, not run

``polyir.kernel(target=..., pipeline=..., specialize=..., fast_math=...)`` sets options. One
compiled version serves every size (sizes are symbols) unless
``specialize=True``. See docs/kernel.md for the accepted subset.
"""
from __future__ import annotations

import ast
import functools
import inspect
import types
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from polyir.errors import ArgumentError
from polyir.frontends.pyast import ArgSpec, lower_kernel
from polyir.frontends.pycheck import KernelSource, check_syntax, load_source
from polyir.ir.nodes import Assign, Module, Node
from polyir.ir.types import DType
from polyir.ir.walk import walk_nodes
from polyir.target import Target, resolve

_IR_CACHE: dict[tuple[Any, ...], Module] = {}
_IR_CACHE_LIMIT = 512


def kernel(func: Callable[..., Any] | None = None, *, target: Target | str | None = "cpu",
           pipeline: str | None = None, specialize: bool = False,
           fast_math: bool = False, check_bounds: bool = True) -> Any:
    """Decorator: ``@kernel`` or ``@kernel(target=..., pipeline=..., specialize=...)``.

    ``target`` is what calling the kernel builds for (default ``"cpu"``, the
    native backend; ``"interpret"`` runs the reference interpreter);
    ``pipeline`` is a pass pipeline string run on the IR before building
    (default: ``polyir.driver.default_pipeline(target)``);
    ``specialize=True`` compiles with sizes and integer arguments as constants;
    ``fast_math=True`` lets the native backend contract multiply-adds into
    FMAs and reassociate float operations (off by default: the kernel computes
    exactly what the Python function computes, bit for bit).
    ``check_bounds=False`` skips the native backend's check, before each call,
    that every subscript stays inside its array (``polyir.cpu.bounds``; a
    violation is ``polyir.BoundsError``, where Python would wrap a negative
    index or raise ``IndexError``). Raises ``polyir.UnsupportedSyntax`` at decoration for constructs outside the
    subset.
    """
    def wrap(f: Callable[..., Any]) -> Kernel:
        return Kernel(f, target=target, pipeline=pipeline, specialize=specialize,
                      fast_math=fast_math, check_bounds=check_bounds)
    return wrap if func is None else wrap(func)


_FAST_LIMIT = 64
"""Call signatures each kernel remembers for its fast path (oldest dropped first)."""


@dataclass(frozen=True)
class _Argument:
    spec: ArgSpec
    runtime: Any               # what the executable receives
    original: Any = None       # the caller's array, when ``runtime`` is a contiguous copy


class Kernel:
    """A compiled-on-call Python kernel; see the module docstring."""

    def __init__(self, func: Callable[..., Any], *, target: Target | str | None = "cpu",
                 pipeline: str | None = None, specialize: bool = False,
                 fast_math: bool = False, check_bounds: bool = True):
        self.py_func = func
        self.check_bounds = bool(check_bounds)
        self.target = target
        self.pipeline = pipeline
        self.specialize = bool(specialize)
        self.fast_math = bool(fast_math)
        self._source: KernelSource = load_source(func)
        check_syntax(self._source)
        self._signature = inspect.signature(func)
        simple = all(p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD
                     for p in self._signature.parameters.values())
        # a call with exactly one positional value per parameter skips Signature.bind
        self._positional = tuple(self._signature.parameters) if simple else None
        self._cache: dict[tuple[Any, ...], Any] = {}
        self._resolved: tuple[Any, Target] | None = None
        self._writes: dict[int, tuple[Module, frozenset[str]]] = {}
        self._fast: dict[tuple[Any, ...], tuple[Any, Any, Any]] = {}
        functools.update_wrapper(self, func)

    def __repr__(self) -> str:
        return f"<polyir.kernel {self.py_func.__qualname__} target={self.target!r}>"

    # -- public API -------------------------------------------------------
    def __call__(self, *args: Any, **kwargs: Any) -> None:
        """Compile for these arguments (cached) and run in place; returns ``None``."""
        key = None if kwargs else self._fast_key(args)
        if key is not None:
            known = self._fast.get(key)
            if known is not None and known[0] is self.target:
                # checked as the first call with this key was: by the fast binding
                # (data pointers only) when it covers the call, else by the binder
                if known[2] is None or not known[2](args):
                    known[1](*args)
                return
        arguments = self._prepare(args, kwargs)
        specs = tuple(a.spec for a in arguments)
        executable = self._executable(specs, self.target)
        written = self._check_writable(arguments, executable.ir)
        executable(*(a.runtime for a in arguments))
        if key is not None:
            if len(self._fast) >= _FAST_LIMIT:
                self._fast.pop(next(iter(self._fast)))
            fast = getattr(executable, "fast_call", None)
            self._fast[key] = (self.target, executable, fast(args) if fast is not None else None)
        for param, argument in zip(executable.ir.entry.params, arguments, strict=True):
            # only what the kernel writes goes back (a read-only input stays untouched)
            if argument.original is not None and param.name in written:
                np.copyto(argument.original, argument.runtime)

    def _fast_key(self, args: tuple[Any, ...]) -> tuple[Any, ...] | None:
        """What decides the compiled version and the checks of a call with only
        contiguous numpy arrays, ints and floats, one per parameter; ``None`` for any
        other call (torch tensors, numpy scalars, strided arrays go the full way)."""
        if self._positional is None or len(args) != len(self._positional):
            return None
        parts: list[Any] = [self.pipeline, self.fast_math, self.specialize, self.check_bounds]
        for value in args:
            kind = type(value)
            if kind is np.ndarray:
                flags = value.flags
                if not flags.c_contiguous:
                    return None
                parts.append((value.dtype.num, value.shape if self.specialize else value.ndim,
                              flags.writeable))
            elif kind is int:
                parts.append(("int", value) if self.specialize else int)
            elif kind is float:
                parts.append(float)
            else:
                return None
        return tuple(parts)

    def ir(self, *args: Any, **kwargs: Any) -> Module:
        """The frontend's IR for these arguments (before any pipeline)."""
        return self._module(tuple(a.spec for a in self._prepare(args, kwargs)))

    def compile_for(self, *args: Any, target: Target | str | None = None, **kwargs: Any) -> Any:
        """The compiled artifact (``polyir.driver.compile_ir``'s result) for these
        arguments, not run."""
        specs = tuple(a.spec for a in self._prepare(args, kwargs))
        return self._executable(specs, self.target if target is None else target)

    @property
    def cache(self) -> Mapping[tuple[Any, ...], Any]:
        """Compiled versions, keyed by (argument specs, target, pipeline, fast_math)."""
        return types.MappingProxyType(self._cache)

    # -- compilation ------------------------------------------------------
    def _module(self, specs: tuple[ArgSpec, ...]) -> Module:
        src = self._source
        key = (src.text, src.filename, src.first_line, specs, tuple(sorted(_global_identity(src))))
        module = _IR_CACHE.get(key)
        if module is None:
            module = lower_kernel(src, specs)
            from polyir.ir.verifier import verify
            verify(module)
            if len(_IR_CACHE) >= _IR_CACHE_LIMIT:
                _IR_CACHE.pop(next(iter(_IR_CACHE)))
            _IR_CACHE[key] = module
        return module

    def _executable(self, specs: tuple[ArgSpec, ...], target: Target | str | None) -> Any:
        if self._resolved is not None and self._resolved[0] is target:
            resolved = self._resolved[1]
        else:
            resolved = resolve(target)
            self._resolved = (target, resolved)
        key = (specs, resolved, self.pipeline, self.fast_math)
        executable = self._cache.get(key)
        if executable is None:
            from polyir.driver import compile_ir
            executable = compile_ir(self._module(specs), resolved, self.pipeline,
                                    fast_math=self.fast_math, check_bounds=self.check_bounds)
            if hasattr(executable, "check_bounds"):
                executable.check_bounds = self.check_bounds
            self._cache[key] = executable
        return executable

    # -- arguments --------------------------------------------------------
    def _prepare(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[_Argument]:
        if not kwargs and self._positional is not None and len(args) == len(self._positional):
            return [self._argument(param, value)
                    for param, value in zip(self._positional, args, strict=True)]
        name = self.py_func.__name__
        try:
            bound = self._signature.bind(*args, **kwargs)
        except TypeError as exc:
            raise ArgumentError(f"kernel '{name}': {exc}") from None
        bound.apply_defaults()
        return [self._argument(param, value) for param, value in bound.arguments.items()]

    def _argument(self, param: str, value: Any) -> _Argument:
        where = f"argument '{param}' of kernel '{self.py_func.__name__}'"
        if type(value).__module__.split(".")[0] == "torch" and hasattr(value, "detach"):
            value = _torch_to_numpy(value, where)
        if isinstance(value, np.ndarray):
            try:
                dtype = DType.from_numpy(value.dtype)
            except KeyError:
                raise ArgumentError(f"{where}: unsupported array dtype {value.dtype}") from None
            shape = tuple(int(s) for s in value.shape) if self.specialize else None
            spec = ArgSpec("array", dtype, value.ndim, shape=shape)
            if value.flags.c_contiguous:
                return _Argument(spec, value)
            return _Argument(spec, np.ascontiguousarray(value), original=value)
        if isinstance(value, (bool, np.bool_)):
            raise ArgumentError(f"{where}: bool scalars are not supported; pass an int")
        if isinstance(value, (int, np.integer)):
            spec = ArgSpec("int", value=int(value) if self.specialize else None)
            return _Argument(spec, int(value))
        if type(value) is float:
            return _Argument(ArgSpec("scalar", DType.F64, weak=True), value)
        if isinstance(value, np.floating):
            try:
                dtype = DType.from_numpy(value.dtype)
            except KeyError:
                raise ArgumentError(f"{where}: unsupported scalar dtype {value.dtype}") from None
            return _Argument(ArgSpec("scalar", dtype), np.asarray(value, dtype=value.dtype))
        raise ArgumentError(f"{where}: expected a numpy array, a torch CPU tensor, an int or a "
                            f"float, got {type(value).__name__}")

    def _check_writable(self, arguments: list[_Argument], module: Module) -> frozenset[str]:
        """The buffers ``module`` writes; ``ArgumentError`` when one is read-only."""
        known = self._writes.get(id(module))
        if known is None or known[0] is not module:
            known = (module, frozenset(_written_buffers(module.entry.body)))
            self._writes[id(module)] = known
        written = known[1]
        for param, argument in zip(module.entry.params, arguments, strict=True):
            array = argument.original if argument.original is not None else argument.runtime
            if param.name in written and isinstance(array, np.ndarray) and not array.flags.writeable:
                raise ArgumentError(f"argument '{param.name}' of kernel '{self.py_func.__name__}' "
                                    f"is read-only but the kernel writes it")
        return written


def _torch_to_numpy(tensor: Any, where: str) -> np.ndarray:
    if tensor.device.type != "cpu":
        raise ArgumentError(f"{where}: only CPU tensors are supported, got device {tensor.device}")
    try:
        return tensor.detach().numpy()
    except (TypeError, RuntimeError) as exc:
        raise ArgumentError(f"{where}: tensor of dtype {tensor.dtype} has no numpy view ({exc})") from None


def _written_buffers(body: tuple[Node, ...]) -> set[str]:
    return {node.buffer for node in walk_nodes(body) if isinstance(node, Assign)}


def _global_identity(src: KernelSource) -> set[tuple[str, str]]:
    """What the kernel's global names resolve to (part of the cache key)."""
    names = {n.id for n in ast.walk(src.tree) if isinstance(n, ast.Name)} - src.locals
    return {(name, repr(src.resolve_global(name))) for name in names}


__all__ = ["Kernel", "kernel"]
