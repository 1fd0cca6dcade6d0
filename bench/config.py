"""Run-wide settings of ``python -m bench``: how many threads everyone may use.

``--threads N`` gives polyir (``polyir.target.cpu(N)``), torch eager and
Inductor (``torch.set_num_threads``), numpy's BLAS (``OPENBLAS_NUM_THREADS``
and friends, set before numpy is imported) and XLA (``XLA_FLAGS``, set before
JAX starts) the same number of threads. By
default each uses every core this process may run on. On a machine shared
with other work, ``--threads 1`` gives much steadier ratios: OpenMP-style
thread teams stall whenever one of their threads is descheduled.
"""
from __future__ import annotations

import os
from typing import Any

THREADS: int | None = None
"""Threads per contender, or ``None`` for each library's default (all cores)."""

_ENVIRONMENT = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def configure_threads(threads: int | None) -> None:
    """Set the thread count of every contender (call before numpy is imported)."""
    global THREADS
    THREADS = threads
    if threads is None:
        return
    for name in _ENVIRONMENT:
        os.environ[name] = str(threads)
    # XLA's CPU thread pool (read when JAX starts; the jax_models section imports it later).
    os.environ.setdefault("XLA_FLAGS", f"--xla_cpu_multi_thread_eigen={str(threads > 1).lower()} "
                                       f"intra_op_parallelism_threads={threads}")
    import torch
    torch.set_num_threads(threads)


def cpu_target() -> Any:
    """The polyir target for the native CPU backend under these settings."""
    from polyir.target import cpu
    return cpu(THREADS)
