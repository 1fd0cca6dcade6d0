"""The CPU backend's runtime costs: OpenMP dispatch, per-call overhead, the size policy.

``python -m bench.cpu_runtime [--sections dispatch,percall,models,matmul,width] [--quick]``
prints one table per section:

* ``dispatch``: what one dispatch through ``GOMP_parallel`` costs. A serial
  loop of ``T`` iterations around a parallel loop of 2 iterations (one tiny
  statement each) is timed with every parallel loop dispatched
  (``parallel_dispatch_ns=0``) and on one core; the difference over ``T`` is
  the cost of a dispatch with the team's threads still spinning. Also one
  dispatch per call after an idle gap (the workers asleep).
* ``percall``: the Python-side cost of a compiled model's call at batch 1:
  the call's median time minus the median time of its native kernels alone
  (argument words for tensors of the compiled shapes, called directly), both
  in CPU time of the calling thread (``time.thread_time``: steadier than wall
  time on a shared machine; the models run without ``mark-parallel``).
* ``models``: the demo models (``polyir/frontends/demo_models.py``) at batch 1
  and at larger sizes, compiled without a pipeline and with
  ``pipeline="mark-parallel"`` (the size policy decides per loop), called for
  a second first (past the first tries of the team, which on a busy machine
  cost milliseconds each), then timed interleaved; ratio = mark-parallel /
  none.
* ``matmul``: a 512^3 f32 matmul on 1 and on 2 threads (the textbook loop nest
  after ``mark-parallel``, and the hand-tiled IR of ``bench/cpu_bench.py``).
* ``width``: f32 dot product and textbook matmul with ``fast_math`` compiled
  for 256-bit (LLVM's default for this CPU) and 512-bit vectors (CPU time of
  the kernels alone, arguments bound once).

All times are medians of interleaved repetitions; the machine's load average
is printed with each section (the host is shared: read ratios, not absolute
times, when it is above 1). Works on the code before the OpenMP runtime too
(the ``percall`` and ``models`` sections), for before/after figures.
"""
from __future__ import annotations

import argparse
import ctypes
import os
import statistics
import time
from collections.abc import Callable
from dataclasses import replace
from functools import partial
from typing import Any

import numpy as np

import polyir
from polyir.cpu.jit import build_cpu
from polyir.target import cpu

DISPATCH = """
func dispatch(s: f32[P], T: index) {
  for t = 0 to T {
    for i = 0 to P parallel {
      S0: s[i] = s[i] + 1.0
    }
  }
}"""

TEXTBOOK_MATMUL = """
func mm(C: f32[N, M], A: f32[N, K], B: f32[K, M]) {
  for i = 0 to N {
    for j = 0 to M {
      S0: C[i, j] = 0.0
    }
    for k = 0 to K {
      for j = 0 to M {
        S1: C[i, j] = C[i, j] + A[i, k] * B[k, j]
      }
    }
  }
}"""

DOT = """
func dot(s: f32[], a: f32[N], b: f32[N]) {
  for k = 0 to N {
    S0: s[] = s[] + a[k] * b[k]
  }
}"""


def interleaved(contenders: dict[str, Callable[[], Any]], repeats: int, inner: int = 1,
                clock: Callable[[], float] = time.perf_counter) -> dict[str, float]:
    """Median seconds per call of each contender, timed in turn ``repeats`` times
    (``inner`` calls per sample) with ``clock``."""
    for fn in contenders.values():
        fn()
    samples: dict[str, list[float]] = {name: [] for name in contenders}
    for _ in range(repeats):
        for name, fn in contenders.items():
            start = clock()
            for _ in range(inner):
                fn()
            samples[name].append((clock() - start) / inner)
    return {name: statistics.median(values) for name, values in samples.items()}


def _load() -> str:
    return "load " + " ".join(f"{x:.1f}" for x in os.getloadavg())


def python_speed() -> float:
    """CPU nanoseconds of one empty ``for`` iteration of this interpreter now
    (about 10 ns on an idle recent x86 core; a busy shared host shows more):
    the yardstick for Python-side overheads measured alongside."""
    samples = []
    for _ in range(5):
        start = time.thread_time()
        for _ in range(500_000):
            pass
        samples.append((time.thread_time() - start) / 500_000)
    return min(samples) * 1e9


def _forced(cores: int) -> Any:
    """Every loop dispatched, however late the team (the raw dispatch cost)."""
    target = cpu(cores)
    if hasattr(target, "team_late_ns"):
        return replace(target, parallel_dispatch_ns=0.0, team_late_ns=2**62)
    return replace(target, parallel_dispatch_ns=0.0) \
        if hasattr(target, "parallel_dispatch_ns") else target


# ------------------------------------------------------------------ dispatch
def dispatch_section(quick: bool) -> list[str]:
    parallel = build_cpu(polyir.parse(DISPATCH), _forced(2), cache_dir=None)
    serial = build_cpu(polyir.parse(DISPATCH), cpu(1), cache_dir=None)
    s = np.zeros(2, np.float32)
    count = 200 if quick else 2000
    parallel(s, count)
    serial(s, count)
    costs, parallel_times, serial_times = [], [], []
    for _ in range(7 if quick else 21):
        start = time.perf_counter()
        parallel(s, count)
        middle = time.perf_counter()
        serial(s, count)
        parallel_times.append(middle - start)
        serial_times.append(time.perf_counter() - middle)
        costs.append((parallel_times[-1] - serial_times[-1]) / count)
    # a difference of two noisy times can come out negative on a busy machine: the best
    # sample is the fastest parallel call less the fastest serial one, and a cost below
    # the noise shows as 0
    best = max(0.0, (min(parallel_times) - min(serial_times)) / count)
    lines = [f"dispatch ({_load()}): GOMP_parallel on 2 threads, back to back ({count} per "
             f"call): median {max(0.0, statistics.median(costs)) * 1e9:.0f} ns, best sample "
             f"{best * 1e9:.0f} ns per dispatch"]
    for gap in (1e-4, 1e-3, 1e-2):
        single: list[float] = []
        alone: list[float] = []
        for _ in range(10 if quick else 30):
            until = time.perf_counter() + gap
            while time.perf_counter() < until:
                pass
            start = time.perf_counter()
            parallel(s, 1)
            single.append(time.perf_counter() - start)
            start = time.perf_counter()
            serial(s, 1)
            alone.append(time.perf_counter() - start)
        lines.append(f"  after {gap * 1e3:g} ms idle: one dispatch adds "
                     f"{(statistics.median(single) - statistics.median(alone)) * 1e6:.1f} us")
    return lines


# ------------------------------------------------------------------- percall
def _ten_parameter_model() -> Any:
    import torch

    class Ten(torch.nn.Module):
        """Five tiny Linear layers: ten parameters, kernels of a few ns."""

        def __init__(self) -> None:
            super().__init__()
            self.layers = torch.nn.ModuleList([torch.nn.Linear(4, 4) for _ in range(5)])

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            for layer in self.layers:
                x = layer(x)
            return x

    return Ten().eval(), torch.randn(1, 4)


def _native_only(compiled: Any, x: Any) -> Callable[[], None]:
    """A function running only the native kernels of the latest plan: graph
    inputs and model state are the real tensors (kernels such as ``erf`` take
    data-dependent time), other values kept-alive zero tensors of the compiled
    shapes; works with the executables before and after the OpenMP runtime."""
    import torch

    from polyir.frontends.aten.context import node_meta
    from polyir.frontends.fx import model_state
    plan = compiled.last_plan
    placeholders = [n for n in plan.captured.gm.graph.nodes if n.op == "placeholder"]
    actual = dict(zip(placeholders, [x, *model_state(compiled.model).values()], strict=True))
    calls = []
    keep = []
    for segment in plan.segments:
        tensors = []
        for node in list(segment.inputs) + list(segment.outputs):
            meta = node_meta(node)
            dtype = torch.float32 if meta.dtype == torch.bfloat16 else meta.dtype
            real = actual.get(node)
            tensors.append(real.detach().to(dtype).contiguous() if real is not None else
                           torch.zeros(tuple(int(d) for d in meta.shape), dtype=dtype))
        keep.append(tensors)
        executable = segment.executable
        bound = executable.binder.bind([t.numpy() for t in tensors])
        if hasattr(executable, "call_words"):
            words = executable._words(*bound.values)
            address = ctypes.addressof(words)
            keep.append(words)
            calls.append(partial(executable._packed, address))
        else:  # before the OpenMP runtime: the trailing dispatcher argument
            calls.append(partial(executable._cfunc, *bound.values, executable._runtime.address))

    def run() -> None:
        for call in calls:
            call()
    run.keep = keep  # type: ignore[attr-defined]
    return run


def percall_section(quick: bool) -> list[str]:
    import torch

    from polyir.frontends.demo_models import SmallCNN, TransformerBlock
    torch.manual_seed(0)
    cases = [("ten Linear(4,4) parameters", *_ten_parameter_model()),
             ("TransformerBlock", TransformerBlock().eval(), torch.randn(1, 32, 64)),
             ("SmallCNN", SmallCNN().eval(), torch.randn(1, 3, 32, 32))]
    lines = [f"per-call overhead at batch 1, CPU time of the calling thread ({_load()}; "
             f"an empty Python loop iteration takes {python_speed():.0f} ns now):"]
    for name, model, x in cases:
        compiled = polyir.compile(model, (x,))
        compiled(x)
        native = _native_only(compiled, x)
        inner = 200 if "ten" in name else 20
        times = interleaved({"call": partial(compiled, x), "native": native},
                            9 if quick else 25, inner, time.thread_time)
        with torch.no_grad():
            expected = model(x)
        torch.testing.assert_close(compiled(x), expected, rtol=1e-3, atol=1e-3)
        state = len(list(model.parameters())) + len(list(model.buffers()))
        lines.append(f"  {name:28s} {state:2d} state tensors: call {times['call'] * 1e6:8.1f} us, "
                     f"kernels {times['native'] * 1e6:8.1f} us, overhead "
                     f"{(times['call'] - times['native']) * 1e6:6.1f} us")
    return lines


# -------------------------------------------------------------------- models
def models_section(quick: bool) -> list[str]:
    import torch

    from polyir.frontends.demo_models import SmallCNN, TransformerBlock
    torch.manual_seed(0)
    cases = [("TransformerBlock b1 seq32 d64", TransformerBlock(), (1, 32, 64), 30),
             ("TransformerBlock b1 seq256 d256", TransformerBlock(256), (1, 256, 256), 3),
             ("SmallCNN b1 32x32", SmallCNN(), (1, 3, 32, 32), 30),
             ("SmallCNN b16 64x64", SmallCNN(), (16, 3, 64, 64), 2)]
    if quick:
        cases = [cases[0], cases[2]]
    lines = [f"demo models, pipeline none vs mark-parallel ({_load()}):"]
    for name, model, shape, inner in cases:
        model = model.eval()
        x = torch.randn(*shape)
        plain = polyir.compile(model, (x,))
        marked = polyir.compile(model, (x,), pipeline="mark-parallel")
        warm_until = time.perf_counter() + (0.2 if quick else 1.0)
        while time.perf_counter() < warm_until:  # past the first tries of the team
            plain(x)
            marked(x)
        times = interleaved({"none": partial(plain, x), "mark-parallel": partial(marked, x)},
                            7 if quick else 15, inner)
        with torch.no_grad():
            expected = model(x)
        torch.testing.assert_close(marked(x), expected, rtol=1e-3, atol=1e-3)
        lines.append(f"  {name:32s} none {times['none'] * 1e3:8.3f} ms, mark-parallel "
                     f"{times['mark-parallel'] * 1e3:8.3f} ms, ratio "
                     f"{times['mark-parallel'] / times['none']:.2f}")
    return lines


# -------------------------------------------------------------------- matmul
def matmul_section(quick: bool) -> list[str]:
    from bench.cpu_bench import MATMUL
    n = 512
    rng = np.random.default_rng(0)
    A = rng.standard_normal((n, n), dtype=np.float32)
    B = rng.standard_normal((n, n), dtype=np.float32)
    C = np.empty((n, n), np.float32)
    textbook = polyir.transform(polyir.parse(TEXTBOOK_MATMUL), "mark-parallel")
    lines = [f"512^3 f32 matmul, 1 vs 2 threads ({_load()}):"]
    for label, module, fast in (("textbook, mark-parallel", textbook, True),
                                ("hand-tiled IR", polyir.parse(MATMUL), True)):
        one = build_cpu(module, cpu(1), cache_dir=None, fast_math=fast)
        two = build_cpu(module, cpu(2), cache_dir=None, fast_math=fast)
        two(C, A, B)
        np.testing.assert_allclose(C, A @ B, rtol=1e-3, atol=1e-2)
        times = interleaved({"1": lambda o=one: o(C, A, B), "2": lambda t=two: t(C, A, B)},
                            5 if quick else 11)
        lines.append(f"  {label:26s} 1 thread {times['1'] * 1e3:7.2f} ms, 2 threads "
                     f"{times['2'] * 1e3:7.2f} ms, speed-up {times['1'] / times['2']:.2f}")
    return lines


# --------------------------------------------------------------------- width
def width_section(quick: bool) -> list[str]:
    import llvmlite.binding as llvm

    from polyir.cpu import jit
    from polyir.cpu.jit import CpuExecutable

    def build(text: str, features: str) -> Any:
        module = polyir.parse(text)
        target = cpu(1)
        llvm_ir = jit.lower_to_llvm(module, target, True)
        ref = llvm.parse_assembly(llvm_ir)
        machine = llvm.Target.from_triple(jit._STATE["triple"]).create_target_machine(
            cpu=jit._STATE["cpu"], features=jit._STATE["features"] + features, opt=3,
            reloc="pic", codemodel="jitdefault")
        tuning = llvm.create_pipeline_tuning_options(speed_level=3)
        tuning.loop_vectorization = tuning.slp_vectorization = tuning.loop_unrolling = True
        builder = llvm.create_pass_builder(machine, tuning)
        builder.getModulePassManager().run(ref, builder)
        return CpuExecutable(module, target, llvm_ir, machine.emit_object(ref), False, True)

    def raw(executable: Any, *arrays: np.ndarray) -> Callable[[], None]:
        """The kernel alone: argument words bound once (``arrays`` kept alive)."""
        words = executable._words(*executable.binder.bind(arrays).values)

        def call() -> None:
            executable.call_words(words)
        call.keep = arrays  # type: ignore[attr-defined]
        return call

    rng = np.random.default_rng(0)
    lines = [f"vector width with fast_math, 256-bit (default) vs 512-bit, CPU time of one "
             f"thread ({_load()}):"]
    for n in (1 << 14, 1 << 16, 1 << 20):
        a = rng.standard_normal(n, dtype=np.float32)
        b = rng.standard_normal(n, dtype=np.float32)
        s = np.zeros((), np.float32)
        narrow, wide = build(DOT, ""), build(DOT, ",-prefer-256-bit")
        inner = max(1, 200_000 // n)
        times = interleaved({"256": raw(narrow, s, a, b), "512": raw(wide, s, a, b)},
                            9 if quick else 25, inner, time.thread_time)
        lines.append(f"  dot n={n:<8d} 256-bit {times['256'] * 1e6:8.2f} us, 512-bit "
                     f"{times['512'] * 1e6:8.2f} us, 512/256 {times['512'] / times['256']:.2f}")
    for n in (128, 256, 512):
        A = rng.standard_normal((n, n), dtype=np.float32)
        B = rng.standard_normal((n, n), dtype=np.float32)
        C = np.zeros((n, n), np.float32)
        narrow, wide = build(TEXTBOOK_MATMUL, ""), build(TEXTBOOK_MATMUL, ",-prefer-256-bit")
        times = interleaved({"256": raw(narrow, C, A, B), "512": raw(wide, C, A, B)},
                            5 if quick else 11, 1, time.thread_time)
        lines.append(f"  matmul n={n:<5d} 256-bit {times['256'] * 1e3:8.2f} ms, 512-bit "
                     f"{times['512'] * 1e3:8.2f} ms, 512/256 {times['512'] / times['256']:.2f}")
    return lines


SECTIONS: dict[str, Callable[[bool], list[str]]] = {
    "dispatch": dispatch_section, "percall": percall_section, "models": models_section,
    "matmul": matmul_section, "width": width_section}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sections", default=",".join(SECTIONS))
    parser.add_argument("--quick", action="store_true")
    options = parser.parse_args()
    for name in options.sections.split(","):
        for line in SECTIONS[name](options.quick):
            print(line, flush=True)


if __name__ == "__main__":
    main()
