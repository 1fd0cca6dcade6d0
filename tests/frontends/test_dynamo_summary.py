"""torch.compile(backend="polyir") says what it compiled and what fell back
(``polyir.frontends.dynamo.summary()`` and the ``polyir.dynamo`` log), and
says so when dynamo never called it."""
from __future__ import annotations

import logging
import subprocess
import sys
import warnings

import pytest
import torch
import torch.nn as nn

from polyir.frontends import dynamo


class SortThenLinear(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(6, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(torch.sort(torch.relu(x), dim=-1).values)


class TwoGraphs(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.tanh(x) * 2.0
        torch._dynamo.graph_break()
        return y + 1.0


@pytest.fixture(autouse=True)
def fresh() -> None:
    torch._dynamo.reset()
    dynamo.reset_summary()


def test_the_summary_names_what_was_lowered_and_what_fell_back(caplog) -> None:
    model = SortThenLinear().eval()
    x = torch.randn(3, 6)
    compiled = torch.compile(model, backend="polyir")
    assert dynamo.summary().calls == 0  # torch.compile itself calls nothing
    with caplog.at_level(logging.INFO, logger="polyir.dynamo"), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the fallback warning: tests/frontends/test_fx_modules.py
        with torch.no_grad():
            torch.testing.assert_close(compiled(x), model(x), rtol=1e-5, atol=1e-5)
    summary = dynamo.summary()
    assert summary.calls == 1
    (graph,) = summary.graphs
    assert graph.compiled and graph.loop_nests >= 2
    assert "aten.relu.default" in graph.ops and "aten.addmm.default" in graph.ops
    assert [(f.op, f.node) for f in graph.fallbacks] == [("aten.sort.default", "sort")]
    assert graph.fallbacks[0].reason
    text = str(summary)
    assert text.startswith("torch.compile(backend='polyir'): 1 graph\n  graph 1: ") and "1 run in eager: aten.sort.default (sort: " in text
    assert [r.getMessage() for r in caplog.records if r.name == "polyir.dynamo"] == [str(graph)]


def test_each_graph_dynamo_hands_over_is_counted() -> None:
    model = TwoGraphs()
    x = torch.randn(5)
    with torch.no_grad():
        torch.testing.assert_close(torch.compile(model, backend="polyir")(x), model(x))
    summary = dynamo.summary()
    assert summary.calls == 2 and [g.index for g in summary.graphs] == [1, 2]
    assert all(g.compiled and not g.fallbacks and g.eager_calls == 0 for g in summary.graphs)
    assert "aten.tanh.default" in summary.graphs[0].ops and "aten.add.Tensor" in summary.graphs[1].ops


def test_calls_that_need_gradients_are_counted_as_eager() -> None:
    model = SortThenLinear()
    x = torch.randn(3, 6)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.compile(model, backend="polyir")(x).sum().backward()
    (graph,) = dynamo.summary().graphs
    assert graph.eager_calls == 1 and "needed gradients" in str(graph)
    assert model.fc.weight.grad is not None


def test_a_backend_dynamo_never_calls_is_reported() -> None:
    assert dynamo.summary().calls == 0
    assert "dynamo never called the backend" in str(dynamo.summary())
    # dynamo imports the entry point's module when torch.compile names the backend; a process
    # that then never has it called says so at exit.
    script = ("import torch, polyir.frontends.dynamo_entry as entry\n"
              "compiled = torch.compile(torch.nn.Linear(2, 2), backend=entry.polyir_backend)\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "dynamo never called the backend, so nothing ran through polyir" in done.stderr
