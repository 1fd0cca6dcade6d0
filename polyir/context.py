"""What every pass receives besides the module: :class:`PassContext`.

* ``ctx.target``: the :class:`~polyir.target.Target` the pipeline compiles for
  (the one source of hardware facts; passes never read global flags);
* ``ctx.analyses``: the polyhedral analyses of the functions seen so far
  (:class:`polyir.polyhedral.analysis.Analyses`), computed at most once per
  function object and shared by the passes of one pipeline, on the
  compilation's own ``isl.Context``;
* ``ctx.remark(pass_name, where, why)``: the channel through which a pass says
  what it did not do and why (a refusal, a skipped function, a cost decision).
  Remarks are kept in ``ctx.remarks`` and logged on the ``polyir`` logger
  (``logging.getLogger("polyir.remarks")`` at DEBUG).

A context lives for one compilation; ``polyir.transform`` makes a fresh one
unless it is given one.
"""
from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from polyir.target import Target, resolve

if TYPE_CHECKING:
    from polyir.polyhedral.analysis import Analyses

LOGGER = logging.getLogger("polyir")
REMARK_LOGGER = logging.getLogger("polyir.remarks")

REMARK_KINDS = ("missed", "applied", "analysis")


@dataclass(frozen=True)
class Remark:
    """One decision a pass reports.

    ``kind`` is ``"missed"`` (the pass did not transform something, ``why``
    says why: a dependence and its witness, a cost, an unsupported construct),
    ``"applied"`` (it did, ``why`` says what) or ``"analysis"`` (a fact).
    ``where`` names the function and, where it applies, the loop (by its
    variable) or statement.
    """

    pass_name: str
    where: str
    why: str
    kind: str = "missed"

    def __str__(self) -> str:
        return f"{self.pass_name}: {self.kind}: {self.where}: {self.why}"


@dataclass
class PassContext:
    """The context of one compilation (see the module docstring).

    ``target`` may be given as a name (``"cpu"``, ``"cuda:sm_80"``) or ``None``
    (the host CPU). ``timings`` collects seconds per pass, in order.
    """

    target: Target = field(default_factory=lambda: resolve(None))
    analyses: Analyses = field(default=None)  # type: ignore[assignment]
    remarks: list[Remark] = field(default_factory=list)
    timings: list[tuple[str, float]] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not isinstance(self.target, Target):
            self.target = resolve(self.target)
        if self.analyses is None:
            from polyir.polyhedral.analysis import Analyses
            self.analyses = Analyses()

    def remark(self, pass_name: str, where: str, why: str, kind: str = "missed") -> Remark:
        """Record (and log) a :class:`Remark`; returns it."""
        if kind not in REMARK_KINDS:
            raise ValueError(f"remark kind must be one of {', '.join(REMARK_KINDS)}, not {kind!r}")
        remark = Remark(pass_name, where, why, kind)
        self.remarks.append(remark)
        REMARK_LOGGER.debug("%s", remark)
        return remark

    def remarks_of(self, pass_name: str | None = None, kind: str | None = None) -> list[Remark]:
        """The remarks of one pass and/or kind (all by default), in order."""
        return [r for r in self.remarks
                if (pass_name is None or r.pass_name == pass_name) and (kind is None or r.kind == kind)]

    @contextmanager
    def timed(self, stage: str) -> Iterator[None]:
        """Time a stage: appended to ``timings`` and logged at DEBUG."""
        start = time.perf_counter()
        try:
            yield
        finally:
            elapsed = time.perf_counter() - start
            self.timings.append((stage, elapsed))
            LOGGER.debug("%s took %.3f s", stage, elapsed)


def make_context(target: Target | str | None = None, ctx: PassContext | None = None,
                 **extra: Any) -> PassContext:
    """``ctx`` when given (its target must agree with ``target`` when both are
    given), else a fresh context for ``target``."""
    if ctx is None:
        return PassContext(resolve(target), **extra)
    if target is not None and resolve(target) != ctx.target:
        raise ValueError(f"target {resolve(target).name} differs from the context's {ctx.target.name}")
    return ctx


__all__ = ["PassContext", "Remark", "REMARK_KINDS", "make_context", "LOGGER"]
