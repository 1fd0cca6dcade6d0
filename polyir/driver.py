"""The one place a pipeline and a backend are chosen.

* :func:`default_pipeline` names the passes every frontend runs for a target
  (``polyir.compile``, ``@polyir.kernel``, ``polyir.jax``, ``polyir-opt`` use it).
* :func:`compile_ir` verifies a module, runs a pipeline (the default one
  unless given) with one :class:`~polyir.context.PassContext` and builds the
  result; the executable's ``remarks`` and ``timings`` say what the passes
  decided and how long each stage took.
* :func:`build` only lowers: it picks the backend for the target and hands it
  IR that is already transformed (for CUDA: already mapped by ``gpu-map``).

Every executable has ``ir`` (the final IR), ``llvm_ir`` (text, or ``None``
for the interpreter), ``ptx`` (text for CUDA, else ``None``) and
``__call__(*args)`` following the entry function's calling convention (see
``polyir.ir.nodes.Function``).
"""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any

from polyir import pipeline_cache
from polyir.compilelog import fewer_collections
from polyir.context import PassContext, Remark, make_context
from polyir.cpu.cache import CompileCache
from polyir.ir.nodes import Module
from polyir.target import Target, resolve

LOGGER = logging.getLogger("polyir.driver")

_PIPELINES = {
    "cpu": "fuse,online-reductions,single-pass-moments,shrink-buffers,simplify-subscripts,distribute,"
           "auto-tile,forward-inits,split-guards",
    "interpret": "fuse,online-reductions,single-pass-moments,shrink-buffers,simplify-subscripts",
    "cuda": "fuse,shrink-buffers,mark-parallel,gpu-tensorcore,gpu-map",
}


def default_pipeline(target: Target | str | None = None, fast_math: bool = False) -> str:
    """The pass pipeline compiled code gets for ``target`` unless a pipeline is given.

    Every target: ``fuse,shrink-buffers`` (slicing fusion by the cost model,
    intermediates contracted to loop-scoped locals); the CPU and the
    interpreter run ``online-reductions,single-pass-moments`` between them
    (softmax statistics and attention in one traversal over key tiles; mean
    and variance in one traversal for rows larger than L1), and
    ``simplify-subscripts`` after ``shrink-buffers`` (the floor divisions of
    reshapes that fusion's slices decide, made affine); CPU adds
    ``distribute,auto-tile,forward-inits`` (perfect bands, then tiling,
    packing and register tiles from the Target's cache and register facts;
    exact: no sum changes order; then an output's initialisation, a bias,
    forwarded into the tiles' copies that read it); CUDA adds ``mark-parallel,gpu-tensorcore,gpu-map`` (16-bit
    contractions go to tensor cores, other parallel loops become grids and
    blocks). With ``fast_math`` (``polyir.compile``'s default), the CPU's
    ``auto-tile`` also reads padded convolutions' inputs from zero-padded
    copies (``zero_pad=true``: exact for finite weights) and leaves unit-stride
    row reductions to LLVM's vectoriser (``reassociate=true``: the sums'
    order may change, as fast math allows). On a CPU target of more than one
    core, ``mark-parallel{outermost=true}`` follows ``auto-tile``: each nest
    without a parallel loop (``auto-tile`` marks a matrix product's row
    blocks) gets its outermost loop that carries no dependence and has at
    least ``cores`` iterations marked parallel, for the OpenMP team (whose size
    policy runs small loops serially at run time).
    """
    resolved = resolve(target)
    kind, pipeline = resolved.kind, _PIPELINES[resolved.kind]
    if kind != "cpu":
        return pipeline
    tile = "auto-tile{zero_pad=true reassociate=true}" if fast_math else "auto-tile"
    if resolved.cores > 1:
        tile += f",mark-parallel{{outermost=true min_trip={resolved.cores}}}"
    return pipeline.replace("auto-tile", tile)


@dataclass
class InterpretedExecutable:
    """Runs the IR in the reference interpreter (target ``"interpret"``)."""

    ir: Module
    target: Target
    llvm_ir: str | None = None
    ptx: str | None = None
    remarks: list[Remark] = field(default_factory=list)

    def __call__(self, *args: Any) -> None:
        from polyir.ir.interpreter import interpret
        interpret(self.ir, *args)


def build(module: Module, target: Target | str | None = None, *, fast_math: bool = False,
          **options: Any) -> Any:
    """Lower ``module`` for ``target`` (default: the native CPU) as it is: no pass
    runs here. ``options`` go to the backend (``cache_dir`` for the CPU;
    ``bounds``, a ``polyir.cpu.bounds.BoundsCheck`` of the unmapped function,
    for CUDA: :func:`compile_ir` passes it unless ``check_bounds=False``).

    ``fast_math``: the CPU backend may contract float multiply-adds into FMAs
    and reassociate float operations (vectorised reductions); results then
    differ from exact IEEE evaluation by rounding. The interpreter is always
    exact; the CUDA backend ignores it (ptxas contracts multiply-adds anyway).
    Raises ``polyir.CompileError`` for IR the backend cannot lower (for CUDA,
    host code that is not mapped yet: use :func:`compile_ir`)."""
    resolved = resolve(target)
    if resolved.kind != "cpu":
        options.pop("check_bounds", None)   # the interpreter always checks; see docs/cpu.md
    if resolved.kind == "interpret":
        return InterpretedExecutable(module, resolved)
    if resolved.kind == "cpu":
        from polyir.cpu.jit import build_cpu
        return build_cpu(module, resolved, fast_math=fast_math, **options)
    if resolved.kind == "cuda":
        from polyir.ptx.build import build_cuda
        return build_cuda(module, resolved, bounds=options.get("bounds"))
    raise ValueError(f"no backend for target {resolved.name}")


def _pipeline_cache(module: Module, passes: str, target: Target, ctx: PassContext | None,
                    options: dict[str, Any]) -> tuple[CompileCache, str] | None:
    """The pipeline cache and this compilation's key in it, or ``None`` where it does
    not apply: the interpreter (a debugging target), no pipeline,
    ``cache_dir=None``, or a plugin's pass. (A hit leaves a caller's pass
    context without the analyses the passes would have computed.)"""
    del ctx
    if target.kind == "interpret" or not passes:
        return None
    from polyir.cpu.cache import default_cache_dir
    directory = options.get("cache_dir", default_cache_dir())
    if directory is None or not pipeline_cache.cacheable(passes):
        return None
    cache = pipeline_cache.open_cache(directory)
    return None if cache is None else (cache, pipeline_cache.key(module, passes, target))


def compile_ir(module: Module, target: Target | str | None = None, pipeline: str | None = None, *,
               ctx: PassContext | None = None, **options: Any) -> Any:
    """Verify ``module``, run ``pipeline`` (default: :func:`default_pipeline`) and
    :func:`build` the result for ``target``.

    For CUDA a ``gpu-map`` is appended when the pipeline leaves host code
    unmapped (the backend lowers mapped IR only). ``ctx`` is a pass context to
    reuse (its analyses and remarks carry over). The pipeline's result comes from the pipeline cache when this module, pipeline and target
    were compiled before (``polyir.pipeline_cache``; CPU and CUDA targets, the
    ``cache_dir`` of the CPU backend). The executable gets
    ``remarks`` (the passes' :class:`~polyir.context.Remark` list) and
    ``timings`` (seconds per stage). Raises ``VerifyError`` for invalid input,
    ``PassError`` when a pass fails, ``CompileError`` from the backend.
    """
    with fewer_collections():
        return _compile_ir(module, target, pipeline, ctx, options)


def _compile_ir(module: Module, target: Target | str | None, pipeline: str | None,
                ctx: PassContext | None, options: dict[str, Any]) -> Any:
    from polyir.ir.verifier import verify
    from polyir.passes import transform
    resolved = resolve(target)
    context = make_context(resolved, ctx)
    verify(module)
    original = module
    passes = default_pipeline(resolved, bool(options.get("fast_math"))) if pipeline is None \
        else pipeline
    start = time.perf_counter()
    cached = _pipeline_cache(module, passes, resolved, ctx, options)
    found = None if cached is None else pipeline_cache.load(*cached)
    if found is not None:
        module, remarks = found
        context.remarks.extend(remarks)
        context.timings.append(("passes (cached)", time.perf_counter() - start))
    elif passes:
        before = len(context.remarks)
        module = transform(module, passes, ctx=context)
        if cached is not None:
            pipeline_cache.store(*cached, module, context.remarks[before:])
    if resolved.kind == "cuda":
        from polyir.ptx.build import needs_mapping
        if needs_mapping(module):
            context.remark("driver", f"module '{module.entry.name}'",
                           "the pipeline left host loops unmapped: gpu-map appended", kind="applied")
            module = transform(module, "gpu-map", ctx=context)
    if found is None:
        context.timings.append(("passes", time.perf_counter() - start))
    if resolved.kind == "cuda" and options.get("check_bounds", True):
        # the check of the unmapped function (its footprints), run before the launches
        from polyir.cpu.bounds import BoundsCheck
        options = {**options, "bounds": BoundsCheck.for_function(original.entry)}
    with context.timed("backend"):
        executable = build(module, resolved, **options)
    executable.remarks = list(context.remarks)
    executable.timings = list(context.timings)
    LOGGER.info("compiled %s for %s: %s", module.entry.name, resolved.name,
                 ", ".join(f"{stage} {seconds:.3f}s" for stage, seconds in context.timings))
    return executable


__all__ = ["build", "compile_ir", "default_pipeline", "InterpretedExecutable"]
