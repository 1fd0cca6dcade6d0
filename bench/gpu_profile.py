"""One f16 ``C = A @ B`` (default CUDA pipeline) for a profiler to look at.

    ncu --kernel-name regex:mm_k0 --launch-skip 2 --launch-count 1 python bench/gpu_profile.py [SIZE]

Compiles the matmul of ``bench/gpu_bench.py`` for the GPU it finds, runs it
three times on random data (so a profiler can skip the warm-up launches) and
prints the time of the last call and its error against ``torch.matmul``.
``bench/gpu_check.sh`` runs it under Nsight Compute when ``GPU_CHECK_PROFILE=1``.
"""
from __future__ import annotations

import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))


def main() -> int:
    import cupy as cp
    import torch

    from bench.gpu_bench import _rel_error, matmul_ir
    from polyir.driver import compile_ir
    from polyir.ir.parser import parse
    from polyir.target import cuda

    size = int(sys.argv[1]) if len(sys.argv) > 1 else 4096
    sm = 90 if int(cp.cuda.Device().compute_capability) >= 90 else 80
    exe = compile_ir(parse(matmul_ir("f16")), cuda(sm))
    a = torch.randn(size, size, device="cuda", dtype=torch.float16)
    b = torch.randn(size, size, device="cuda", dtype=torch.float16)
    c = torch.empty(size, size, device="cuda", dtype=torch.float16)
    for _ in range(3):
        torch.cuda.synchronize()
        begin = time.perf_counter()
        exe(c, a, b)
        torch.cuda.synchronize()
        seconds = time.perf_counter() - begin
    print(f"matmul f16 {size}^3: {seconds * 1e3:.3f} ms, {2 * size ** 3 / seconds / 1e12:.1f} TFLOP/s, "
          f"error {_rel_error(c, torch.matmul(a, b)):.2e}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
