"""torch.nn models benchmarked: polyir vs torch eager vs torch.compile (Inductor), CPU."""
from __future__ import annotations

from typing import Any, Callable

import torch
from torch import nn


class MLPNorm(nn.Module):
    """Linear -> LayerNorm -> GELU -> Linear."""

    def __init__(self, d: int = 128, hidden: int = 256):
        super().__init__()
        self.fc1, self.norm, self.fc2 = nn.Linear(d, hidden), nn.LayerNorm(hidden), nn.Linear(hidden, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(nn.functional.gelu(self.norm(self.fc1(x))))


class SmallCNN(nn.Module):
    """Conv -> BatchNorm -> ReLU -> MaxPool -> Conv -> ReLU -> AdaptiveAvgPool -> Linear."""

    def __init__(self, channels: int = 16, classes: int = 10):
        super().__init__()
        self.conv1 = nn.Conv2d(3, channels, 3, padding=1)
        self.bn = nn.BatchNorm2d(channels)
        self.conv2 = nn.Conv2d(channels, 2 * channels, 3, padding=1)
        self.head = nn.Linear(2 * channels, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = nn.functional.max_pool2d(torch.relu(self.bn(self.conv1(x))), 2)
        x = nn.functional.adaptive_avg_pool2d(torch.relu(self.conv2(x)), 1)
        return self.head(torch.flatten(x, 1))


class ResidualBlock(nn.Module):
    def __init__(self, channels: int = 16):
        super().__init__()
        self.conv1 = nn.Conv2d(channels, channels, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(channels)
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1)
        self.bn2 = nn.BatchNorm2d(channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.bn1(self.conv1(x)))
        return torch.relu(x + self.bn2(self.conv2(y)))


class CausalSelfAttention(nn.Module):
    def __init__(self, d: int = 64, heads: int = 4):
        super().__init__()
        self.heads = heads
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(x).split(d, dim=2)
        q, k, v = (z.reshape(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        y = nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.proj(y.transpose(1, 2).reshape(b, t, d))


def encoder_layer(d: int = 64, heads: int = 4) -> nn.Module:
    return nn.TransformerEncoderLayer(d, heads, dim_feedforward=2 * d, dropout=0.0, batch_first=True)


class LayerStack(nn.Module):
    """``n`` identical Linear -> LayerNorm -> GELU layers (compile-time scaling)."""

    def __init__(self, n: int, d: int = 64):
        super().__init__()
        self.layers = nn.ModuleList(nn.Sequential(nn.Linear(d, d), nn.LayerNorm(d), nn.GELU())
                                    for _ in range(n))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            x = layer(x)
        return x


# name -> (factory, example-input maker taking the batch size)
MODELS: dict[str, tuple[Callable[[], nn.Module], Callable[[int], tuple[torch.Tensor, ...]]]] = {
    "mlp_layernorm": (MLPNorm, lambda b: (torch.randn(b, 128),)),
    "small_cnn": (SmallCNN, lambda b: (torch.randn(b, 3, 32, 32),)),
    "residual_block": (ResidualBlock, lambda b: (torch.randn(b, 16, 16, 16),)),
    "causal_attention": (CausalSelfAttention, lambda b: (torch.randn(b, 32, 64),)),
    "transformer_encoder": (encoder_layer, lambda b: (torch.randn(b, 32, 64),)),
}


def make(name: str, batch: int, seed: int = 0) -> tuple[nn.Module, tuple[Any, ...]]:
    """The model ``name`` in eval mode with example inputs of batch size ``batch``."""
    torch.manual_seed(seed)
    factory, inputs = MODELS[name]
    return factory().eval(), inputs(batch)


def _compile_polyir(model: nn.Module, inputs: tuple[Any, ...]) -> Callable[..., Any]:
    import polyir
    return polyir.compile(model, inputs, target="cpu")


def _compile_inductor(model: nn.Module) -> Callable[..., Any]:
    import torch._dynamo
    torch._dynamo.reset()
    return torch.compile(model)


def run(quick: bool) -> list[dict[str, Any]]:
    """Every model at batch sizes 1 and 8: medians of polyir, eager and Inductor."""
    from bench.timing import median_seconds

    names = ["mlp_layernorm", "small_cnn"] if quick else list(MODELS)
    batches = [1] if quick else [1, 8]
    repeats = 3 if quick else 10
    rows = []
    for name in names:
        for batch in batches:
            model, inputs = make(name, batch)
            row: dict[str, Any] = {"model": name, "batch": batch,
                                   "shape": "x".join(map(str, inputs[0].shape)), "dtype": "f32"}
            with torch.no_grad():
                expected = model(*inputs)
                row["eager_s"] = median_seconds(lambda: model(*inputs), repeats, min_seconds=0.01)
                try:
                    compiled = _compile_polyir(model, inputs)
                    got = compiled(*inputs)
                    torch.testing.assert_close(got, expected, rtol=1e-3, atol=1e-3)
                    row["polyir_s"] = median_seconds(lambda: compiled(*inputs), repeats, min_seconds=0.01)
                except Exception as error:  # report, keep measuring the others
                    row["note"] = f"polyir failed: {type(error).__name__}: {str(error)[:120]}"
                if not quick or name == names[0]:
                    inductor = _compile_inductor(model)
                    inductor(*inputs)
                    row["inductor_s"] = median_seconds(lambda: inductor(*inputs), repeats, min_seconds=0.01)
            for peer in ("eager", "inductor"):
                if row.get("polyir_s") and row.get(f"{peer}_s"):
                    row[f"ratio_vs_{peer}"] = row["polyir_s"] / row[f"{peer}_s"]
            print(f"  {name} b{batch}: {row}", flush=True)
            rows.append(row)
    return rows
