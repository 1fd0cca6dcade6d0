"""The lowering table: ATen operator -> rule.

A rule is a plain function ``rule(ctx, node, *args, **kwargs)`` registered for
one or more operators with :func:`register`. It gets the node's arguments in
ATen schema order, with every graph value replaced by its lowered form (a
:class:`~polyir.frontends.aten.context.TensorValue`, or a tuple of them for
multi-output nodes) and every other argument (ints, floats, lists, dtypes)
unchanged. It emits loop nests through ``ctx`` and returns the value(s) of the
node. ``accepts(node)`` may refuse particular argument combinations by
returning the reason as a string (the node then runs in eager, or raises
``UnsupportedOp`` with that reason).

Adding an operator: write the rule in the module of its family and decorate it
with ``@register(torch.ops.aten.NAME.OVERLOAD, ...)`` (an overload packet such
as ``torch.ops.aten.add`` covers every overload).
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

Accepts = Callable[[torch.fx.Node], "str | None"]


@dataclass(frozen=True)
class Rule:
    """One lowering rule and its optional argument check."""

    name: str
    lower: Callable[..., Any]
    accepts: Accepts | None = None


LOWERINGS: dict[Any, Rule] = {}


def register(*ops: Any, accepts: Accepts | None = None) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorator: make the function the lowering rule of every operator in ``ops``."""
    def decorate(fn: Callable[..., Any]) -> Callable[..., Any]:
        for op in ops:
            if op in LOWERINGS:
                raise ValueError(f"operator {op} already has lowering rule {LOWERINGS[op].name}")
            LOWERINGS[op] = Rule(fn.__name__, fn, accepts)
        return fn
    return decorate


def find_rule(target: Any) -> Rule | None:
    """The rule for an fx node target (an ``OpOverload``), or ``None``."""
    rule = LOWERINGS.get(target)
    if rule is None:
        packet = getattr(target, "overloadpacket", None)
        if packet is not None:
            rule = LOWERINGS.get(packet)
    return rule


def op_name(target: Any) -> str:
    """A readable operator name: ``aten.add.Tensor``."""
    if isinstance(target, torch._ops.OpOverload):
        return f"{target.namespace}.{target._schema.name.split('::')[-1]}.{target._overloadname}"
    return getattr(target, "__name__", str(target))
