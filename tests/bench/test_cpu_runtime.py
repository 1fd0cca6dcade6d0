"""``bench/cpu_runtime.py`` runs and reports what it measures (no time is asserted)."""
from __future__ import annotations

import re

import numpy as np
import torch

import polyir
from bench import cpu_runtime


def test_dispatch_section_reports_a_cost_per_dispatch() -> None:
    lines = cpu_runtime.dispatch_section(quick=True)
    assert re.search(r"median \d+ ns, best sample \d+ ns per dispatch", lines[0])
    assert len(lines) == 4


def test_native_only_runs_the_compiled_kernels_on_the_real_state() -> None:
    """The kernels-alone figure calls the same native code on the model's own
    parameters: its output buffer ends up holding the model's result."""
    torch.manual_seed(0)
    model, x = cpu_runtime._ten_parameter_model()
    compiled = polyir.compile(model, (x,))
    compiled(x)
    native = cpu_runtime._native_only(compiled, x)
    native()
    output = native.keep[0][-1]  # type: ignore[attr-defined]
    with torch.no_grad():
        np.testing.assert_allclose(output.numpy(), model(x).numpy(), rtol=1e-5, atol=1e-6)
    assert cpu_runtime.python_speed() > 0
