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

Every entry function also gets ``i32 @polyir.F.packed(ptr args)``, which reads
its arguments from an array of 64-bit words (pointers and integers) and calls
``@polyir.F``: one ctypes argument per call instead of one per parameter.

Kernels take their buffers as ``noalias`` pointers and keep their shapes
(constants stay constants), so the optimiser knows what it knew when the whole
function was one LLVM function. A function of at most
:data:`WHOLE_FUNCTION_NESTS` top-level nests is still compiled as one LLVM
function (fewer modules cost less when there is little to split). Parallel
loops inside kernels run on the OpenMP runtime as in a whole function; the
runtime globals they share (size threshold, dispatch counters) are defined
once, by the entry module (``polyir.cpu.abi``).

Code is generated for the *small* code model: MCJIT's loader misplaces the
constant pools of an object added after one that calls external functions
when the large (JIT default) code model is used, so several objects in one
engine need the small one.
"""
from __future__ import annotations

import atexit
import ctypes
import ctypes.util
import logging
import os
import queue
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import llvmlite.binding as llvm
from llvmlite import ir

from polyir.compilelog import Progress, StageTimes, logger
from polyir.cpu.abi import KERNEL_GLOBALS, define_runtime_globals, global_names
from polyir.cpu.args import ArgumentBinder
from polyir.cpu.cache import CompileCache, cache_key, default_cache_dir
from polyir.cpu.entry import emit_entry
from polyir.cpu.hooks import CpuHooks
from polyir.cpu.llvm_worker import LLVMCrash, LLVMWorker
from polyir.cpu.machine import (
    _LOCK,
    _STATE,
    _check_external_symbols,
    _initialise,
    fingerprint,
    host_description,
    host_machine,
    optimise,
    target_machine,
    vector_width_features,
)
from polyir.cpu.omp import openmp, start_team
from polyir.cpu.split import Kernel, SplitFunction, group_nodes, split_function, splittable
from polyir.errors import BoundsError, CompileError
from polyir.ir.nodes import Assign, For, FragmentStore, Module, Node
from polyir.ir.printer import print_module
from polyir.ir.walk import walk_nodes
from polyir.llvm.diagnostics import llvm_diagnostics
from polyir.llvm.hooks import STATUS_SUBSCRIPT
from polyir.llvm.lower import ParamSlot, lower_function, signature
from polyir.target import Target

_LIVE: weakref.WeakSet[CpuExecutable] = weakref.WeakSet()
_FORKED = False
"""True in a child process made by ``fork()``: libgomp's thread pool did not
survive it (a dispatch would wait forever for threads that are not there), so
every parallel loop runs serially from then on."""


def _serial_after_fork() -> None:
    global _FORKED
    _FORKED = True
    for executable in list(_LIVE):
        executable._keep_serial()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_serial_after_fork)

_LOG = logger("cpu")
KERNEL_SPEED_LEVEL = 3
"""LLVM optimisation level of kernels (O3: loop and SLP vectorisation, unrolling)."""
WHOLE_FUNCTION_NESTS = 8
"""Functions of at most this many top-level nests are compiled as one LLVM
function (one module costs less than several when there are few), unless
some of their kernels repeat (a stack of identical layers: each distinct
kernel is then compiled once); longer ones are split into kernels."""
ENTRY_SPEED_LEVEL = 1
"""The entry only allocates and calls: O1 is enough (O3 is slow on a long one)."""
DEFAULT = object()
"""``cache_dir`` default: :func:`polyir.cpu.cache.default_cache_dir`."""


def open_cache(cache_dir: Any = DEFAULT) -> CompileCache:
    """The compile cache at ``cache_dir`` (default: :func:`default_cache_dir`) for
    this compiler version."""
    directory = default_cache_dir() if cache_dir is DEFAULT else cache_dir
    return CompileCache(directory, fingerprint())


def _written(nodes: tuple[Node, ...]) -> set[str]:
    return {node.buffer for node in walk_nodes(nodes) if isinstance(node, (Assign, FragmentStore))}


def llvm_name(module: Module) -> str:
    """The LLVM symbol of the entry function (prefixed: a polyir function may be
    called ``exp`` or ``free``)."""
    return f"polyir.{module.entry.name}"


def packed_name(module: Module) -> str:
    """The LLVM symbol of the entry's packed-arguments wrapper."""
    return f"{llvm_name(module)}.packed"


def kernel_symbol(kernel: Kernel) -> str:
    """The LLVM symbol of a kernel's code: named by its canonical text's hash."""
    return f"polyir.k.{kernel.key}"


def parallel_cores(target: Target) -> int:
    """Threads a dispatch may use: ``target.cores``, or 1 without an OpenMP
    runtime in this process (parallel loops then compile serially)."""
    if target.cores <= 1:
        return 1
    return target.cores if openmp() is not None else 1


def _emit_packed_wrapper(llmod: Any, entry: Any, slots: list[ParamSlot], name: str) -> None:
    """``i32 @name(ptr args)``: ``entry(args[0], args[1], ...)`` with each
    64-bit word converted to the parameter's type (pointer or i64)."""
    i64 = ir.IntType(64)
    wrapper = ir.Function(llmod, ir.FunctionType(entry.function_type.return_type,
                                                 [ir.PointerType()]), name)
    builder = ir.IRBuilder(wrapper.append_basic_block("entry"))
    words = wrapper.args[0]
    arguments = []
    for position, (slot, param_type) in enumerate(zip(slots, entry.function_type.args,
                                                      strict=True)):
        word = builder.load(builder.gep(words, [ir.Constant(i64, position)], inbounds=True,
                                        source_etype=i64), typ=i64)
        arguments.append(builder.inttoptr(word, param_type) if slot.kind != "symbol" else word)
    builder.ret(builder.call(entry, arguments))


class CpuExecutable:
    """A compiled entry function. Attributes: ``ir`` (the IR module), ``llvm_ir``
    (LLVM IR text as lowered: the entry module, then one module per distinct
    kernel), ``ptx`` (``None``), ``asm`` (host assembly, made on first access),
    ``cache_hit`` (whether all object code came from the cache), ``kernels``
    (kernel calls) and ``distinct_kernels`` (objects compiled or loaded)."""

    ptx = None

    def __init__(self, module: Module, target: Target, llvm_modules: Sequence[str],
                 objects: Sequence[bytes], cache_hit: bool, kernels: int = 1,
                 fast_math: bool = False, globals_prefix: str | None = None,
                 check_bounds: bool = True):
        self.ir = module
        self.check_bounds = check_bounds
        """Check subscripts against the arguments before each call (``polyir.cpu.bounds``)."""
        self._bounds: Any = None
        self.target = target
        self.fast_math = fast_math
        self.llvm_modules = list(llvm_modules)
        self.llvm_ir = "\n".join(self.llvm_modules)
        self.objects = list(objects)
        self.cache_hit = cache_hit
        self.kernels = kernels
        self.distinct_kernels = max(len(self.objects) - 1, 1)
        self.function = module.entry
        self.slots = signature(self.function, CpuHooks())
        self.binder = ArgumentBinder(self.function, self.slots, _written(self.function.body))
        self._asm: str | None = None
        with _LOCK, llvm_diagnostics(f"loading '{module.entry.name}'"):
            engine = llvm.create_mcjit_compiler(llvm.parse_assembly(""), host_machine())
            for code in self.objects:
                engine.add_object_file(llvm.ObjectFileRef.from_data(code))
            engine.finalize_object()
            address = engine.get_function_address(packed_name(module))
            prefix = globals_prefix or llvm_name(module)
            self._globals = {kind: engine.get_global_value_address(name)
                             for kind, name in global_names(prefix).items()}
        if not address:
            raise CompileError(f"function '{self.function.name}': no symbol in object code")
        self._engine = engine
        self._packed = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p)(address)
        self._words = ctypes.c_int64 * len(self.slots)
        with _LOCK:
            _LIVE.add(self)
            forked = _FORKED
            if forked:
                self._keep_serial()
        cores = parallel_cores(target)
        if not forked and cores > 1 and any(isinstance(node, For) and node.parallel
                                            for node in walk_nodes(self.function.body)):
            start_team(cores)   # the first dispatch must not pay for creating the threads

    def _keep_serial(self) -> None:
        """Run every parallel loop serially from now on (see ``_FORKED``)."""
        if self._globals["min_work"]:
            ctypes.c_double.from_address(self._globals["min_work"]).value = float("inf")

    @property
    def asm(self) -> str:
        """Host assembly of the optimised code (every module, entry first)."""
        if self._asm is None:
            with _LOCK, llvm_diagnostics(f"assembly of '{self.function.name}'"):
                _initialise()
                parts = []
                for text in self.llvm_modules:
                    ref = llvm.parse_assembly(text)
                    optimise(ref, self.target.vector_bits)
                    parts.append(target_machine(self.target.vector_bits).emit_assembly(ref))
                self._asm = "\n".join(parts)
        return self._asm

    def __call__(self, *args: Any) -> None:
        """Run on ``args`` (the entry function's parameters, in order) in place;
        raises ``polyir.ArgumentError`` before anything runs for bad arguments,
        ``MemoryError`` when a local buffer cannot be allocated."""
        bound = self.binder.bind(args)
        self.call_words(self._words(*bound.values))
        bound.finish()

    def fast_call(self, args: Sequence[Any]) -> Callable[[Sequence[Any]], bool] | None:
        """For calls like ``args`` (checked here in full): a function that runs a
        call whose arguments differ from them only in their arrays' data and
        returns ``True``, or returns ``False`` without running when the call
        needs the full checks of ``__call__`` (``ArgumentBinder.fast_binding``;
        ``None`` where that does not apply)."""
        binding = self.binder.fast_binding(args)
        if binding is None:
            return None
        words_type, call_words = self._words, self.call_words

        def call(given: Sequence[Any]) -> bool:
            prepared = binding.words(given)
            if prepared is None:
                return False
            values, keep = prepared
            call_words(words_type(*values))
            del keep
            return True
        return call

    def call_words(self, words: Any) -> None:
        """Run on raw argument words, unchecked: ``words`` is a ctypes array of
        ``len(self.slots)`` int64 (data pointers of contiguous arrays of the
        right dtype and shape, then symbol values, in ``self.slots`` order)
        that must stay alive during the call. For callers that checked the
        arguments once (``polyir.frontends.fx``'s prepared plans)."""
        if self.check_bounds:
            if self._bounds is None:
                from polyir.cpu.bounds import BoundsCheck
                self._bounds = BoundsCheck(self.function, self.slots)
            if self._bounds.needed:
                self._bounds.check_words(words)
        status = self._packed(ctypes.addressof(words))
        if status:
            self._raise(status)

    def _raise(self, status: int) -> None:
        if status == 1:
            raise MemoryError(f"{self.function.name}(): cannot allocate local buffers")
        if status == STATUS_SUBSCRIPT:
            from polyir.cpu.bounds import data_dependent_subscripts
            raise BoundsError(f"{self.function.name}(): a data-dependent subscript took a value "
                              f"outside its buffer (checked in the loop: outputs may be partly "
                              f"written); the function's data-dependent subscripts: "
                              + "; ".join(data_dependent_subscripts(self.function)))
        raise RuntimeError(f"{self.function.name}(): native code failed (status {status}); "
                           f"outputs may be partly written")

    def parallel_stats(self) -> dict[str, int]:
        """``{"dispatches": n, "team": t, "deferred": d}``: how many parallel
        loops ran on the OpenMP runtime so far (loops the size policy kept
        serial do not count), the team size of the latest dispatch (0 before
        any), and how many big-enough loops ran serially because the team had
        come late at that loop just before (``polyir.cpu.policy.LateTeam``).
        Counted over all the kernels of a split build."""
        stats = {}
        for kind in ("dispatches", "team", "deferred"):
            address = self._globals[kind]
            stats[kind] = ctypes.c_int64.from_address(address).value if address else 0
        return stats

    def _set_late_ns(self, nanoseconds: int) -> None:
        """Tests: the lateness above which a team counts as late."""
        address = self._globals["late_ns"]
        if address:
            ctypes.c_int64.from_address(address).value = nanoseconds


def _new_llvm_module(name: str) -> ir.Module:
    llmod = ir.Module(name=name)
    llmod.triple = _STATE["triple"]
    llmod.data_layout = _STATE["data_layout"]
    return llmod


def _hooks(target: Target, fast_math: bool, shared_globals: bool = False,
           check_subscripts: bool = False) -> CpuHooks:
    return CpuHooks(parallel_cores(target), target.min_parallel_work, fast_math,
                    target.team_late_ns, target.work_unit_ns, shared_globals, check_subscripts,
                    target.vector_bits)


def lower_to_llvm(module: Module, target: Target, fast_math: bool = False,
                  check_subscripts: bool = False) -> str:
    """LLVM IR text of the module's entry function (and its packed wrapper) for
    the host, as one LLVM function (what :func:`build_cpu` does when a function
    is not split); ``fast_math`` puts ``contract reassoc nsz`` on float operations;
    ``check_subscripts`` checks data-dependent subscripts in the loop."""
    _initialise()
    function = module.entry
    llmod = _new_llvm_module(f"polyir.{function.name}")
    lowered = lower_function(llmod, function, _hooks(target, fast_math, False, check_subscripts),
                             llvm_name(module))
    _emit_packed_wrapper(llmod, llmod.get_global(lowered.llvm_name), lowered.params,
                         packed_name(module))
    return str(llmod)


def lower_kernel(kernel: Kernel, target: Target, fast_math: bool = False,
                 check_subscripts: bool = False) -> str:
    """LLVM IR text of one kernel's module (its parallel loops use the runtime
    globals the entry module defines, ``polyir.cpu.abi.KERNEL_GLOBALS``)."""
    _initialise()
    symbol = kernel_symbol(kernel)
    llmod = _new_llvm_module(symbol)
    lower_function(llmod, kernel.function,
                   _hooks(target, fast_math, shared_globals=True, check_subscripts=check_subscripts),
                   symbol)
    return str(llmod)


def lower_entry(split: SplitFunction, target: Target, module: Module) -> str:
    """LLVM IR text of the entry module calling ``split``'s kernels, with its
    packed wrapper and the runtime globals the kernels share."""
    _initialise()
    name = llvm_name(module)
    llmod = _new_llvm_module(name)
    hooks = _hooks(target, False)
    entry = emit_entry(llmod, split, hooks, name, kernel_symbol)
    _emit_packed_wrapper(llmod, entry, signature(split.function, hooks), packed_name(module))
    define_runtime_globals(llmod, KERNEL_GLOBALS, target.min_parallel_work, target.team_late_ns)
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
    whole: bool = False      # a whole function that could be split into kernels instead


class _SplitAndRetry(Exception):
    """LLVM aborted on a whole function that splits into kernels: compile those
    instead, so that only the nest LLVM cannot vectorise loses the vectoriser."""

    def __init__(self, what: str, crash: LLVMCrash):
        super().__init__(what)
        self.what, self.crash = what, crash


def _compile_units(units: list[_Unit], target: Target, times: StageTimes, provided: set[str],
                   progress: Progress | None = None) -> None:
    """Object code for every unit: lowered (and verified) here, one after the
    other, each handed at once to the LLVM workers (up to one per core), which
    optimise and emit it while the next one is lowered. ``times``: ``lower``
    is this thread's lowering; ``optimise+codegen`` the wait for the workers
    after the last unit was lowered."""
    if not units:       # every object came from the cache
        return
    machine = (_STATE["triple"], _STATE["cpu"], _STATE["features"] + vector_width_features(target.vector_bits))
    lanes = min(len(units), len(_WORKERS))
    done: list[_Unit] = []
    failures: list[BaseException] = []
    counter = threading.Lock()
    ready: queue.SimpleQueue[tuple[_Unit, llvm.ModuleRef] | None] = queue.SimpleQueue()

    def lane(k: int) -> None:
        while True:
            item = ready.get()
            if item is None:
                return
            if failures:
                continue
            unit, ref = item
            start = time.perf_counter()
            try:
                unit.object_code, externals = _isolated(unit, machine, _WORKERS[k])
                _check_external_names(externals, unit.what, provided)
            except OSError as error:   # no worker process: compile here
                _LOG.warning("polyir: no LLVM worker process (%s); compiling in this process", error)
                try:
                    with counter, llvm_diagnostics(unit.what):
                        optimise(ref, target.vector_bits, unit.speed_level)
                        _check_external_symbols(ref, unit.what, provided)
                        unit.object_code = target_machine(target.vector_bits).emit_object(ref)
                except BaseException as again:  # re-raised in the caller's thread
                    failures.append(again)
                    continue
            except BaseException as error:  # re-raised in the caller's thread
                failures.append(error)
                continue
            _LOG.debug("%s: optimise+codegen %.3f s", unit.what, time.perf_counter() - start)
            with counter:
                done.append(unit)
                if progress is not None:
                    progress.step(len(done))

    threads = [threading.Thread(target=lane, args=(k,), daemon=True) for k in range(lanes)]
    for thread in threads:
        thread.start()
    try:
        for unit in units:
            if failures:
                break
            with times.stage("lower", unit.what):
                unit.llvm_ir = unit.lower()
            try:
                with llvm_diagnostics(unit.what):
                    ref = llvm.parse_assembly(unit.llvm_ir)
                    ref.verify()
            except RuntimeError as error:
                raise CompileError(f"{unit.what}: invalid LLVM IR from lowering: {error}") from None
            ready.put((unit, ref))
    finally:
        for _ in threads:
            ready.put(None)
        with times.stage("optimise+codegen"):
            for thread in threads:
                thread.join()
    if failures:
        raise failures[0]


_WORKERS = [LLVMWorker() for _ in range(max(1, min(4, os.cpu_count() or 1)))]
"""One LLVM worker process per core (at most 4), each started on first use."""
for _worker in _WORKERS:
    atexit.register(_worker.close)


def _isolated(unit: _Unit, machine: tuple[str, str, str], worker: LLVMWorker) -> tuple[bytes, list[str]]:
    """Object code and external functions of ``unit`` from the LLVM worker
    (``polyir.cpu.llvm_worker``). When LLVM aborts there: a whole function that
    splits raises :class:`_SplitAndRetry` (its kernels are compiled instead);
    anything else is compiled again preferring 256-bit vectors (where the host
    preferred 512), then without the loop vectoriser; an abort there too is a
    ``CompileError``."""
    try:
        return worker.compile(unit.llvm_ir, machine, unit.speed_level, vectorize=True)
    except LLVMCrash as crash:
        if unit.whole:
            raise _SplitAndRetry(unit.what, crash) from None
        first = crash
    except RuntimeError as error:
        raise CompileError(f"{unit.what}: LLVM failed: {error}") from None
    narrower = _narrower(machine)
    if narrower is not None:   # the vectoriser's choice of width is where it aborts
        try:
            result = worker.compile(unit.llvm_ir, narrower, unit.speed_level, vectorize=True)
        except LLVMCrash:
            pass
        else:
            _LOG.warning("polyir: %s: LLVM aborted (%s); compiled it again preferring 256-bit "
                         "vectors", unit.what, first)
            return result
    _LOG.warning("polyir: %s: LLVM aborted (%s); compiling it again without the loop vectoriser",
                 unit.what, first)
    try:
        return worker.compile(unit.llvm_ir, machine, unit.speed_level, vectorize=False)
    except (LLVMCrash, RuntimeError) as again:
        raise CompileError(f"{unit.what}: LLVM aborted while optimising ({first}), and again "
                           f"without the loop vectoriser ({again})") from None


def _narrower(machine: tuple[str, str, str]) -> tuple[str, str, str] | None:
    """``machine`` preferring 256-bit vectors where it preferred 512 (else ``None``)."""
    triple, cpu_name, features = machine
    if "-prefer-256-bit" not in features:
        return None
    return triple, cpu_name, features.replace("-prefer-256-bit", "+prefer-256-bit")


def _check_external_names(names: list[str], function: str, provided: set[str]) -> None:
    """:func:`_check_external_symbols` for the names the worker reported."""
    for name in names:
        if name not in provided and not llvm.address_of_symbol(name):
            raise CompileError(f"function '{function}': external function '{name}' is not "
                               f"available in this process")


def _units(module: Module, target: Target, fast_math: bool, host: str, fingerprint: str,
           check: bool = False, force_split: bool = False) -> tuple[list[_Unit], int, bool]:
    """The objects ``module`` needs, entry last, the number of kernel calls, and
    whether it was split (``check``: data-dependent subscripts checked in the loop;
    ``force_split``: one kernel per nest however few nests there are)."""
    function = module.entry
    options = (repr(target), host, fingerprint, f"fast_math={fast_math}",
               f"parallel_cores={parallel_cores(target)}", f"check_subscripts={check}")
    can_split = splittable(function)
    split = None
    if can_split and (force_split or len(group_nodes(function.body)) > WHOLE_FUNCTION_NESTS):
        split = split_function(function)
    elif can_split:
        candidate = split_function(function)
        if len(candidate.distinct) < len(candidate.kernels):   # kernels repeat: each compiled once
            split = candidate
    if split is None:
        key = cache_key("function", print_module(module), *options, str(KERNEL_SPEED_LEVEL))
        return [_Unit(f"function '{function.name}'", key,
                      lambda: lower_to_llvm(module, target, fast_math, check),
                      speed_level=KERNEL_SPEED_LEVEL, whole=can_split)], 1, False
    units = []
    for kernel in split.distinct.values():
        key = cache_key("kernel", kernel.text, *options, str(KERNEL_SPEED_LEVEL))
        units.append(_Unit(f"function '{function.name}' kernel {kernel.key}", key,
                           lambda k=kernel: lower_kernel(k, target, fast_math, check),
                           kernel_symbol(kernel),
                           KERNEL_SPEED_LEVEL))
    key = cache_key("entry", f"{module.entry.name}\n{split.entry_text()}", *options)
    units.append(_Unit(f"function '{function.name}' entry", key,
                       lambda: lower_entry(split, target, module), speed_level=ENTRY_SPEED_LEVEL))
    return units, len(split.kernels), True


def build_cpu(module: Module, target: Target, cache_dir: Any = DEFAULT,
              fast_math: bool = False, check_bounds: bool = True) -> CpuExecutable:
    """Compile ``module``'s entry function for the host CPU.

    ``cache_dir``: a directory for the compile cache, ``None`` for no cache,
    default :func:`~polyir.cpu.cache.default_cache_dir`. ``fast_math``: allow
    FMA contraction and reassociation of float operations (faster, vectorised
    reductions; results differ from the exact ones by rounding).
    ``check_bounds``: check every access against the arguments before each
    call (``polyir.cpu.bounds``; ``polyir.BoundsError``). Raises
    :class:`polyir.CompileError` for constructs the CPU cannot run (barriers,
    fragments, GPU-mapped loops, launches).
    """
    directory = default_cache_dir() if cache_dir is DEFAULT else cache_dir
    fast_math = bool(fast_math)
    with _LOCK:
        _initialise()
        fp = _STATE["fingerprint"]
        cache = CompileCache(directory, fp)
        what = f"cpu {module.entry.name}"
        times = StageTimes(_LOG, what)
        def compile_missing(force_split: bool) -> tuple[list[_Unit], int, bool, set[str],
                                                        list[_Unit]]:
            with times.stage("split"):
                units, calls, split = _units(module, target, fast_math, host_description(), fp,
                                             check_bounds, force_split)
            provided = {unit.symbol for unit in units if unit.symbol}
            with times.stage("cache"):
                for unit in units:
                    entry = cache.load(unit.key)
                    if entry is not None:
                        unit.llvm_ir, unit.object_code, unit.hit = entry.llvm_ir, entry.object_code, True
            missing = [unit for unit in units if not unit.hit]
            _compile_units(missing, target, times, provided,
                           Progress(_LOG, what, "kernel", len(missing)))
            return units, calls, split, provided, missing

        try:
            units, calls, split, provided, missing = compile_missing(False)
        except _SplitAndRetry as crash:
            _LOG.warning("polyir: %s: LLVM aborted (%s); compiling its nests as separate kernels "
                         "(a kernel that aborts again is compiled without the loop vectoriser)",
                         crash.what, crash.crash)
            units, calls, split, provided, missing = compile_missing(True)
        for unit in missing:
            _store(cache, unit, module, target, fast_math)
        build = _Build(module, target, units, calls, fast_math, split, check_bounds)
        try:
            with times.stage("load"):
                executable = build.executable()
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
            _compile_units(hits, target, times, provided)
            for unit in hits:
                _store(cache, unit, module, target, fast_math)
            executable = build.executable()
        if cache.stored:
            with times.stage("evict"):
                cache.evict()
        if _LOG.isEnabledFor(logging.INFO):
            from_cache = sum(unit.hit for unit in units)
            _LOG.info("%s: %d kernel calls, %d objects (%d from the cache) in %.2f s: %s",
                      what, calls, len(units), from_cache, times.elapsed(), times.summary())
        return executable


def _store(cache: CompileCache, unit: _Unit, module: Module, target: Target,
           fast_math: bool) -> None:
    cache.store(unit.key, unit.object_code, unit.llvm_ir,
                {"function": module.entry.name, "unit": unit.what, "target": repr(target),
                 "fast_math": fast_math})


@dataclass
class _Build:
    """What :class:`CpuExecutable` is made of, once every unit has object code."""

    module: Module
    target: Target
    units: list[_Unit]
    calls: int
    fast_math: bool
    split: bool
    check_bounds: bool = True

    def executable(self) -> CpuExecutable:
        ordered = self.units[-1:] + self.units[:-1]  # entry (or the whole function) first
        return CpuExecutable(self.module, self.target, [u.llvm_ir for u in ordered],
                             [u.object_code for u in ordered], all(u.hit for u in self.units),
                             self.calls, self.fast_math,
                             KERNEL_GLOBALS if self.split else None, self.check_bounds)
