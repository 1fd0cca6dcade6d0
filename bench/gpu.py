"""The GPU section: polyir with ``target="cuda"`` against torch eager and Inductor on the GPU.

Without a usable GPU (CuPy and a CUDA device, torch with CUDA) :func:`run`
returns ``[]`` and sets :data:`NOTE` saying why. With one it measures:

* the cases of ``bench/gpu_bench.py`` (the GPU engineer's IR kernels against
  torch/cuBLAS), when that module is there;
* the corpus kernels compiled with ``target="cuda"``, called on CuPy arrays
  (no host transfers), against their numpy formulations run by CuPy;
* the models of ``bench.models`` compiled with ``target="cuda"`` against torch
  eager and Inductor on the GPU, all three called with the same CUDA inputs
  and weights on the GPU (polyir's results are CUDA tensors: no host
  transfers in any contender's time).

Rows: ``name``, ``shape``, ``dtype``, ``polyir_s``, ``peer``, ``peer_s``, ``ratio``
(polyir time / peer time, below 1: polyir faster), ``note``.
"""
from __future__ import annotations

import functools
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from bench.timing import interleaved_medians, ratio

NOTE: str | None = None
"""Why the section measured nothing, when it did not."""

SLOW_CALL_S = 0.5
"""A contender slower than this on its first call is timed once, not repeatedly."""


def gpu_unavailable() -> str | None:
    """``None`` when CuPy, a CUDA device and torch CUDA are all usable, else the reason."""
    try:
        import cupy
    except ImportError:
        return "CuPy is not installed"
    try:
        if cupy.cuda.runtime.getDeviceCount() < 1:
            return "CuPy sees no CUDA device"
    except Exception as error:  # no driver
        return f"CuPy cannot reach a CUDA device ({type(error).__name__})"
    import torch
    if not torch.cuda.is_available():
        return "torch has no CUDA support on this machine"
    return None


def _call(fn: Callable[..., Any], args: Sequence[Any]) -> Any:
    return fn(*args)


def _synchronised(fn: Callable[[], Any]) -> Callable[[], None]:
    import torch

    def call() -> None:
        fn()
        torch.cuda.synchronize()
    return call


def _time(contenders: dict[str, Callable[[], Any]], repeats: int,
          setup: Callable[[str], Any] | None = None) -> dict[str, float]:
    calls = {name: _synchronised(fn) for name, fn in contenders.items()}
    slow = False
    for name, call in calls.items():
        if setup is not None:
            setup(name)
        start = time.perf_counter()
        call()
        slow = slow or time.perf_counter() - start > SLOW_CALL_S
    samples = interleaved_medians(calls, 1 if slow else repeats, warmup=0 if slow else 1,
                                  setup=setup)
    return {name: sample.median for name, sample in samples.items()}


def _row(name: str, shape: str, dtype: str, polyir_s: float | None, peer: str,
         peer_s: float | None, note: str | None = None) -> dict[str, Any]:
    row = {"name": name, "shape": shape, "dtype": dtype, "polyir_s": polyir_s, "peer": peer,
           "peer_s": peer_s, "ratio": ratio(polyir_s, peer_s)}
    if note:
        row["note"] = note
    return row


def gpu_bench_rows(quick: bool) -> list[dict[str, Any]]:
    """The cases of bench/gpu_bench.py, as rows of this section."""
    try:
        from bench import gpu_bench
    except Exception as error:  # missing, or broken by a change elsewhere
        return [{"name": "gpu_bench", "note": f"bench/gpu_bench.py not importable: {error}"}]
    import cupy as cp
    import torch

    sm = 90 if int(cp.cuda.Device().compute_capability) >= 90 else 80
    cases: list[tuple[str, Callable[[], Any]]] = gpu_bench.cases(cp, torch, sm, quick)
    rows = []
    for label, case in cases:
        try:
            results = case()
        except Exception as error:  # one failing case must not hide the others
            rows.append({"name": label, "note": f"failed: {type(error).__name__}: {str(error)[:160]}"})
            continue
        for result in results if isinstance(results, list) else [results]:
            if "polyir_ms" not in result:
                rows.append({"name": label, "note": str(result.get("error"))[:200]})
                continue
            shape = "x".join(map(str, result.get("shape", [])))
            row = _row(result.get("case", label), shape, "", result["polyir_ms"] / 1e3,
                       result.get("peer", "torch eager"), result["peer_ms"] / 1e3)
            row["compile_s"] = result.get("compile_s")
            row["max_rel_error"] = result.get("max_rel_error")
            rows.append(row)
    return rows


def kernel_rows(quick: bool) -> list[dict[str, Any]]:
    """Corpus kernels with ``target="cuda"`` on CuPy arrays against the CuPy formulation."""
    import cupy as cp

    import polyir
    from bench.kernels import DTYPE, MEDIUM, sizes_for
    from bench.numpy_kernels import NUMPY_KERNELS
    from polyir.testing.corpus import CORPUS

    rows = []
    for entry in CORPUS:
        if entry.name not in MEDIUM:
            continue
        sizes = sizes_for(entry.name, quick)
        shape = ",".join(f"{k}={v}" for k, v in sizes.items())
        host = entry.make_args(sizes, np.random.default_rng(0), dtype=DTYPE)
        device = {who: [cp.asarray(a) if isinstance(a, np.ndarray) else a for a in host]
                  for who in ("polyir", "cupy")}

        def restore(who: str, device: dict[str, list[Any]] = device, host: list[Any] = host) -> None:
            for target, source in zip(device[who], host, strict=True):
                if isinstance(source, np.ndarray):
                    target.set(source)

        notes = []
        contenders: dict[str, Callable[[], Any]] = {}
        try:
            executable = polyir.kernel(entry.func).compile_for(*host, target="cuda")
            contenders["polyir"] = functools.partial(_call, executable, device["polyir"])
        except Exception as error:
            notes.append(f"polyir failed: {type(error).__name__}: {str(error)[:160]}")
        formulation = NUMPY_KERNELS.get(entry.name)
        if formulation is not None:
            contenders["cupy"] = functools.partial(_call, formulation, device["cupy"])
        try:
            for who, call in contenders.items():
                restore(who)
                call()
            if len(contenders) == 2:
                for position, (a, b) in enumerate(zip(device["polyir"], device["cupy"], strict=True)):
                    if isinstance(a, cp.ndarray) and not np.allclose(cp.asnumpy(a), cp.asnumpy(b),
                                                                     rtol=2e-3, atol=2e-3):
                        notes.append(f"polyir differs from CuPy in argument {position}")
                        break
            times = _time(contenders, 5 if quick else 20, setup=restore) if contenders else {}
        except Exception as error:
            notes.append(f"run failed: {type(error).__name__}: {str(error)[:160]}")
            times = {}
        rows.append(_row(entry.name, shape, np.dtype(DTYPE).name, times.get("polyir"), "cupy",
                         times.get("cupy"), "; ".join(notes) or None))
    return rows


def model_rows(quick: bool, names: Sequence[str] | None = None,
               batches: Sequence[int] | None = None) -> list[dict[str, Any]]:
    """Models with ``target="cuda"`` against torch eager and Inductor on the GPU
    (``names``/``batches``: these only; default: the quick models at batch 1,
    or every model at batch 1 and 8)."""
    import copy

    import torch

    from bench.caches import drop_inductor_memory_caches, inductor_cache, session_dir
    from bench.models import MODELS, QUICK_MODELS, compile_polyir, make

    rows = []
    for name in names or (QUICK_MODELS if quick else list(MODELS)):
        for batch in batches or ([1] if quick else [1, 8]):
            model, inputs = make(name, batch)
            shape = "x".join(map(str, inputs[0].shape))
            gpu_model = copy.deepcopy(model).cuda()
            gpu_inputs = tuple(x.cuda() for x in inputs)
            notes: list[str] = []
            contenders: dict[str, Callable[[], Any]] = {"eager": functools.partial(_call, gpu_model,
                                                                                   gpu_inputs)}
            with torch.no_grad():
                expected = gpu_model(*gpu_inputs)
                try:
                    compiled = compile_polyir(gpu_model, gpu_inputs, target="cuda")
                    result = compiled(*gpu_inputs)
                    leaves = torch.utils._pytree.tree_leaves(result)
                    if not all(leaf.is_cuda for leaf in leaves if isinstance(leaf, torch.Tensor)):
                        raise TypeError("polyir returned host tensors for CUDA inputs")
                    torch.testing.assert_close(result, expected, rtol=1e-3, atol=1e-3)
                    contenders["polyir"] = functools.partial(_call, compiled, gpu_inputs)
                except Exception as error:
                    notes.append(f"polyir failed: {type(error).__name__}: {str(error)[:160]}")
                try:
                    with inductor_cache(session_dir("inductor")):
                        drop_inductor_memory_caches()
                        inductor = torch.compile(gpu_model, backend="inductor")
                        inductor(*gpu_inputs)
                    contenders["inductor"] = functools.partial(_call, inductor, gpu_inputs)
                except Exception as error:
                    notes.append(f"Inductor failed: {type(error).__name__}: {str(error)[:160]}")
                times = _time(contenders, 5 if quick else 20)
            for peer in ("eager", "inductor"):
                rows.append(_row(f"{name} b{batch}", shape, "f32", times.get("polyir"),
                                 f"torch {peer} (GPU)", times.get(peer), "; ".join(notes)))
    return rows


def run(quick: bool) -> list[dict[str, Any]]:
    """All GPU rows, or ``[]`` (with :data:`NOTE` set and printed) without a GPU."""
    global NOTE
    reason = gpu_unavailable()
    if reason is not None:
        NOTE = f"no GPU: {reason}; the GPU section measured nothing"
        print(f"  {NOTE}", flush=True)
        return []
    NOTE = None
    rows: list[dict[str, Any]] = []
    for part in (gpu_bench_rows, kernel_rows, model_rows):
        try:
            rows.extend(part(quick))
        except Exception as error:  # a broken part must not hide the others
            rows.append({"name": part.__name__, "note": f"failed: {type(error).__name__}: {error}"})
        print(f"  {part.__name__}: {len(rows)} rows so far", flush=True)
    return rows
