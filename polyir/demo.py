"""``python -m polyir.demo``: compile a small transformer block and a small CNN
for the CPU, check them against eager PyTorch, and time both.

For each model it prints the compile time, the median run time of the
compiled model and of eager (over a few runs), and what was compiled: the ATen
operators lowered, the number of loop nests, and any operators left to eager.
"""
from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

import torch

import polyir
from polyir.frontends.demo_models import SmallCNN, TransformerBlock


def median_seconds(fn: Callable[[], Any], runs: int = 5) -> float:
    """Median wall time of ``fn()`` over ``runs`` calls (after one warm-up)."""
    fn()
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def demo_model(name: str, model: torch.nn.Module, example: torch.Tensor, *,
               target: str = "cpu", runs: int = 5) -> dict[str, Any]:
    """Compile ``model``, compare with eager, time both; returns the figures."""
    model.eval()
    start = time.perf_counter()
    compiled = polyir.compile(model, (example,), target=target)
    compile_seconds = time.perf_counter() - start
    with torch.no_grad():
        expected = model(example)
        got = compiled(example)
        torch.testing.assert_close(got, expected, rtol=1e-4, atol=1e-4)
        compiled_seconds = median_seconds(lambda: compiled(example), runs)
        eager_seconds = median_seconds(lambda: model(example), runs)
    summary = compiled.summary()
    print(f"== {name}: input {tuple(example.shape)}, target {target}")
    print(f"   matches eager (rtol=1e-4, atol=1e-4); compiled in {compile_seconds:.1f} s")
    print(f"   median of {runs} runs: polyir {compiled_seconds * 1e3:.2f} ms, "
          f"eager {eager_seconds * 1e3:.2f} ms")
    ops = ", ".join(f"{op.split('.', 1)[1]} x{count}" for op, count in summary["ops"].items())
    print(f"   lowered: {ops}")
    print(f"   {summary['loop_nests']} loop nests in {summary['functions']} function(s); "
          f"eager fallbacks: {', '.join(summary['fallbacks']) or 'none'}")
    return {"name": name, "compile_s": compile_seconds, "polyir_s": compiled_seconds,
            "eager_s": eager_seconds, **summary}


MATMUL_IR = """func matmul(C: f32[M, N], A: f32[M, K], B: f32[K, N]) {
  for i = 0 to M {
    for j = 0 to N {
      S0: C[i, j] = 0.0
      for k = 0 to K {
        S1: C[i, j] = C[i, j] + A[i, k] * B[k, j]
      }
    }
  }
}
"""


def demo_ir() -> None:
    """The IR itself: parse a matrix product, print it, mark its parallel
    loops with isl, interpret it and check it against numpy."""
    import numpy as np

    import polyir

    module = polyir.parse(MATMUL_IR)
    assert polyir.parse(str(module)) == module
    marked = polyir.transform(module, "mark-parallel")
    print("== IR: a matrix product after mark-parallel (text form; polyir.parse reads it back)")
    print(str(marked).rstrip())
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((24, 16), dtype=np.float32), rng.standard_normal((16, 20), dtype=np.float32)
    c = np.empty((24, 20), np.float32)
    polyir.interpret(marked, c, a, b, parallel_order="shuffle")
    np.testing.assert_allclose(c, a @ b, rtol=1e-5, atol=1e-5)
    print("   interpreted (parallel loops shuffled) == numpy a @ b")


def main(target: str = "cpu", eager_threads: int = 1) -> list[dict[str, Any]]:
    """Run the demo on both models; returns their figures.

    Eager runs on ``eager_threads`` intra-op threads (default 1, like the
    compiled code without parallel loops; on a busy machine torch's OpenMP
    threads can also wait a scheduler tick per operator, which would make
    eager look far slower than it is)."""
    torch.manual_seed(0)
    torch.set_num_threads(eager_threads)
    demo_ir()
    print(f"torch {torch.__version__}, eager on {eager_threads} thread(s)")
    results = [
        demo_model("transformer block (d_model=64, heads=4, seq=32)",
                   TransformerBlock(d_model=64, heads=4), torch.randn(1, 32, 64), target=target),
        demo_model("small CNN (conv-bn-relu-pool x2, linear)", SmallCNN(channels=8, classes=10),
                   torch.randn(1, 3, 32, 32), target=target),
    ]
    return results


if __name__ == "__main__":
    main()
