"""What a compile is doing and how long each stage takes, on the ``polyir`` logger.

At ``INFO`` each compile logs one line per stage (capture, lowering, passes,
LLVM optimisation, code generation, loading) with its time, and a compile
that runs for more than :data:`PROGRESS_AFTER_SECONDS` logs its progress
("kernel 12/40") every :data:`PROGRESS_EVERY_SECONDS`. At ``DEBUG`` every
stage of every kernel and every pass is timed too. Turn it on with::

    import logging
    logging.basicConfig(level=logging.INFO)   # or logging.getLogger("polyir").setLevel(...)

Nothing here changes what is compiled.
"""
from __future__ import annotations

import contextlib
import gc
import logging
import threading
import time
from collections.abc import Iterator

LOG = logging.getLogger("polyir")
PROGRESS_AFTER_SECONDS = 2.0
PROGRESS_EVERY_SECONDS = 2.0


COLLECT_EVERY = 50_000
"""Allocations (net, of container objects) between runs of Python's youngest
garbage collection during a compile, :func:`fewer_collections` (Python's
default: 700)."""

_COLLECTIONS = threading.Lock()
_RAISED: list[tuple[int, int, int]] = []   # the thresholds to restore, while a compile runs
_OPEN = [0]                                # compiles running (several threads may compile)


@contextlib.contextmanager
def fewer_collections() -> Iterator[None]:
    """Python's cyclic garbage collector runs less often while the block runs.

    A compile allocates millions of small objects (IR nodes, affine
    expressions, isl wrappers) that live until the pass is done; every 700
    allocations the collector walks the youngest generation, and every few
    hundred walks the older ones, which hold the whole model's IR: 5% of a
    ResNet-18 compile. The youngest generation's threshold is raised to
    :data:`COLLECT_EVERY` for the duration (the first compile to start saves
    the thresholds, the last to finish restores them); nothing is disabled, and
    where the collector is off it stays off."""
    with _COLLECTIONS:
        if _OPEN[0] == 0:
            current = gc.get_threshold()
            _RAISED[:] = [current]
            if 0 < current[0] < COLLECT_EVERY:
                gc.set_threshold(COLLECT_EVERY, *current[1:])
        _OPEN[0] += 1
    try:
        yield
    finally:
        with _COLLECTIONS:
            _OPEN[0] -= 1
            if _OPEN[0] == 0 and _RAISED:
                gc.set_threshold(*_RAISED.pop())


def logger(name: str) -> logging.Logger:
    """The ``polyir.<name>`` logger (a child of ``polyir``)."""
    return LOG.getChild(name)


class StageTimes:
    """Seconds per stage of one compile, summed over repeats (``stage`` blocks)."""

    def __init__(self, log: logging.Logger, what: str):
        self.log = log
        self.what = what
        self.seconds: dict[str, float] = {}
        self.start = time.perf_counter()

    @contextlib.contextmanager
    def stage(self, name: str, detail: str = "", level: int = logging.DEBUG) -> Iterator[None]:
        """Time the block as stage ``name``; logs it at ``level`` (DEBUG by default)."""
        begin = time.perf_counter()
        try:
            yield
        finally:
            elapsed = time.perf_counter() - begin
            self.seconds[name] = self.seconds.get(name, 0.0) + elapsed
            if self.log.isEnabledFor(level):
                suffix = f" ({detail})" if detail else ""
                self.log.log(level, "%s: %s %.3f s%s", self.what, name, elapsed, suffix)

    def elapsed(self) -> float:
        return time.perf_counter() - self.start

    def summary(self) -> str:
        """``optimise 1.20 s, codegen 0.40 s, ...`` in the order stages first ran."""
        return ", ".join(f"{name} {seconds:.2f} s" for name, seconds in self.seconds.items())


class Progress:
    """Logs ``<what>: <noun> i/n`` at INFO once a job has run for
    :data:`PROGRESS_AFTER_SECONDS`, then at most every :data:`PROGRESS_EVERY_SECONDS`."""

    def __init__(self, log: logging.Logger, what: str, noun: str, total: int):
        self.log = log
        self.what = what
        self.noun = noun
        self.total = total
        self.start = time.perf_counter()
        self.last = self.start

    def step(self, done: int) -> None:
        now = time.perf_counter()
        if now - self.start < PROGRESS_AFTER_SECONDS or now - self.last < PROGRESS_EVERY_SECONDS:
            return
        self.last = now
        self.log.info("%s: %s %d/%d (%.1f s)", self.what, self.noun, done, self.total,
                      now - self.start)
