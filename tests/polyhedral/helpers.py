"""Shared helpers for the polyhedral tests."""
from __future__ import annotations

from polyir.ir.nodes import Function, Module
from polyir.ir.parser import parse
from polyir.polyhedral.bruteforce import Event, trace
from tests.polyhedral.kernels import KERNELS


def kernel(name: str) -> Function:
    """A classic kernel of ``tests/polyhedral/kernels.py`` as a Function."""
    return parse(KERNELS[name]).entry


def function_of(text: str) -> Function:
    return parse(text).entry


def module_of(function: Function) -> Module:
    return Module((function,))


def access_history(events: list[Event]) -> dict:
    """Per element: the writes in order, with the reads between two writes as a
    sorted group. Two programs whose statements compute the same values
    from the same elements have equal histories exactly when every read sees
    the same write (instances are named by statement and accessed elements)."""
    history: dict = {}
    for ev in events:
        signature = (ev.instance[0], ev.reads, ev.writes)
        for buffer, element, _ in ev.reads:
            entries = history.setdefault((buffer, element), [])
            if entries and isinstance(entries[-1], list):
                entries[-1].append(signature)
            else:
                entries.append([signature])
        for buffer, element, _ in ev.writes:
            history.setdefault((buffer, element), []).append(signature)
    return {k: [sorted(x) if isinstance(x, list) else x for x in v] for k, v in history.items()}


def same_history(a: Function, b: Function, params: dict[str, int]) -> bool:
    return access_history(trace(a, params)) == access_history(trace(b, params))
