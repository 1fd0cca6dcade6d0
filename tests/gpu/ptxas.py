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
