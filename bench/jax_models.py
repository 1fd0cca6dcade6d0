"""JAX models on CPU: ``polyir.jax.jit`` against ``jax.jit`` (XLA CPU).

The Flax-free models of ``polyir.frontends.jax.models`` (an MLP with layer
norm, a pre-norm transformer block with causal attention, a small CNN) at
batch 1 and 8, each row checked against XLA before it is timed; the two
contenders are timed interleaved, each call waited for
(``jax.block_until_ready``). Each row also has the compile time of both:
polyir's ``polyir.jax.jit(fn).lower(...)`` (trace, lower, LLVM) with an
empty disk cache, XLA's ``jax.jit(fn).lower(...).compile()`` after
``jax.clear_caches()``; one-time process costs are paid first on a
throwaway function.
"""
from __future__ import annotations

import tempfile
import time
from typing import Any

from bench.caches import WARMUP_SECONDS, polyir_cache
from bench.config import cpu_target
from bench.timing import interleaved_medians, ratio, record_medians

QUICK_MODELS = ["mlp_layernorm"]
NOTE = None


def _warm_up() -> None:
    """Pay JAX's and polyir's one-time costs (imports, XLA and LLVM set-up)."""
    if "jax" in WARMUP_SECONDS:
        return
    import jax
    import numpy as np

    import polyir
    start = time.perf_counter()
    x = np.ones((2, 3), np.float32)
    jax.block_until_ready(jax.jit(lambda v: v * 2 + 1)(x))
    with tempfile.TemporaryDirectory() as directory, polyir_cache(directory):
        polyir.jax.jit(lambda v: v * 2 + 1, target=cpu_target())(x)
    WARMUP_SECONDS["jax"] = time.perf_counter() - start


def compile_seconds(apply: Any, params: Any, x: Any) -> tuple[float, float, Any]:
    """(polyir cold compile, XLA compile, the polyir function) for one model."""
    import jax

    import polyir
    with tempfile.TemporaryDirectory() as directory, polyir_cache(directory):
        start = time.perf_counter()
        compiled = polyir.jax.jit(apply, target=cpu_target())
        compiled.lower(params, x)
        polyir_seconds = time.perf_counter() - start
    jax.clear_caches()
    start = time.perf_counter()
    jax.jit(apply).lower(params, x).compile()
    return polyir_seconds, time.perf_counter() - start, compiled


def bench_model(name: str, batch: int, repeats: int) -> dict[str, Any]:
    """One row: medians of polyir and XLA, their ratio, and both compile times."""
    import jax
    import numpy as np

    from polyir.frontends.jax.models import MODELS
    init, apply, shape = MODELS[name]
    params = init(seed=0)
    x = np.random.default_rng(1).standard_normal(shape(batch)).astype(np.float32)
    row: dict[str, Any] = {"model": name, "batch": batch, "shape": "x".join(map(str, x.shape)),
                           "dtype": "f32"}
    notes: list[str] = []
    xla = jax.jit(apply)
    expected = jax.block_until_ready(xla(params, x))
    contenders: dict[str, Any] = {"xla": lambda: jax.block_until_ready(xla(params, x))}
    try:
        row["polyir_compile_s"], row["xla_compile_s"], compiled = compile_seconds(apply, params, x)
        got = compiled(params, x)
        np.testing.assert_allclose(np.asarray(got), np.asarray(expected), rtol=1e-3, atol=1e-3)
        summary = compiled.summary()
        row["loop_nests"] = summary.get("loop_nests")
        if summary.get("fallbacks"):
            notes.append(f"JAX fallback for {', '.join(summary['fallbacks'])}")
        contenders["polyir"] = lambda: jax.block_until_ready(compiled(params, x))
    except Exception as error:  # report it and keep measuring XLA
        notes.append(f"polyir failed: {type(error).__name__}: {str(error)[:160]}")
    samples = interleaved_medians(contenders, repeats, warmup=2, min_seconds=0.01)
    record_medians(row, samples)
    row["ratio_vs_xla"] = ratio(row.get("polyir_s"), row.get("xla_s"))
    row["ratio_compile_vs_xla"] = ratio(row.get("polyir_compile_s"), row.get("xla_compile_s"))
    if notes:
        row["note"] = "; ".join(notes)
    return row


def run(quick: bool) -> list[dict[str, Any]]:
    """Every model at batch sizes 1 and 8 (``--quick``: the MLP at batch 1)."""
    from polyir.frontends.jax.models import MODELS
    _warm_up()
    names = QUICK_MODELS if quick else list(MODELS)
    rows = []
    for name in names:
        for batch in [1] if quick else [1, 8]:
            row = bench_model(name, batch, repeats=5 if quick else 25)
            print(f"  {name} b{batch}: polyir {row.get('polyir_s')}, xla {row.get('xla_s')}, "
                  f"compile {row.get('polyir_compile_s')} vs {row.get('xla_compile_s')}"
                  f"{', ' + row['note'] if row.get('note') else ''}", flush=True)
            rows.append(row)
    return rows
