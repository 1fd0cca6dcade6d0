"""Compile time of each model, cold and warm: polyir against Inductor.

cold: an empty disk cache and nothing in memory; warm: the disk cache that the
cold compile filled, still nothing in memory (see ``bench.caches``). One-time
process costs are paid before timing by ``warm_up_polyir``/``warm_up_inductor``.

polyir's figure is ``polyir.compile(model, inputs)`` (capture, lowering,
passes, LLVM, object code; it compiles for the example inputs before
returning). Inductor's is its first call minus one eager call, since
``torch.compile`` compiles lazily on the first call.

Inductor compiles only what Dynamo captures as graph operations: an eval-mode
``nn.TransformerEncoderLayer`` or ``nn.MultiheadAttention`` under ``no_grad``
takes torch's fused "fast path" (one ATen call for a whole layer), which
Inductor leaves to the eager kernel, so it has almost nothing to compile. Each
row records ``inductor_graph_ops`` (what Dynamo captured) and, for models with
such modules, ``inductor_cold_nofastpath_s``: Inductor's cold compile with
``torch.backends.mha.set_fastpath_enabled(False)``, the layer decomposed into
the operations polyir compiles too (``ratio_cold_vs_inductor_nofastpath``).
"""
from __future__ import annotations

import statistics
import tempfile
import time
from typing import Any

import torch

from bench.caches import (
    drop_inductor_memory_caches,
    drop_polyir_memory_caches,
    inductor_cache,
    polyir_cache,
    warm_up_inductor,
    warm_up_polyir,
)
from bench.models import MODELS, QUICK_INDUCTOR_MODEL, compile_polyir, make
from bench.timing import median_seconds, ratio


def polyir_compile_seconds(model: torch.nn.Module, inputs: tuple[Any, ...],
                           cache_dir: str) -> tuple[float, Any]:
    """Seconds for ``polyir.compile`` with ``cache_dir`` as the disk cache and nothing in
    memory, and the compiled model."""
    with polyir_cache(cache_dir), torch.no_grad():
        drop_polyir_memory_caches()
        start = time.perf_counter()
        compiled = compile_polyir(model, inputs)
        return time.perf_counter() - start, compiled


def inductor_compile_seconds(model: torch.nn.Module, inputs: tuple[Any, ...], cache_dir: str) -> float:
    """Seconds for Inductor's first call, less one eager call, with ``cache_dir`` as its disk
    cache and nothing in memory."""
    with inductor_cache(cache_dir), torch.no_grad():
        eager = median_seconds(lambda: model(*inputs), repeats=3)
        drop_inductor_memory_caches()
        compiled = torch.compile(model, backend="inductor")
        start = time.perf_counter()
        compiled(*inputs)
        seconds = time.perf_counter() - start
        drop_inductor_memory_caches()
    return max(seconds - eager, 0.0)


def _has_fast_path(model: torch.nn.Module) -> bool:
    """Does ``model`` hold modules that torch may run through its fused MHA fast path?"""
    kinds = (torch.nn.MultiheadAttention, torch.nn.TransformerEncoderLayer)
    return any(isinstance(m, kinds) for m in model.modules())


def inductor_graph_ops(model: torch.nn.Module, inputs: tuple[Any, ...]) -> int:
    """How many operations Dynamo captures from ``model`` (what Inductor gets to compile)."""
    with torch.no_grad():
        explained = torch._dynamo.explain(model)(*inputs)
    drop_inductor_memory_caches()
    return int(explained.op_count)


def inductor_cold_without_fast_path(model: torch.nn.Module, inputs: tuple[Any, ...]) -> float:
    """Inductor's cold compile seconds with torch's MHA fast path off (restored after)."""
    previous = torch.backends.mha.get_fastpath_enabled()
    torch.backends.mha.set_fastpath_enabled(False)
    try:
        with tempfile.TemporaryDirectory() as cache_dir:
            return inductor_compile_seconds(model, inputs, cache_dir)
    finally:
        torch.backends.mha.set_fastpath_enabled(previous)


def cache_hits(compiled: Any) -> list[bool]:
    """For each polyir function of ``compiled``'s latest plan: did its object code come
    from the disk cache?"""
    plan = compiled.last_plan
    return [bool(getattr(s.executable, "cache_hit", False)) for s in plan.segments] if plan else []


def cold_and_warm(model: torch.nn.Module, inputs: tuple[Any, ...], *, repeats: int,
                  inductor: bool) -> dict[str, Any]:
    """``polyir_cold_s``, ``polyir_warm_s``, and with ``inductor`` ``inductor_cold_s`` and
    ``inductor_warm_s``: medians over ``repeats`` fresh cache folders, each compiled
    into once cold and once warm. Also ``loop_nests`` (what polyir compiled); failures,
    and a cold compile that hit polyir's cache or a warm one that missed, as ``note``."""
    row: dict[str, Any] = {}
    notes = []
    try:
        cold, warm = [], []
        for _ in range(repeats):
            with tempfile.TemporaryDirectory() as cache_dir:
                seconds, compiled = polyir_compile_seconds(model, inputs, cache_dir)
                cold.append(seconds)
                if any(cache_hits(compiled)):
                    notes.append("a cold polyir compile hit the cache")
                seconds, compiled = polyir_compile_seconds(model, inputs, cache_dir)
                warm.append(seconds)
                if not all(cache_hits(compiled)):
                    notes.append("a warm polyir compile missed the cache")
        row["loop_nests"] = compiled.summary().get("loop_nests")
        row["polyir_cold_s"], row["polyir_warm_s"] = statistics.median(cold), statistics.median(warm)
    except Exception as error:  # report it and keep measuring Inductor
        notes.append(f"polyir failed: {type(error).__name__}: {str(error)[:160]}")
    if inductor:
        try:
            cold, warm = [], []
            for _ in range(repeats):
                with tempfile.TemporaryDirectory() as cache_dir:
                    cold.append(inductor_compile_seconds(model, inputs, cache_dir))
                    warm.append(inductor_compile_seconds(model, inputs, cache_dir))
            row["inductor_cold_s"], row["inductor_warm_s"] = statistics.median(cold), statistics.median(warm)
            row["inductor_graph_ops"] = inductor_graph_ops(model, inputs)
            if _has_fast_path(model):
                row["inductor_cold_nofastpath_s"] = statistics.median(
                    inductor_cold_without_fast_path(model, inputs) for _ in range(repeats))
                row["ratio_cold_vs_inductor_nofastpath"] = ratio(
                    row.get("polyir_cold_s"), row["inductor_cold_nofastpath_s"])
        except Exception as error:
            notes.append(f"Inductor failed: {type(error).__name__}: {str(error)[:160]}")
    else:
        notes.append("Inductor skipped (--quick)")
    if notes:
        notes = list(dict.fromkeys(notes))
    row["ratio_cold_vs_inductor"] = ratio(row.get("polyir_cold_s"), row.get("inductor_cold_s"))
    row["ratio_warm_vs_inductor"] = ratio(row.get("polyir_warm_s"), row.get("inductor_warm_s"))
    if notes:
        row["note"] = "; ".join(notes)
    return row


def encoder_8_layers() -> tuple[torch.nn.Module, tuple[Any, ...]]:
    """torch's ``nn.TransformerEncoder``: 8 layers, d_model 128, feed-forward 256,
    4 heads, at batch 2 and sequence 16 (the model of issue 17)."""
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(128, 4, dim_feedforward=256, dropout=0.0,
                                             batch_first=True)
    model = torch.nn.TransformerEncoder(layer, 8, enable_nested_tensor=False).eval()
    return model, (torch.randn(2, 16, 128),)


def whole_cnn(name: str) -> tuple[torch.nn.Module, tuple[Any, ...]]:
    """``resnet18_224`` or ``mobilenetv2_224`` of ``bench.fusion`` at batch 1."""
    from bench.fusion import REALISTIC
    torch.manual_seed(0)
    factory, maker = REALISTIC[name]
    return factory().eval(), maker(1)


WHOLE_CNNS = ("resnet18_224", "mobilenetv2_224")
"""Whole CNNs (68 and 180 loop nests): timed once cold and once warm, not 3 times."""


def run(quick: bool) -> list[dict[str, Any]]:
    """Every model at batch size 1, the 8-layer encoder and the whole CNNs
    (``--quick``: the one model Inductor compiles)."""
    names = [QUICK_INDUCTOR_MODEL] if quick else list(MODELS)
    warm_up_polyir()
    warm_up_inductor()
    cases = [(name, 1, lambda name=name: make(name, 1)) for name in names]
    if not quick:
        cases.append(("encoder_8_layers", 2, encoder_8_layers))
        cases += [(name, 1, lambda name=name: whole_cnn(name)) for name in WHOLE_CNNS]
    rows = []
    for name, batch, maker in cases:
        model, inputs = maker()
        row: dict[str, Any] = {"model": name, "batch": batch}
        repeats = 1 if quick or name in WHOLE_CNNS else 3
        row.update(cold_and_warm(model, inputs, repeats=repeats, inductor=True))
        print(f"  {name}: {row}", flush=True)
        rows.append(row)
    return rows
