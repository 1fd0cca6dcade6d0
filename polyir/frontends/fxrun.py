"""The call path of a compiled model, prepared once per plan (the batch-1 overhead).

``Plan.run`` is the general interpreter of a plan's steps. When every segment
of a plan runs on the native CPU backend and the model is called with plain
tensors, :class:`PreparedPlan` runs it with almost nothing left to do per call:

* what the plan key guarantees is checked once per call and cheaply: the
  inputs' shapes and dtypes select the prepared plan
  (:func:`input_signature`), and each state tensor, read by its traced name
  through the modules' own dictionaries, must still have the plan's shape,
  dtype and device (else the call goes the slow way, which builds a new plan);
* every segment's argument words (data pointers, then the size symbols, which
  the plan fixes) sit in a ctypes array per thread; a call writes the data
  pointers and makes one ctypes call (``CpuExecutable.call_words``);
* output shapes and dtypes are precomputed; intermediate values live in a
  list indexed by slot, not a dictionary keyed by graph nodes.

What is not guaranteed by the key is still checked: a non-contiguous input
or state tensor is made contiguous, and a tensor that an eager step produced
is checked against the shape and dtype the segment was compiled for (a
mismatch is a ``polyir.ArgumentError`` naming the graph value). Adding new
parameters to the model after compiling is not seen (the plan reads the state
tensors it was traced with, by name; replacing one, or a submodule, is).
"""
from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.utils._pytree as pytree

from polyir.errors import ArgumentError
from polyir.frontends.aten.context import node_meta

MISS = object()
"""Returned by :meth:`PreparedPlan.call` when the arguments or the model's
state no longer fit the plan (the caller takes the general path)."""


def input_signature(args: Sequence[Any]) -> tuple[Any, ...] | None:
    """``((shape, dtype), ...)`` of ``args`` when they are all tensors, else ``None``."""
    signature = []
    for arg in args:
        if not isinstance(arg, torch.Tensor):
            return None
        signature.append((arg.shape, arg.dtype))
    return tuple(signature)


@dataclass(frozen=True)
class _StateTensor:
    """One state tensor of a module: ``module._parameters[attr]`` (or
    ``_buffers``), expected with ``shape`` and ``dtype``, put in ``slot``."""

    attr: str
    in_parameters: bool
    slot: int
    shape: torch.Size
    dtype: torch.dtype


@dataclass(frozen=True)
class _StateGroup:
    """The state tensors of the module at ``root._modules[p0]._modules[p1]...``."""

    path: tuple[str, ...]
    tensors: tuple[_StateTensor, ...]

    def module(self, root: torch.nn.Module) -> Any:
        module: Any = root
        for part in self.path:
            module = module._modules.get(part)
            if module is None:
                return None
        return module


def _state_groups(root: torch.nn.Module, names: Sequence[str], state: dict[str, torch.Tensor],
                  first_slot: int) -> list[_StateGroup]:
    """Group the traced state names by owning module; ``ValueError`` when a name
    does not lead back to its tensor through the modules' dictionaries."""
    grouped: dict[tuple[str, ...], list[_StateTensor]] = {}
    for offset, name in enumerate(names):
        *path, attr = name.split(".")
        tensor = state[name]
        group = _StateGroup(tuple(path), ())
        module = group.module(root)
        if module is None:
            raise ValueError(f"state '{name}': no such submodule")
        if module._parameters.get(attr) is tensor:
            in_parameters = True
        elif module._buffers.get(attr) is tensor:
            in_parameters = False
        else:
            raise ValueError(f"state '{name}' is not a parameter or buffer of its module")
        grouped.setdefault(tuple(path), []).append(
            _StateTensor(attr, in_parameters, first_slot + offset, tensor.shape, tensor.dtype))
    return [_StateGroup(path, tuple(tensors)) for path, tensors in grouped.items()]


@dataclass
class _Segment:
    executable: Any
    direct: list[tuple[int, int]]                  # (word, slot): pointer known
    special: list[tuple[int, int, bool, bool, tuple[torch.Size, torch.dtype], str]]
    # (word, slot, check against expected, bf16 -> f32, expected, graph name)
    outputs: list[tuple[int, int, Any, tuple[int, ...], torch.dtype, bool]]
    # (word, slot, empty_like template or None, shape, held dtype, bf16)
    template: list[int | None]


@dataclass
class _Eager:
    node: torch.fx.Node
    slot: int


def _allocation_template(shape: tuple[int, ...], dtype: torch.dtype) -> Any:
    """A zero-stride tensor whose ``torch.empty_like`` is a new contiguous tensor
    of ``shape`` (cheaper than ``torch.empty(shape, dtype=...)``), or ``None``
    when that does not hold."""
    template = torch.empty((), dtype=dtype).expand(shape)
    probe = torch.empty_like(template)
    contiguous = torch.empty(shape, dtype=dtype)
    if probe.shape != contiguous.shape or probe.stride() != contiguous.stride() \
            or probe.dtype != dtype:
        return None
    return template


class PreparedPlan:
    """A plan's fast call path (see the module docstring). Build it with
    :meth:`prepare`, which returns ``None`` for plans it does not cover."""

    def __init__(self, plan: Any, model: torch.nn.Module, state: dict[str, torch.Tensor]):
        captured = plan.captured
        graph = captured.gm.graph
        self.plan = plan
        self.model = model
        self._slot: dict[torch.fx.Node, int] = {}
        placeholders = [n for n in graph.nodes if n.op == "placeholder"]
        for node in placeholders:
            self._slot[node] = len(self._slot)
        self.input_count = captured.input_count
        groups = _state_groups(model, captured.state_names, state, captured.input_count)
        # the same, as plain tuples (the per-call loop unpacks them)
        self._state = [(g.path, [(t.attr, t.in_parameters, t.slot, t.shape, t.dtype)
                                 for t in g.tensors]) for g in groups]
        constants: list[tuple[int, Any]] = []
        for node in graph.nodes:
            if node.op == "get_attr":
                self._slot[node] = len(self._slot)
                value = plan._constants[node]
                if isinstance(value, torch.Tensor) and not value.is_contiguous():
                    value = value.contiguous()
                constants.append((self._slot[node], value))
        trusted = set(placeholders) | {n for n in graph.nodes if n.op == "get_attr"}
        self._steps: list[_Segment | _Eager] = []
        for step in plan.steps:
            if hasattr(step, "executable"):
                self._steps.append(self._segment(step, trusted))
            else:
                self._slot[step.node] = len(self._slot)
                self._steps.append(_Eager(step.node, self._slot[step.node]))
        self._output = next(n for n in graph.nodes if n.op == "output")
        self._out_spec = captured.out_spec
        self._constant_outputs = captured.constant_outputs
        self._output_count = captured.output_count
        single = self._output.args[0]
        self._single_output: int | None = None
        if isinstance(single, (list, tuple)) and len(single) == 1 \
                and isinstance(single[0], torch.fx.Node) and captured.output_count == 1 \
                and not captured.constant_outputs and self._out_spec is not None \
                and self._out_spec.is_leaf():
            self._single_output = self._slot[single[0]]
        self._values: list[Any] = [None] * len(self._slot)
        self._pointers: list[int] = [0] * len(self._slot)
        for slot, value in constants:
            self._values[slot] = value
            if isinstance(value, torch.Tensor) and value.is_cpu:
                self._pointers[slot] = value.data_ptr()
        self._local = threading.local()

    @classmethod
    def prepare(cls, plan: Any, model: torch.nn.Module,
                state: dict[str, torch.Tensor]) -> PreparedPlan | None:
        """The fast path of ``plan``, or ``None`` when a segment is not a native
        CPU executable, writes one of its inputs, or the state cannot be read
        back by name."""
        for segment in plan.segments:
            executable = segment.executable
            if not hasattr(executable, "call_words"):
                return None
            inputs = {p.name for p in executable.function.params[:len(segment.inputs)]}
            if inputs & executable.binder.written:
                return None
        try:
            return cls(plan, model, state)
        except (ValueError, ArgumentError, KeyError, RuntimeError):
            return None

    def _segment(self, segment: Any, trusted: set[torch.fx.Node]) -> _Segment:
        executable = segment.executable
        shapes: list[tuple[int, ...]] = []
        metas = []
        for node in list(segment.inputs) + list(segment.outputs):
            meta = node_meta(node)
            metas.append(meta)
            shapes.append(tuple(int(s) for s in meta.shape))
        template = executable.binder.prepare(shapes)
        words = [k for k, word in enumerate(template) if word is None]
        if len(words) != len(shapes):
            raise ValueError("segment parameters are not all buffers")
        direct: list[tuple[int, int]] = []
        special = []
        for k, node in enumerate(segment.inputs):
            meta = metas[k]
            bf16 = meta.dtype == torch.bfloat16
            check = node not in trusted
            if check or bf16:
                special.append((words[k], self._slot[node], check, bf16,
                                (meta.shape, meta.dtype), node.name))
            else:
                direct.append((words[k], self._slot[node]))
        outputs = []
        first = len(segment.inputs)
        for k, node in enumerate(segment.outputs):
            meta = metas[first + k]
            self._slot[node] = len(self._slot)
            trusted.add(node)
            bf16 = meta.dtype == torch.bfloat16
            held = torch.float32 if bf16 else meta.dtype
            shape = shapes[first + k]
            outputs.append((words[first + k], self._slot[node],
                            _allocation_template(shape, held), shape, held, bf16))
        return _Segment(executable, direct, special, outputs, template)

    def _words(self) -> list[Any]:
        words = getattr(self._local, "words", None)
        if words is None:
            words = []
            for step in self._steps:
                if isinstance(step, _Segment):
                    array = (step.executable._words)()
                    for index, word in enumerate(step.template):
                        if word is not None:
                            array[index] = word
                    words.append(array)
                else:
                    words.append(None)
            self._local.words = words
        return words

    def call(self, args: Sequence[torch.Tensor]) -> Any:
        """Run the plan on ``args`` (tensors of the shapes and dtypes the plan
        was built for); :data:`MISS` when the state no longer fits it."""
        values = self._values.copy()
        pointers = self._pointers.copy()
        slot = 0
        for arg in args:
            if not arg.is_cpu:
                return MISS
            if not arg.is_contiguous():
                arg = arg.contiguous()
            values[slot] = arg
            pointers[slot] = arg.data_ptr()
            slot += 1
        model = self.model
        for path, members in self._state:
            module: Any = model
            for part in path:
                module = module._modules.get(part)
                if module is None:
                    return MISS
            parameters, buffers = module._parameters, module._buffers
            for attr, in_parameters, index, shape, dtype in members:
                tensor = parameters.get(attr) if in_parameters else buffers.get(attr)
                if tensor is None or tensor.shape != shape or tensor.dtype is not dtype \
                        or not tensor.is_cpu:
                    return MISS
                if not tensor.is_contiguous():
                    tensor = tensor.contiguous()
                values[index] = tensor
                pointers[index] = tensor.data_ptr()
        words = self._words()
        for step, array in zip(self._steps, words, strict=True):
            if isinstance(step, _Segment):
                _run_segment(step, array, values, pointers)
            else:
                node = step.node
                lookup = self._lookup(values)
                args_ = torch.fx.node.map_arg(node.args, lookup)
                kwargs = torch.fx.node.map_arg(node.kwargs, lookup)
                target: Any = node.target
                with torch.no_grad():
                    values[step.slot] = target(*args_, **kwargs)
        if self._single_output is not None:
            return values[self._single_output]
        results = list(torch.fx.node.map_arg(self._output.args[0], self._lookup(values)))
        leaves = []
        for index in range(self._output_count):
            if index in self._constant_outputs:
                leaves.append(self._constant_outputs[index])
            else:
                leaves.append(results.pop(0))
        return pytree.tree_unflatten(leaves, self._out_spec)

    def _lookup(self, values: list[Any]) -> Any:
        slot = self._slot
        return lambda node: values[slot[node]]


def _run_segment(step: _Segment, words: Any, values: list[Any], pointers: list[int]) -> None:
    for word, slot in step.direct:
        words[word] = pointers[slot]
    keep = []
    for word, slot, check, to_float, expected, name in step.special:
        tensor = values[slot]
        if check:
            tensor = _checked(tensor, expected, name, step.executable)
        if to_float:
            tensor = tensor.float()
        keep.append(tensor)
        words[word] = tensor.data_ptr()
    results = []
    for word, slot, template, shape, held, _ in step.outputs:
        result = torch.empty_like(template) if template is not None \
            else torch.empty(shape, dtype=held)
        words[word] = pointers[slot] = result.data_ptr()
        results.append(result)
    step.executable.call_words(words)
    for (_, slot, _, _, _, bf16), result in zip(step.outputs, results, strict=True):
        values[slot] = result.to(torch.bfloat16) if bf16 else result
    del keep


def _checked(tensor: Any, expected: tuple[torch.Size, torch.dtype], name: str,
             executable: Any) -> torch.Tensor:
    """A tensor an eager step produced, checked against what the segment was
    compiled for, made contiguous."""
    shape, dtype = expected
    where = f"{executable.function.name}(): graph value '{name}'"
    if not isinstance(tensor, torch.Tensor):
        raise ArgumentError(f"{where} is a {type(tensor).__name__}, expected a tensor")
    if tensor.shape != shape or tensor.dtype is not dtype:
        raise ArgumentError(f"{where} has shape {tuple(tensor.shape)} and dtype {tensor.dtype} "
                            f"at run time; the plan was compiled for {tuple(shape)} {dtype}")
    if not tensor.is_cpu:
        raise ArgumentError(f"{where} is on {tensor.device}; polyir runs on CPU tensors")
    tensor = tensor.detach()
    return tensor if tensor.is_contiguous() else tensor.contiguous()


__all__ = ["MISS", "PreparedPlan", "input_signature"]
