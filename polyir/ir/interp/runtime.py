"""Compiled modules (cached) and the per-call runtime object generated code uses."""
from __future__ import annotations

import linecache
import random
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from polyir.ir.interp import gpu
from polyir.ir.interp.binding import bind_symbols
from polyir.ir.interp.codegen import ModuleCompiler
from polyir.ir.interp.errors import InterpretError
from polyir.ir.interp.exprs import describe
from polyir.ir.interp.scalar import helper_namespace
from polyir.ir.nodes import Assign, FragmentStore, Function, Launch, Module, Symbol
from polyir.ir.walk import walk_nodes

PARALLEL_ORDERS = ("forward", "reverse", "shuffle")
_ITEMSIZE = {"f": 4, "d": 8, "b": 1, "i": 4, "q": 8, "?": 1}


@dataclass
class CompiledModule:
    """The generated Python for one module and what is needed to explain faults."""

    module: Module
    source: str
    filename: str
    namespace: dict[str, Any]
    nodes: list[tuple[str, object]]
    line_nodes: list[int]

    def node(self, k: int) -> tuple[Function, object]:
        fn_name, node = self.nodes[k]
        return self.module.function(fn_name), node

    def describe(self, k: int) -> str:
        fn_name, node = self.nodes[k]
        return describe(fn_name, node)

    def out_of_bounds(self, k: int, buffer: str, index: tuple[int, ...], dims: tuple[int, ...]) -> None:
        """Raise the error for an out-of-bounds access (called by generated code)."""
        raise InterpretError(f"{self.describe(k)}: index {list(index)} out of bounds for buffer "
                             f"'{buffer}' of shape {list(dims)}")

    def translate(self, exc: BaseException) -> InterpretError:
        """An ``InterpretError`` for an exception raised inside generated code."""
        tb, line = exc.__traceback__, None
        while tb is not None:
            if tb.tb_frame.f_code.co_filename == self.filename:
                line = tb.tb_lineno
            tb = tb.tb_next
        where = self.describe(self.line_nodes[line - 1]) if line else "interpreted code"
        return InterpretError(f"{where}: {type(exc).__name__}: {exc}")

    def written_buffers(self, fn: Function) -> set[str]:
        """Buffers ``fn`` may write, directly or through the kernels it launches."""
        written: set[str] = set()
        for node in walk_nodes(fn.body):
            if isinstance(node, Assign):
                written.add(node.buffer)
            elif isinstance(node, FragmentStore):
                written.add(node.buffer)
            elif isinstance(node, Launch):
                try:
                    kernel = self.module.function(node.kernel)
                except KeyError:
                    continue
                inner = self.written_buffers(kernel) if kernel is not fn else set()
                for param, arg in zip(kernel.params, node.args, strict=True):
                    if param.name in inner:
                        written.add(arg)
        return written


_CACHE: OrderedDict[tuple[int, bool, bool], tuple[object, CompiledModule]] = OrderedDict()
_CACHE_SIZE = 256
_counter = 0


def compile_module(key_object: object, module: Module, check_bounds: bool,
                   detect_races: bool = False) -> CompiledModule:
    """The compiled form of ``module``, cached by the identity of ``key_object``."""
    global _counter
    key = (id(key_object), check_bounds, detect_races)
    hit = _CACHE.get(key)
    if hit is not None and hit[0] is key_object:
        _CACHE.move_to_end(key)
        return hit[1]
    compiler = ModuleCompiler(module, check_bounds, detect_races)
    source, line_nodes = compiler.compile()
    _counter += 1
    filename = f"<polyir-interpreter-{_counter}>"
    compiled = CompiledModule(module, source, filename, {}, compiler.nodes, line_nodes)
    namespace = helper_namespace()
    namespace["_oob"] = compiled.out_of_bounds
    code = compile(source, filename, "exec")
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    exec(code, namespace)  # noqa: S102 - our own generated code
    compiled.namespace = namespace
    _CACHE[key] = (key_object, compiled)
    if len(_CACHE) > _CACHE_SIZE:
        _, (_, old) = _CACHE.popitem(last=False)
        linecache.cache.pop(old.filename, None)
    return compiled


class Runtime:
    """Per-call state: iteration order for parallel loops, allocation, launches."""

    def __init__(self, compiled: CompiledModule, parallel_order: str, seed: int, detect_races: bool = False):
        if parallel_order not in PARALLEL_ORDERS:
            raise ValueError(f"parallel_order must be one of {PARALLEL_ORDERS}, not {parallel_order!r}")
        self.compiled = compiled
        self.detect_races = detect_races
        self.order = parallel_order
        self.rng = random.Random(seed)
        self.par = {"forward": range, "reverse": self._reversed, "shuffle": self._shuffled}[parallel_order]
        # the float32 rounding cell of generated code, one per call (thread safe)
        self.cell = memoryview(bytearray(4)).cast("f")

    # parallel iteration orders
    @staticmethod
    def _reversed(*bounds: int) -> Iterable[int]:
        return reversed(range(*bounds))

    def _shuffled(self, *bounds: int) -> list[int]:
        items = list(range(*bounds))
        self.rng.shuffle(items)
        return items

    def ordered(self, items: Iterable[Any]) -> list[Any]:
        items = list(items)
        if self.order == "reverse":
            items.reverse()
        elif self.order == "shuffle":
            self.rng.shuffle(items)
        return items

    # memory
    @staticmethod
    def alloc(fmt: str, size: int) -> memoryview:
        """A fresh zero-filled flat buffer of ``size`` elements."""
        return memoryview(bytearray(size * _ITEMSIZE[fmt])).cast(fmt)  # type: ignore[call-overload]

    def size(self, k: int, name: str, dims: tuple[int, ...]) -> int:
        total = 1
        for d in dims:
            if d < 0:
                raise self.error(k, f"buffer '{name}' has a negative dimension: shape {list(dims)}")
            total *= d
        return total

    # errors
    def node(self, k: int) -> tuple[Function, object]:
        return self.compiled.node(k)

    def describe(self, k: int) -> str:
        return self.compiled.describe(k)

    def error(self, k: int, message: str) -> InterpretError:
        return InterpretError(f"{self.describe(k)}: {message}")

    def mapping_error(self, k: int, trips: int, size: int) -> None:
        raise self.error(k, f"GPU-mapped loop has {trips} iterations but the launch provides only "
                            f"{size} along its dimension")

    # GPU
    def run_grid(self, k: int, thread: Any, grid: Any, block: Any, shared: Any, frags: Any) -> None:
        gpu.run_grid(self, k, thread, grid, block, shared, frags)

    def fragment_op(self, payload: tuple[Any, ...]) -> None:
        gpu.fragment_op(self, payload)

    def launch(self, k: int, grid: tuple[int, int, int], args: tuple[Any, ...]) -> None:
        caller, node = self.node(k)
        assert isinstance(node, Launch)
        try:
            kernel = self.compiled.module.function(node.kernel)
        except KeyError:
            raise self.error(k, f"no function named '{node.kernel}' in the module") from None
        if kernel.kind != "kernel":
            raise self.error(k, f"'{node.kernel}' is a {kernel.kind} function, not a kernel")
        if len(args) != len(kernel.params):
            raise self.error(k, f"kernel {kernel.name} takes {len(kernel.params)} arguments, "
                                f"got {len(args)}")
        caller_buffers = caller.buffers
        shapes: dict[str, tuple[int, ...]] = {}
        explicit: dict[str, int] = {}
        views = []
        for param, name, value in zip(kernel.params, node.args, args, strict=True):
            if isinstance(param, Symbol):
                if name in caller_buffers:
                    raise self.error(k, f"argument '{name}' is a buffer but '{param.name}' is a symbol")
                explicit[param.name] = value
                continue
            buf = caller_buffers.get(name)
            if buf is None:
                raise self.error(k, f"argument '{name}' for buffer parameter '{param.name}' is not a buffer")
            if buf.dtype != param.dtype or buf.rank != param.rank:
                raise self.error(k, f"argument '{name}' is {buf.dtype} of rank {buf.rank}; parameter "
                                    f"'{param.name}' is {param.dtype} of rank {param.rank}")
            views.append(value[0])
            shapes[param.name] = tuple(value[1])

        def fail(param: str, message: str) -> InterpretError:
            return self.error(k, f"kernel parameter '{param}': {message}")

        symbols = bind_symbols(kernel, shapes, explicit, fail)
        entry = self.compiled.namespace["_kern_" + kernel.name]
        entry(self, tuple(grid), tuple(node.block), *views, *(symbols[s] for s in kernel.symbols))

