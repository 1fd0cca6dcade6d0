"""Dynamic shapes for ``polyir.compile(..., dynamic=True)``: symbolic capture, sizes, guards.

Which dimensions are dynamic: every dimension of a tensor *input* (not of a
parameter or buffer) whose size in the example inputs differs from 1. A size
of 1 stays static (it broadcasts, so code for it differs), and so do the
sizes of the model's state. A dimension torch proves equal to a constant
while tracing (say the feature size, through a weight's shape) becomes that
constant.

:func:`trace_symbolic` traces the model as ``capture`` does (core ATen
decompositions, functionalised), on fake tensors whose dynamic dimensions are
size symbols of one ``ShapeEnv``; node shapes then hold ``torch.SymInt``
values, which the lowering turns into symbolic extents
(``polyir.frontends.aten.symbolic``). Every decision the capture or the
lowering takes on a symbolic size (``size == 1``? ``a < b``?) is recorded by the
ShapeEnv as a guard, and so is each size's range (at least 2). A plan compiled
this way serves any sizes for which :class:`Guards` holds; when a guard
fails (a size of 1 where the plan assumed more, or a relation between sizes
the lowering relied on), the model is compiled again for the new sizes.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import sympy
import torch
import torch.utils._pytree as pytree

from polyir.frontends.aten.symbolic import SymbolTable, compile_sizes


def dynamic_dims(tensor: torch.Tensor) -> list[bool]:
    """Which dimensions of an input are dynamic: those whose size is not 1."""
    return [size != 1 for size in tensor.shape]


@dataclass
class DynamicShapes:
    """What a symbolic capture knows about sizes.

    ``bindings``: each size symbol's name -> (tensor input position, dimension)
    it is read from; ``fake_inputs``: the inputs' fake tensors (for the guards);
    ``table``: the :class:`SymbolTable` shared by every segment's lowering."""

    shape_env: Any
    fake_inputs: list[Any]
    bindings: dict[str, tuple[int, int]]
    table: SymbolTable
    guards: Guards | None = None
    _shapes: dict[torch.fx.Node, Callable[[dict[str, int]], list[int]]] = \
        field(default_factory=dict)

    def sizes(self, tensors: Sequence[torch.Tensor]) -> dict[str, int]:
        """The size symbols' values for a call's tensor inputs."""
        return {name: int(tensors[position].shape[dim])
                for name, (position, dim) in self.bindings.items()}

    def node_shape(self, node: torch.fx.Node, sizes: dict[str, int]) -> tuple[int, ...]:
        """The concrete shape of ``node``'s (tensor) value for ``sizes``."""
        evaluate = self._shapes.get(node)
        if evaluate is None:
            evaluate = compile_sizes([self.table.expr(s) for s in node.meta["val"].shape])
            self._shapes[node] = evaluate
        return tuple(evaluate(sizes))

    def node_value(self, node: torch.fx.Node, sizes: dict[str, int]) -> Any:
        """The value of a size node (an int, or a tuple/list of ints) for ``sizes``."""
        meta = node.meta["val"]
        evaluate = self._shapes.get(node)
        if evaluate is None:
            items = list(meta) if isinstance(meta, (tuple, list)) else [meta]
            evaluate = compile_sizes([self.table.expr(v) for v in items])
            self._shapes[node] = evaluate
        values = evaluate(sizes)
        return type(meta)(values) if isinstance(meta, (tuple, list)) else values[0]

    def finish(self) -> None:
        """Freeze the guards (after lowering: the lowering adds guards too)."""
        self.guards = Guards(self.shape_env, self.fake_inputs)

    def specialised(self) -> list[str]:
        """Size symbols that guards pinned to a constant (``s27 = 16``)."""
        found = []
        for name in self.bindings:
            value = self.table.expr_of_name(name)
            if value is not None and value.is_Integer:
                found.append(f"{name} = {int(value)}")
        return found


class Guards:
    """The ShapeEnv's guards on the inputs, compiled once; ``holds(tensors)``."""

    def __init__(self, shape_env: Any, fake_inputs: Sequence[Any]):
        from torch.fx.experimental.symbolic_shapes import SYMPY_INTERP

        # ignore_static=False: a size pinned to a constant (or static) must be checked too
        code = shape_env.produce_guards_expression(list(fake_inputs), ignore_static=False)
        self.source = code or "True"
        self._code = compile(self.source, "<polyir guards>", "eval")
        self._globals = dict(SYMPY_INTERP)

    def holds(self, tensors: Sequence[torch.Tensor]) -> bool:
        """Whether a plan captured on the fake inputs is valid for ``tensors``'
        sizes (strides and offsets are not the plan's concern: the plan makes
        its inputs contiguous, so the guards see them as contiguous)."""
        names = {f"t{i}": _Contiguous(tuple(t.shape)) for i, t in enumerate(tensors)}
        return bool(eval(self._code, self._globals, {"L": names}))


class _Contiguous:
    """What the guards read of a tensor, for a contiguous one of ``shape``."""

    def __init__(self, shape: tuple[int, ...]):
        self.shape = shape
        strides = []
        stride = 1
        for size in reversed(shape):
            strides.append(stride)
            stride *= max(size, 1)
        self.strides = tuple(reversed(strides))

    def size(self, dim: int | None = None) -> Any:
        return self.shape if dim is None else self.shape[dim]

    def stride(self, dim: int | None = None) -> Any:
        return self.strides if dim is None else self.strides[dim]

    def storage_offset(self) -> int:
        return 0

    def dim(self) -> int:
        return len(self.shape)


def _functionalise(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` under torch's Python functionalisation (which keeps sizes symbolic,
    unlike ``torch.func.functionalize``); inputs it mutates get the new values
    copied back at the end (an in-place ``copy_`` on the placeholder)."""
    from torch._subclasses.functional_tensor import FunctionalTensor, FunctionalTensorMode

    def from_functional(t: Any) -> Any:
        if not isinstance(t, FunctionalTensor):
            return t
        torch._sync(t)
        return torch._from_functional_tensor(t.elem)

    def inner(*args: Any) -> Any:
        exclude = torch._C._ExcludeDispatchKeyGuard(
            torch._C.DispatchKeySet(torch._C.DispatchKey.Functionalize))
        with exclude, FunctionalTensorMode():
            wrapped = [FunctionalTensor.to_functional(a) if isinstance(a, torch.Tensor) else a
                       for a in args]
            outputs = fn(*wrapped)
            outputs = pytree.tree_map_only(FunctionalTensor, from_functional, outputs)
            updates = []
            for original, functional in zip(args, wrapped, strict=True):
                if isinstance(functional, FunctionalTensor):
                    torch._sync(functional)
                    if torch._functionalize_has_data_mutation(functional.elem):  # type: ignore[attr-defined]
                        updates.append((original, from_functional(functional)))
        for original, value in updates:
            original.copy_(value)
        return outputs
    return inner


def trace_symbolic(traced: Callable[..., Any], inputs: Sequence[torch.Tensor], input_count: int,
                   decompositions: dict[Any, Any],
                   dims: Sequence[Sequence[bool]] | None = None
                   ) -> tuple[torch.fx.GraphModule, DynamicShapes]:
    """Trace ``traced(*inputs)`` with the first ``input_count`` inputs' dynamic
    dimensions symbolic (:func:`dynamic_dims`, or the flags ``dims`` gives per
    input); returns the graph and its :class:`DynamicShapes`."""
    from torch._dynamo.source import LocalSource
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.proxy_tensor import make_fx
    from torch.fx.experimental.symbolic_shapes import (
        DimDynamic,
        ShapeEnv,
        StatelessSymbolicContext,
    )

    shape_env = ShapeEnv(duck_shape=False)  # equal sizes in the example stay distinct symbols
    mode = FakeTensorMode(shape_env=shape_env, allow_non_fake_inputs=True)
    fakes = []
    for position, tensor in enumerate(inputs):
        if position >= input_count:
            dynamic = [False] * tensor.dim()
        elif dims is not None:
            dynamic = [bool(flag) and size != 1 for flag, size in zip(dims[position], tensor.shape,
                                                                      strict=True)]
        else:
            dynamic = dynamic_dims(tensor)
        context: Any = StatelessSymbolicContext(
            dynamic_sizes=[DimDynamic.DYNAMIC if d else DimDynamic.STATIC for d in dynamic])
        fakes.append(mode.from_tensor(tensor.contiguous(), source=LocalSource(f"input{position}"),
                                      symbolic_context=context))
    # outside any dynamo tracing context: make_fx would otherwise adopt dynamo's
    # fake mode (and its symbols) instead of ours
    with torch._guards.tracing(None):
        gm = make_fx(_functionalise(traced), decomposition_table=decompositions,
                     tracing_mode="fake")(*fakes)
    table = SymbolTable(shape_env)
    bindings: dict[str, tuple[int, int]] = {}
    for position, fake in enumerate(fakes[:input_count]):
        for dim, size in enumerate(fake.shape):
            if isinstance(size, torch.SymInt):
                expr = size.node.expr
                if isinstance(expr, sympy.Symbol) and str(expr) not in bindings:
                    bindings[str(expr)] = (position, dim)
    return gm, DynamicShapes(shape_env, fakes[:input_count], bindings, table)
