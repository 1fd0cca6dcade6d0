"""Small GPU benchmark: polyir-generated kernels against torch on the same GPU.

    python bench/gpu_bench.py --out results.json [--quick]

Cases (each checked against torch before it is timed):

* ``elementwise``: ``Y = tanh(2X + b) * sigmoid(X) + exp(-X*X)`` on f32
  (polyir flat mapping vs torch eager, which runs several kernels);
* ``matmul_fragments``: ``C = A @ B`` with f16 inputs, f32 accumulation, on
  tensor cores (wmma, one 16x16 tile per warp, 8 warps per block) vs torch
  f16 ``mm`` (cuBLAS);
* ``matmul_scalar``: the same product without fragments: shared-memory 32x32
  tiles mapped by ``gpu-map`` (CUDA cores) vs torch f32 ``mm`` (TF32 off).

Times are medians of CUDA-event timings after a warm-up; compile time is
reported separately. Writes one JSON file.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from polyir.ir.parser import parse  # noqa: E402
from polyir.ptx.build import build_cuda  # noqa: E402
from polyir.target import cuda  # noqa: E402
from tests.gpu.kernels import wmma_matmul_kernel  # noqa: E402

ELEMENTWISE = """
func chain(Y: f32[N, M], X: f32[N, M], b: f32[M]) {
  for i = 0 to N parallel {
    for j = 0 to M parallel {
      S0: Y[i, j] = tanh(X[i, j] * 2.0 + b[j]) * sigmoid(X[i, j]) + exp(-X[i, j] * X[i, j])
    }
  }
}
"""

SCALAR_MATMUL = """
func matmul(C: f32[N, M], A: f16[N, K], B: f16[K, M]) {
  local At: f16[32, 32]
  local Bt: f16[32, 32]
  for ii = 0 to N step 32 parallel {
    for jj = 0 to M step 32 parallel {
      for kk = 0 to K step 32 {
        for i = ii to min(N, ii + 32) parallel {
          for k = kk to min(K, kk + 32) parallel {
            S0: At[i - ii, k - kk] = A[i, k]
          }
        }
        for k_1 = kk to min(K, kk + 32) parallel {
          for j = jj to min(M, jj + 32) parallel {
            S1: Bt[k_1 - kk, j - jj] = B[k_1, j]
          }
        }
        for i_1 = ii to min(N, ii + 32) parallel {
          for j_1 = jj to min(M, jj + 32) parallel {
            for k_2 = kk to min(K, kk + 32) {
              S2: C[i_1, j_1] = C[i_1, j_1] + cast<f32>(At[i_1 - ii, k_2 - kk]) * cast<f32>(Bt[k_2 - kk, j_1 - jj])
            }
          }
        }
      }
    }
  }
}
"""


def timed(cp: Any, fn: Callable[[], None], reps: int) -> float:
    """Median milliseconds of ``fn`` over ``reps`` runs (after one warm-up)."""
    fn()
    cp.cuda.get_current_stream().synchronize()
    samples = []
    for _ in range(reps):
        start, stop = cp.cuda.Event(), cp.cuda.Event()
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        samples.append(cp.cuda.get_elapsed_time(start, stop))
    return statistics.median(samples)


def compile_timed(text: str, sm: int, pipeline: str | None = None) -> tuple[Any, float]:
    begin = time.perf_counter()
    exe = build_cuda(parse(text), cuda(sm), pipeline=pipeline)
    return exe, time.perf_counter() - begin


def bench_elementwise(cp: Any, torch: Any, sm: int, n: int, reps: int) -> dict[str, Any]:
    exe, compile_s = compile_timed(ELEMENTWISE, sm)
    x = torch.randn(n, n, device="cuda")
    b = torch.randn(n, device="cuda")
    y = torch.empty_like(x)
    exe(y, x, b)

    def eager() -> Any:
        return torch.tanh(x * 2 + b) * torch.sigmoid(x) + torch.exp(-x * x)

    expected = eager()
    error = float(((y - expected).abs() / (expected.abs() + 1e-6)).max())
    return {"case": "elementwise", "shape": [n, n], "compile_s": compile_s,
            "polyir_ms": timed(cp, lambda: exe(y, x, b), reps),
            "torch_ms": timed(cp, lambda: eager(), reps), "max_rel_error": error}


def bench_matmul(cp: Any, torch: Any, sm: int, size: int, fragments: bool, reps: int) -> dict[str, Any]:
    text = wmma_matmul_kernel("m16n16k16.f16.f32", warps=(4, 2)) if fragments else SCALAR_MATMUL
    exe, compile_s = compile_timed(text, sm)
    a = torch.randn(size, size, device="cuda", dtype=torch.float16)
    b = torch.randn(size, size, device="cuda", dtype=torch.float16)
    c = torch.zeros(size, size, device="cuda", dtype=torch.float32)
    exe(c, a, b)
    reference = a.float() @ b.float()
    error = float((c - reference).abs().max() / reference.abs().max())

    def run() -> None:
        c.zero_()
        exe(c, a, b)

    if fragments:
        torch_ms = timed(cp, lambda: torch.mm(a, b), reps)
        baseline = "torch.mm f16 (cuBLAS, tensor cores)"
    else:
        af, bf = a.float(), b.float()
        torch.backends.cuda.matmul.allow_tf32 = False
        torch_ms = timed(cp, lambda: torch.mm(af, bf), reps)
        baseline = "torch.mm f32 (cuBLAS, TF32 off)"
    polyir_ms = timed(cp, run, reps)
    return {"case": "matmul_fragments" if fragments else "matmul_scalar", "shape": [size] * 3,
            "compile_s": compile_s, "polyir_ms": polyir_ms, "torch_ms": torch_ms,
            "baseline": baseline, "polyir_tflops": 2 * size ** 3 / polyir_ms / 1e9,
            "torch_tflops": 2 * size ** 3 / torch_ms / 1e9, "max_rel_error": error}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="JSON file to write")
    parser.add_argument("--quick", action="store_true", help="small sizes only")
    options = parser.parse_args()
    import cupy as cp
    import torch
    sm = int(cp.cuda.Device().compute_capability)
    sm = 90 if sm >= 90 else 80
    props = cp.cuda.runtime.getDeviceProperties(0)
    report: dict[str, Any] = {
        "gpu": props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"]),
        "target": f"sm_{sm}", "python": platform.python_version(), "cupy": cp.__version__,
        "torch": torch.__version__, "results": [], "errors": [],
    }
    sizes = [1024] if options.quick else [1024, 4096]
    cases: list[tuple[str, Callable[[], dict[str, Any]]]] = [
        ("elementwise", lambda: bench_elementwise(cp, torch, sm, 2048 if options.quick else 8192, 20))]
    for size in sizes:
        reps = 20 if size <= 1024 else 5
        cases.append((f"matmul_fragments {size}", lambda s=size, r=reps: bench_matmul(cp, torch, sm, s, True, r)))
        cases.append((f"matmul_scalar {size}", lambda s=size, r=reps: bench_matmul(cp, torch, sm, s, False, r)))
    for name, case in cases:
        try:
            result = case()
            result["speedup_vs_torch"] = result["torch_ms"] / result["polyir_ms"]
            report["results"].append(result)
            print(json.dumps(result), flush=True)
        except Exception as error:  # keep going: one failing case must not hide the others
            report["errors"].append({"case": name, "error": f"{type(error).__name__}: {error}"})
            print(f"{name}: FAILED {type(error).__name__}: {error}", flush=True)
    with open(options.out, "w") as handle:
        json.dump(report, handle, indent=2)
    return 1 if report["errors"] else 0


if __name__ == "__main__":
    sys.exit(main())
