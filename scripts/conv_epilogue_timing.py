"""Time a conv + batch norm + ReLU and the ResNet-18 basic block (64 channels,
56x56, f32, one thread) against torch eager: the default pipeline (with
``auto-tile``'s accumulator widening), the same without it
(``auto-tile{widen=false}``, the code before widening) and without fusion
(``distribute,auto-tile``), interleaved, medians.

    PYTHONPATH=$PWD python scripts/conv_epilogue_timing.py [BATCHES [REPEATS]]

``BATCHES`` is comma-separated (default ``1,8``), ``REPEATS`` the interleaved
rounds (default 9).
"""
from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Callable

import torch
from torch import nn

import polyir
import polyir.target
from bench.fusion import BasicBlock
from polyir.driver import default_pipeline

CHANNELS, SIZE = 64, 56


class ConvBnRelu(nn.Module):
    """conv3x3 (no bias), batch norm, ReLU."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(CHANNELS, CHANNELS, 3, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(CHANNELS)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.bn(self.conv(x)))


def _randomise_batch_norms(model: nn.Module) -> None:
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, nn.BatchNorm2d):
                module.running_mean.uniform_(-1, 1)
                module.running_var.uniform_(0.5, 2)
                module.weight.uniform_(0.5, 2)
                module.bias.uniform_(-1, 1)


def time_model(name: str, model: nn.Module, batch: int, repeats: int) -> str:
    x = torch.randn(batch, CHANNELS, SIZE, SIZE)
    target = polyir.target.cpu(1)
    pipelines = {"widened": None,
                 "before": default_pipeline("cpu").replace("auto-tile", "auto-tile{widen=false}"),
                 "unfused": "distribute,auto-tile"}
    contenders: dict[str, Callable[[], object]] = {"eager": lambda: model(x)}
    with torch.no_grad():
        expected = model(x)
        for label, pipeline in pipelines.items():
            compiled = polyir.compile(model, (x,), target=target, pipeline=pipeline)
            torch.testing.assert_close(compiled(x), expected, rtol=1e-3, atol=1e-3)
            contenders[label] = (lambda c: lambda: c(x))(compiled)
        samples: dict[str, list[float]] = {label: [] for label in contenders}
        for _ in range(repeats):
            for label, call in contenders.items():
                start = time.perf_counter()
                call()
                samples[label].append(time.perf_counter() - start)
    medians = {label: statistics.median(values) for label, values in samples.items()}
    eager = medians["eager"]
    return f"{name} b{batch}: " + ", ".join(
        f"{label} {seconds * 1e3:.2f}ms ({seconds / eager:.2f}x eager)" for label, seconds in medians.items())


def main() -> None:
    batches = [int(b) for b in (sys.argv[1] if len(sys.argv) > 1 else "1,8").split(",")]
    repeats = int(sys.argv[2]) if len(sys.argv) > 2 else 9
    torch.set_num_threads(1)
    factories: dict[str, Callable[[], nn.Module]] = {"conv_bn_relu": ConvBnRelu,
                                                      "resnet_block": BasicBlock}
    for name, factory in factories.items():
        for batch in batches:
            torch.manual_seed(0)
            model = factory().eval()
            _randomise_batch_norms(model)
            print(time_model(name, model, batch, repeats), flush=True)


if __name__ == "__main__":
    main()
