"""Helpers for the CPU backend tests: compile IR text without touching ~/.cache."""
from __future__ import annotations

from typing import Any

import pytest

import polyir
from polyir.cpu.jit import CpuExecutable, build_cpu
from polyir.target import cpu


def compile_text(text: str, cores: int = 1, cache_dir: Any = None) -> CpuExecutable:
    """Parse IR text and build it for the host (no compile cache by default)."""
    return build_cpu(polyir.parse(text), cpu(cores), cache_dir=cache_dir)


@pytest.fixture
def native():
    return compile_text
