"""Assemble PTX with NVIDIA's ``ptxas`` (the oracle that emitted PTX is valid)."""
from __future__ import annotations

import os
import shutil
import subprocess
import tempfile

import pytest

PTXAS = shutil.which("ptxas")
ARCHS = ("sm_80", "sm_90")


def assemble(ptx: str, archs: tuple[str, ...] = ARCHS) -> None:
    """Assemble ``ptx`` for every arch in ``archs``; fail with ptxas's message.
    Skips (with a notice) only where ptxas is not installed."""
    assert ".extern .func llvm." not in ptx, "PTX calls an intrinsic LLVM did not select"
    if PTXAS is None:
        pytest.skip("ptxas not found: PTX was emitted but not assembled")
    with tempfile.TemporaryDirectory() as tmp:
        source = os.path.join(tmp, "kernel.ptx")
        with open(source, "w") as handle:
            handle.write(ptx)
        for arch in archs:
            result = subprocess.run([PTXAS, f"-arch={arch}", source, "-o", os.path.join(tmp, f"{arch}.cubin")],
                                    capture_output=True, text=True, timeout=120)
            assert result.returncode == 0, f"ptxas -arch={arch} failed:\n{result.stderr}\n--- PTX:\n{ptx}"


def resource_usage(ptx: str, arch: str = "sm_90") -> dict[str, dict[str, int]]:
    """``ptxas -v`` figures per kernel: registers, shared bytes, spill stores and
    loads, stack frame bytes. Skips where ptxas is not installed."""
    assert ".extern .func llvm." not in ptx, "PTX calls an intrinsic LLVM did not select"
    if PTXAS is None:
        pytest.skip("ptxas not found: PTX was emitted but not assembled")
    import re

    with tempfile.TemporaryDirectory() as tmp:
        source = os.path.join(tmp, "kernel.ptx")
        with open(source, "w") as handle:
            handle.write(ptx)
        result = subprocess.run([PTXAS, "-v", f"-arch={arch}", source, "-o",
                                 os.path.join(tmp, "k.cubin")],
                                capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    usage: dict[str, dict[str, int]] = {}
    current = None
    for line in result.stderr.splitlines():
        found = re.search(r"Compiling entry function '(\w+)'", line)
        if found:
            current = usage.setdefault(found.group(1), {"registers": 0, "shared": 0, "spill_stores": 0,
                                                        "spill_loads": 0, "stack": 0})
            continue
        if current is None:
            continue
        if (m := re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads",
                           line)):
            current["stack"], current["spill_stores"], current["spill_loads"] = map(int, m.groups())
        if (m := re.search(r"Used (\d+) registers", line)):
            current["registers"] = int(m.group(1))
        if (m := re.search(r"(\d+) bytes smem", line)):
            current["shared"] = int(m.group(1))
    return usage
