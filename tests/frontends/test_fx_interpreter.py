"""The lowered IR itself: it verifies, round-trips through the text form, and
runs in the reference interpreter (exact float32 arithmetic) to eager's
results, also with parallel loops run in shuffled order after the default
pipeline."""
from __future__ import annotations

from typing import Any

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from fx_support import Fn, check

import polyir
import polyir.driver
from polyir.frontends.demo_models import SmallCNN, TransformerBlock
from polyir.ir.interpreter import interpret
from polyir.ir.parser import parse
from polyir.ir.verifier import verify

torch.manual_seed(5)


def _models() -> list[tuple[str, nn.Module, tuple[torch.Tensor, ...]]]:
    cnn = SmallCNN(channels=2, classes=3).eval()
    with torch.no_grad():
        cnn.bn1.running_var.uniform_(0.5, 1.5)
        cnn.bn2.running_mean.uniform_(-0.2, 0.2)
    return [
        ("transformer", TransformerBlock(d_model=8, heads=2, mlp_ratio=2).eval(), (torch.randn(1, 5, 8),)),
        ("cnn", cnn, (torch.randn(1, 3, 8, 8),)),
        ("mixed", Fn(lambda a, b, i: (F.softmax(a @ b, -1).half() * 2, a.var(0), F.embedding(i, b.t()),
                                      torch.cat([a, a.exp()], 0)[1:, ::2].sum(-1))),
         (torch.randn(3, 4), torch.randn(4, 5), torch.tensor([[0, 4], [2, 1]]))),
    ]


MODELS = _models()


@pytest.mark.parametrize("name, model, inputs", MODELS, ids=[m[0] for m in MODELS])
def test_interpreter_matches_eager(name: str, model: nn.Module, inputs: tuple[torch.Tensor, ...]) -> None:
    compiled = check(model, *inputs, target="interpret", rtol=1e-3, atol=1e-4)
    for module in compiled.ir():
        verify(module)
        assert parse(str(module)) == module


@pytest.mark.parametrize("order", ["reverse", "shuffle"])
def test_parallel_marks_hold_in_any_order(order: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """After ``mark-parallel``, running the loops it marks reversed or
    shuffled must not change any result."""
    built: list[Any] = []

    def build(module: Any, target: Any = None, **options: Any) -> Any:
        built.append(module)
        return lambda *args: interpret(module, *args, parallel_order=order, seed=3)
    monkeypatch.setattr(polyir.driver, "build", build)
    for _, model, inputs in MODELS[:2]:
        check(model, *inputs, target="interpret", rtol=1e-3, atol=1e-4, pipeline="mark-parallel")
    assert any(_has_parallel_loop(m.entry.body) for m in built)


def _has_parallel_loop(nodes: Any) -> bool:
    for node in nodes:
        if getattr(node, "parallel", False):
            return True
        if _has_parallel_loop(getattr(node, "body", ())):
            return True
    return False


def test_interpreter_low_precision_boundary() -> None:
    """bf16 tensors cross the boundary as float32 arrays; f16 stays f16."""
    a = torch.randn(4, 6).bfloat16()
    b = torch.randn(4, 6).half()
    compiled = check(lambda x, y: (x * 2 + 1, torch.softmax(y, -1), x.float() + y.float()), a, b,
                     target="interpret", rtol=2e-2, atol=2e-2)
    (module,) = compiled.ir()
    dtypes = [str(p.dtype) for p in module.entry.params]
    assert dtypes == ["bf16", "f16", "bf16", "f16", "f32"]
