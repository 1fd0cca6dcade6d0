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

from typing import Any

import torch

from polyir.frontends.lowering.registry import Rule, registrar

__all__ = ["LOWERINGS", "Rule", "find_rule", "op_name", "register"]

LOWERINGS: dict[Any, Rule] = {}

register = registrar(LOWERINGS)
"""Decorator: make the function the lowering rule of every operator given."""


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
