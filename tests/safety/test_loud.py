"""Loud failures: gradients, pass options."""
from __future__ import annotations

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
