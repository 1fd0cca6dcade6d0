"""The PyTorch frontend: ``polyir.compile(model, example_inputs, **options)``.

1. Capture (:mod:`polyir.frontends.fxcapture`): the model (an ``nn.Module`` or
   ``fx.GraphModule``) is traced with ``make_fx`` (functionalised, core ATen
   decompositions, no autograd) on the example inputs; parameters and buffers
   become graph inputs, so they are bound at call time, never copied into the
   compiled code.
2. Partition: nodes the lowering table covers are grouped into segments (runs
   of consecutive supported nodes); the others run in eager. With
   ``fallback=False`` an unsupported node raises ``UnsupportedOp`` instead.
3. Lower each segment to a polyir module (:mod:`polyir.frontends.aten`),
   verify it, run the pass pipeline, build it with ``polyir.driver.build``.
4. Call: tensors go to the executable as numpy views (no copies for
   contiguous CPU tensors; bf16 goes through float32), outputs are allocated
   as torch tensors and returned in the model's output structure. With
   ``target="cuda"`` and CUDA inputs everything stays on the device
   (:mod:`polyir.frontends.fxdevice`).

Each distinct combination of input shapes and dtypes gets its own compiled
plan (a cache keyed by them), so a call never runs code compiled for other
shapes. With ``dynamic=True`` the capture keeps the inputs' sizes symbolic
(``polyir.frontends.dynamic``): one plan serves every size its guards accept,
and a new one is compiled only when a guard fails.
"""
from __future__ import annotations

import logging
import operator
import threading
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.utils._pytree as pytree

from polyir.compilelog import StageTimes, fewer_collections, logger
from polyir.errors import ArgumentError, CaptureError, PolyirError, UnsupportedOp
from polyir.frontends.aten import LoweredSegment, lower_segment, op_name, unsupported_reason
from polyir.frontends.aten.context import node_meta
from polyir.frontends.aten.lower import is_size_node
from polyir.frontends.dynamic import DynamicShapes
from polyir.frontends.fxcapture import Captured, capture, model_state, mutates
from polyir.frontends.fxdevice import CudaTensors, DeviceCopies, placement
from polyir.frontends.fxrun import MISS, PreparedPlan, input_signature
from polyir.frontends.gate import CallGate
from polyir.frontends.lowering.partition import group_by_fallback_depth
from polyir.frontends.lowering.registry import summarize

aten = torch.ops.aten
_LOG = logger("compile")


def _describe(args: Sequence[Any]) -> str:
    """``(2, 16, 128) float32, ...`` for the log."""
    leaves, _ = pytree.tree_flatten(tuple(args))
    return ", ".join(f"{tuple(leaf.shape)} {str(leaf.dtype).replace('torch.', '')}"
                     if isinstance(leaf, torch.Tensor) else type(leaf).__name__ for leaf in leaves)


class PolyirFallbackWarning(UserWarning):
    """Some operators of a compiled model have no lowering and run in eager."""


# ----------------------------------------------------------------- partition
@dataclass
class Segment:
    """Consecutive supported nodes compiled as one polyir function."""

    nodes: list[torch.fx.Node]
    inputs: list[torch.fx.Node] = field(default_factory=list)
    outputs: list[torch.fx.Node] = field(default_factory=list)
    lowered: LoweredSegment | None = None
    executable: Any = None
    _symbol_values: Any = None

    def symbol_values(self, sizes: dict[str, int]) -> list[int]:
        """The values of the size symbols the segment takes explicitly."""
        if self._symbol_values is None:
            assert self.lowered is not None and self.lowered.symbols is not None
            self._symbol_values = self.lowered.symbols.evaluator(self.lowered.symbol_params)
        return list(self._symbol_values(sizes))


@dataclass
class Eager:
    """A node run by torch itself."""

    node: torch.fx.Node
    reason: str


Step = Any  # Segment | Eager


def partition(gm: torch.fx.GraphModule, symbolic: bool = False) -> list[Step]:
    """Steps in execution order: segments of supported nodes and eager nodes.
    With ``symbolic`` (dynamic shapes), nodes that compute sizes are no step:
    the plan evaluates them from the call's sizes."""
    nodes = [n for n in gm.graph.nodes if n.op == "call_function"
             and not (symbolic and is_size_node(n))]
    reasons: dict[torch.fx.Node, str | None] = {}
    for node in nodes:
        reason = unsupported_reason(node, symbolic)
        if reason is None and node.target is operator.getitem:
            parent = node.args[0]
            if not isinstance(parent, torch.fx.Node) or reasons.get(parent) is not None:
                reason = "element of an eager result"
        if reason is None and isinstance(node.meta.get("val"), (tuple, list)) and any(
                user.target is not operator.getitem for user in node.users):
            reason = "multi-output node used as a whole"
        reasons[node] = reason

    steps = _group_by_eager_depth(nodes, reasons) if not any(map(mutates, nodes)) \
        else _group_in_graph_order(nodes, reasons)

    position = {node: i for i, node in enumerate(gm.graph.nodes)}
    for step in steps:
        if not isinstance(step, Segment):
            continue
        members = set(step.nodes)
        inputs = {arg for node in step.nodes for arg in node.all_input_nodes
                  if arg not in members and not (symbolic and is_size_node(arg))}
        step.inputs = sorted(inputs, key=position.__getitem__)
        step.outputs = [node for node in step.nodes if _is_tensor(node)
                        and any(user not in members and not (symbolic and is_size_node(user))
                                for user in node.users)]
    return [s for s in steps if not isinstance(s, Segment) or s.outputs]


def _group_by_eager_depth(nodes: list[torch.fx.Node],
                          reasons: dict[torch.fx.Node, str | None]) -> list[Step]:
    """Fewest segments: a supported node's depth is the number of eager nodes
    on its longest input path; all supported nodes of one depth form one
    segment, run before the eager nodes of that depth (which need only
    segments up to their depth and earlier eager nodes)."""
    groups = group_by_fallback_depth(nodes, lambda n: n.all_input_nodes, reasons)
    return [Segment(members) if compiled else Eager(members[0], reasons[members[0]] or "")
            for compiled, members in groups]


def _group_in_graph_order(nodes: list[torch.fx.Node],
                          reasons: dict[torch.fx.Node, str | None]) -> list[Step]:
    """Segments of consecutive supported nodes, eager nodes in between, in
    graph order (used when the graph mutates something: order matters)."""
    steps: list[Step] = []
    owner: dict[torch.fx.Node, Segment] = {}
    current: Segment | None = None
    for node in nodes:
        reason = reasons[node]
        if reason is not None:
            steps.append(Eager(node, reason))
            current = None
            continue
        parent: Any = node.args[0] if node.args else None
        if node.target is operator.getitem and parent in owner:
            segment = owner[parent]  # stays with its producer
        else:
            if current is None:
                current = Segment([])
                steps.append(current)
            segment = current
        segment.nodes.append(node)
        owner[node] = segment
    return steps


def _is_tensor(node: torch.fx.Node) -> bool:
    return isinstance(node.meta.get("val"), torch.Tensor)


# ------------------------------------------------------------------- compile
@dataclass
class Plan:
    """Everything compiled for one combination of input shapes and dtypes.

    ``context`` is the pass context shared by its segments' compilations
    (their remarks and timings)."""

    captured: Captured
    steps: list[Step]
    target: Any
    context: Any = None

    @property
    def segments(self) -> list[Segment]:
        return [s for s in self.steps if isinstance(s, Segment)]

    @property
    def fallbacks(self) -> list[Eager]:
        return [s for s in self.steps if isinstance(s, Eager) and s.node.target is not operator.getitem]

    def __post_init__(self) -> None:
        graph = self.captured.gm.graph
        eager = {s.node for s in self.steps if isinstance(s, Eager)}
        self._size_nodes = [n for n in graph.nodes if is_size_node(n) and any(
            user in eager or user.op == "output" for user in n.users)] \
            if self.captured.dynamic is not None else []  # sizes the eager steps need
        self._placeholders = [n for n in graph.nodes if n.op == "placeholder"]
        self._constants = {n: _fetch_attr(self.captured.gm, str(n.target))
                           for n in graph.nodes if n.op == "get_attr"}
        self._output = next(n for n in graph.nodes if n.op == "output")

    def run(self, tensors: Sequence[torch.Tensor], state: Sequence[torch.Tensor],
            copies: DeviceCopies | None = None) -> Any:
        """Run the steps on the call's tensors and the model's current state.

        ``copies`` (CUDA plans): when the tensors are on a CUDA device the plan
        runs there (:mod:`polyir.frontends.fxdevice`), reading the model's CPU
        state through these device copies; ``ArgumentError`` for inputs on
        different devices."""
        device = None
        if copies is not None:
            device = placement(copies.tensors, tensors, state, self.captured.state_names)
        if device is None:
            return self._run_steps(tensors, state, None)
        assert copies is not None
        with copies.tensors.stream(device):
            return self._run_steps(tensors, state, _OnDevice(copies, device))

    def _run_steps(self, tensors: Sequence[torch.Tensor], state: Sequence[torch.Tensor],
                   on_device: _OnDevice | None) -> Any:
        env: dict[torch.fx.Node, Any] = dict(self._constants)
        if on_device is not None:
            copies, device = on_device.copies, on_device.device
            state = [copies.get(name, tensor, device)
                     for name, tensor in zip(self.captured.state_names, state, strict=True)]
            for node, value in env.items():
                if isinstance(value, torch.Tensor):
                    env[node] = copies.get(f"constant {node.name}", value, device)
        for node, value in zip(self._placeholders, list(tensors) + list(state), strict=True):
            env[node] = value
        dynamic = self.captured.dynamic
        sizes = dynamic.sizes(tensors) if dynamic is not None else None
        if dynamic is not None and sizes is not None:
            for node in self._size_nodes:
                env[node] = dynamic.node_value(node, sizes)
        for step in self.steps:
            if isinstance(step, Eager):
                args = torch.fx.node.map_arg(step.node.args, env.__getitem__)
                kwargs = torch.fx.node.map_arg(step.node.kwargs, env.__getitem__)
                if on_device is not None and isinstance(kwargs.get("device"), torch.device):
                    kwargs = {**kwargs, "device": on_device.device}  # traced on the CPU
                target: Any = step.node.target
                with torch.no_grad():
                    env[step.node] = target(*args, **kwargs)
            elif on_device is not None:
                _run_segment_on_device(step, env, on_device, dynamic, sizes)
            else:
                _run_segment(step, env, dynamic, sizes)
        results = list(torch.fx.node.map_arg(self._output.args[0], env.__getitem__))
        leaves = []
        for position in range(self.captured.output_count):
            if position in self.captured.constant_outputs:
                leaves.append(self.captured.constant_outputs[position])
            else:
                leaves.append(results.pop(0))
        return pytree.tree_unflatten(leaves, self.captured.out_spec)


def _fetch_attr(gm: torch.fx.GraphModule, target: str) -> Any:
    value: Any = gm
    for part in target.split("."):
        value = getattr(value, part)
    return value


def _as_array(tensor: torch.Tensor) -> Any:
    """A numpy view of ``tensor`` (bf16 converted to float32 first)."""
    if tensor.device.type != "cpu":
        raise ArgumentError(f"polyir runs on CPU tensors; got a tensor on {tensor.device}")
    tensor = tensor.detach()
    if tensor.dtype == torch.bfloat16:
        tensor = tensor.float()
    return tensor.contiguous().numpy()


def _output_shape(node: torch.fx.Node, dynamic: DynamicShapes | None,
                  sizes: dict[str, int] | None) -> tuple[int, ...]:
    if dynamic is None or sizes is None:
        return tuple(int(s) for s in node_meta(node).shape)
    return dynamic.node_shape(node, sizes)


def _symbol_arguments(segment: Segment, dynamic: DynamicShapes | None,
                      sizes: dict[str, int] | None) -> list[int]:
    if dynamic is not None and sizes is not None and segment.lowered is not None \
            and segment.lowered.symbol_params:
        return segment.symbol_values(sizes)
    return []


def _run_segment(segment: Segment, env: dict[torch.fx.Node, Any],
                 dynamic: DynamicShapes | None = None, sizes: dict[str, int] | None = None) -> None:
    arrays = [_as_array(env[node]) for node in segment.inputs]
    results = []
    for node in segment.outputs:
        meta = node_meta(node)
        held = torch.float32 if meta.dtype == torch.bfloat16 else meta.dtype
        results.append(torch.empty(_output_shape(node, dynamic, sizes), dtype=held))
    symbols = _symbol_arguments(segment, dynamic, sizes)
    segment.executable(*arrays, *[r.numpy() for r in results], *symbols)
    for node, result in zip(segment.outputs, results, strict=True):
        env[node] = result.to(torch.bfloat16) if node_meta(node).dtype == torch.bfloat16 else result


@dataclass(frozen=True)
class _OnDevice:
    """A call of a CUDA plan on ``device``, reading host state through ``copies``."""

    copies: DeviceCopies
    device: torch.device


def _run_segment_on_device(segment: Segment, env: dict[torch.fx.Node, Any], on_device: _OnDevice,
                           dynamic: DynamicShapes | None, sizes: dict[str, int] | None) -> None:
    """Run a CUDA segment on device tensors: results are allocated on the
    device (bf16 stays bf16) and written in place; a host value an eager step
    made is uploaded first."""
    tensors = on_device.copies.tensors
    arguments = []
    for node in segment.inputs:
        value = env[node]
        if not isinstance(value, torch.Tensor):
            raise ArgumentError(f"{segment.executable.ir.entry.name}(): graph value '{node.name}' "
                                f"is a {type(value).__name__}, expected a tensor")
        if not tensors.on_device(value):
            value = tensors.upload(value, on_device.device)
        arguments.append(tensors.argument(value if value.is_contiguous() else value.contiguous()))
    results = [tensors.empty(_output_shape(node, dynamic, sizes), node_meta(node).dtype,
                             on_device.device) for node in segment.outputs]
    symbols = _symbol_arguments(segment, dynamic, sizes)
    segment.executable(*arguments, *[tensors.argument(r) for r in results], *symbols)
    for node, result in zip(segment.outputs, results, strict=True):
        env[node] = result


def build_plan(model: torch.nn.Module, args: Sequence[Any], *, target: Any, fallback: bool,
               pipeline: str | None, fast_math: bool = True, dynamic: bool = False,
               dynamic_dims: Sequence[Sequence[bool]] | None = None,
               check_bounds: bool = True) -> Plan:
    """Capture, partition, lower and compile ``model`` for ``args``
    (``polyir.driver.compile_ir`` with ``pipeline``, default the target's; with
    ``dynamic``, for every size the plan's guards accept; ``check_bounds``: the
    CPU code checks data-dependent subscripts in the loop)."""
    from polyir.context import PassContext
    from polyir.driver import compile_ir
    from polyir.target import resolve

    what = f"compile {type(model).__name__}"
    times = StageTimes(_LOG, what)
    _LOG.info("%s: capturing for inputs %s", what, _describe(args))
    resolved = resolve(target)
    with times.stage("capture", level=logging.INFO):
        captured = capture(model, args, dynamic, dynamic_dims, on_cpu=resolved.kind == "cuda")
        steps = partition(captured.gm, symbolic=dynamic)
    table = captured.dynamic.table if captured.dynamic is not None else None
    plan = Plan(captured, steps, target, PassContext(resolved))
    unsupported = plan.fallbacks
    if unsupported and not fallback:
        first = unsupported[0]
        raise UnsupportedOp(op_name(first.node.target), first.node.name, first.reason)
    for index, segment in enumerate(plan.segments):
        name = "forward" if len(plan.segments) == 1 else f"segment{index}"
        with times.stage("lower", f"{name}: {len(segment.nodes)} ATen nodes", level=logging.INFO):
            segment.lowered = lower_segment(segment.nodes, segment.inputs, segment.outputs, name,
                                            table)
        # verify, the pass pipeline, the backend (their split: plan.context.timings)
        with times.stage("compile", f"{name}: {segment.lowered.loop_nests} loop nests",
                         level=logging.INFO):
            segment.executable = compile_ir(segment.lowered.module, plan.context.target, pipeline,
                                            ctx=plan.context, fast_math=fast_math,
                                            check_bounds=check_bounds)
    if captured.dynamic is not None:
        captured.dynamic.finish()
        pinned = captured.dynamic.specialised()
        _LOG.info("%s: dynamic sizes %s; guards: %s%s", what,
                  ", ".join(captured.dynamic.bindings) or "none", captured.dynamic.guards.source
                  if captured.dynamic.guards else "-",
                  f"; specialised: {', '.join(pinned)}" if pinned else "")
    _LOG.info("%s: done in %.2f s (%s)", what, times.elapsed(), times.summary())
    if unsupported:
        names = sorted({op_name(s.node.target) for s in unsupported})
        where = ", ".join(f"{s.node.name} ({s.reason})" for s in unsupported)
        warnings.warn(f"polyir: operators without a lowering run in eager: {', '.join(names)}; "
                      f"nodes: {where}", PolyirFallbackWarning, stacklevel=5)
    return plan


# ------------------------------------------------------------------- runtime
def _leaf_kind(leaf: Any, any_device: bool = False) -> Any:
    """What a dynamic plan depends on besides sizes: rank, dtype, device (and
    values); with ``any_device`` (CUDA plans serve CPU and CUDA tensors) not the device."""
    if isinstance(leaf, torch.Tensor):
        return ("tensor", leaf.dim(), leaf.dtype, None if any_device else leaf.device.type)
    return _leaf_key(leaf)


def _leaf_key(leaf: Any, any_device: bool = False) -> Any:
    if isinstance(leaf, torch.Tensor):
        return ("tensor", tuple(leaf.shape), leaf.dtype, None if any_device else leaf.device.type)
    if isinstance(leaf, (int, float, bool, str, type(None))):
        return ("value", type(leaf).__name__, leaf)
    return ("object", type(leaf).__name__, id(leaf))


BUILD_LOCK = threading.RLock()
"""Held while a plan is captured and compiled: torch's tracers patch
process-wide state (``nn.Module.__call__``, the dispatcher's modes), so two
captures at once, even of different models, corrupt each other."""


class CompiledModel:
    """The callable ``polyir.compile`` returns.

    Calls are thread-safe: a plan is built once per key (a lock per key; the
    threads that need the same plan wait for it), builds are serialised by
    :data:`BUILD_LOCK`, and a build runs alone with respect to this model's
    calls (``polyir.frontends.gate``: capture swaps the model's state).

    Calling it runs the plan compiled for the arguments' shapes and dtypes,
    compiling a new one first when there is none. ``plans`` maps each key to
    its :class:`Plan`; :meth:`summary` describes the latest one. With
    ``dynamic``, a plan whose guards accept the arguments' sizes is reused
    (``plans`` then maps every shape seen to the plan that served it);
    ``compiles`` counts the plans built. ``dynamic_dims`` (one list of flags
    per tensor input) says which dimensions are dynamic instead of the default
    rule (every size that is not 1); the dynamo backend passes dynamo's own.

    With a CUDA target a plan serves CPU and CUDA tensor inputs alike (the
    device is not part of its key); ``device_copies`` holds the device copies
    of the model's CPU state (:mod:`polyir.frontends.fxdevice`; ``None`` for
    other targets).
    """

    def __init__(self, model: torch.nn.Module, *, target: Any = "cpu", fallback: bool = True,
                 pipeline: str | None = None, fast_math: bool = True, dynamic: bool = False,
                 dynamic_dims: Sequence[Sequence[bool]] | None = None,
                 check_bounds: bool = True) -> None:
        self.model = model
        self.dynamic_dims = dynamic_dims
        self.check_bounds = bool(check_bounds)
        self._grad_warned = False
        self.target = target
        self.fallback = fallback
        self.pipeline = pipeline
        self.fast_math = bool(fast_math)
        self.dynamic = dynamic
        from polyir.target import resolve
        self.device_copies: DeviceCopies | None = \
            DeviceCopies(CudaTensors()) if resolve(target).kind == "cuda" else None
        self.plans: dict[Any, Plan] = {}
        self.last_plan: Plan | None = None
        self.compiles = 0
        self._dynamic_plans: dict[Any, list[Plan]] = {}
        self._symbolic_failed: set[Any] = set()  # kinds of arguments not compilable symbolically
        # input signature -> (plan, its PreparedPlan or None when it has no fast path)
        self._prepared: dict[Any, tuple[Plan, Any]] = {}
        self._locks: dict[Any, threading.Lock] = {}
        self._locks_lock = threading.Lock()
        self._gate = CallGate()

    def _key_lock(self, key: Any) -> threading.Lock:
        with self._locks_lock:
            return self._locks.setdefault(key, threading.Lock())

    def plan_for(self, args: Sequence[Any], state: dict[str, torch.Tensor] | None = None) -> Plan:
        """The plan for ``args`` (and the model's current ``state``), compiling
        it if needed. Not to be called from inside ``self._gate.calling()``."""
        with self._gate.calling():
            key, plan = self._known_plan(args, state)
        if plan is None:
            with self._key_lock(key):
                with self._gate.building():   # alone: capture swaps the model's state
                    key, plan = self._known_plan(args, state)  # built by another thread meanwhile?
                    if plan is None:
                        flat, spec = pytree.tree_flatten(tuple(args))
                        current = model_state(self.model) if state is None else state
                        if self.dynamic:
                            plan = self._dynamic_plan(args, flat, spec, current)
                        if plan is None:
                            plan = self._build(args, dynamic=False)
                        self.plans[key] = plan
        self.last_plan = plan
        return plan

    def _known_plan(self, args: Sequence[Any],
                    state: dict[str, torch.Tensor] | None) -> tuple[Any, Plan | None]:
        """``(key, plan)`` for ``args``: the plan built for their key, else a
        dynamic one whose guards accept them (recorded under the key), else ``None``."""
        flat, spec = pytree.tree_flatten(tuple(args))
        state = model_state(self.model) if state is None else state
        any_device = self.device_copies is not None
        key = (spec, tuple(_leaf_key(leaf, any_device) for leaf in flat),
               tuple((name, _leaf_key(t, any_device)) for name, t in state.items()))
        plan = self.plans.get(key)
        if plan is None and self.dynamic:
            plan = self._dynamic_plan(args, flat, spec, state, build=False)
            if plan is not None:
                self.plans[key] = plan
        return key, plan

    def _build(self, args: Sequence[Any], dynamic: bool) -> Plan:
        self._check_devices(args)
        with BUILD_LOCK:
            self.compiles += 1
            try:
                plan = build_plan(self.model, args, target=self.target, fallback=self.fallback,
                                  pipeline=self.pipeline, fast_math=self.fast_math, dynamic=dynamic,
                                  dynamic_dims=self.dynamic_dims if dynamic else None,
                                  check_bounds=self.check_bounds)
            except PolyirError:
                raise
            except Exception as error:
                raise self._capture_error(args, error) from error
        for segment in plan.segments:  # the call-time check of polyir.cpu.bounds
            if hasattr(segment.executable, "check_bounds"):
                segment.executable.check_bounds = self.check_bounds
        return plan

    def _check_devices(self, args: Sequence[Any]) -> None:
        """``ArgumentError`` naming the first tensor input on another device than
        the target's (CPU tensors for ``cpu`` and ``interpret``; a CUDA target
        checks at call time, :func:`polyir.frontends.fxdevice.placement`)."""
        if self.device_copies is not None:
            return
        flat, _ = pytree.tree_flatten(tuple(args))
        tensors = [leaf for leaf in flat if isinstance(leaf, torch.Tensor)]
        for index, tensor in enumerate(tensors):
            if tensor.device.type != "cpu":
                raise ArgumentError(f"polyir.compile({type(self.model).__name__}): tensor input {index} "
                                    f"is on {tensor.device}; target {self.target!r} takes CPU tensors")

    def _capture_error(self, args: Sequence[Any], error: Exception) -> PolyirError:
        """The polyir error for a capture that failed on ``args``: an
        ``ArgumentError`` when the model was compiled before (the call's
        arguments are what changed), else a ``CaptureError``; both name the
        inputs and say what to do for data-dependent control flow."""
        name = type(self.model).__name__
        told = f"{type(error).__name__}: {str(error).strip()[:400]}"
        advice = ""
        if "data-dependent" in told.lower() or "data dependent" in told.lower():
            told = (f"{type(error).__name__}: tracing read a tensor's value "
                    f"(data-dependent control flow, .item() or a value-dependent shape)")
            advice = ("; the model's Python control flow depends on tensor values, which "
                      "polyir.compile cannot capture: use torch.compile(model, backend='polyir'), "
                      "which splits the graph there")
        if self.plans:
            return ArgumentError(f"polyir.compile({name}) called with inputs ({_describe(args)}) "
                                 f"for which the model cannot be captured: {told}{advice}")
        return CaptureError(f"polyir.compile({name}): cannot capture the model for inputs "
                            f"({_describe(args)}): {told}{advice}")

    def _dynamic_plan(self, args: Sequence[Any], flat: list[Any], spec: Any,
                      state: dict[str, torch.Tensor], build: bool = True) -> Plan | None:
        """A symbolic plan whose guards accept ``args`` (compiling one if none
        does and ``build``); ``None`` when the model cannot be compiled with
        symbolic sizes."""
        any_device = self.device_copies is not None
        kind = (spec, tuple(_leaf_kind(leaf, any_device) for leaf in flat),
                tuple((name, _leaf_key(t, any_device)) for name, t in state.items()))
        tensors = [leaf for leaf in flat if isinstance(leaf, torch.Tensor)]
        if kind in self._symbolic_failed:
            return None
        candidates = self._dynamic_plans.setdefault(kind, [])
        for plan in candidates:
            dynamic = plan.captured.dynamic
            if dynamic is not None and dynamic.guards is not None and dynamic.guards.holds(tensors):
                return plan
        if not build:
            return None
        try:
            plan = self._build(args, dynamic=True)
        except UnsupportedOp:
            raise
        except Exception as error:  # symbolic sizes the lowering cannot express
            self._symbolic_failed.add(kind)
            warnings.warn(f"polyir: dynamic=True: cannot compile {type(self.model).__name__} with "
                          f"symbolic sizes ({type(error).__name__}: {str(error)[:200]}); "
                          f"compiling for each size instead", PolyirFallbackWarning, stacklevel=4)
            return None
        candidates.append(plan)
        return plan

    def __call__(self, *args: Any) -> Any:
        if not self._grad_warned and torch.is_grad_enabled():
            from polyir.frontends.grad import warn_detached
            self._grad_warned = warn_detached(self.model, args)
        signature = input_signature(args)
        while True:
            with self._gate.calling():
                result = self._call_built(args, signature)
            if result is not MISS:
                return result
            self.plan_for(args)   # builds outside the call; the next pass runs it

    def _call_built(self, args: Sequence[Any], signature: Any) -> Any:
        """The result of a plan already built for ``args``; :data:`MISS` when there is none."""
        known = self._prepared.get(signature) if signature is not None else None
        if known is not None and known[1] is not None:
            result = known[1].call(args)
            if result is not MISS:
                self.last_plan = known[0]
                return result
        state = model_state(self.model)
        _, plan = self._known_plan(args, state)
        if plan is None:
            return MISS
        self.last_plan = plan
        flat, _ = pytree.tree_flatten(tuple(args))
        tensors = [leaf for leaf in flat if isinstance(leaf, torch.Tensor)]
        if signature is not None and (known is None or known[0] is not plan):
            # a dynamic plan is prepared for this signature's sizes (its guards hold for them)
            self._prepared[signature] = (plan, PreparedPlan.prepare(plan, self.model, state,
                                                                    tensors))
        return plan.run(tensors, list(state.values()), self.device_copies)

    def summary(self) -> dict[str, Any]:
        """What the latest plan compiled: operators lowered (with counts), loop
        nests, polyir functions, and operators left to eager."""
        plan = self.last_plan
        if plan is None:
            return {}
        summary = summarize([s.lowered for s in plan.segments],
                            (op_name(s.node.target) for s in plan.fallbacks))
        summary["remarks"] = [str(r) for r in plan.context.remarks] if plan.context else []
        return summary

    def ir(self) -> list[Any]:
        """The lowered modules of the latest plan (before the pass pipeline)."""
        plan = self.last_plan
        return [] if plan is None else [s.lowered.module for s in plan.segments if s.lowered]


def compile_model(model: Any, example_inputs: Any, *, target: Any = "cpu", fallback: bool = True,
                  pipeline: str | None = None, fast_math: bool = True,
                  dynamic: bool = False, check_bounds: bool = True) -> CompiledModel:
    """Compile ``model`` (an ``nn.Module`` or ``fx.GraphModule``) for
    ``example_inputs`` (a tensor or a tuple/list of arguments).

    ``target``: ``"cpu"`` (default), ``"interpret"`` or ``"cuda"``.
    ``fallback``: run operators without a lowering in eager (with one
    ``PolyirFallbackWarning``); when false they raise ``polyir.UnsupportedOp``.
    ``pipeline``: a pass pipeline string run on every lowered module
    (default: ``polyir.driver.default_pipeline(target)``).
    ``fast_math`` (default on): the CPU backend may contract multiply-adds into
    FMAs and reassociate float sums (vectorised reductions); results match
    eager within rounding, as eager's own kernels do. ``False``: exact IEEE
    evaluation of the lowered loops.
    ``dynamic``: compile with symbolic sizes for the inputs' dimensions that are
    not 1 (see ``polyir.frontends.dynamic``): later calls with other sizes reuse
    the plan while its guards hold, instead of compiling again. ``check_bounds`` (default on): native
    code checks gather indices (embedding ids, ``index_select``) and sizes
    against the arrays before each call (``polyir.BoundsError``, an
    ``IndexError`` as in eager); ``False`` skips it.

    Returns a :class:`CompiledModel`; it is compiled for the example inputs
    now, so unsupported operators and lowering errors surface here.
    """
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"polyir.compile takes an nn.Module or fx.GraphModule, not {type(model).__name__}")
    args = tuple(example_inputs) if isinstance(example_inputs, (tuple, list)) else (example_inputs,)
    compiled = CompiledModel(model, target=target, fallback=fallback, pipeline=pipeline,
                             fast_math=fast_math, dynamic=dynamic, check_bounds=check_bounds)
    with fewer_collections():
        compiled.plan_for(args)
    return compiled
