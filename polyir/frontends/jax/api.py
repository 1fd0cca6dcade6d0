"""``polyir.jax.jit``: a decorator like ``jax.jit`` that compiles through polyir.

On the first call for a signature (the argument pytree's structure, each
leaf's shape and dtype, the static arguments' values, JAX's x64 mode) the
function is traced with ``jax.make_jaxpr``, the jaxpr flattened (calls
inlined), partitioned, lowered and built; the plan is cached under that
signature, so a call never runs code compiled for other shapes. Later calls
with the same signature only bind arrays and run.
"""
from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Sequence
from typing import Any

import jax
import numpy as np
from jax.core import Tracer

from polyir.errors import ArgumentError
from polyir.frontends.jax import rules  # noqa: F401  (fills the lowering table)
from polyir.frontends.jax.graph import flatten
from polyir.frontends.jax.plan import Plan, build_plan
from polyir.frontends.lowering.registry import summarize


def _leaf_key(leaf: Any) -> Any:
    if isinstance(leaf, (jax.Array, np.ndarray, np.generic)):
        return ("array", tuple(np.shape(leaf)), str(leaf.dtype))
    if isinstance(leaf, (bool, int, float)):
        return ("python", type(leaf).__name__)
    raise ArgumentError(f"polyir.jax.jit: argument leaf of type {type(leaf).__name__} is not an "
                        f"array or a number (pass it through static_argnums/static_argnames)")


def _static_key(value: Any) -> Any:
    try:
        hash(value)
    except TypeError:
        raise ArgumentError(f"polyir.jax.jit: static argument {value!r} is not hashable") from None
    return (type(value).__name__, value)


class JitFunction:
    """The callable ``polyir.jax.jit(fn)`` returns.

    Calling it runs the plan compiled for the arguments' signature, compiling
    it first when there is none. Called on tracers (inside ``jax.grad``,
    ``jax.vmap`` or an enclosing ``jax.jit``) it calls ``fn`` itself, so JAX
    transforms the original function; polyir compiles only concrete calls. ``plans`` maps each signature to its
    :class:`~polyir.frontends.jax.plan.Plan`; :meth:`summary` and :meth:`ir`
    describe the latest one; :meth:`lower` traces and compiles without
    running.
    """

    def __init__(self, fn: Callable[..., Any], *, target: Any = "cpu", fallback: bool = True,
                 pipeline: str | None = None, static_argnums: int | Sequence[int] = (),
                 static_argnames: str | Sequence[str] = ()) -> None:
        if not callable(fn):
            raise TypeError(f"polyir.jax.jit takes a function, not {type(fn).__name__}")
        self.fn = fn
        self.target = target
        self.fallback = fallback
        self.pipeline = pipeline
        self.static_argnums = {static_argnums} if isinstance(static_argnums, int) else set(static_argnums)
        self.static_argnames = {static_argnames} if isinstance(static_argnames, str) else set(static_argnames)
        try:
            self._signature: inspect.Signature | None = inspect.signature(fn)
        except (TypeError, ValueError):
            self._signature = None
        self.plans: dict[Any, Plan] = {}
        self.last_plan: Plan | None = None
        functools.update_wrapper(self, fn)

    # -- signature ---------------------------------------------------------
    def _split(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, Any, list[Any]]:
        """(static key, dynamic pytree, its leaves) of a call."""
        names = set(self.static_argnames)
        if self._signature is not None:
            parameters = list(self._signature.parameters)
            names |= {parameters[i] for i in self.static_argnums if 0 <= i < len(parameters)}
        positional = [i for i in range(len(args))
                      if i in self.static_argnums or (self._signature is not None
                                                      and i < len(self._signature.parameters)
                                                      and list(self._signature.parameters)[i] in names)]
        static_pos = {i: args[i] for i in positional}
        static_kw = {k: v for k, v in kwargs.items() if k in names}
        dynamic = ([a for i, a in enumerate(args) if i not in static_pos],
                   {k: v for k, v in kwargs.items() if k not in static_kw})
        key = (tuple(sorted((i, _static_key(v)) for i, v in static_pos.items())),
               tuple(sorted((k, _static_key(v)) for k, v in static_kw.items())))
        leaves = jax.tree_util.tree_leaves(dynamic)
        return (key, static_pos, static_kw), dynamic, leaves

    def _call_fn(self, static: Any, dynamic: Any) -> Any:
        _, static_pos, static_kw = static
        positional, keywords = dynamic
        args: list[Any] = []
        rest = iter(positional)
        for i in range(len(positional) + len(static_pos)):
            args.append(static_pos[i] if i in static_pos else next(rest))
        return self.fn(*args, **keywords, **static_kw)

    def plan_for(self, *args: Any, **kwargs: Any) -> Plan:
        """The plan for these arguments, traced and compiled if needed."""
        return self._plan(*self._split(args, kwargs))

    def _plan(self, static: Any, dynamic: Any, leaves: list[Any]) -> Plan:
        tree = jax.tree_util.tree_structure(dynamic)
        key = (static[0], tree, tuple(_leaf_key(leaf) for leaf in leaves), _x64_enabled())
        plan = self.plans.get(key)
        if plan is None:
            plan = self._compile(static, tree, leaves)
            self.plans[key] = plan
        self.last_plan = plan
        return plan

    def _compile(self, static: Any, tree: Any, leaves: list[Any]) -> Plan:
        out_trees: list[Any] = []

        def flat_fn(*flat: Any) -> list[Any]:
            result = self._call_fn(static, jax.tree_util.tree_unflatten(tree, flat))
            out_leaves, out_tree = jax.tree_util.tree_flatten(result)
            out_trees.append(out_tree)
            return out_leaves

        closed = jax.make_jaxpr(flat_fn)(*leaves)
        names = [_leaf_name(path) for path, _ in
                 jax.tree_util.tree_flatten_with_path(jax.tree_util.tree_unflatten(tree, leaves))[0]]
        graph = flatten(closed, names)
        return build_plan(graph, out_trees[-1], target=self.target, fallback=self.fallback,
                          pipeline=self.pipeline, stacklevel=5)

    # -- calls -------------------------------------------------------------
    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        static, dynamic, leaves = self._split(args, kwargs)
        if any(isinstance(leaf, Tracer) for leaf in leaves):
            # Under a JAX transformation (grad, vmap, an enclosing jit) JAX traces
            # the function itself: compiled code cannot be differentiated or batched.
            return self.fn(*args, **kwargs)
        plan = self._plan(static, dynamic, leaves)
        return jax.tree_util.tree_unflatten(plan.out_tree, plan.run(leaves))

    def lower(self, *args: Any, **kwargs: Any) -> Plan:
        """Trace and compile for these arguments without running; the plan."""
        return self.plan_for(*args, **kwargs)

    def summary(self) -> dict[str, Any]:
        """What the latest plan compiled: primitives lowered (with counts), loop
        nests, polyir functions, and primitives left to JAX."""
        plan = self.last_plan
        if plan is None:
            return {}
        return summarize([s.lowered for s in plan.segments], (s.equation.name for s in plan.fallbacks))

    def ir(self) -> list[Any]:
        """The lowered modules of the latest plan (before any pass pipeline)."""
        plan = self.last_plan
        return [] if plan is None else [s.lowered.module for s in plan.segments if s.lowered]


def _x64_enabled() -> bool:
    """JAX's x64 mode (64-bit types) in this thread."""
    return bool(jax.dtypes.canonicalize_dtype(np.float64) == np.float64)


def _leaf_name(path: Sequence[Any]) -> str:
    """A buffer-name hint from a pytree path (``args[0]['w']`` -> ``w``)."""
    for entry in reversed(path):
        name = getattr(entry, "key", None) or getattr(entry, "name", None)
        if isinstance(name, str):
            return name
    return "arg"


def jit(fn: Callable[..., Any] | None = None, **options: Any) -> Any:
    """Compile ``fn`` through polyir, like ``jax.jit``: ``@polyir.jax.jit`` or
    ``@polyir.jax.jit(target="cpu", fallback=True, pipeline=None,
    static_argnums=(), static_argnames=())``.

    Takes pytrees of JAX arrays, numpy arrays and Python numbers; returns JAX
    arrays in the function's output structure. ``target``: ``"cpu"`` (native
    code, default), ``"interpret"`` (the reference interpreter) or a
    ``polyir.target.Target``; ``pipeline``: a pass pipeline string run on every
    lowered module; ``fallback``: primitives without a lowering run through JAX
    (one ``PolyirJaxFallbackWarning`` per compilation); when false they raise
    ``polyir.UnsupportedOp`` naming the primitive and the equation. Non-array
    leaves raise ``polyir.ArgumentError`` unless static.
    """
    if fn is None:
        return lambda f: JitFunction(f, **options)
    return JitFunction(fn, **options)
