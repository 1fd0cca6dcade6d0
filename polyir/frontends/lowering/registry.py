"""Lowering tables: an operator key -> :class:`Rule`, and what a lowered
segment is. The ATen table keys rules by ``OpOverload`` (or overload packet),
the jaxpr table by primitive name; both are filled with the decorator that
:func:`registrar` makes for their table.
"""
from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from polyir.ir.nodes import For, Module

Accepts = Callable[[Any], "str | None"]


@dataclass(frozen=True)
class Rule:
    """One lowering rule and its optional argument check: ``accepts(node)``
    returns the reason it refuses that node, or ``None``."""

    name: str
    lower: Callable[..., Any]
    accepts: Accepts | None = None


Register = Callable[..., Callable[[Callable[..., Any]], Callable[..., Any]]]


def registrar(table: dict[Any, Rule]) -> Register:
    """The ``@register(*keys, accepts=None)`` decorator of ``table``: it makes
    the decorated function the rule of every key (a key registered twice is an
    error)."""
    def register(*keys: Hashable, accepts: Accepts | None = None) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        def decorate(fn: Callable[..., Any]) -> Callable[..., Any]:
            for key in keys:
                if key in table:
                    raise ValueError(f"operator {key} already has lowering rule {table[key].name}")
                table[key] = Rule(fn.__name__, fn, accepts)
            return fn
        return decorate
    return register


@dataclass
class LoweredSegment:
    """A lowered segment: the module, the graph values that went in and out of
    it (the frontend's own node objects), and the operators lowered, counted.
    Lowered with symbolic sizes, ``symbol_params`` names the size symbols the
    caller passes after the buffers, and ``symbols`` is the frontend's size
    table that lowered it (it evaluates them at call time)."""

    module: Module
    inputs: list[Any]
    outputs: list[Any]
    ops: dict[str, int] = field(default_factory=dict)
    symbol_params: list[str] = field(default_factory=list)
    symbols: Any = None

    @property
    def loop_nests(self) -> int:
        return sum(isinstance(node, For) for node in self.module.entry.body)


def summarize(lowered: Sequence[LoweredSegment | None], fallbacks: Iterable[str]) -> dict[str, Any]:
    """What a compiled plan holds: ``ops`` (operators lowered, with counts),
    ``loop_nests``, ``functions`` (polyir functions) and ``fallbacks`` (the
    operators left to the framework, sorted, once each)."""
    ops: dict[str, int] = {}
    nests = 0
    for segment in lowered:
        assert segment is not None
        nests += segment.loop_nests
        for name, count in segment.ops.items():
            ops[name] = ops.get(name, 0) + count
    return {"ops": dict(sorted(ops.items())), "loop_nests": nests, "functions": len(lowered),
            "fallbacks": sorted(set(fallbacks))}
