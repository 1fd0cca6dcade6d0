"""Compile caches of polyir and Inductor, set up so that "cold" and "warm" mean something.

* **cold**: an empty disk cache and nothing compiled in this process;
* **warm**: a disk cache populated by an earlier compile of the same model, and
  still nothing in this process' memory.

polyir: the CPU backend's only cache is on disk (``polyir.cpu.cache``; an
executable is never reused in memory, each ``build_cpu`` makes a new one) and
its directory is read from ``POLYIR_CACHE_DIR`` at each build. The pykernel
frontend keeps the IR lowered from Python source in memory
(``polyir.frontends.pykernel._IR_CACHE``), and the polyhedral layer the answers
of isl problems (``polyir.polyhedral.memo.ISL_MEMO``);
:func:`drop_polyir_memory_caches` empties both. Inductor: ``TORCHINDUCTOR_CACHE_DIR`` (read at each compile) and
``torch._inductor.utils.clear_caches`` plus ``torch._dynamo.reset``.

The first compile in a process also pays one-time costs that are not the
model's (imports, LLVM initialisation, Inductor's C++ toolchain checks: 20-30 s
for Inductor on the 2-core development machine). :func:`warm_up_polyir` and :func:`warm_up_inductor` pay them once on
a throwaway model, before anything is timed, and record what they took in
:data:`WARMUP_SECONDS`.
"""
from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

WARMUP_SECONDS: dict[str, float] = {}
"""One-time process costs paid before timing: ``polyir`` and ``inductor``."""

_SESSION: dict[str, Path] = {}


def session_dir(kind: str) -> Path:
    """A temporary folder for this run (``kind``: ``polyir`` or ``inductor``), removed at exit.

    The runtime sections compile into these so that they neither read nor
    fill the user's own caches.
    """
    path = _SESSION.get(kind)
    if path is None:
        path = Path(tempfile.mkdtemp(prefix=f"bench-{kind}-"))
        _SESSION[kind] = path
        atexit.register(shutil.rmtree, path, ignore_errors=True)
    return path


@contextlib.contextmanager
def _environment(values: dict[str, str]) -> Iterator[None]:
    previous = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in previous.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


@contextlib.contextmanager
def polyir_cache(directory: str | Path) -> Iterator[None]:
    """polyir's disk cache is ``directory`` inside the block."""
    with _environment({"POLYIR_CACHE_DIR": str(directory)}):
        yield


@contextlib.contextmanager
def inductor_cache(directory: str | Path) -> Iterator[None]:
    """Inductor's (and Triton's) disk caches are under ``directory`` inside the block."""
    with _environment({"TORCHINDUCTOR_CACHE_DIR": str(directory),
                       "TRITON_CACHE_DIR": str(Path(directory) / "triton")}):
        yield


def drop_polyir_memory_caches() -> None:
    """Forget whatever polyir keeps in memory between compiles."""
    from polyir.cpu import cache

    clear = getattr(cache, "clear_memory_cache", None)  # none today: the CPU cache is disk only
    if clear is not None:
        clear()
    from polyir.frontends import pykernel

    ir_cache = getattr(pykernel, "_IR_CACHE", None)
    if isinstance(ir_cache, dict):
        ir_cache.clear()
    from polyir.polyhedral.memo import ISL_MEMO

    ISL_MEMO.clear()


def drop_inductor_memory_caches() -> None:
    """Forget Dynamo's compiled frames and Inductor's in-memory caches."""
    import torch._dynamo
    import torch._inductor.utils

    torch._dynamo.reset()
    torch._inductor.utils.clear_caches()


def warm_up_polyir() -> None:
    """Pay polyir's one-time costs (imports, LLVM set-up, tracing machinery) once."""
    if "polyir" in WARMUP_SECONDS:
        return
    import numpy as np
    import torch

    import polyir

    def saxpy(a: Any, x: Any, y: Any) -> None:
        for i in range(x.shape[0]):
            y[i] += a * x[i]

    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as directory, polyir_cache(directory):
        polyir.kernel(saxpy)(2.0, np.ones(4, np.float32), np.ones(4, np.float32))
        model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU()).eval()
        with torch.no_grad():
            x = torch.randn(2, 4)
            polyir.compile(model, (x,))(x)
            polyir.compile(model, (x,), dynamic=True)(x)  # symbolic tracing's imports too
        drop_polyir_memory_caches()
    WARMUP_SECONDS["polyir"] = time.perf_counter() - start


def warm_up_inductor() -> None:
    """Pay Inductor's one-time costs once, on a throwaway model and cache."""
    if "inductor" in WARMUP_SECONDS:
        return
    import torch

    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as directory, inductor_cache(directory):
        drop_inductor_memory_caches()
        model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU()).eval()
        with torch.no_grad():
            torch.compile(model)(torch.randn(2, 4))
        drop_inductor_memory_caches()
    WARMUP_SECONDS["inductor"] = time.perf_counter() - start
