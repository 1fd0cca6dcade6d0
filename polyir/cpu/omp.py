"""The OpenMP runtime that parallel loops call: one libgomp per process.

Generated code calls ``GOMP_parallel``, ``GOMP_barrier``,
``omp_get_thread_num`` and ``omp_get_num_threads`` (the GNU OpenMP ABI, which
LLVM's ``libomp`` and Intel's ``libiomp5`` also export). :func:`openmp` finds
the library once per process and gives their addresses to LLVM
(``llvmlite.binding.add_symbol``), so every JIT-compiled module resolves them
to that one library.

Which library, in this order:

1. **One already loaded in the process**: ``libgomp.so.1`` (torch's, once
   ``import torch`` ran), else ``libiomp5.so`` / ``libomp.so`` (MKL, LLVM
   OpenMP). Two OpenMP runtimes in one process each keep a team of threads
   for all cores and fight over them, so polyir joins the one that is there.
2. **torch's own** ``torch/lib/libgomp.so.1`` when torch is installed (found
   without importing it). Its soname is ``libgomp.so.1``, so a later
   ``import torch`` resolves its dependency to the library already loaded:
   the process still ends up with one runtime, the one torch was built with
   (torch 2.13's is older than the system's and torch needs nothing newer).
3. **The system's** ``libgomp.so.1`` (GCC's runtime, in the loader's path).

Without any, :func:`openmp` returns ``None`` and the CPU backend compiles
parallel loops as serial loops (with one ``RuntimeWarning``).

libgomp keeps its worker threads after a parallel region and lets them spin
for a while before they sleep (``GOMP_SPINCOUNT``, ``OMP_WAIT_POLICY``), so
back-to-back dispatches cost about a microsecond; these environment variables
are the runtime's own and polyir does not set them. libgomp's thread pool does
not survive ``fork()`` (a dispatch in the child would wait forever for the
parent's threads), so in a child made by ``fork()`` polyir runs every parallel
loop serially (``polyir.cpu.jit``, through ``os.register_at_fork``).
"""
from __future__ import annotations

import ctypes
import importlib.util
import os
import threading
import warnings
from dataclasses import dataclass
from pathlib import Path

SYMBOLS = ("GOMP_parallel", "GOMP_barrier", "omp_get_thread_num", "omp_get_num_threads")
"""The runtime functions generated code calls."""

_LOADED_NAMES = ("libgomp.so.1", "libiomp5.so", "libomp.so", "libomp.so.5")


@dataclass(frozen=True)
class OpenMPRuntime:
    """The OpenMP library in use: ``path`` (as mapped in the process, when
    known), ``source`` (``"loaded"``, ``"torch"`` or ``"system"``) and the
    addresses of :data:`SYMBOLS`."""

    path: str
    source: str
    addresses: dict[str, int]


_lock = threading.Lock()
_state: dict[str, OpenMPRuntime | None] = {}
_started: set[int] = set()


def openmp() -> OpenMPRuntime | None:
    """The process's OpenMP runtime, loaded on first use (see the module
    docstring for the choice); ``None`` when no library can be loaded."""
    with _lock:
        if "runtime" not in _state:
            runtime = _find()
            if runtime is None:
                warnings.warn("polyir: no OpenMP runtime (libgomp.so.1) found; parallel loops "
                              "run serially", RuntimeWarning, stacklevel=3)
            else:
                import llvmlite.binding as llvm
                for name, address in runtime.addresses.items():
                    llvm.add_symbol(name, address)
            _state["runtime"] = runtime
        return _state["runtime"]


def start_team(cores: int) -> None:
    """Have the runtime create its worker threads for a team of ``cores`` now,
    once per process and team size, by an empty parallel region (each thread
    calls ``free(NULL)``). libgomp creates them at the first dispatch, which
    then takes a thread creation, often more than ``Target.team_late_ns``:
    without this, the first parallel loop a process runs would count its team
    as late and run serially for a back-off (``polyir.cpu.policy.LateTeam``).
    Nothing happens without a runtime or for one core."""
    runtime = openmp() if cores > 1 else None
    if runtime is None:
        return
    with _lock:
        if cores in _started:
            return
        _started.add(cores)
    region = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint, ctypes.c_uint)
    free = ctypes.cast(ctypes.CDLL(None).free, ctypes.c_void_p).value
    region(runtime.addresses["GOMP_parallel"])(free, None, cores, 0)


def _find() -> OpenMPRuntime | None:
    for name in _LOADED_NAMES:
        library = _open(name, os.RTLD_NOLOAD | os.RTLD_GLOBAL)
        if library is not None:
            runtime = _runtime(library, _mapped_path(name) or name, "loaded")
            if runtime is not None:
                return runtime
    torch_gomp = _torch_libgomp()
    if torch_gomp is not None:
        library = _open(str(torch_gomp), os.RTLD_GLOBAL)
        if library is not None:
            runtime = _runtime(library, str(torch_gomp), "torch")
            if runtime is not None:
                return runtime
    library = _open("libgomp.so.1", os.RTLD_GLOBAL)
    if library is not None:
        return _runtime(library, _mapped_path("libgomp.so.1") or "libgomp.so.1", "system")
    return None


def _open(name: str, mode: int) -> ctypes.CDLL | None:
    try:
        return ctypes.CDLL(name, mode=mode)
    except OSError:
        return None


def _runtime(library: ctypes.CDLL, path: str, source: str) -> OpenMPRuntime | None:
    addresses: dict[str, int] = {}
    for symbol in SYMBOLS:
        try:
            function = getattr(library, symbol)
        except AttributeError:
            return None
        address = ctypes.cast(function, ctypes.c_void_p).value
        if not address:
            return None
        addresses[symbol] = address
    return OpenMPRuntime(path, source, addresses)


def _torch_libgomp() -> Path | None:
    """``torch/lib/libgomp.so.1`` of the installed torch, without importing torch."""
    try:
        spec = importlib.util.find_spec("torch")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    for location in spec.submodule_search_locations:
        candidate = Path(location) / "lib" / "libgomp.so.1"
        if candidate.is_file():
            return candidate
    return None


def _mapped_path(name: str) -> str | None:
    """The file a loaded library ``name`` was mapped from (``/proc/self/maps``)."""
    stem = name.split(".so")[0]
    try:
        with open("/proc/self/maps") as maps:
            for line in maps:
                path = line.rstrip("\n").split(maxsplit=5)[-1]
                if path.startswith("/") and Path(path).name.startswith(stem + ".so"):
                    return path
    except OSError:
        return None
    return None


def loaded_openmp_libraries() -> list[str]:
    """Paths of every OpenMP runtime mapped in this process (for tests and
    diagnostics: there should be at most one)."""
    found: set[str] = set()
    try:
        with open("/proc/self/maps") as maps:
            for line in maps:
                path = line.rstrip("\n").split(maxsplit=5)[-1]
                if path.startswith("/") and Path(path).name.split(".so")[0] in (
                        "libgomp", "libiomp5", "libomp"):
                    found.add(os.path.realpath(path))
    except OSError:
        pass
    return sorted(found)
