"""Native CPU backend: polyir IR -> LLVM IR -> host machine code, called through ctypes.

``build_cpu(module, target, cache_dir=...)`` splits the module's entry function
into kernels, one per top-level loop nest (``polyir.cpu.split``), canonically
named so that identical nests (the layers of a stack) are one kernel. Each
distinct kernel is lowered (``polyir.llvm.lower`` with
:class:`~polyir.cpu.hooks.CpuHooks`) into its own LLVM module, optimised at O3
with loop and SLP vectorisation for the host CPU and compiled to object code,
through the compile cache (``polyir.cpu.cache``), keyed by its canonical text:
so the optimiser never sees more than one nest at a time, compile time grows
linearly with the number of distinct nests, and a kernel compiled once is
reused by every later build that contains it. A small entry module
(``polyir.cpu.entry``) allocates the shared locals and calls the kernels. All
objects are loaded into one MCJIT engine with ``add_object_file``, which links
the entry's calls to the kernels. The result, a :class:`CpuExecutable`, runs in
place on numpy arrays / torch CPU tensors following the ``Function`` calling
convention.

Kernels take their buffers as ``noalias`` pointers and keep their shapes
(constants stay constants), so the optimiser knows what it knew when the whole
function was one LLVM function. A function of at most
:data:`WHOLE_FUNCTION_NESTS` top-level nests is still compiled as one LLVM
function (fewer modules cost less when there is little to split).

Code is generated for the *small* code model: MCJIT's loader misplaces the
constant pools of an object added after one that calls external functions
when the large (JIT default) code model is used, so several objects in one
engine need the small one.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import logging
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import llvmlite.binding as llvm
from llvmlite import ir

from polyir.compilelog import Progress, StageTimes, logger
from polyir.cpu.args import ArgumentBinder
from polyir.cpu.cache import CompileCache, cache_key, compiler_fingerprint, default_cache_dir
from polyir.cpu.entry import emit_entry
from polyir.cpu.hooks import CpuHooks
from polyir.cpu.parallel import DRAIN_NAME, ParallelRuntime, emit_drain
from polyir.cpu.split import Kernel, SplitFunction, group_nodes, split_function, splittable
from polyir.errors import CompileError
from polyir.ir.nodes import Assign, FragmentStore, Module, Node
from polyir.ir.walk import walk_nodes
from polyir.llvm.lower import lower_function, signature
from polyir.target import Target

_LOCK = threading.RLock()
_STATE: dict[str, Any] = {}
_LOG = logger("cpu")
KERNEL_SPEED_LEVEL = 3
"""LLVM optimisation level of kernels (O3: loop and SLP vectorisation, unrolling)."""
WHOLE_FUNCTION_NESTS = 8
"""Functions of at most this many top-level nests are compiled as one LLVM
function (one module costs less than several when there are few); longer ones
are split into kernels."""
ENTRY_SPEED_LEVEL = 1
"""The entry only allocates and calls: O1 is enough (O3 is slow on a long one)."""
DEFAULT = object()
"""``cache_dir`` default: :func:`polyir.cpu.cache.default_cache_dir`."""


def _initialise() -> None:
    if _STATE:
        return
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    libm = ctypes.util.find_library("m")
    if libm:
        llvm.load_library_permanently(libm)
    triple = llvm.get_process_triple()
    cpu = llvm.get_host_cpu_name()
    features = llvm.get_host_cpu_features().flatten()
    _STATE.update(triple=triple, cpu=cpu, features=features)
    machine = host_machine()
    sources = [p for d in ("llvm", "cpu") for p in (Path(__file__).parent.parent / d).glob("*.py")]
    data_layout = str(machine.target_data)
    _STATE.update(machine=machine, data_layout=data_layout,
                  fingerprint=compiler_fingerprint(sources))


def host_machine() -> llvm.TargetMachine:
    """A new TargetMachine for the host CPU (an MCJIT engine takes ownership of one)."""
    return llvm.Target.from_triple(_STATE["triple"]).create_target_machine(
        cpu=_STATE["cpu"], features=_STATE["features"], opt=3, reloc="pic",
        codemodel="small")


def host_description() -> str:
    """``triple cpu features`` of the host (part of every cache key)."""
    with _LOCK:
        _initialise()
        return f"{_STATE['triple']} {_STATE['cpu']} {_STATE['features']}"


def fingerprint() -> str:
    """The compiler fingerprint that names this version's cache entries."""
    with _LOCK:
        _initialise()
        return str(_STATE["fingerprint"])


def open_cache(cache_dir: Any = DEFAULT) -> CompileCache:
    """The compile cache at ``cache_dir`` (default: :func:`default_cache_dir`) for
    this compiler version."""
    directory = default_cache_dir() if cache_dir is DEFAULT else cache_dir
    return CompileCache(directory, fingerprint())


def optimise(module_ref: llvm.ModuleRef, speed_level: int = 3) -> None:
    """O3 (or ``speed_level``) with loop and SLP vectorisation, for the host target machine."""
    tuning = llvm.create_pipeline_tuning_options(speed_level=speed_level)
    tuning.loop_vectorization = True
    tuning.slp_vectorization = True
    tuning.loop_unrolling = True
    builder = llvm.create_pass_builder(_STATE["machine"], tuning)
    builder.getModulePassManager().run(module_ref, builder)


def _check_external_symbols(ref: llvm.ModuleRef, function: str,
                            provided: frozenset[str] | set[str] = frozenset()) -> None:
    """Every function the code calls must exist in the process (libm, libc) or
    in another object of the build: MCJIT would otherwise jump to address 0."""
    for declared in ref.functions:
        name = declared.name
        if declared.is_declaration and not name.startswith("llvm.") and name not in provided \
                and not llvm.address_of_symbol(name):
            raise CompileError(f"function '{function}': external function '{name}' is not "
                               f"available in this process")


def _written(nodes: tuple[Node, ...]) -> set[str]:
    return {node.buffer for node in walk_nodes(nodes) if isinstance(node, (Assign, FragmentStore))}


def llvm_name(module: Module) -> str:
    """The LLVM symbol of the entry function (prefixed: a polyir function may be
    called ``exp`` or ``free``)."""
    return f"polyir.{module.entry.name}"


def kernel_symbol(kernel: Kernel) -> str:
    """The LLVM symbol of a kernel's code: named by its canonical text's hash."""
    return f"polyir.k.{kernel.key}"


class CpuExecutable:
    """A compiled entry function. Attributes: ``ir`` (the IR module), ``llvm_ir``
    (LLVM IR text as lowered: the entry module, then one module per distinct
    kernel), ``ptx`` (``None``), ``asm`` (host assembly, made on first access),
    ``cache_hit`` (whether all object code came from the cache), ``kernels``
    (kernel calls) and ``distinct_kernels`` (objects compiled or loaded)."""

    ptx = None

    def __init__(self, module: Module, target: Target, llvm_modules: Sequence[str],
                 objects: Sequence[bytes], cache_hit: bool, kernels: int = 1):
        self.ir = module
        self.target = target
        self.llvm_modules = list(llvm_modules)
        self.llvm_ir = "\n".join(self.llvm_modules)
        self.objects = list(objects)
        self.cache_hit = cache_hit
        self.kernels = kernels
        self.distinct_kernels = max(len(self.objects) - 1, 1)
        self.function = module.entry
        self.hooks = CpuHooks(target.cores)
        self.slots = signature(self.function, self.hooks)
        self.binder = ArgumentBinder(self.function, self.slots, _written(self.function.body))
        self._asm: str | None = None
        with _LOCK:
            engine = llvm.create_mcjit_compiler(llvm.parse_assembly(""), host_machine())
            for code in self.objects:
                engine.add_object_file(llvm.ObjectFileRef.from_data(code))
            engine.finalize_object()
            address = engine.get_function_address(llvm_name(module))
            drain_address = engine.get_function_address(DRAIN_NAME)
        if not address:
            raise CompileError(f"function '{self.function.name}': no symbol in object code")
        self._engine = engine
        arg_types = [ctypes.c_void_p if s.kind in ("buffer", "extra") else ctypes.c_int64
                     for s in self.slots]
        self._cfunc = ctypes.CFUNCTYPE(ctypes.c_int32, *arg_types)(address)
        self._runtime = ParallelRuntime(target.cores, drain_address)

    @property
    def asm(self) -> str:
        """Host assembly of the optimised code (every module, entry first)."""
        if self._asm is None:
            with _LOCK:
                _initialise()
                parts = []
                for text in self.llvm_modules:
                    ref = llvm.parse_assembly(text)
                    optimise(ref)
                    parts.append(_STATE["machine"].emit_assembly(ref))
                self._asm = "\n".join(parts)
        return self._asm

    def __call__(self, *args: Any) -> None:
        bound = self.binder.bind(args)
        values = bound.values + [self._runtime.address]
        status = self._cfunc(*values)
        if status == 1:
            raise MemoryError(f"{self.function.name}(): cannot allocate local buffers")
        if status != 0:
            raise RuntimeError(f"{self.function.name}(): the parallel runtime failed "
                               f"(status {status}); outputs may be partly written")
        bound.finish()


def _new_llvm_module(name: str) -> ir.Module:
    llmod = ir.Module(name=name)
    llmod.triple = _STATE["triple"]
    llmod.data_layout = _STATE["data_layout"]
    return llmod


def lower_to_llvm(module: Module, target: Target) -> str:
    """LLVM IR text of the module's entry function for the host, as one LLVM
    function (what :func:`build_cpu` does when a function cannot be split)."""
    _initialise()
    function = module.entry
    llmod = _new_llvm_module(f"polyir.{function.name}")
    lower_function(llmod, function, CpuHooks(target.cores), llvm_name(module))
    return str(llmod)


def lower_kernel(kernel: Kernel, target: Target) -> str:
    """LLVM IR text of one kernel's module (its ``polyir.drain``, if the parallel
    lowering made one, is internal: the entry module exports the only one)."""
    _initialise()
    symbol = kernel_symbol(kernel)
    llmod = _new_llvm_module(symbol)
    lower_function(llmod, kernel.function, CpuHooks(target.cores), symbol)
    drain = llmod.globals.get(DRAIN_NAME)
    if isinstance(drain, ir.Function):
        drain.linkage = "internal"
    return str(llmod)


def lower_entry(split: SplitFunction, target: Target, name: str) -> str:
    """LLVM IR text of the entry module calling ``split``'s kernels."""
    _initialise()
    llmod = _new_llvm_module(name)
    hooks = CpuHooks(target.cores)
    emit_entry(llmod, split, hooks, name, kernel_symbol)
    if target.cores > 1:
        emit_drain(llmod)
    return str(llmod)


@dataclass
class _Unit:
    """One object of a build: a kernel, the entry, or a whole function."""

    what: str
    key: str
    lower: Any               # () -> LLVM IR text
    symbol: str = ""         # the kernel symbol it defines (kernels only)
    speed_level: int = 3     # KERNEL_SPEED_LEVEL; the entry only calls kernels: ENTRY_SPEED_LEVEL
    llvm_ir: str = ""
    object_code: bytes = b""
    hit: bool = False


def _compile_unit(unit: _Unit, times: StageTimes, provided: set[str]) -> None:
    with times.stage("lower", unit.what):
        unit.llvm_ir = unit.lower()
    try:
        ref = llvm.parse_assembly(unit.llvm_ir)
        ref.verify()
    except RuntimeError as error:
        raise CompileError(f"{unit.what}: invalid LLVM IR from lowering: {error}") from None
    with times.stage("optimise", unit.what):
        optimise(ref, unit.speed_level)
    _check_external_symbols(ref, unit.what, provided)
    with times.stage("codegen", unit.what):
        unit.object_code = _STATE["machine"].emit_object(ref)


def _units(module: Module, target: Target, host: str, fingerprint: str
           ) -> tuple[list[_Unit], int]:
    """The objects ``module`` needs, entry last, and the number of kernel calls."""
    function = module.entry
    name = llvm_name(module)
    if not splittable(function) or len(group_nodes(function.body)) <= WHOLE_FUNCTION_NESTS:
        key = cache_key("function", str(module), repr(target), host, fingerprint,
                        str(KERNEL_SPEED_LEVEL))
        return [_Unit(f"function '{function.name}'", key, lambda: lower_to_llvm(module, target),
                      speed_level=KERNEL_SPEED_LEVEL)], 1
    split = split_function(function)
    units = []
    for kernel in split.distinct.values():
        key = cache_key("kernel", kernel.text, repr(target), host, fingerprint,
                        str(KERNEL_SPEED_LEVEL))
        units.append(_Unit(f"function '{function.name}' kernel {kernel.key}", key,
                           lambda k=kernel: lower_kernel(k, target), kernel_symbol(kernel),
                           KERNEL_SPEED_LEVEL))
    key = cache_key("entry", split.entry_text(), repr(target), host, fingerprint)
    units.append(_Unit(f"function '{function.name}' entry", key,
                       lambda: lower_entry(split, target, name), speed_level=ENTRY_SPEED_LEVEL))
    return units, len(split.kernels)


def build_cpu(module: Module, target: Target, cache_dir: Any = DEFAULT) -> CpuExecutable:
    """Compile ``module``'s entry function for the host CPU.

    ``cache_dir``: a directory for the compile cache, ``None`` for no cache,
    default :func:`~polyir.cpu.cache.default_cache_dir`. Raises
    :class:`polyir.CompileError` for constructs the CPU cannot run (barriers,
    fragments, GPU-mapped loops, launches).
    """
    directory = default_cache_dir() if cache_dir is DEFAULT else cache_dir
    with _LOCK:
        _initialise()
        fp = _STATE["fingerprint"]
        cache = CompileCache(directory, fp)
        what = f"cpu {module.entry.name}"
        times = StageTimes(_LOG, what)
        with times.stage("split"):
            units, calls = _units(module, target, host_description(), fp)
        provided = {unit.symbol for unit in units if unit.symbol}
        with times.stage("cache"):
            for unit in units:
                entry = cache.load(unit.key)
                if entry is not None:
                    unit.llvm_ir, unit.object_code, unit.hit = entry.llvm_ir, entry.object_code, True
        missing = [unit for unit in units if not unit.hit]
        progress = Progress(_LOG, what, "kernel", len(missing))
        for done, unit in enumerate(missing, 1):
            _compile_unit(unit, times, provided)
            _store(cache, unit, module, target)
            progress.step(done)
        try:
            with times.stage("load"):
                executable = _executable(module, target, units, calls)
        except Exception as error:  # unusable cached object code: recompile those
            hits = [unit for unit in units if unit.hit]
            if not hits:
                raise
            import warnings
            warnings.warn(f"polyir: cached object for {module.entry.name} failed to load "
                          f"({error}); recompiling", RuntimeWarning, stacklevel=2)
            for unit in hits:
                cache.invalidate(unit.key)
                unit.hit = False
                _compile_unit(unit, times, provided)
                _store(cache, unit, module, target)
            executable = _executable(module, target, units, calls)
        if cache.stored:
            with times.stage("evict"):
                cache.evict()
        if _LOG.isEnabledFor(logging.INFO):
            from_cache = sum(unit.hit for unit in units)
            _LOG.info("%s: %d kernel calls, %d objects (%d from the cache) in %.2f s: %s",
                      what, calls, len(units), from_cache, times.elapsed(), times.summary())
        return executable


def _store(cache: CompileCache, unit: _Unit, module: Module, target: Target) -> None:
    cache.store(unit.key, unit.object_code, unit.llvm_ir,
                {"function": module.entry.name, "unit": unit.what, "target": repr(target)})


def _executable(module: Module, target: Target, units: list[_Unit], calls: int) -> CpuExecutable:
    ordered = units[-1:] + units[:-1]  # entry (or the whole function) first
    return CpuExecutable(module, target, [u.llvm_ir for u in ordered],
                         [u.object_code for u in ordered], all(u.hit for u in units), calls)
