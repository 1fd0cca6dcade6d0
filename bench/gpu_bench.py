"""GPU benchmark: polyir kernels against torch (cuBLAS, eager, Inductor) on the same GPU.

    python bench/gpu_bench.py --out results.json [--quick] [--no-models]

Cases (each checked against torch before it is timed; a failing case is
recorded with its error and the others go on):

* ``matmul``: ``C = A @ B`` in f16 and bf16 (f32 accumulation, 16-bit
  output), 1024^3 to 8192^3 (``--quick``: 1024^3, 2048^3), compiled by the
  default CUDA pipeline (``gpu-tensorcore``: shared-memory tiles,
  ``ldmatrix`` + ``mma.sync``) against ``torch.matmul`` (cuBLAS);
* ``matmul_f32``: the same in f32 at 2048^3 (CUDA-core register tiles,
  ``polyir.gpu.simt``) against ``torch.matmul`` with TF32 off;
* ``linear_relu``: ``relu(X @ W^T + b)`` in f16 (the epilogue fused into the
  tensor-core kernel) against torch eager (cuBLAS + a separate kernel) and
  ``torch.compile`` (Inductor);
* ``conv``: ResNet-50 convolutions (f16, batch 1 and 8, bias added; the
  3x3, 1x1 and strided layers and the 7x7 stem) as implicit GEMM on tensor
  cores (``polyir.gpu.implicit_gemm``) against ``torch.nn.functional.conv2d``
  (cuDNN), with the median ratio over the shapes in a summary row;
* ``softmax``: row softmax in f32 (4096 x 1024 and 8192 x 4096), one block
  per row (``polyir.gpu.rows``), against ``torch.softmax``;
* ``elementwise``: ``tanh(2X + b) * sigmoid(X) + exp(-X*X)`` in f32 against
  torch eager;
* ``attention``: ``F.scaled_dot_product_attention`` in f16 (batch 1, 8 heads,
  sequence 2048, head dim 128) through ``polyir.compile(..., target="cuda")``
  against torch's own;
* ``models`` (unless ``--no-models``): ``bench.gpu.model_rows`` -- every
  benchmark model (``--quick``: the quick ones) at batch 1 with
  ``target="cuda"`` on CUDA tensors against torch eager and Inductor on the GPU.

Times are medians of CUDA-event timings after a warm-up, in milliseconds;
``ratio_vs_peer`` is peer time / polyir time (above 1: polyir faster). The
compile time (IR to PTX) is reported separately. Writes one JSON file.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
import traceback
from collections.abc import Callable
from typing import Any

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from polyir.driver import compile_ir  # noqa: E402
from polyir.ir.parser import parse  # noqa: E402
from polyir.target import cuda  # noqa: E402

ELEMENTWISE = """
func chain(Y: f32[N, M], X: f32[N, M], b: f32[M]) {
  for i = 0 to N {
    for j = 0 to M {
      S0: Y[i, j] = tanh(X[i, j] * 2.0 + b[j]) * sigmoid(X[i, j]) + exp(-X[i, j] * X[i, j])
    }
  }
}
"""


def matmul_ir(dtype: str) -> str:
    """``C = A @ B`` with 16-bit ``dtype`` inputs and output, f32 accumulation,
    in the shape the ATen lowering gives ``torch.matmul``."""
    return f"""
func mm(C: {dtype}[M, N], A: {dtype}[M, K], B: {dtype}[K, N]) {{
  for i = 0 to M {{
    for j = 0 to N {{
      local acc: f32[]
      S0: acc[] = 0.0
      for r = 0 to K {{
        S1: acc[] = acc[] + cast<f32>(A[i, r]) * cast<f32>(B[r, j])
      }}
      S2: C[i, j] = cast<{dtype}>(acc[])
    }}
  }}
}}
"""


LINEAR_RELU = """
func linear(Y: f16[M, N], X: f16[M, K], W: f16[N, K], b: f16[N]) {
  for i = 0 to M {
    for j = 0 to N {
      local acc: f32[]
      S0: acc[] = cast<f32>(b[j])
      for r = 0 to K {
        S1: acc[] = acc[] + cast<f32>(X[i, r]) * cast<f32>(W[j, r])
      }
      S2: Y[i, j] = cast<f16>(max(acc[], 0.0))
    }
  }
}
"""


def timed(cp: Any, fn: Callable[[], Any], reps: int) -> float:
    """Median milliseconds of ``fn`` over ``reps`` runs (after one warm-up)."""
    fn()
    cp.cuda.get_current_stream().synchronize()
    import torch
    torch.cuda.synchronize()
    samples = []
    for _ in range(reps):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        samples.append(start.elapsed_time(stop))
    return statistics.median(samples)


def compile_timed(text: str, sm: int) -> tuple[Any, float]:
    """The executable of ``text`` for ``sm_<sm>`` (default CUDA pipeline) and seconds spent."""
    begin = time.perf_counter()
    exe = compile_ir(parse(text), cuda(sm))
    return exe, time.perf_counter() - begin


def _kernel_facts(exe: Any) -> dict[str, Any]:
    launches = [n for n in exe.ir.entry.body if hasattr(n, "kernel")]
    return {"launches": [{"kernel": n.kernel, "block": list(n.block),
                          "shared_bytes": n.shared_bytes} for n in launches],
            "mma_sync": "mma.sync.aligned.m16n8k16" in exe.ptx,
            "ldmatrix": "ldmatrix.sync.aligned" in exe.ptx}


def _rel_error(got: Any, want: Any) -> float:
    return float((got.float() - want.float()).abs().max() / want.float().abs().max().clamp(min=1e-6))


def bench_matmul(cp: Any, torch: Any, sm: int, size: int, dtype: str, reps: int) -> dict[str, Any]:
    text = matmul_ir(dtype)
    if dtype == "f32":
        text = text.replace("cast<f32>(", "(")
        torch.backends.cuda.matmul.allow_tf32 = False  # the peer computes in f32 too
    exe, compile_s = compile_timed(text, sm)
    tdtype = {"f16": torch.float16, "bf16": torch.bfloat16, "f32": torch.float32}[dtype]
    gen = torch.Generator(device="cuda").manual_seed(size)
    a = torch.randn(size, size, device="cuda", dtype=tdtype, generator=gen)
    b = torch.randn(size, size, device="cuda", dtype=tdtype, generator=gen)
    c = torch.empty(size, size, device="cuda", dtype=tdtype)
    exe(c, a, b)
    reference = torch.matmul(a, b)
    error = _rel_error(c, reference)
    polyir_ms = timed(cp, lambda: exe(c, a, b), reps)
    torch_ms = timed(cp, lambda: torch.matmul(a, b), reps)
    flops = 2 * size ** 3
    return {"case": f"matmul_{dtype}", "shape": [size] * 3, "compile_s": compile_s,
            "polyir_ms": polyir_ms, "peer": "torch.matmul (cuBLAS)", "peer_ms": torch_ms,
            "polyir_tflops": flops / polyir_ms / 1e9, "peer_tflops": flops / torch_ms / 1e9,
            "max_rel_error": error, "ok": error < (1e-4 if dtype == "f32" else 2e-2),
            **_kernel_facts(exe)}


def bench_linear(cp: Any, torch: Any, sm: int, m: int, n: int, k: int, reps: int
                 ) -> list[dict[str, Any]]:
    exe, compile_s = compile_timed(LINEAR_RELU, sm)
    gen = torch.Generator(device="cuda").manual_seed(7)
    x = torch.randn(m, k, device="cuda", dtype=torch.float16, generator=gen)
    w = torch.randn(n, k, device="cuda", dtype=torch.float16, generator=gen) / k ** 0.5
    bias = torch.randn(n, device="cuda", dtype=torch.float16, generator=gen)
    y = torch.empty(m, n, device="cuda", dtype=torch.float16)

    def eager() -> Any:
        return torch.relu(torch.nn.functional.linear(x, w, bias))

    exe(y, x, w, bias)
    error = _rel_error(y, eager())
    polyir_ms = timed(cp, lambda: exe(y, x, w, bias), reps)
    rows = [{"case": "linear_relu", "shape": [m, n, k], "compile_s": compile_s,
             "polyir_ms": polyir_ms, "peer": "torch eager", "peer_ms": timed(cp, eager, reps),
             "max_rel_error": error, "ok": error < 2e-2, **_kernel_facts(exe)}]
    try:
        inductor = torch.compile(eager)
        inductor()
        rows.append({**rows[0], "peer": "torch.compile (Inductor)",
                     "peer_ms": timed(cp, inductor, reps)})
    except Exception as error:
        rows.append({"case": "linear_relu", "peer": "torch.compile (Inductor)",
                     "error": f"{type(error).__name__}: {error}"})
    return rows


def bench_elementwise(cp: Any, torch: Any, sm: int, n: int, reps: int) -> dict[str, Any]:
    exe, compile_s = compile_timed(ELEMENTWISE, sm)
    x = torch.randn(n, n, device="cuda")
    b = torch.randn(n, device="cuda")
    y = torch.empty_like(x)
    exe(y, x, b)

    def eager() -> Any:
        return torch.tanh(x * 2 + b) * torch.sigmoid(x) + torch.exp(-x * x)

    expected = eager()
    # normwise: the sum cancels to ~0 at some x, where an elementwise relative
    # error only measures the fast-math tanh's absolute error (~5e-4)
    error = _rel_error(y, expected)
    return {"case": "elementwise", "shape": [n, n], "compile_s": compile_s,
            "polyir_ms": timed(cp, lambda: exe(y, x, b), reps), "peer": "torch eager",
            "peer_ms": timed(cp, eager, reps), "max_rel_error": error, "ok": error < 1e-3}


RESNET50_CONVS = [  # (channels in, input size, channels out, kernel, stride, padding)
    (3, 224, 64, 7, 2, 3), (64, 56, 64, 1, 1, 0), (64, 56, 64, 3, 1, 1), (64, 56, 256, 1, 1, 0),
    (256, 56, 128, 1, 1, 0), (128, 28, 128, 3, 1, 1), (128, 28, 512, 1, 1, 0),
    (512, 28, 256, 1, 1, 0), (256, 14, 256, 3, 1, 1), (256, 14, 1024, 1, 1, 0),
    (1024, 14, 512, 1, 1, 0), (512, 7, 512, 3, 1, 1), (512, 7, 2048, 1, 1, 0),
    (256, 56, 256, 3, 2, 1)]


def conv_ir(n: int, c: int, h: int, oc: int, k: int, stride: int, pad: int) -> str:
    """``conv2d(x, w, bias, stride, pad)`` in f16 (square), as the ATen lowering writes it."""
    o = (h + 2 * pad - k) // stride + 1
    ih, iw = f"{stride}*i_2 + r_1 - {pad}", f"{stride}*i_3 + r_2 - {pad}"
    update = (f"S1: acc[] = acc[] + cast<f32>(x[i, r, {ih}, {iw}]) * cast<f32>(w[i_1, r, r_1, r_2])")
    if pad:
        update = f"if ({ih} >= 0, {ih} < {h}, {iw} >= 0, {iw} < {h}) {{ {update} }}"
    return f"""
func conv(x: f16[{n}, {c}, {h}, {h}], w: f16[{oc}, {c}, {k}, {k}], bias: f16[{oc}],
          y: f16[{n}, {oc}, {o}, {o}]) {{
  for i = 0 to {n} {{ for i_1 = 0 to {oc} {{ for i_2 = 0 to {o} {{ for i_3 = 0 to {o} {{
    local acc: f32[]
    S0: acc[] = cast<f32>(bias[i_1])
    for r = 0 to {c} {{ for r_1 = 0 to {k} {{ for r_2 = 0 to {k} {{ {update} }} }} }}
    S2: y[i, i_1, i_2, i_3] = cast<f16>(acc[])
  }} }} }} }}
}}
"""


def bench_conv(cp: Any, torch: Any, sm: int, batch: int, layers: list[tuple[int, ...]],
               reps: int) -> list[dict[str, Any]]:
    """One row per layer against cuDNN, then a row with the median ratio."""
    rows: list[dict[str, Any]] = []
    for c, h, oc, k, stride, pad in layers:
        exe, compile_s = compile_timed(conv_ir(batch, c, h, oc, k, stride, pad), sm)
        gen = torch.Generator(device="cuda").manual_seed(c * h + k)
        x = torch.randn(batch, c, h, h, device="cuda", dtype=torch.float16, generator=gen)
        w = torch.randn(oc, c, k, k, device="cuda", dtype=torch.float16, generator=gen) / (c * k * k) ** 0.5
        bias = torch.randn(oc, device="cuda", dtype=torch.float16, generator=gen)
        o = (h + 2 * pad - k) // stride + 1
        y = torch.empty(batch, oc, o, o, device="cuda", dtype=torch.float16)

        def peer(x: Any = x, w: Any = w, bias: Any = bias, s: int = stride, p: int = pad) -> Any:
            return torch.nn.functional.conv2d(x, w, bias, stride=s, padding=p)

        exe(x, w, bias, y)
        error = _rel_error(y, peer())
        polyir_ms = timed(cp, lambda e=exe, a=(x, w, bias, y): e(*a), reps)
        peer_ms = timed(cp, peer, reps)
        rows.append({"case": "conv", "shape": [batch, c, h, h, oc, k, stride, pad],
                     "compile_s": compile_s, "polyir_ms": polyir_ms,
                     "peer": "torch conv2d (cuDNN)", "peer_ms": peer_ms,
                     "max_rel_error": error, "ok": error < 2e-2, **_kernel_facts(exe)})
    ratios = sorted(r["peer_ms"] / r["polyir_ms"] for r in rows)
    rows.append({"case": "conv_median", "batch": batch, "layers": len(rows),
                 "median_ratio_vs_cudnn": ratios[len(ratios) // 2]})
    return rows


SOFTMAX = """
func softmax(y: f32[R, N], x: f32[R, N]) {
  for i = 0 to R {
    local mx: f32[]
    local total: f32[]
    S0: mx[] = -inf
    for r = 0 to N { S1: mx[] = max(mx[], x[i, r]) }
    S2: total[] = 0.0
    for r_1 = 0 to N { S3: total[] = total[] + exp(x[i, r_1] - mx[]) }
    for j = 0 to N { S4: y[i, j] = exp(x[i, j] - mx[]) / total[] }
  }
}
"""


def bench_softmax(cp: Any, torch: Any, sm: int, rows: int, n: int, reps: int) -> dict[str, Any]:
    exe, compile_s = compile_timed(SOFTMAX, sm)
    x = torch.randn(rows, n, device="cuda")
    y = torch.empty_like(x)
    exe(y, x)
    error = float((y - torch.softmax(x, -1)).abs().max())
    return {"case": "softmax", "shape": [rows, n], "compile_s": compile_s,
            "polyir_ms": timed(cp, lambda: exe(y, x), reps), "peer": "torch.softmax",
            "peer_ms": timed(cp, lambda: torch.softmax(x, -1), reps), "max_abs_error": error,
            "ok": error < 1e-5, **_kernel_facts(exe)}


SWEEP_CONFIGS = [  # (BM, BN, BK, warps M, warps N, stages): CUTLASS-like shapes
    (128, 128, 32, 2, 4, 2), (128, 128, 32, 2, 4, 3), (128, 128, 32, 2, 4, 4),
    (128, 128, 32, 2, 2, 3), (128, 128, 32, 2, 2, 4), (128, 128, 32, 2, 2, 5),
    (128, 128, 64, 2, 2, 3), (128, 128, 64, 2, 4, 3), (128, 128, 64, 2, 4, 4),
    (128, 128, 32, 2, 4, 5), (128, 256, 32, 2, 4, 3), (256, 128, 32, 4, 2, 3),
    (64, 128, 32, 2, 2, 4),
    (128, 64, 32, 2, 2, 4), (64, 64, 32, 2, 2, 4), (64, 64, 64, 2, 2, 3),
]


def sweep(cp: Any, torch: Any, sm: int, sizes: tuple[int, ...] = (2048, 4096, 8192)
          ) -> list[dict[str, Any]]:
    """f16 ``C = A @ B`` for every tile configuration of :data:`SWEEP_CONFIGS`
    (``gpu-tensorcore{tile= warps= stages=}``) at each size, checked against
    cuBLAS and timed: the data that calibrates ``polyir.tiling.gpu_tiles``."""
    rows: list[dict[str, Any]] = []
    module = parse(matmul_ir("f16"))
    for size in sizes:
        gen = torch.Generator(device="cuda").manual_seed(size)
        a = torch.randn(size, size, device="cuda", dtype=torch.float16, generator=gen)
        b = torch.randn(size, size, device="cuda", dtype=torch.float16, generator=gen)
        c = torch.empty(size, size, device="cuda", dtype=torch.float16)
        reference = torch.matmul(a, b)
        reps = 20 if size <= 4096 else 5
        torch_ms = timed(cp, lambda x=a, y=b: torch.matmul(x, y), reps)
        for bm, bn, bk, wm, wn, stages in SWEEP_CONFIGS:
            label = f"{bm}x{bn}x{bk} warps {wm}x{wn} stages {stages}"
            pipeline = (f"mark-parallel,gpu-tensorcore{{tile={bm},{bn},{bk} warps={wm},{wn} "
                        f"stages={stages}}},gpu-map")
            try:
                exe = compile_ir(module, cuda(sm), pipeline=pipeline)
                c.fill_(float("nan"))
                exe(c, a, b)
                error = _rel_error(c, reference)
                polyir_ms = timed(cp, lambda e=exe, args=(c, a, b): e(*args), reps)
                row = {"case": "sweep", "config": label, "size": size, "polyir_ms": polyir_ms,
                       "peer_ms": torch_ms, "ratio_vs_peer": torch_ms / polyir_ms,
                       "polyir_tflops": 2 * size ** 3 / polyir_ms / 1e9,
                       "max_rel_error": error, "ok": error < 2e-2, **_kernel_facts(exe)}
            except Exception as error:
                row = {"case": "sweep", "config": label, "size": size,
                       "error": f"{type(error).__name__}: {str(error)[:300]}"}
            rows.append(row)
            print(json.dumps(row), flush=True)
    return rows


def bench_attention(cp: Any, torch: Any, batch: int, heads: int, seq: int, head_dim: int,
                    reps: int) -> dict[str, Any]:
    """``F.scaled_dot_product_attention`` in f16 through ``polyir.compile(...,
    target="cuda")`` (the fused attention nest as the CUDA pipeline maps it) on
    CUDA tensors, against torch's own (its flash-attention kernel)."""
    import polyir

    functional = torch.nn.functional

    class Attention(torch.nn.Module):
        def forward(self, q: Any, k: Any, v: Any) -> Any:
            return functional.scaled_dot_product_attention(q, k, v)

    gen = torch.Generator(device="cuda").manual_seed(seq + head_dim)
    q, k, v = (torch.randn(batch, heads, seq, head_dim, device="cuda", dtype=torch.float16,
                           generator=gen) for _ in range(3))
    begin = time.perf_counter()
    compiled = polyir.compile(Attention(), (q, k, v), target="cuda")
    got = compiled(q, k, v)
    compile_s = time.perf_counter() - begin
    want = functional.scaled_dot_product_attention(q, k, v)
    error = _rel_error(got, want)
    return {"case": "attention", "shape": [batch, heads, seq, head_dim], "dtype": "f16",
            "compile_s": compile_s, "polyir_ms": timed(cp, lambda: compiled(q, k, v), reps),
            "peer": "F.scaled_dot_product_attention", "peer_ms": timed(
                cp, lambda: functional.scaled_dot_product_attention(q, k, v), reps),
            "max_rel_error": error, "ok": error < 2e-2}


def cases(cp: Any, torch: Any, sm: int, quick: bool) -> list[tuple[str, Callable[[], Any]]]:
    """The (label, thunk) pairs of the kernel cases; a thunk returns a row or rows."""
    found: list[tuple[str, Callable[[], Any]]] = []
    sizes = [1024, 2048] if quick else [1024, 2048, 4096, 8192]
    for dtype in ("f16", "bf16"):
        for size in sizes:
            reps = 20 if size <= 2048 else 10 if size <= 4096 else 5
            found.append((f"matmul_{dtype} {size}",
                          lambda s=size, d=dtype, r=reps: bench_matmul(cp, torch, sm, s, d, r)))
    found.append(("matmul_f32 2048", lambda: bench_matmul(cp, torch, sm, 2048, "f32", 10)))
    m = 256 if quick else 2048
    found.append(("linear_relu", lambda: bench_linear(cp, torch, sm, m, 4096, 4096, 10)))
    layers = RESNET50_CONVS[:4] if quick else RESNET50_CONVS
    for batch in (1,) if quick else (1, 8):
        found.append((f"conv batch {batch}",
                      lambda b=batch: bench_conv(cp, torch, sm, b, layers, 10)))
    for rows, n in ((4096, 1024),) if quick else ((4096, 1024), (8192, 4096)):
        found.append((f"softmax {rows}x{n}",
                      lambda r=rows, c=n: bench_softmax(cp, torch, sm, r, c, 20)))
    found.append(("elementwise", lambda: bench_elementwise(cp, torch, sm, 2048 if quick else 8192, 20)))
    found.append(("attention", lambda: bench_attention(cp, torch, 1, 8, 512 if quick else 2048, 128,
                                                       5)))
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--out", required=True, help="JSON file to write")
    parser.add_argument("--quick", action="store_true", help="small sizes only")
    parser.add_argument("--no-models", action="store_true", help="skip the model rows")
    parser.add_argument("--sweep", action="store_true",
                        help="only the tile-configuration sweep of the f16 matmul")
    options = parser.parse_args()
    try:
        import cupy as cp
        import torch
        if not torch.cuda.is_available() or cp.cuda.runtime.getDeviceCount() < 1:
            raise RuntimeError("torch or CuPy sees no CUDA device")
    except Exception as error:
        with open(options.out, "w") as handle:
            json.dump({"results": [], "errors": [{"case": "setup", "error":
                                                  f"no usable GPU: {type(error).__name__}: {error}"}]},
                      handle, indent=2)
        print(f"no usable GPU: {error}", flush=True)
        return 1
    sm = 90 if int(cp.cuda.Device().compute_capability) >= 90 else 80
    props = cp.cuda.runtime.getDeviceProperties(0)
    name = props["name"]
    report: dict[str, Any] = {
        "gpu": name.decode() if isinstance(name, bytes) else str(name),
        "target": f"sm_{sm}", "python": platform.python_version(), "cupy": cp.__version__,
        "torch": torch.__version__, "results": [], "errors": [],
    }

    def save() -> None:  # after every case: a later crash or timeout keeps what ran
        with open(options.out, "w") as handle:
            json.dump(report, handle, indent=2)

    work = cases(cp, torch, sm, options.quick) if not options.sweep else [
        ("sweep", lambda: sweep(cp, torch, sm, (2048, 4096) if options.quick else (2048, 4096, 8192)))]
    if not options.no_models and not options.sweep:
        from bench.models import MODELS, QUICK_MODELS
        for name in QUICK_MODELS if options.quick else MODELS:   # one case each: saved as they finish
            def models(name: str = name) -> list[dict[str, Any]]:
                from bench.gpu import model_rows
                return model_rows(quick=True, names=[name], batches=[1])
            work.append((f"model {name}", models))
    for label, case in work:
        begin = time.perf_counter()
        try:
            result = case()
            rows = result if isinstance(result, list) else [result]
            for row in rows:
                if "polyir_ms" in row and "peer_ms" in row:
                    row["ratio_vs_peer"] = row["peer_ms"] / row["polyir_ms"]
                row.setdefault("wall_s", time.perf_counter() - begin)
                report["results"].append(row)
                print(json.dumps(row), flush=True)
        except Exception as error:  # keep going: one failing case must not hide the others
            report["errors"].append({"case": label, "error": f"{type(error).__name__}: {error}",
                                     "traceback": traceback.format_exc()[-2000:]})
            print(f"{label}: FAILED {type(error).__name__}: {error}", flush=True)
        save()
    save()
    return 1 if report["errors"] or any(r.get("ok") is False for r in report["results"]) else 0


if __name__ == "__main__":
    sys.exit(main())
