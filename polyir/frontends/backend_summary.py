"""What ``torch.compile(model, backend="polyir")`` compiled, and what it left to eager.

Each time dynamo calls the backend it hands over one graph; the backend
records it here. :func:`summary` describes every graph recorded since the
process started (or since :func:`reset_summary`): the ATen operators lowered
into loop nests, and each operator that runs in eager with its reason.
``summary().calls == 0`` after the model ran means dynamo never called the
backend, so nothing ran through polyir. The same facts are logged on the
``polyir.dynamo`` logger at ``INFO`` as each graph compiles, and a process
that loaded the backend through ``torch.compile`` but never had it called
logs a warning at exit.
"""
from __future__ import annotations

import atexit
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from polyir.compilelog import logger

LOG = logger("dynamo")


@dataclass(frozen=True)
class Fallback:
    """An operator of a graph that runs in eager: ``op`` (``aten.sort``),
    the graph ``node`` and the ``reason`` it has no lowering."""

    op: str
    node: str
    reason: str


@dataclass(frozen=True)
class GraphSummary:
    """One graph dynamo handed to the backend (``index``: 1-based, in call order).

    ``nodes``: operator calls in dynamo's graph; ``compiled``: whether polyir has
    built a plan for it yet (a graph with dynamic sizes dynamo could not pass on
    compiles at its first call); ``ops``: ATen operators lowered, with counts;
    ``loop_nests``; ``fallbacks``: the operators run in eager;
    ``eager_calls``: calls run wholly in eager because they needed gradients."""

    index: int
    nodes: int
    compiled: bool
    ops: dict[str, int]
    loop_nests: int
    fallbacks: tuple[Fallback, ...]
    eager_calls: int

    def __str__(self) -> str:
        if not self.compiled:
            return f"graph {self.index}: {self.nodes} operator calls, not compiled yet (compiles at its first call)"
        lowered = sum(self.ops.values())
        text = (f"graph {self.index}: {self.nodes} operator calls; {lowered} ATen ops lowered into "
                f"{self.loop_nests} loop nests")
        if self.fallbacks:
            text += f"; {len(self.fallbacks)} run in eager: " + ", ".join(
                f"{f.op} ({f.node}: {f.reason})" for f in self.fallbacks)
        else:
            text += "; none run in eager"
        if self.eager_calls:
            text += f"; {self.eager_calls} calls ran in eager (they needed gradients)"
        return text


@dataclass(frozen=True)
class BackendSummary:
    """Every graph the backend was given: ``calls`` (times dynamo called it) and
    one :class:`GraphSummary` each. ``str()`` is a readable report."""

    calls: int
    graphs: tuple[GraphSummary, ...]

    @property
    def fallbacks(self) -> list[Fallback]:
        """The operators run in eager, over all graphs."""
        return [f for graph in self.graphs for f in graph.fallbacks]

    def __str__(self) -> str:
        if self.calls == 0:
            return ("torch.compile(backend='polyir'): dynamo never called the backend, so nothing ran "
                    "through polyir (has the compiled model been called? dynamo skips functions it "
                    "cannot trace and graphs without tensor operations)")
        lines = [f"torch.compile(backend='polyir'): {self.calls} graph{'' if self.calls == 1 else 's'}"]
        lines += [f"  {graph}" for graph in self.graphs]
        return "\n".join(lines)


@dataclass
class _Record:
    index: int
    nodes: int
    models: Callable[[], Iterable[Any]]  # the graph's CompiledModels (polyir.frontends.fx)
    eager_calls: int = 0

    def summary(self) -> GraphSummary:
        from polyir.frontends.aten import op_name

        plans = {id(p): p for model in self.models() for p in model.plans.values()}
        ops: dict[str, int] = {}
        nests = 0
        fallbacks: dict[tuple[str, str], Fallback] = {}
        for plan in plans.values():
            for segment in plan.segments:
                if segment.lowered is not None:
                    nests += segment.lowered.loop_nests
                    for name, count in segment.lowered.ops.items():
                        ops[name] = ops.get(name, 0) + count
            for step in plan.fallbacks:
                fallback = Fallback(op_name(step.node.target), step.node.name, step.reason)
                fallbacks.setdefault((fallback.op, fallback.node), fallback)
        return GraphSummary(self.index, self.nodes, bool(plans), dict(sorted(ops.items())), nests,
                            tuple(fallbacks.values()), self.eager_calls)


@dataclass
class _State:
    records: list[_Record] = field(default_factory=list)
    looked_up: bool = False


_STATE = _State()


def record_graph(nodes: int, models: Callable[[], Iterable[Any]]) -> _Record:
    """Note one backend call: a graph of ``nodes`` operator calls compiled into
    the CompiledModels ``models()`` returns (now or later); logs its summary."""
    record = _Record(len(_STATE.records) + 1, nodes, models)
    _STATE.records.append(record)
    LOG.info("%s", record.summary())
    return record


def counting_eager(record: _Record, eager: Callable[..., Any]) -> Callable[..., Any]:
    """``eager`` counting its calls in ``record`` (the calls that needed gradients)."""
    def call(*args: Any) -> Any:
        record.eager_calls += 1
        return eager(*args)
    return call


def summary() -> BackendSummary:
    """What the backend compiled since the process started (or :func:`reset_summary`)."""
    return BackendSummary(len(_STATE.records), tuple(r.summary() for r in _STATE.records))


def reset_summary() -> None:
    """Forget the graphs recorded so far (e.g. after ``torch._dynamo.reset()``)."""
    _STATE.records.clear()


def note_lookup() -> None:
    """dynamo looked the backend up by name (``torch.compile(..., backend="polyir")``):
    at exit, warn if it was never called."""
    if not _STATE.looked_up:
        _STATE.looked_up = True
        atexit.register(_warn_if_never_called)


def _warn_if_never_called() -> None:
    if not _STATE.records:
        LOG.warning("%s", summary())


__all__ = ["BackendSummary", "GraphSummary", "Fallback", "summary", "reset_summary"]
