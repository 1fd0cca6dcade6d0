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
class _StateSlot:
    """Where a state tensor lives: ``root._modules[p0]._modules[p1]...`` then
    ``._parameters[name]`` or ``._buffers[name]``."""

    name: str
    path: tuple[str, ...]
    attr: str
    shape: torch.Size
    dtype: torch.dtype

    def fetch(self, root: torch.nn.Module) -> Any:
        module: Any = root
        for part in self.path:
            module = module._modules.get(part)
            if module is None:
                return None
        found = module._parameters.get(self.attr)
        if found is None:
            found = module._buffers.get(self.attr)
        return found


def _state_slot(root: torch.nn.Module, name: str, tensor: torch.Tensor) -> _StateSlot | None:
    *path, attr = name.split(".")
    slot = _StateSlot(name, tuple(path), attr, tensor.shape, tensor.dtype)
    return slot if slot.fetch(root) is tensor else None


@dataclass
class _Segment:
    executable: Any
    inputs: list[tuple[int, bool, bool, str]]      # (slot, check, bf16 -> f32, graph name)
    expected: list[tuple[torch.Size, torch.dtype]]
    outputs: list[tuple[int, tuple[int, ...], torch.dtype, bool]]  # slot, shape, held, bf16
    template: list[int | None]
    buffer_words: list[int]                        # word index of parameter k


@dataclass
class _Eager:
    node: torch.fx.Node
    slot: int


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
        self._inputs = placeholders[:captured.input_count]
        self.state_slots: list[_StateSlot] = []
        for name in captured.state_names:
            slot = _state_slot(model, name, state[name])
            if slot is None:
                raise ValueError(f"state '{name}' is not a parameter or buffer of the model")
            self.state_slots.append(slot)
        self._constants: list[tuple[int, Any]] = []
        for node in graph.nodes:
            if node.op == "get_attr":
                self._slot[node] = len(self._slot)
                self._constants.append((self._slot[node], plan._constants[node]))
        produced_by_segment: set[torch.fx.Node] = set()
        self._steps: list[_Segment | _Eager] = []
        for step in plan.steps:
            if hasattr(step, "executable"):
                self._steps.append(self._segment(step, produced_by_segment, captured))
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
        self._size = len(self._slot)
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
        except (ValueError, ArgumentError, KeyError):
            return None

    def _segment(self, segment: Any, produced: set[torch.fx.Node], captured: Any) -> _Segment:
        executable = segment.executable
        placeholders = {n for n in captured.gm.graph.nodes if n.op in ("placeholder", "get_attr")}
        inputs = []
        expected = []
        shapes: list[tuple[int, ...]] = []
        for node in segment.inputs:
            meta = node_meta(node)
            check = node not in produced and node not in placeholders
            inputs.append((self._slot[node], check, meta.dtype == torch.bfloat16, node.name))
            expected.append((meta.shape, meta.dtype))
            shapes.append(tuple(int(s) for s in meta.shape))
        outputs = []
        for node in segment.outputs:
            meta = node_meta(node)
            self._slot[node] = len(self._slot)
            produced.add(node)
            bf16 = meta.dtype == torch.bfloat16
            shape = tuple(int(s) for s in meta.shape)
            outputs.append((self._slot[node], shape, torch.float32 if bf16 else meta.dtype, bf16))
            shapes.append(shape)
        template = executable.binder.prepare(shapes)
        buffer_words = [k for k, word in enumerate(template) if word is None]
        if len(buffer_words) != len(shapes):
            raise ValueError("segment parameters are not all buffers")
        return _Segment(executable, inputs, expected, outputs, template, buffer_words)

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
        values: list[Any] = [None] * self._size
        position = 0
        for arg in args:
            if not arg.is_cpu:
                return MISS
            values[position] = arg if arg.is_contiguous() else arg.contiguous()
            position += 1
        model = self.model
        for slot in self.state_slots:
            tensor = slot.fetch(model)
            if tensor is None or tensor.shape != slot.shape or tensor.dtype is not slot.dtype \
                    or not tensor.is_cpu:
                return MISS
            values[position] = tensor if tensor.is_contiguous() else tensor.contiguous()
            position += 1
        for slot_index, constant in self._constants:
            values[slot_index] = constant
        words = self._words()
        for step, array in zip(self._steps, words, strict=True):
            if isinstance(step, _Segment):
                self._run_segment(step, array, values)
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

    @staticmethod
    def _run_segment(step: _Segment, words: Any, values: list[Any]) -> None:
        buffer_words = step.buffer_words
        keep = []
        for k, (slot, check, to_float, name) in enumerate(step.inputs):
            tensor = values[slot]
            if check:
                tensor = _checked(tensor, step.expected[k], name, step.executable)
            if to_float:
                tensor = tensor.float()
                keep.append(tensor)
            words[buffer_words[k]] = tensor.data_ptr()
        first = len(step.inputs)
        results = []
        for k, (slot, shape, held, _) in enumerate(step.outputs):
            result = torch.empty(shape, dtype=held)
            words[buffer_words[first + k]] = result.data_ptr()
            results.append(result)
        step.executable.call_words(words)
        for (slot, _, _, bf16), result in zip(step.outputs, results, strict=True):
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
