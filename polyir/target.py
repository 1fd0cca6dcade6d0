"""Target descriptions: the hardware facts passes and backends read.

A ``Target`` is passed explicitly; nothing reads global flags.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Target:
    """What the compiler may assume about the machine it compiles for.

    ``kind`` is ``"cpu"``, ``"cuda"`` or ``"interpret"`` (the reference
    interpreter; slow, exact, always available).
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

    @property
    def name(self) -> str:
        return f"cuda:sm_{self.sm}" if self.kind == "cuda" else self.kind


def cpu(cores: int | None = None) -> Target:
    """The host CPU (cores default to those this process may use)."""
    if cores is None:
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return Target("cpu", cores=cores)


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
