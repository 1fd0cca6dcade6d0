"""Target descriptions: the hardware facts passes and backends read.

A ``Target`` is passed explicitly; nothing reads global flags. It is the one
source of hardware facts: cost models (tile sizes, fusion, parallelism) and
the GPU mapping read it, never constants of their own.

* CPU (:func:`cpu`): cores this process may use, vector width and register
  count (from the host's features as LLVM reports them), cache levels (size,
  line, associativity, from ``/sys`` where readable, else typical values).
* CUDA (:func:`cuda`): one row of :data:`GPU_TABLE` per compute capability:
  SM count, shared memory per SM and per block (the opt-in maximum), the
  static shared-memory limit, registers per SM and per thread, threads per
  block and per SM, L2 size; the tensor-core shapes available from
  ``polyir.ir.fragments.MMA_SHAPES`` (each entry's ``min_sm``).
"""
from __future__ import annotations

import functools
import os
from dataclasses import dataclass, field, replace
from pathlib import Path

PARALLEL_MARGIN = 4.0
"""How many times over the work a loop saves on threads must pay for a
dispatch (see :attr:`Target.min_parallel_work`)."""


@dataclass(frozen=True)
class CacheLevel:
    """One data cache level: total bytes, line bytes, associativity (ways)."""

    size: int
    line: int = 64
    ways: int = 8


@dataclass(frozen=True)
class Target:
    """What the compiler may assume about the machine it compiles for.

    ``kind`` is ``"cpu"``, ``"cuda"`` or ``"interpret"`` (the reference
    interpreter; slow, exact, always available). ``cache_bytes`` repeats the
    sizes of ``caches`` (L1, L2, L3 data caches). GPU fields are 0 for CPUs.
    ``vector_bits``: the SIMD width the CPU backend prefers (LLVM's
    ``prefer-vector-width``; 512 on AVX-512 hosts, where 512-bit code ran the
    demo models' kernels in 0.79-0.99x the time of 256-bit code).
    ``parallel_dispatch_ns`` and ``work_unit_ns`` describe the CPU's parallel
    runtime (see :attr:`min_parallel_work`); ``team_late_ns``: a team thread
    that starts later than this after its dispatch means the cores are busy
    with other work, and the loop runs serially for a while
    (``polyir.cpu.policy.LateTeam``).
    """

    kind: str
    cores: int = 1
    vector_bits: int = 256
    vector_registers: int = 16
    fma: bool = True
    cache_bytes: tuple[int, ...] = (32 * 1024, 1024 * 1024, 32 * 1024 * 1024)
    caches: tuple[CacheLevel, ...] = ()
    sm: int = 0
    sm_count: int = 0
    shared_memory_bytes: int = 0
    """Shared memory one block may use (the opt-in maximum)."""
    shared_memory_per_sm: int = 0
    static_shared_bytes: int = 0
    """Shared memory a kernel may declare statically; above it, dynamic shared memory."""
    registers_per_sm: int = 0
    max_registers_per_thread: int = 0
    max_threads_per_block: int = 0
    max_threads_per_sm: int = 0
    l2_bytes: int = 0
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

    @property
    def vector_lanes_f32(self) -> int:
        """f32 elements in one vector register."""
        return max(1, self.vector_bits // 32)

    def cache(self, level: int) -> CacheLevel:
        """Data cache ``level`` (1-based); the last level when there are fewer."""
        levels = self.caches or tuple(CacheLevel(size) for size in self.cache_bytes)
        return levels[min(level, len(levels)) - 1]


# ------------------------------------------------------------------ CPU
def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def _size(text: str) -> int:
    units = {"K": 1024, "M": 1024 ** 2, "G": 1024 ** 3}
    if text and text[-1] in units:
        return int(text[:-1]) * units[text[-1]]
    return int(text)


@functools.lru_cache(maxsize=1)
def host_caches() -> tuple[CacheLevel, ...]:
    """The data caches of CPU 0 (``/sys/devices/system/cpu/cpu0/cache``), L1 first;
    typical values (32 KiB, 1 MiB, 32 MiB) where the system does not say."""
    root = Path("/sys/devices/system/cpu/cpu0/cache")
    found: dict[int, CacheLevel] = {}
    for index in sorted(root.glob("index*")) if root.is_dir() else ():
        kind, level, size = (_read(index / n) for n in ("type", "level", "size"))
        if kind not in ("Data", "Unified") or not level or not size:
            continue
        try:
            line = int(_read(index / "coherency_line_size") or 64)
            ways = int(_read(index / "ways_of_associativity") or 8)
            found[int(level)] = CacheLevel(_size(size), line, max(1, ways))
        except ValueError:
            continue
    if not found:
        return (CacheLevel(32 * 1024), CacheLevel(1024 * 1024, 64, 16), CacheLevel(32 * 1024 ** 2, 64, 16))
    return tuple(found[k] for k in sorted(found))


@functools.lru_cache(maxsize=1)
def host_vector_facts() -> tuple[int, int, bool]:
    """``(vector_bits, vector_registers, fma)`` of the host, from LLVM's view of
    its features (AVX-512: 512 bits, 32 registers; AVX2: 256, 16; else SSE)."""
    try:
        import llvmlite.binding as llvm
        llvm.initialize_native_target()
        features = llvm.get_host_cpu_features()
        has = {name for name, on in features.items() if on}
    except Exception:  # no LLVM: assume AVX2
        return 256, 16, True
    if "avx512f" in has:
        return 512, 32, True
    if "avx2" in has or "avx" in has:
        return 256, 16, "fma" in has
    return 128, 16, False


def host_vector_bits() -> int:
    """The host's vector width in bits (:func:`host_vector_facts`)."""
    return host_vector_facts()[0]


def cpu(cores: int | None = None) -> Target:
    """The host CPU (cores default to those this process may use)."""
    if cores is None:
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    bits, registers, fma = host_vector_facts()
    caches = host_caches()
    return Target("cpu", cores=cores, vector_bits=bits, vector_registers=registers, fma=fma,
                  cache_bytes=tuple(c.size for c in caches), caches=caches)


# ------------------------------------------------------------------ GPUs
@dataclass(frozen=True)
class GpuFacts:
    """One compute capability's per-SM facts (CUDA programming guide, "Compute
    Capabilities" table; SM counts of the common data-centre part)."""

    sm: int
    sm_count: int
    shared_memory_per_sm: int
    shared_memory_per_block: int
    registers_per_sm: int = 65536
    max_registers_per_thread: int = 255
    max_threads_per_block: int = 1024
    max_threads_per_sm: int = 2048
    l2_bytes: int = 0


GPU_TABLE: dict[int, GpuFacts] = {
    facts.sm: facts
    for facts in (
        GpuFacts(80, 108, 164 * 1024, 163 * 1024, l2_bytes=40 * 1024 ** 2),     # A100
        GpuFacts(86, 84, 100 * 1024, 99 * 1024, max_threads_per_sm=1536, l2_bytes=6 * 1024 ** 2),
        GpuFacts(89, 128, 100 * 1024, 99 * 1024, max_threads_per_sm=1536, l2_bytes=72 * 1024 ** 2),
        GpuFacts(90, 132, 228 * 1024, 227 * 1024, l2_bytes=50 * 1024 ** 2),     # H100 / H200
    )
}
STATIC_SHARED_BYTES = 48 * 1024


def cuda(sm: int = 90) -> Target:
    """An NVIDIA GPU of compute capability ``sm`` (80: A100, 90: H100/H200);
    raises ``polyir.CompileError`` for one not in :data:`GPU_TABLE`."""
    facts = GPU_TABLE.get(sm)
    if facts is None:
        from polyir.errors import CompileError
        raise CompileError(f"CUDA target sm_{sm} is not supported; expected one of "
                           f"{', '.join(f'sm_{s}' for s in GPU_TABLE)}")
    from polyir.ir.fragments import MMA_SHAPES
    shapes = tuple(key for key, shape in MMA_SHAPES.items() if shape.min_sm <= sm)
    return Target("cuda", cores=facts.sm_count, sm=sm, sm_count=facts.sm_count,
                  shared_memory_bytes=facts.shared_memory_per_block,
                  shared_memory_per_sm=facts.shared_memory_per_sm,
                  static_shared_bytes=STATIC_SHARED_BYTES,
                  registers_per_sm=facts.registers_per_sm,
                  max_registers_per_thread=facts.max_registers_per_thread,
                  max_threads_per_block=facts.max_threads_per_block,
                  max_threads_per_sm=facts.max_threads_per_sm, l2_bytes=facts.l2_bytes,
                  mma_shapes=shapes)


def interpret() -> Target:
    """The reference interpreter (its cost-model facts are the host CPU's)."""
    return replace(cpu(), kind="interpret")


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
    if isinstance(target, str) and target.startswith("cuda:sm_") and target[8:].isdigit():
        return cuda(int(target[8:]))
    raise ValueError(f"unknown target {target!r}; expected 'cpu', 'cuda', 'cuda:sm_80', "
                     f"'cuda:sm_90' or 'interpret'")


__all__ = ["Target", "CacheLevel", "GpuFacts", "GPU_TABLE", "cpu", "cuda", "interpret", "resolve",
           "host_caches", "host_vector_facts", "host_vector_bits", "PARALLEL_MARGIN"]
