"""Time fused Linear layers on 3-D input and the GPT-2-small block (d=768,
sequence 128, batch 1, f32, one thread) against torch eager: the default
pipeline (``auto-tile`` spills a fused matrix product's accumulator into its
output) and the same without the spill (``auto-tile{spill=false}``, the code
before it), interleaved, medians, as ratios to eager.

    PYTHONPATH=$PWD python scripts/linear_epilogue_timing.py [REPEATS [MODELS]]

``REPEATS``: the interleaved rounds (default 15); ``MODELS``: comma-separated
names of :data:`MODELS` (default all).
"""
from __future__ import annotations

import sys
from collections.abc import Callable

import torch
from torch import nn

import polyir
import polyir.target
from bench.fusion import GPT2Block
from bench.timing import interleaved_medians
from polyir.driver import default_pipeline

TOKENS = (1, 128)


class LinearGelu(nn.Module):
    """Linear followed by GELU (GPT-2's MLP up-projection)."""

    def __init__(self, inputs: int, outputs: int) -> None:
        super().__init__()
        self.fc = nn.Linear(inputs, outputs)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return nn.functional.gelu(self.fc(x))


MODELS: dict[str, tuple[Callable[[], nn.Module], int]] = {
    "linear_768_2304": (lambda: nn.Linear(768, 2304), 768),
    "linear_768_3072_gelu": (lambda: LinearGelu(768, 3072), 768),
    "linear_3072_768": (lambda: nn.Linear(3072, 768), 3072),
    "gpt2_block_d768_s128": (GPT2Block, 768),
}
"""name: (model factory, input features)."""


def time_model(name: str, repeats: int) -> str:
    """One line: each contender's median and its ratio to eager."""
    factory, features = MODELS[name]
    torch.manual_seed(0)
    model = factory().eval()
    x = torch.randn(*TOKENS, features)
    target = polyir.target.cpu(1)
    pipelines = {"spill": None,
                 "before": default_pipeline("cpu").replace("auto-tile", "auto-tile{spill=false}")}
    contenders: dict[str, Callable[[], object]] = {"eager": lambda: model(x)}
    with torch.no_grad():
        expected = model(x)
        for label, pipeline in pipelines.items():
            compiled = polyir.compile(model, (x,), target=target, pipeline=pipeline)
            torch.testing.assert_close(compiled(x), expected, rtol=1e-3, atol=1e-3)
            contenders[label] = (lambda c: lambda: c(x))(compiled)
        samples = interleaved_medians(contenders, repeats, min_seconds=0.05)
    eager = samples["eager"].median
    return f"{name}: " + ", ".join(
        f"{label} {s.median * 1e3:.2f}ms ({s.median / eager:.2f}x eager)" for label, s in samples.items())


def main() -> None:
    repeats = int(sys.argv[1]) if len(sys.argv) > 1 else 15
    names = sys.argv[2].split(",") if len(sys.argv) > 2 else list(MODELS)
    torch.set_num_threads(1)
    for name in names:
        print(time_model(name, repeats), flush=True)


if __name__ == "__main__":
    main()
