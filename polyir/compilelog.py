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
import logging
import time
from collections.abc import Iterator

LOG = logging.getLogger("polyir")
PROGRESS_AFTER_SECONDS = 2.0
PROGRESS_EVERY_SECONDS = 2.0


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
