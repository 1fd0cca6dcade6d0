"""Loud failures: gradients, pass options."""
from __future__ import annotations

import re
import warnings

import pytest

import polyir
from polyir.passes import PipelineError

PROGRAM = polyir.parse("func f(A: f32[N]) {\n  for i = 0 to N parallel {\n    S0: A[i] = 1.0\n  }\n}\n")


@pytest.mark.parametrize("pipeline,message", [
    ("gpu-map{block_sizes=0}", "positive ints"),
    ("canonicalize-names{prefix=1x}", "ASCII identifier"),
    ("canonicalize-names{prefix=a-b}", "ASCII identifier"),
])
def test_bad_pass_options_are_pipeline_errors(pipeline: str, message: str) -> None:
    with pytest.raises(PipelineError, match=message):
        polyir.transform(PROGRAM, pipeline)
    assert str(polyir.transform(PROGRAM, "canonicalize-names{prefix=T_}")).count("T_0:") == 1


def test_gradients_are_not_dropped_silently() -> None:
    torch = pytest.importorskip("torch")
    from polyir.frontends.grad import PolyirGradientWarning

    model = torch.nn.Linear(4, 3)
    x = torch.randn(2, 4)
    compiled = polyir.compile(model, [x])
    with pytest.warns(PolyirGradientWarning, match="forward pass only"):
        out = compiled(x)
    assert not out.requires_grad
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        compiled(x)                                 # once per compiled model
        with torch.no_grad():
            polyir.compile(model, [x])(x)           # inference: no warning
    trained = torch.compile(model, backend="polyir")
    with pytest.warns(PolyirGradientWarning, match="runs in eager"):
        y = trained(x)
    y.sum().backward()                              # autograd works (eager fallback)
    assert model.weight.grad is not None
    with torch.no_grad():
        torch.testing.assert_close(trained(x), model(x))


def test_compiled_model_called_with_wrong_inputs_names_them() -> None:
    torch = pytest.importorskip("torch")
    from polyir.errors import ArgumentError, CaptureError

    model = torch.nn.Linear(4, 3).eval()
    x = torch.randn(2, 4)
    with torch.no_grad():
        compiled = polyir.compile(model, [x])
        for args, shown in [((x, x), "(2, 4) float32, (2, 4) float32"), ((), "inputs ()"),
                            ((torch.randn(2, 5),), "(2, 5) float32"),
                            ((x.double(),), "(2, 4) float64")]:
            with pytest.raises(ArgumentError, match=r"polyir.compile\(Linear\) called with") as info:
                compiled(*args)
            assert shown in str(info.value)
        with pytest.raises(ArgumentError, match="tensor input 0 is on meta"):
            compiled(torch.randn(2, 4, device="meta"))
        torch.testing.assert_close(compiled(x), model(x))   # still usable

        class Branchy(torch.nn.Module):
            def forward(self, t: torch.Tensor) -> torch.Tensor:
                return t * 2 if t.sum() > 0 else t - 1

        with pytest.raises(CaptureError, match=r"torch.compile\(model, backend='polyir'\)"):
            polyir.compile(Branchy(), [x])


def _add_one(B, A, n):
    for i in range(n):
        B[i] = A[i] + 1.0


def test_read_only_strided_input_is_read_not_written_back() -> None:
    import numpy as np

    base = np.arange(8.0)
    base.flags.writeable = False
    B = np.zeros(4)
    polyir.kernel(_add_one)(B, base[::2], 4)
    np.testing.assert_array_equal(B, base[::2] + 1.0)


@pytest.mark.parametrize("body,message", [
    ("A[True] = 1.0", "boolean subscript 'A[True]'"),
    ("A[i] = A[i, False] + 1.0", "boolean subscript"),
    ("A[i] = A[i] / 0", "division by the constant zero"),
    ("A[i // -0] = 1.0", "division by the constant zero"),
    ("A[i] = A[i] % 0.0", "division by the constant zero"),
    ("\u00c4 = 1.0\n        A[i] = \u00c4", "non-ASCII name"),
])
def test_kernel_refuses_what_python_reads_differently(body: str, message: str, tmp_path) -> None:
    import importlib.util

    from polyir.errors import UnsupportedSyntax

    path = tmp_path / "misread.py"
    path.write_text(f"def f(A, n):\n    for i in range(n):\n        {body}\n", encoding="utf-8")
    spec = importlib.util.spec_from_file_location("misread", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    with pytest.raises(UnsupportedSyntax, match=re.escape(message)):
        polyir.kernel(module.f)
