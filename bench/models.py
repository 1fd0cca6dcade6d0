"""torch.nn models on CPU: polyir against torch eager and torch.compile (Inductor).

The models are those of the frontend tests (tests/frontends/test_fx_modules.py)
at benchmark sizes, and the two demo models (polyir/frontends/demo_models.py).
Each runs at batch sizes 1 and 8; the three contenders are timed interleaved,
after checking polyir's and Inductor's outputs against eager.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from bench.caches import (
    drop_inductor_memory_caches,
    inductor_cache,
    polyir_cache,
    session_dir,
    warm_up_inductor,
    warm_up_polyir,
)
from bench.config import cpu_target
from bench.timing import interleaved_medians, ratio, record_medians
from polyir.frontends.demo_models import SmallCNN, TransformerBlock


class MLPNorm(nn.Module):
    """Linear -> LayerNorm -> GELU -> Linear."""

    def __init__(self, d: int = 128, hidden: int = 256):
        super().__init__()
        self.fc1, self.norm, self.fc2 = nn.Linear(d, hidden), nn.LayerNorm(hidden), nn.Linear(hidden, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(nn.functional.gelu(self.norm(self.fc1(x))))


class ResidualBlock(nn.Module):
    """conv-bn-relu-conv-bn, plus the input, relu."""

    def __init__(self, channels: int = 16):
        super().__init__()
        self.conv1 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(channels)
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.bn1(self.conv1(x)))
        return torch.relu(x + self.bn2(self.conv2(y)))


class CausalSelfAttention(nn.Module):
    """qkv projection, causal scaled-dot-product attention, output projection."""

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
    """torch's own post-norm TransformerEncoderLayer."""
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
    "transformer_block": (TransformerBlock, lambda b: (torch.randn(b, 32, 64),)),
}
"""``small_cnn`` and ``transformer_block`` are the demo's models, at their default sizes."""

QUICK_MODELS = ["mlp_layernorm", "small_cnn"]
QUICK_INDUCTOR_MODEL = "mlp_layernorm"
"""``--quick`` compiles only this model with Inductor (Inductor compiles take seconds)."""


def _randomise_batch_norm(model: nn.Module) -> None:
    """Non-trivial running statistics (fresh ones make batch norm nearly the identity)."""
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, nn.modules.batchnorm._BatchNorm):
                assert module.running_mean is not None and module.running_var is not None
                module.running_mean.copy_(torch.randn_like(module.running_mean) * 0.1)
                module.running_var.copy_(torch.rand_like(module.running_var) + 0.5)


def make(name: str, batch: int, seed: int = 0) -> tuple[nn.Module, tuple[Any, ...]]:
    """The model ``name`` in eval mode with example inputs of batch size ``batch``."""
    torch.manual_seed(seed)
    factory, inputs = MODELS[name]
    model = factory().eval()
    _randomise_batch_norm(model)
    return model, inputs(batch)


def compile_polyir(model: nn.Module, inputs: tuple[Any, ...], target: Any = None) -> Any:
    """``polyir.compile`` for ``target`` (default: the native CPU with ``--threads``);
    it compiles for ``inputs`` before returning."""
    import polyir
    return polyir.compile(model, inputs, target=cpu_target() if target is None else target)


def compile_inductor(model: nn.Module, inputs: tuple[Any, ...]) -> Callable[..., Any]:
    """``torch.compile`` with Inductor, compiled by one call on ``inputs``."""
    drop_inductor_memory_caches()
    compiled = torch.compile(model, backend="inductor")
    compiled(*inputs)
    return compiled


def bench_model(name: str, batch: int, repeats: int, with_inductor: bool) -> dict[str, Any]:
    """One row: medians of polyir, eager and (optionally) Inductor, and their ratios."""
    model, inputs = make(name, batch)
    row: dict[str, Any] = {"model": name, "batch": batch,
                           "shape": "x".join(map(str, inputs[0].shape)), "dtype": "f32"}
    notes: list[str] = []
    contenders: dict[str, Callable[[], Any]] = {"eager": lambda: model(*inputs)}
    with torch.no_grad():
        expected = model(*inputs)
        try:
            with polyir_cache(session_dir("polyir")):
                compiled = compile_polyir(model, inputs)
            torch.testing.assert_close(compiled(*inputs), expected, rtol=1e-3, atol=1e-3)
            summary = compiled.summary()
            row["loop_nests"] = summary.get("loop_nests")
            if summary.get("fallbacks"):
                notes.append(f"eager fallback for {', '.join(summary['fallbacks'])}")
            contenders["polyir"] = lambda: compiled(*inputs)
        except Exception as error:  # report it and keep measuring the others
            notes.append(f"polyir failed: {type(error).__name__}: {str(error)[:160]}")
        if with_inductor:
            try:
                with inductor_cache(session_dir("inductor")):
                    inductor = compile_inductor(model, inputs)
                torch.testing.assert_close(inductor(*inputs), expected, rtol=1e-3, atol=1e-3)
                contenders["inductor"] = lambda: inductor(*inputs)
            except Exception as error:
                notes.append(f"Inductor failed: {type(error).__name__}: {str(error)[:160]}")
        else:
            notes.append("Inductor skipped (--quick)")
        samples = interleaved_medians(contenders, repeats, warmup=2, min_seconds=0.01)
    record_medians(row, samples)
    row["ratio_vs_eager"] = ratio(row.get("polyir_s"), row.get("eager_s"))
    row["ratio_vs_inductor"] = ratio(row.get("polyir_s"), row.get("inductor_s"))
    if notes:
        row["note"] = "; ".join(notes)
    return row


def run(quick: bool) -> list[dict[str, Any]]:
    """Every model at batch sizes 1 and 8 (``--quick``: two models, batch 1)."""
    names = QUICK_MODELS if quick else list(MODELS)
    batches = [1] if quick else [1, 8]
    repeats = 5 if quick else 25
    warm_up_polyir()
    warm_up_inductor()
    rows = []
    for name in names:
        for batch in batches:
            with_inductor = not quick or name == QUICK_INDUCTOR_MODEL
            row = bench_model(name, batch, repeats, with_inductor)
            print(f"  {name} b{batch}: polyir {row.get('polyir_s')}, eager {row.get('eager_s')}, "
                  f"inductor {row.get('inductor_s')}"
                  f"{', ' + row['note'] if row.get('note') else ''}", flush=True)
            rows.append(row)
    return rows
