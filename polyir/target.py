"""Target descriptions: the hardware facts passes and backends read.

A ``Target`` is passed explicitly; nothing reads global flags.
"""
from __future__ import annotations

import functools
import os
from dataclasses import dataclass, field

PARALLEL_MARGIN = 4.0
"""How many times over the work a loop saves on threads must pay for a
dispatch (see :attr:`Target.min_parallel_work`)."""


@dataclass(frozen=True)
class Target:
    """What the compiler may assume about the machine it compiles for.

    ``kind`` is ``"cpu"``, ``"cuda"`` or ``"interpret"`` (the reference
    interpreter; slow, exact, always available). ``vector_bits``: the SIMD
    width the CPU backend prefers (LLVM's ``prefer-vector-width``).
    ``parallel_dispatch_ns`` and ``work_unit_ns`` describe the CPU's parallel
    runtime (see :attr:`min_parallel_work`); ``team_late_ns``: a team thread
    that starts later than this after its dispatch means the cores are busy
    with other work, and the loop runs serially for a while
    (``polyir.cpu.policy.LateTeam``).
    """

    kind: str
    cores: int = 1
    vector_bits: int = 256
    cache_bytes: tuple[int, ...] = (32 * 1024, 1024 * 1024, 32 * 1024 * 1024)
    sm: int = 0
    shared_memory_bytes: int = 0
    max_threads_per_block: int = 0
    warp_size: int = 32
    mma_shapes: tuple[str, ...] = field(default=())
    parallel_dispatch_ns: float = 2000.0
    work_unit_ns: float = 0.1
    team_late_ns: int = 200_000

    @property
    def name(self) -> str:
        return f"cuda:sm_{self.sm}" if self.kind == "cuda" else self.kind

    @property
    def min_parallel_work(self) -> float:
        """The estimated work (``polyir.cpu.policy`` units) above which a
        parallel loop runs on ``cores`` threads rather than serially.

        Derived from two facts of the machine: ``parallel_dispatch_ns``, what
        one dispatch through the OpenMP runtime costs when the team's threads
        have their cores (``python -m bench.cpu_runtime --sections dispatch``:
        about 2 us on this project's 2-core host), and ``work_unit_ns``, the
        time of one work unit of a vectorised loop on one core (0.04-0.15 ns
        measured, 0.1 taken). Threads save ``work * (1 - 1/cores)`` and must
        pay for the dispatch ``PARALLEL_MARGIN`` times over (a machine shared
        with other work seldom gives every thread its core at once), so the
        threshold is ``PARALLEL_MARGIN * dispatch / unit * cores / (cores - 1)``
        (160,000 units, about 16 us of serial work, on 2 cores); infinite on
        one core.
        """
        if self.cores <= 1:
            return float("inf")
        return PARALLEL_MARGIN * self.parallel_dispatch_ns / self.work_unit_ns \
            * self.cores / (self.cores - 1)


def cpu(cores: int | None = None) -> Target:
    """The host CPU (cores default to those this process may use; vector width
    :func:`host_vector_bits`)."""
    if cores is None:
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return Target("cpu", cores=cores, vector_bits=host_vector_bits())


@functools.lru_cache(maxsize=1)
def host_vector_bits() -> int:
    """512 on an x86 host with AVX-512F (``/proc/cpuinfo``), else 256.

    LLVM's own tuning prefers 256-bit vectors even on AVX-512 hosts; on this
    project's host (Sapphire Rapids) 512-bit code ran the demo models' kernels
    in 0.79-0.99x and f32 dot products and matmuls in 0.82-0.93x the time of
    256-bit code (``python -m bench.cpu_runtime --sections width``)."""
    try:
        with open("/proc/cpuinfo") as info:
            for line in info:
                if line.startswith("flags"):
                    return 512 if "avx512f" in line.split() else 256
    except OSError:
        pass
    return 256


def cuda(sm: int = 90) -> Target:
    """An NVIDIA GPU of compute capability ``sm`` (80: A100, 90: H100/H200)."""
    shared = {80: 163 * 1024, 90: 227 * 1024}.get(sm, 48 * 1024)
    return Target("cuda", cores=132 if sm >= 90 else 108, sm=sm, shared_memory_bytes=shared,
                  max_threads_per_block=1024,
                  mma_shapes=("m16n16k16.f16.f32", "m16n16k16.bf16.f32", "m16n16k8.tf32.f32"))


def interpret() -> Target:
    return Target("interpret")


def resolve(target: Target | str | None) -> Target:
    """A ``Target`` from a name (``"cpu"``, ``"cuda"``, ``"cuda:sm_80"``,
    ``"interpret"``) or ``None`` (the default: the native CPU)."""
    if isinstance(target, Target):
        return target
    if target is None or target == "cpu":
        return cpu()
    if target == "interpret":
        return interpret()
    if target == "cuda":
        return cuda()
    if isinstance(target, str) and target.startswith("cuda:sm_"):
        return cuda(int(target.split("_", 1)[1]))
    raise ValueError(f"unknown target {target!r}; expected 'cpu', 'cuda', 'cuda:sm_80', "
                     f"'cuda:sm_90' or 'interpret'")
