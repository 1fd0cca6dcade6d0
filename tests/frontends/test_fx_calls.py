"""The prepared call path of compiled models: fast, and still right when the
model's state or the inputs change under it."""
from __future__ import annotations

import threading
import warnings

import pytest
import torch

import polyir
from polyir.frontends.fxrun import PreparedPlan, input_signature


class Stack(torch.nn.Module):
    def __init__(self, width: int = 8, depth: int = 3) -> None:
        super().__init__()
        self.layers = torch.nn.ModuleList([torch.nn.Linear(width, width) for _ in range(depth)])
        self.norm = torch.nn.LayerNorm(width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            x = torch.relu(layer(x))
        return self.norm(x)


def _eager(model: torch.nn.Module, *args: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        return model(*args)


def _compiled(model: torch.nn.Module, *args: torch.Tensor):
    compiled = polyir.compile(model, args)
    compiled(*args)
    plan, prepared = compiled._prepared[input_signature(args)]
    assert isinstance(prepared, PreparedPlan) and plan is compiled.last_plan
    return compiled


def test_repeated_calls_take_the_prepared_path_and_match_eager():
    torch.manual_seed(0)
    model = Stack().eval()
    x = torch.randn(2, 8)
    compiled = _compiled(model, x)
    for _ in range(3):
        y = torch.randn(2, 8)
        torch.testing.assert_close(compiled(y), _eager(model, y), rtol=1e-5, atol=1e-5)
    assert len(compiled.plans) == 1


def test_state_changes_are_seen():
    torch.manual_seed(1)
    model = Stack().eval()
    x = torch.randn(2, 8)
    compiled = _compiled(model, x)
    with torch.no_grad():
        model.layers[0].weight.mul_(2.0)                              # in place
    torch.testing.assert_close(compiled(x), _eager(model, x), rtol=1e-5, atol=1e-5)
    model.layers[1].bias = torch.nn.Parameter(torch.randn(8))         # new tensor
    torch.testing.assert_close(compiled(x), _eager(model, x), rtol=1e-5, atol=1e-5)
    model.layers[2] = torch.nn.Linear(8, 8)                           # new submodule
    torch.testing.assert_close(compiled(x), _eager(model, x), rtol=1e-5, atol=1e-5)
    model.layers[0].weight.data = model.layers[0].weight.data.t()     # same memory, transposed
    torch.testing.assert_close(compiled(x), _eager(model, x), rtol=1e-5, atol=1e-5)
    assert len(compiled.plans) == 1


def test_a_state_tensor_of_another_shape_builds_a_new_plan():
    torch.manual_seed(2)
    model = Stack().eval()
    x = torch.randn(2, 8)
    compiled = _compiled(model, x)
    model.norm = torch.nn.LayerNorm(8, elementwise_affine=False)     # weight and bias gone
    torch.testing.assert_close(compiled(x), _eager(model, x), rtol=1e-5, atol=1e-5)
    assert len(compiled.plans) == 2


def test_inputs_of_several_shapes_each_get_a_prepared_plan():
    torch.manual_seed(3)
    model = Stack().eval()
    compiled = polyir.compile(model, (torch.randn(1, 8),))
    for rows in (1, 4, 1, 4, 3):
        x = torch.randn(rows, 8)
        torch.testing.assert_close(compiled(x), _eager(model, x), rtol=1e-5, atol=1e-5)
    assert len(compiled.plans) == 3
    assert all(isinstance(p, PreparedPlan) for _, p in compiled._prepared.values())


def test_non_contiguous_and_bf16_inputs():
    torch.manual_seed(4)
    model = Stack().eval()
    x = torch.randn(8, 2).t()
    compiled = _compiled(model, x)
    torch.testing.assert_close(compiled(x), _eager(model, x), rtol=1e-5, atol=1e-5)

    class Scale(torch.nn.Module):
        def forward(self, a: torch.Tensor) -> torch.Tensor:
            return a * 2 + 1

    a = torch.randn(5, 3).bfloat16()
    scale = _compiled(Scale(), a)
    out = scale(a)
    assert out.dtype == torch.bfloat16
    torch.testing.assert_close(out, a * 2 + 1)


def test_an_eager_result_of_another_shape_is_an_argument_error():
    """``nonzero`` runs in eager and its result's shape depends on the data: a
    segment compiled for the traced shape refuses another one, naming it."""

    class NonZero(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.nonzero(x).float() * 2.0

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        compiled = polyir.compile(NonZero(), (torch.tensor([1.0, 0.0, 2.0]),))
    assert compiled.last_plan.fallbacks
    torch.testing.assert_close(compiled(torch.tensor([0.0, 3.0, 4.0])),
                               torch.tensor([[2.0], [4.0]]))
    with pytest.raises(polyir.ArgumentError, match="graph value"):
        compiled(torch.tensor([1.0, 0.0, 0.0]))


def test_plans_without_a_fast_path_are_not_prepared_again():
    model = Stack().eval()
    x = torch.randn(2, 8)
    compiled = polyir.compile(model, (x,), target="interpret")
    for _ in range(2):
        torch.testing.assert_close(compiled(x), _eager(model, x), rtol=1e-5, atol=1e-5)
    ((plan, prepared),) = compiled._prepared.values()
    assert prepared is None and plan is compiled.last_plan


def test_calls_from_several_threads():
    torch.manual_seed(5)
    model = Stack(width=16).eval()
    compiled = _compiled(model, torch.randn(4, 16))
    inputs = [torch.randn(4, 16) for _ in range(8)]
    expected = [_eager(model, x) for x in inputs]
    failures: list[BaseException] = []

    def work(offset: int) -> None:
        try:
            for k in range(40):
                index = (k + offset) % len(inputs)
                torch.testing.assert_close(compiled(inputs[index]), expected[index],
                                           rtol=1e-5, atol=1e-5)
        except BaseException as error:  # noqa: BLE001 - reported by the main thread
            failures.append(error)

    threads = [threading.Thread(target=work, args=(offset,)) for offset in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not failures, failures[0]
