"""The host as LLVM sees it: target machines, feature strings, the O3 pipeline.

Initialised once per process (:func:`_initialise`, under :data:`_LOCK`): the
host's triple, CPU name and features (with :func:`gather_features`' tuning),
its data layout and the compiler fingerprint that names cache entries, kept
in :data:`_STATE`. ``polyir.cpu.jit`` builds and loads code with them; the
LLVM worker process (``polyir.cpu.llvm_worker``) optimises with
:func:`optimise` on a :func:`target_machine`.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import threading
from pathlib import Path
from typing import Any

import llvmlite.binding as llvm

from polyir.cpu.cache import compiler_fingerprint
from polyir.errors import CompileError
from polyir.llvm.diagnostics import llvm_diagnostics

_LOCK = threading.RLock()
_STATE: dict[str, Any] = {}


def _initialise() -> None:
    if _STATE:
        return
    with llvm_diagnostics("initialising the host target"):
        _initialise_host()


def _initialise_host() -> None:
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    libm = ctypes.util.find_library("m")
    if libm:
        llvm.load_library_permanently(libm)
    triple = llvm.get_process_triple()
    cpu = llvm.get_host_cpu_name()
    features = llvm.get_host_cpu_features().flatten() + gather_features(cpu)
    _STATE.update(triple=triple, cpu=cpu, features=features)
    machine = host_machine()
    sources = [p for d in ("llvm", "cpu") for p in (Path(__file__).parent.parent / d).glob("*.py")]
    data_layout = str(machine.target_data)
    _STATE.update(machine=machine, data_layout=data_layout,
                  fingerprint=compiler_fingerprint(sources))


def host_machine(vector_bits: int | None = None) -> llvm.TargetMachine:
    """A new TargetMachine for the host CPU (an MCJIT engine takes ownership of
    one), preferring ``vector_bits``-wide vectors when given (see
    :func:`vector_width_features`).

    Static relocations with the large code model, LLVM's own choice for JIT code
    on x86-64: MCJIT maps an object's code and data sections separately, and in a
    process with a big heap they may land more than 2 GiB apart, which the small
    model's 32-bit PC-relative references cannot reach (LLVM aborted in
    ``finalize_object``, twice in full test runs). PIC with the large model
    emits GOT relocations MCJIT does not resolve; static absolute ones it does."""
    features = _STATE["features"] + vector_width_features(vector_bits)
    with llvm_diagnostics("creating the host target machine"):
        return llvm.Target.from_triple(_STATE["triple"]).create_target_machine(
            cpu=_STATE["cpu"], features=features, opt=3, reloc="static", codemodel="large")


SLOW_GATHER_CPUS = frozenset({"znver1", "znver2", "znver3", "znver4", "znver5"})
"""Host CPUs (LLVM's names) whose vector gathers are slower than the scalar
loads they replace, though LLVM's cost model for them still forms gathers.
AMD Zen: on a znver4 host the SLP vectoriser turned an 8-row unroll-and-jammed
matrix-vector product (``auto-tile``'s exact reduction plan) into one 8-lane
gather per column: 638 us against 245 us without gathers (1000 x 1000 f32)."""


def gather_features(cpu: str) -> str:
    """Subtarget tuning features that keep LLVM from vectorising with gathers on
    CPUs in :data:`SLOW_GATHER_CPUS` (``+prefer-no-gather``); else nothing."""
    return ",+prefer-no-gather" if cpu in SLOW_GATHER_CPUS else ""


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


def fingerprint() -> str:
    """The compiler fingerprint that names this version's cache entries."""
    with _LOCK:
        _initialise()
        return str(_STATE["fingerprint"])


def optimise(module_ref: llvm.ModuleRef, vector_bits: int = 256, speed_level: int = 3) -> None:
    """O3 (or ``speed_level``) with loop and SLP vectorisation, for the host with
    ``vector_bits``-wide vectors preferred.

    A new pass builder and pipeline every time: running one ``ModulePassManager``
    on a second module aborts the process (an LLVM assertion, llvmlite 0.50).
    The cost is memory that llvmlite never returns, about 30 KiB to build the
    default pipeline and 45 KiB to run it, per call, whatever the module or its
    LLVM context (measured with ``malloc_trim``; polyir's own Python objects do
    not grow, see ``tests/safety/test_memory.py``). It stays in the LLVM worker
    process (``polyir.cpu.llvm_worker``), which is replaced every
    ``OBJECTS_PER_WORKER`` objects; the compile cache skips it on a hit."""
    tuning = llvm.create_pipeline_tuning_options(speed_level=speed_level)
    tuning.loop_vectorization = True
    tuning.slp_vectorization = True
    tuning.loop_unrolling = True
    builder = llvm.create_pass_builder(target_machine(vector_bits), tuning)
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


__all__ = ["host_machine", "gather_features", "vector_width_features", "target_machine",
           "host_description", "fingerprint", "optimise", "SLOW_GATHER_CPUS"]
