"""Native CPU backend: polyir IR -> LLVM IR -> host machine code, called through ctypes.

``build_cpu(module, target, cache_dir=...)`` lowers the module's entry function
(``polyir.llvm.lower`` with :class:`~polyir.cpu.hooks.CpuHooks`), optimises it
at O3 with loop and SLP vectorisation for the host CPU, emits object code
(through the compile cache, ``polyir.cpu.cache``) and loads it into an MCJIT
engine with ``add_object_file``. The result, a :class:`CpuExecutable`, runs in
place on numpy arrays / torch CPU tensors following the ``Function`` calling
convention.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import threading
from pathlib import Path
from typing import Any

import llvmlite.binding as llvm

from polyir.cpu.args import ArgumentBinder
from polyir.cpu.cache import CompileCache, cache_key, compiler_fingerprint, default_cache_dir
from polyir.cpu.hooks import CpuHooks
from polyir.cpu.parallel import DRAIN_NAME, ParallelRuntime
from polyir.errors import CompileError
from polyir.ir.nodes import Assign, FragmentStore, Module, Node
from polyir.ir.printer import print_module
from polyir.ir.walk import walk_nodes
from polyir.llvm.lower import lower_function, signature
from polyir.target import Target

_LOCK = threading.RLock()
_STATE: dict[str, Any] = {}
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
    if "+avx512f" in features.split(","):
        # LLVM tunes AVX-512 hosts to 256-bit vectors; the register tiles of
        # polyir.tiling are sized for the full 512-bit registers (and 32 of them)
        features += ",-prefer-256-bit"
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
        codemodel="jitdefault")


def host_description() -> str:
    """``triple cpu features`` of the host (part of every cache key)."""
    with _LOCK:
        _initialise()
        return f"{_STATE['triple']} {_STATE['cpu']} {_STATE['features']}"


def optimise(module_ref: llvm.ModuleRef) -> None:
    """O3 with loop and SLP vectorisation, for the host target machine."""
    tuning = llvm.create_pipeline_tuning_options(speed_level=3)
    tuning.loop_vectorization = True
    tuning.slp_vectorization = True
    tuning.loop_unrolling = True
    builder = llvm.create_pass_builder(_STATE["machine"], tuning)
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


class CpuExecutable:
    """A compiled entry function. Attributes: ``ir`` (the IR module), ``llvm_ir``
    (LLVM IR text as lowered), ``ptx`` (``None``), ``asm`` (host assembly, made on
    first access), ``cache_hit`` (whether the object code came from the cache)."""

    ptx = None

    def __init__(self, module: Module, target: Target, llvm_ir: str, object_code: bytes,
                 cache_hit: bool):
        self.ir = module
        self.target = target
        self.llvm_ir = llvm_ir
        self.object_code = object_code
        self.cache_hit = cache_hit
        self.function = module.entry
        self.hooks = CpuHooks(target.cores)
        self.slots = signature(self.function, self.hooks)
        self.binder = ArgumentBinder(self.function, self.slots, _written(self.function.body))
        self._asm: str | None = None
        with _LOCK:
            engine = llvm.create_mcjit_compiler(llvm.parse_assembly(""), host_machine())
            engine.add_object_file(llvm.ObjectFileRef.from_data(object_code))
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
        """Host assembly of the optimised code."""
        if self._asm is None:
            with _LOCK:
                _initialise()
                ref = llvm.parse_assembly(self.llvm_ir)
                optimise(ref)
                self._asm = _STATE["machine"].emit_assembly(ref)
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


def lower_to_llvm(module: Module, target: Target) -> str:
    """LLVM IR text of the module's entry function for the host."""
    from llvmlite import ir

    _initialise()
    function = module.entry
    llmod = ir.Module(name=f"polyir.{function.name}")
    llmod.triple = _STATE["triple"]
    llmod.data_layout = _STATE["data_layout"]
    lower_function(llmod, function, CpuHooks(target.cores), llvm_name(module))
    return str(llmod)


def build_cpu(module: Module, target: Target, cache_dir: Any = DEFAULT) -> CpuExecutable:
    """Compile ``module``'s entry function for the host CPU.

    ``cache_dir``: a directory for the compile cache, ``None`` for no cache,
    default :func:`~polyir.cpu.cache.default_cache_dir`. Raises
    :class:`polyir.CompileError` for constructs the CPU cannot run (barriers,
    fragments, GPU-mapped loops, launches).
    """
    cache = CompileCache(default_cache_dir() if cache_dir is DEFAULT else cache_dir)
    with _LOCK:
        _initialise()
        fingerprint = _STATE["fingerprint"]
        key = cache_key(print_module(module), repr(target), host_description(), fingerprint)
        entry = cache.load(key, fingerprint)
        if entry is not None:
            try:
                return CpuExecutable(module, target, entry.llvm_ir, entry.object_code, True)
            except Exception as error:  # unusable object code: recompile
                import warnings
                warnings.warn(f"polyir: cached object for {module.entry.name} failed to load "
                              f"({error}); recompiling", RuntimeWarning, stacklevel=2)
                cache.invalidate(key)
        llvm_ir = lower_to_llvm(module, target)
        try:
            ref = llvm.parse_assembly(llvm_ir)
            ref.verify()
        except RuntimeError as error:
            raise CompileError(f"function '{module.entry.name}': invalid LLVM IR from "
                               f"lowering: {error}") from None
        optimise(ref)
        _check_external_symbols(ref, module.entry.name)
        object_code = _STATE["machine"].emit_object(ref)
        cache.store(key, fingerprint, object_code, llvm_ir,
                    {"function": module.entry.name, "target": repr(target)})
        return CpuExecutable(module, target, llvm_ir, object_code, False)
