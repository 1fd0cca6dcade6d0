"""Calls and builds of one compiled model, kept apart across threads.

Capturing a model (``torch.func.functional_call`` under ``make_fx``) swaps the
live module's parameters and buffers for tracing tensors while it runs, so a
call reading the model's state at that moment would hand a fake tensor's
address to native code. :class:`CallGate` is a readers-writer gate: any number
of calls run together; a build waits for the calls in flight, and calls that
arrive during a build wait for it to end. A build is never started from
inside a call (the caller leaves the gate first), so the gate cannot deadlock.
"""
from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager


class CallGate:
    """Many calls, or one build (see the module docstring)."""

    def __init__(self) -> None:
        self._condition = threading.Condition()
        self._calls = 0
        self._building = False

    @contextmanager
    def calling(self) -> Iterator[None]:
        """Hold the gate for a call: waits while a build runs."""
        with self._condition:
            while self._building:
                self._condition.wait()
            self._calls += 1
        try:
            yield
        finally:
            with self._condition:
                self._calls -= 1
                if self._calls == 0:
                    self._condition.notify_all()

    @contextmanager
    def building(self) -> Iterator[None]:
        """Hold the gate alone for a build: waits for the calls in flight and
        any other build."""
        with self._condition:
            while self._building or self._calls:
                self._condition.wait()
            self._building = True
        try:
            yield
        finally:
            with self._condition:
                self._building = False
                self._condition.notify_all()


__all__ = ["CallGate"]
