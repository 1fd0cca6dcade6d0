"""Convolutions on the CPU: one ``nn.Conv2d`` (f32, batch 1, bias) compiled by
``polyir.compile`` against torch's own convolution (oneDNN when torch was
built with it), interleaved medians in one run.

The shapes are the convolutions of ResNet-18 (its 7x7 stem, the 3x3 layers of
each stage, the strided 3x3 and 1x1 of a downsampling block), ResNet-50's
bottleneck 1x1s and MobileNetV2's depthwise 3x3s (stride 1 and 2) and
pointwise 1x1s. The last row is the median ratio over the shapes (the issue's
"median shape"), with the geometric mean beside it.
"""
from __future__ import annotations

import statistics
import time
from typing import Any

import torch
from torch import nn

from bench import config
from bench.caches import polyir_cache, session_dir, warm_up_polyir
from bench.config import cpu_target
from bench.timing import interleaved_medians, ratio, record_medians

# name: (in channels, out channels, height = width, kernel, stride, padding, groups)
SHAPES: dict[str, tuple[int, int, int, int, int, int, int]] = {
    "resnet18_stem_7x7s2": (3, 64, 224, 7, 2, 3, 1),
    "resnet18_3x3_64x56": (64, 64, 56, 3, 1, 1, 1),
    "resnet18_3x3s2_64to128x56": (64, 128, 56, 3, 2, 1, 1),
    "resnet18_3x3_128x28": (128, 128, 28, 3, 1, 1, 1),
    "resnet18_3x3_256x14": (256, 256, 14, 3, 1, 1, 1),
    "resnet18_3x3_512x7": (512, 512, 7, 3, 1, 1, 1),
    "resnet18_1x1s2_64to128x56": (64, 128, 56, 1, 2, 0, 1),
    "resnet50_1x1_64to256x56": (64, 256, 56, 1, 1, 0, 1),
    "resnet50_1x1_256to64x56": (256, 64, 56, 1, 1, 0, 1),
    "resnet50_1x1_1024to256x14": (1024, 256, 14, 1, 1, 0, 1),
    "mobilenetv2_dw3x3_32x112": (32, 32, 112, 3, 1, 1, 32),
    "mobilenetv2_dw3x3s2_96x112": (96, 96, 112, 3, 2, 1, 96),
    "mobilenetv2_dw3x3_144x56": (144, 144, 56, 3, 1, 1, 144),
    "mobilenetv2_1x1_16to96x112": (16, 96, 112, 1, 1, 0, 1),
    "mobilenetv2_1x1_144to24x56": (144, 24, 56, 1, 1, 0, 1),
}
QUICK = ("resnet18_3x3_64x56", "resnet50_1x1_256to64x56", "mobilenetv2_dw3x3_144x56")

NOTE = ("f32, batch 1, bias; ratio = polyir's time over torch's (oneDNN when built in); "
        "the 'median' row: the median and geometric mean of the ratios over the shapes")


def _peer() -> str:
    mkldnn = getattr(torch.backends, "mkldnn", None)
    return "torch (oneDNN)" if mkldnn is not None and mkldnn.is_available() else "torch"


PLAN_WORDS = ("convolution register tile", "matrix product", "register tile", "unrolled by",
              "vectorised across", "left to the vectoriser", "innermost")
"""Phrases of auto-tile's remarks that name a plan (the first found names it)."""


def _plans(compiled: Any) -> str:
    """The auto-tile plans the compiled convolution got, one phrase each."""
    found = []
    for segment in compiled.last_plan.segments:
        for remark in segment.executable.remarks:
            if remark.pass_name == "auto-tile" and remark.kind == "applied":
                found += [w for w in PLAN_WORDS if w in remark.why][:1]
    return "; ".join(found) or "-"


def bench_conv(name: str, repeats: int) -> dict[str, Any]:
    import polyir
    cin, cout, size, kernel, stride, padding, groups = SHAPES[name]
    torch.manual_seed(0)
    model = nn.Conv2d(cin, cout, kernel, stride=stride, padding=padding, groups=groups).eval()
    x = torch.randn(1, cin, size, size)
    row: dict[str, Any] = {"name": name, "shape": f"{cin}x{size}x{size}->{cout} k{kernel} s{stride}"
                                                  + (f" g{groups}" if groups > 1 else ""),
                           "dtype": "f32", "threads": config.THREADS or "all", "peer": _peer()}
    with torch.no_grad():
        expected = model(x)
        start = time.perf_counter()
        with polyir_cache(session_dir("polyir")):
            compiled = polyir.compile(model, (x,), target=cpu_target())
        row["compile_s"] = round(time.perf_counter() - start, 3)
        torch.testing.assert_close(compiled(x), expected, rtol=1e-3, atol=1e-3)
        row["plan"] = _plans(compiled)
        samples = interleaved_medians({"polyir": lambda: compiled(x), "torch": lambda: model(x)},
                                      repeats, warmup=1, min_seconds=0.02,
                                      settle=0.2 if (config.THREADS or 2) > 1 else 0.0)
    record_medians(row, samples)
    row["ratio_vs_torch"] = ratio(row.get("polyir_s"), row.get("torch_s"))
    return row


def summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The median and geometric mean of the ratios."""
    ratios = [r["ratio_vs_torch"] for r in rows if r.get("ratio_vs_torch")]
    if not ratios:
        return {"name": "median", "note": "no ratios"}
    geomean = statistics.geometric_mean(ratios)
    return {"name": "median", "shape": f"{len(ratios)} shapes", "dtype": "f32",
            "threads": config.THREADS or "all", "ratio_vs_torch": round(statistics.median(ratios), 3),
            "note": f"geometric mean {geomean:.3f}"}


def run(quick: bool) -> list[dict[str, Any]]:
    """Every shape (``--quick``: three, three repetitions), then the median row."""
    warm_up_polyir()
    names = QUICK if quick else tuple(SHAPES)
    rows = []
    for name in names:
        try:
            row = bench_conv(name, 3 if quick else 9)
        except Exception as error:  # keep the other shapes' figures
            row = {"name": name, "note": f"failed: {type(error).__name__}: {str(error)[:160]}"}
        print(f"  {name}: polyir {row.get('polyir_s')} torch {row.get('torch_s')} "
              f"ratio {row.get('ratio_vs_torch')} ({row.get('plan', row.get('note'))})", flush=True)
        rows.append(row)
    rows.append(summary(rows))
    return rows


def main() -> None:
    from bench.report import TABLES, print_table
    title, columns = TABLES["conv"]
    print_table(title, run(quick=False), columns)


if __name__ == "__main__":
    main()
