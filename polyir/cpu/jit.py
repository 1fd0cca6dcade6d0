"""Native CPU backend: polyir IR -> LLVM IR -> host machine code, called through ctypes.

``build_cpu(module, target, cache_dir=...)`` lowers the module's entry function
(``polyir.llvm.lower`` with :class:`~polyir.cpu.hooks.CpuHooks`), optimises it
at O3 with loop and SLP vectorisation for the host CPU, emits object code
(through the compile cache, ``polyir.cpu.cache``) and loads it into an MCJIT
engine with ``add_object_file``. The result, a :class:`CpuExecutable`, runs in
place on numpy arrays / torch CPU tensors following the ``Function`` calling
convention.

Every entry function also gets ``i32 @polyir.F.packed(ptr args)``, which reads
its arguments from an array of 64-bit words (pointers and integers) and calls
``@polyir.F``: one ctypes argument per call instead of one per parameter.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import os
import threading
import weakref
from pathlib import Path
from typing import Any

import llvmlite.binding as llvm

from polyir.cpu.abi import global_names
from polyir.cpu.args import ArgumentBinder
from polyir.cpu.cache import CompileCache, cache_key, compiler_fingerprint, default_cache_dir
from polyir.cpu.hooks import CpuHooks
from polyir.cpu.omp import openmp
from polyir.errors import CompileError
from polyir.ir.nodes import Assign, FragmentStore, Module, Node
from polyir.ir.printer import print_module
from polyir.ir.walk import walk_nodes
from polyir.llvm.lower import ParamSlot, lower_function, signature
from polyir.target import Target

_LOCK = threading.RLock()
_STATE: dict[str, Any] = {}
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


def host_machine(vector_bits: int | None = None) -> llvm.TargetMachine:
    """A new TargetMachine for the host CPU (an MCJIT engine takes ownership of
    one), preferring ``vector_bits``-wide vectors when given (see
    :func:`vector_width_features`)."""
    features = _STATE["features"] + vector_width_features(vector_bits)
    return llvm.Target.from_triple(_STATE["triple"]).create_target_machine(
        cpu=_STATE["cpu"], features=features, opt=3, reloc="pic", codemodel="jitdefault")


def vector_width_features(vector_bits: int | None) -> str:
    """Subtarget features that make LLVM prefer ``vector_bits``-wide vectors on
    x86 (``Target.vector_bits``): LLVM's own tuning for AVX-512 hosts prefers
    256 bits; 512 lifts that, 128 asks for SSE widths; ``None``: LLVM's
    default. Other architectures: nothing."""
    if vector_bits is None or not _STATE["triple"].startswith(("x86_64", "i686")):
        return ""
    if vector_bits >= 512:
        return ",-prefer-256-bit"
    if vector_bits >= 256:
        return ",+prefer-256-bit"
    return ",+prefer-128-bit"


def target_machine(vector_bits: int) -> llvm.TargetMachine:
    """The (cached) TargetMachine that optimises and emits code for ``vector_bits``."""
    machines = _STATE.setdefault("machines", {})
    if vector_bits not in machines:
        machines[vector_bits] = host_machine(vector_bits)
    return machines[vector_bits]


def host_description() -> str:
    """``triple cpu features`` of the host (part of every cache key)."""
    with _LOCK:
        _initialise()
        return f"{_STATE['triple']} {_STATE['cpu']} {_STATE['features']}"


def optimise(module_ref: llvm.ModuleRef, vector_bits: int = 256) -> None:
    """O3 with loop and SLP vectorisation, for the host with ``vector_bits``-wide
    vectors preferred."""
    tuning = llvm.create_pipeline_tuning_options(speed_level=3)
    tuning.loop_vectorization = True
    tuning.slp_vectorization = True
    tuning.loop_unrolling = True
    builder = llvm.create_pass_builder(target_machine(vector_bits), tuning)
    builder.getModulePassManager().run(module_ref, builder)


def _check_external_symbols(ref: llvm.ModuleRef, function: str) -> None:
    """Every function the code calls must exist in the process (libm, libc):
    MCJIT would otherwise jump to address 0."""
    for declared in ref.functions:
        name = declared.name
        if declared.is_declaration and not name.startswith("llvm.") \
                and not llvm.address_of_symbol(name):
            raise CompileError(f"function '{function}': external function '{name}' is not "
                               f"available in this process")


def _written(nodes: tuple[Node, ...]) -> set[str]:
    return {node.buffer for node in walk_nodes(nodes) if isinstance(node, (Assign, FragmentStore))}


def llvm_name(module: Module) -> str:
    """The LLVM symbol of the entry function (prefixed: a polyir function may be
    called ``exp`` or ``free``)."""
    return f"polyir.{module.entry.name}"


def packed_name(module: Module) -> str:
    """The LLVM symbol of the entry's packed-arguments wrapper."""
    return f"{llvm_name(module)}.packed"


def parallel_cores(target: Target) -> int:
    """Threads a dispatch may use: ``target.cores``, or 1 without an OpenMP
    runtime in this process (parallel loops then compile serially)."""
    if target.cores <= 1:
        return 1
    return target.cores if openmp() is not None else 1


def _emit_packed_wrapper(llmod: Any, entry: Any, slots: list[ParamSlot], name: str) -> None:
    """``i32 @name(ptr args)``: ``entry(args[0], args[1], ...)`` with each
    64-bit word converted to the parameter's type (pointer or i64)."""
    from llvmlite import ir

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
    (LLVM IR text as lowered), ``ptx`` (``None``), ``asm`` (host assembly, made on
    first access), ``cache_hit`` (whether the object code came from the cache)."""

    ptx = None

    def __init__(self, module: Module, target: Target, llvm_ir: str, object_code: bytes,
                 cache_hit: bool, fast_math: bool = False):
        self.ir = module
        self.target = target
        self.fast_math = fast_math
        self.llvm_ir = llvm_ir
        self.object_code = object_code
        self.cache_hit = cache_hit
        self.function = module.entry
        self.slots = signature(self.function, CpuHooks())
        self.binder = ArgumentBinder(self.function, self.slots, _written(self.function.body))
        self._asm: str | None = None
        with _LOCK:
            engine = llvm.create_mcjit_compiler(llvm.parse_assembly(""), host_machine())
            engine.add_object_file(llvm.ObjectFileRef.from_data(object_code))
            engine.finalize_object()
            address = engine.get_function_address(packed_name(module))
            self._globals = {kind: engine.get_global_value_address(name)
                             for kind, name in global_names(llvm_name(module)).items()}
        if not address:
            raise CompileError(f"function '{self.function.name}': no symbol in object code")
        self._engine = engine
        self._packed = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p)(address)
        self._words = ctypes.c_int64 * len(self.slots)
        with _LOCK:
            _LIVE.add(self)
            if _FORKED:
                self._keep_serial()

    def _keep_serial(self) -> None:
        """Run every parallel loop serially from now on (see ``_FORKED``)."""
        if self._globals["min_work"]:
            ctypes.c_double.from_address(self._globals["min_work"]).value = float("inf")

    @property
    def asm(self) -> str:
        """Host assembly of the optimised code."""
        if self._asm is None:
            with _LOCK:
                _initialise()
                ref = llvm.parse_assembly(self.llvm_ir)
                optimise(ref, self.target.vector_bits)
                self._asm = target_machine(self.target.vector_bits).emit_assembly(ref)
        return self._asm

    def __call__(self, *args: Any) -> None:
        """Run on ``args`` (the entry function's parameters, in order) in place;
        raises ``polyir.ArgumentError`` before anything runs for bad arguments,
        ``MemoryError`` when a local buffer cannot be allocated."""
        bound = self.binder.bind(args)
        self.call_words(self._words(*bound.values))
        bound.finish()

    def call_words(self, words: Any) -> None:
        """Run on raw argument words, unchecked: ``words`` is a ctypes array of
        ``len(self.slots)`` int64 (data pointers of contiguous arrays of the
        right dtype and shape, then symbol values, in ``self.slots`` order)
        that must stay alive during the call. For callers that checked the
        arguments once (``polyir.frontends.fx``'s prepared plans)."""
        status = self._packed(ctypes.addressof(words))
        if status:
            self._raise(status)

    def _raise(self, status: int) -> None:
        if status == 1:
            raise MemoryError(f"{self.function.name}(): cannot allocate local buffers")
        raise RuntimeError(f"{self.function.name}(): native code failed (status {status}); "
                           f"outputs may be partly written")

    def parallel_stats(self) -> dict[str, int]:
        """``{"dispatches": n, "team": t, "deferred": d}``: how many parallel
        loops ran on the OpenMP runtime so far (loops the size policy kept
        serial do not count), the team size of the latest dispatch (0 before
        any), and how many big-enough loops ran serially because the team had
        come late at that loop just before (``polyir.cpu.policy.LateTeam``)."""
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


def lower_to_llvm(module: Module, target: Target, fast_math: bool = False) -> str:
    """LLVM IR text of the module's entry function (and its packed wrapper) for
    the host; ``fast_math`` puts ``contract reassoc nsz`` on float operations."""
    from llvmlite import ir

    _initialise()
    function = module.entry
    llmod = ir.Module(name=f"polyir.{function.name}")
    llmod.triple = _STATE["triple"]
    llmod.data_layout = _STATE["data_layout"]
    hooks = CpuHooks(parallel_cores(target), target.min_parallel_work, fast_math,
                     target.team_late_ns, target.work_unit_ns)
    lowered = lower_function(llmod, function, hooks, llvm_name(module))
    _emit_packed_wrapper(llmod, llmod.get_global(lowered.llvm_name), lowered.params,
                         packed_name(module))
    return str(llmod)


def build_cpu(module: Module, target: Target, cache_dir: Any = DEFAULT,
              fast_math: bool = False) -> CpuExecutable:
    """Compile ``module``'s entry function for the host CPU.

    ``cache_dir``: a directory for the compile cache, ``None`` for no cache,
    default :func:`~polyir.cpu.cache.default_cache_dir`. ``fast_math``: allow
    FMA contraction and reassociation of float operations (faster, vectorised
    reductions; results differ from the exact ones by rounding). Raises
    :class:`polyir.CompileError` for constructs the CPU cannot run (barriers,
    fragments, GPU-mapped loops, launches).
    """
    cache = CompileCache(default_cache_dir() if cache_dir is DEFAULT else cache_dir)
    fast_math = bool(fast_math)
    cores = parallel_cores(target)
    with _LOCK:
        _initialise()
        fingerprint = _STATE["fingerprint"]
        key = cache_key(print_module(module), repr(target), host_description(), fingerprint,
                        f"fast_math={fast_math}", f"parallel_cores={cores}")
        entry = cache.load(key, fingerprint)
        if entry is not None:
            try:
                return CpuExecutable(module, target, entry.llvm_ir, entry.object_code, True,
                                     fast_math)
            except Exception as error:  # unusable object code: recompile
                import warnings
                warnings.warn(f"polyir: cached object for {module.entry.name} failed to load "
                              f"({error}); recompiling", RuntimeWarning, stacklevel=2)
                cache.invalidate(key)
        llvm_ir = lower_to_llvm(module, target, fast_math)
        try:
            ref = llvm.parse_assembly(llvm_ir)
            ref.verify()
        except RuntimeError as error:
            raise CompileError(f"function '{module.entry.name}': invalid LLVM IR from "
                               f"lowering: {error}") from None
        optimise(ref, target.vector_bits)
        _check_external_symbols(ref, module.entry.name)
        object_code = target_machine(target.vector_bits).emit_object(ref)
        cache.store(key, fingerprint, object_code, llvm_ir,
                    {"function": module.entry.name, "target": repr(target),
                     "fast_math": fast_math})
        return CpuExecutable(module, target, llvm_ir, object_code, False, fast_math)
