"""What fusion does to the benchmark models: nests, intermediate bytes, time.

For each model (the models section's, plus realistic sizes: a GPT-2-small
block at d=768 and sequence 128, a BERT-base encoder layer, a ResNet-18 basic
block at 64 channels and 56x56, its single 3x3 convolution alone, and whole
ResNet-18 and MobileNetV2 at 224x224, batch 1 only) at batch 1 and 8 it reports

* top-level loop nests and bytes of intermediate (local) buffers of the
  compiled functions without fusion (``pipeline=""``) and with the default
  pipeline (``fuse,shrink-buffers,...``; a loop-scoped local counts once, at
  its per-iteration size);
* the time of both builds against torch eager and Inductor, interleaved, and
  the ratios.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from bench.caches import polyir_cache, session_dir, warm_up_inductor, warm_up_polyir
from bench.config import cpu_target
from bench.models import MODELS, compile_inductor, make
from bench.timing import interleaved_medians, ratio, record_medians

NOTE = ("nests and intermediate bytes are of the compiled functions; a loop-scoped local counts at "
        "its per-iteration size")


class GPT2Block(nn.Module):
    """GPT-2-small block: pre-norm causal self-attention and a 4x GELU MLP."""

    def __init__(self, d: int = 768, heads: int = 12):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.attn, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc, self.out = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.attn(self.ln1(x)).split(d, dim=2)
        q, k, v = (z.reshape(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        y = nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(y.transpose(1, 2).reshape(b, t, d))
        return x + self.out(nn.functional.gelu(self.fc(self.ln2(x))))


class BasicBlock(nn.Module):
    """ResNet-18 basic block: conv3x3-bn-relu-conv3x3-bn, plus the input, relu."""

    def __init__(self, channels: int = 64):
        super().__init__()
        self.conv1 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(channels)
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.bn1(self.conv1(x)))
        return torch.relu(x + self.bn2(self.conv2(y)))


def _randomise_batch_norms(model: nn.Module) -> None:
    """Batch norm statistics that are not the identity."""
    for module in model.modules():
        if isinstance(module, nn.BatchNorm2d):
            module.running_mean.uniform_(-0.1, 0.1)
            module.running_var.uniform_(0.5, 1.5)


class DownBlock(nn.Module):
    """ResNet's downsampling basic block: a stride-2 3x3 convolution, a 3x3 one,
    and a 1x1 stride-2 convolution with batch norm on the shortcut."""

    def __init__(self, cin: int, cout: int):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride=2, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride=2, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.bn1(self.conv1(x)))
        return torch.relu(self.down(x) + self.bn2(self.conv2(y)))


class ResNet18(nn.Module):
    """ResNet-18 for 224x224 images, written out (no torchvision): the 7x7
    stride-2 stem with batch norm, ReLU and a 3x3 max pool, four stages of two
    basic blocks (the first of the last three downsampling), average pooling
    and a 1000-way linear head. Batch norm statistics are randomised so that
    they are not the identity."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64),
                                  nn.ReLU(), nn.MaxPool2d(3, 2, 1))
        blocks: list[nn.Module] = [BasicBlock(64), BasicBlock(64)]
        for cin, cout in ((64, 128), (128, 256), (256, 512)):
            blocks += [DownBlock(cin, cout), BasicBlock(cout)]
        self.blocks = nn.Sequential(*blocks)
        self.fc = nn.Linear(512, 1000)
        _randomise_batch_norms(self)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.blocks(self.stem(x))
        return self.fc(torch.flatten(nn.functional.adaptive_avg_pool2d(x, 1), 1))


class InvertedResidual(nn.Module):
    """MobileNetV2's block: a 1x1 expansion (batch norm, ReLU6), a depthwise 3x3
    (batch norm, ReLU6), a 1x1 projection (batch norm), the input added when
    the shapes agree."""

    def __init__(self, cin: int, cout: int, stride: int, expand: int):
        super().__init__()
        hidden = cin * expand
        self.residual = stride == 1 and cin == cout
        layers: list[nn.Module] = []
        if expand != 1:
            layers += [nn.Conv2d(cin, hidden, 1, bias=False), nn.BatchNorm2d(hidden), nn.ReLU6()]
        layers += [nn.Conv2d(hidden, hidden, 3, stride, 1, groups=hidden, bias=False),
                   nn.BatchNorm2d(hidden), nn.ReLU6(),
                   nn.Conv2d(hidden, cout, 1, bias=False), nn.BatchNorm2d(cout)]
        self.conv = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.conv(x) if self.residual else self.conv(x)


class MobileNetV2(nn.Module):
    """MobileNetV2 (width 1.0) for 224x224 images, written out: the stride-2
    stem, the 17 inverted residual blocks of the paper's table, the 1x1 to
    1280 channels, average pooling and a 1000-way head."""

    STAGES = ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1),
              (6, 160, 3, 2), (6, 320, 1, 1))
    """(expansion, channels, blocks, first stride)"""

    def __init__(self) -> None:
        super().__init__()
        layers: list[nn.Module] = [nn.Sequential(nn.Conv2d(3, 32, 3, 2, 1, bias=False),
                                                 nn.BatchNorm2d(32), nn.ReLU6())]
        cin = 32
        for expand, cout, count, stride in self.STAGES:
            for n in range(count):
                layers.append(InvertedResidual(cin, cout, stride if n == 0 else 1, expand))
                cin = cout
        layers.append(nn.Sequential(nn.Conv2d(cin, 1280, 1, bias=False), nn.BatchNorm2d(1280),
                                    nn.ReLU6()))
        self.features = nn.Sequential(*layers)
        self.fc = nn.Linear(1280, 1000)
        _randomise_batch_norms(self)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = nn.functional.adaptive_avg_pool2d(self.features(x), 1)
        return self.fc(torch.flatten(x, 1))


def bert_layer() -> nn.Module:
    """A BERT-base encoder layer (d=768, 12 heads, feed-forward 3072, post-norm, GELU)."""
    return nn.TransformerEncoderLayer(768, 12, dim_feedforward=3072, dropout=0.0, activation="gelu",
                                      batch_first=True)


REALISTIC: dict[str, tuple[Callable[[], nn.Module], Callable[[int], tuple[torch.Tensor, ...]]]] = {
    "gpt2_block_d768_s128": (GPT2Block, lambda b: (torch.randn(b, 128, 768),)),
    "bert_layer_d768_s128": (bert_layer, lambda b: (torch.randn(b, 128, 768),)),
    "resnet18_block_64x56x56": (BasicBlock, lambda b: (torch.randn(b, 64, 56, 56),)),
    "conv2d_3x3_64x56x56": (lambda: nn.Conv2d(64, 64, 3, padding=1, bias=False),
                            lambda b: (torch.randn(b, 64, 56, 56),)),
    "resnet18_224": (ResNet18, lambda b: (torch.randn(b, 3, 224, 224),)),
    "mobilenetv2_224": (MobileNetV2, lambda b: (torch.randn(b, 3, 224, 224),)),
}
BATCHES: dict[str, tuple[int, ...]] = {"resnet18_224": (1,), "mobilenetv2_224": (1,)}
"""Models measured at fewer batch sizes than 1 and 8 (a whole CNN at batch 8
takes most of a minute to compile and time)."""


def intermediate_bytes(module: Any) -> tuple[int, int]:
    """``(top-level loop nests, bytes of local buffers)`` of a compiled module."""
    from polyir.ir.nodes import For
    from polyir.ir.types import DType
    nests, total = 0, 0
    for function in module.functions:
        nests += sum(1 for node in function.body if isinstance(node, For))
        for buffer in (*function.locals, *function.loop_locals):
            count = 1
            for dim in buffer.shape:
                count *= dim.constant if dim.is_constant else 64
            total += count * (buffer.dtype.storage_bytes("cpu") if isinstance(buffer.dtype, DType) else 4)
    return nests, total


def _structure(compiled: Any) -> tuple[int, int]:
    nests, total = 0, 0
    for segment in compiled.last_plan.segments:
        n, b = intermediate_bytes(segment.executable.ir)
        nests, total = nests + n, total + b
    return nests, total


def bench_fusion(name: str, batch: int, repeats: int, with_inductor: bool) -> dict[str, Any]:
    import polyir
    if name in REALISTIC:
        torch.manual_seed(0)
        factory, maker = REALISTIC[name]
        model, inputs = factory().eval(), maker(batch)
    else:
        model, inputs = make(name, batch)
    row: dict[str, Any] = {"model": name, "batch": batch, "shape": "x".join(map(str, inputs[0].shape)),
                           "dtype": "f32"}
    notes: list[str] = []
    contenders: dict[str, Callable[[], Any]] = {"eager": lambda: model(*inputs)}
    with torch.no_grad():
        expected = model(*inputs)
        builds = {"unfused": "", "fused": None}
        for label, pipeline in builds.items():
            try:
                with polyir_cache(session_dir("polyir")):
                    compiled = polyir.compile(model, inputs, target=cpu_target(), pipeline=pipeline)
                torch.testing.assert_close(compiled(*inputs), expected, rtol=2e-3, atol=2e-3)
                nests, nbytes = _structure(compiled)
                row[f"{label}_nests"], row[f"{label}_intermediate_bytes"] = nests, nbytes
                contenders[label] = (lambda c: lambda: c(*inputs))(compiled)
            except Exception as error:
                notes.append(f"polyir {label} failed: {type(error).__name__}: {str(error)[:160]}")
        if with_inductor:
            try:
                inductor = compile_inductor(model, inputs)
                contenders["inductor"] = lambda: inductor(*inputs)
            except Exception as error:
                notes.append(f"Inductor failed: {type(error).__name__}: {str(error)[:120]}")
        samples = interleaved_medians(contenders, repeats, warmup=1, min_seconds=0.01)
    record_medians(row, samples)
    for label in ("unfused", "fused"):
        row[f"{label}_vs_eager"] = ratio(row.get(f"{label}_s"), row.get("eager_s"))
        row[f"{label}_vs_inductor"] = ratio(row.get(f"{label}_s"), row.get("inductor_s"))
    row["fusion_speedup"] = ratio(row.get("unfused_s"), row.get("fused_s"))
    if notes:
        row["note"] = "; ".join(notes)
    return row


def run(quick: bool) -> list[dict[str, Any]]:
    """The models section's models at batch 1 and 8, then the realistic ones
    (``--quick``: two small models, batch 1, no Inductor)."""
    names = ["mlp_layernorm", "transformer_block"] if quick else [*MODELS, *REALISTIC]
    batches = [1] if quick else [1, 8]
    repeats = 3 if quick else 9
    warm_up_polyir()
    if not quick:
        warm_up_inductor()
    rows = []
    for name in names:
        for batch in [b for b in batches if b in BATCHES.get(name, batches)]:
            row = bench_fusion(name, batch, repeats if name not in REALISTIC else 3, not quick)
            print(f"  {name} b{batch}: nests {row.get('unfused_nests')} -> {row.get('fused_nests')}, "
                  f"bytes {row.get('unfused_intermediate_bytes')} -> {row.get('fused_intermediate_bytes')}, "
                  f"fused {row.get('fused_s')} unfused {row.get('unfused_s')} eager {row.get('eager_s')} "
                  f"inductor {row.get('inductor_s')}{', ' + row['note'] if row.get('note') else ''}",
                  flush=True)
            rows.append(row)
    return rows


def main(argv: list[str] | None = None) -> None:
    """``python -m bench.fusion [--threads N] [--batch B] MODEL...``: the rows of
    the named models (of the models section or the realistic ones) alone."""
    import argparse

    from bench.config import configure_threads
    parser = argparse.ArgumentParser(prog="python -m bench.fusion")
    parser.add_argument("models", nargs="+", choices=[*MODELS, *REALISTIC])
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--batch", type=int, action="append")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    configure_threads(args.threads)
    warm_up_polyir()
    warm_up_inductor()
    for name in args.models:
        for batch in args.batch or BATCHES.get(name, (1, 8)):
            row = bench_fusion(name, batch, args.repeats, True)
            print({k: v for k, v in row.items() if not k.endswith("_spread")}, flush=True)


if __name__ == "__main__":
    main()
