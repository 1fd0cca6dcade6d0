"""Time single convolutions through ``polyir.compile`` against torch's own
convolution (oneDNN), one thread, interleaved, medians: ResNet-18 3x3 (64
channels at 56x56, 128 at 28x28), 1x1, 3x3 stride 2, MobileNetV2 depthwise
(stride 1 and 2), and small or odd channel counts.

    PYTHONPATH=$PWD python scripts/conv_shapes_timing.py [CASES [REPEATS [PIPELINE]]]

``CASES`` is comma-separated names of ``CASES`` (default: all), ``REPEATS``
the interleaved rounds (default 9), ``PIPELINE`` a pipeline string (default:
the driver's, with ``fast_math``). Prints polyir's and torch's times, GFLOP/s
and the ratio polyir / torch (below 1: polyir faster).
"""
from __future__ import annotations

import statistics
import sys
import time

import torch
from torch import nn

import polyir
import polyir.target

CASES = {
    # name: (batch, in channels, out channels, size, kernel, stride, padding, groups)
    "r18_3x3_64_56": (1, 64, 64, 56, 3, 1, 1, 1),
    "r18_1x1_64_256_56": (1, 64, 256, 56, 1, 1, 0, 1),
    "r18_s2_64_128_56": (1, 64, 128, 56, 3, 2, 1, 1),
    "r18_3x3_128_28": (1, 128, 128, 28, 3, 1, 1, 1),
    "mbv2_dw_96_56": (1, 96, 96, 56, 3, 1, 1, 96),
    "mbv2_dw_s2_144_56": (1, 144, 144, 56, 3, 2, 1, 144),
    "c32_3x3_56": (1, 32, 32, 56, 3, 1, 1, 1),
    "odd_3x3_13_29": (1, 13, 29, 29, 3, 1, 1, 1),
}


def time_case(name: str, repeats: int, pipeline: str | None) -> str:
    batch, cin, cout, size, kernel, stride, pad, groups = CASES[name]
    model = nn.Conv2d(cin, cout, kernel, stride=stride, padding=pad, groups=groups, bias=False)
    x = torch.randn(batch, cin, size, size)
    with torch.no_grad():
        compiled = polyir.compile(model, (x,), target=polyir.target.cpu(1), pipeline=pipeline)
        torch.testing.assert_close(compiled(x), model(x), rtol=1e-3, atol=1e-3)
        start = time.perf_counter()
        model(x)
        inner = max(1, int(0.05 / max(1e-5, time.perf_counter() - start)))
        ours: list[float] = []
        theirs: list[float] = []
        for _ in range(repeats):
            for call, samples in ((lambda: compiled(x), ours), (lambda: model(x), theirs)):
                start = time.perf_counter()
                for _ in range(inner):
                    call()
                samples.append((time.perf_counter() - start) / inner)
    mine, torch_s = statistics.median(ours), statistics.median(theirs)
    out = (size + 2 * pad - kernel) // stride + 1
    gflop = 2 * batch * cout * (cin // groups) * kernel * kernel * out * out / 1e9
    return (f"{name:20s} polyir {mine * 1e3:8.3f} ms ({gflop / mine:6.1f} GFLOP/s)  torch "
            f"{torch_s * 1e3:8.3f} ms ({gflop / torch_s:6.1f} GFLOP/s)  ratio {mine / torch_s:5.2f}")


def main() -> None:
    names = sys.argv[1].split(",") if len(sys.argv) > 1 and sys.argv[1] else list(CASES)
    repeats = int(sys.argv[2]) if len(sys.argv) > 2 else 9
    pipeline = sys.argv[3] if len(sys.argv) > 3 else None
    torch.set_num_threads(1)
    for name in names:
        print(time_case(name, repeats, pipeline), flush=True)


if __name__ == "__main__":
    main()
