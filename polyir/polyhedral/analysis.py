"""The analysis cache shared by the passes of one compilation.

``Analyses`` computes the polyhedral view of a function (:class:`Scop`), its
dependences and its footprints at most once per function *object* (IR nodes
are immutable, so an object never changes; a pass that returns a new function
gets a new entry) and keeps every isl object on one ``isl.Context`` of its
own, so that compilations never share or mutate islpy's process-wide context
(the scheduler's operation limit, for instance, is set on this context only).

``Analyses.computed`` counts the computations per kind (``"scop"``,
``"dependences"``, ``"footprints"``): a test can check that a pipeline
analyses each function once.

Failures are cached too: a function the polyhedral layer cannot model raises
the same ``NotPolyhedral`` on every request.

The dependence analysis is bounded: it may spend at most ``max_operations``
isl operations (default :data:`DEPENDENCE_OPERATIONS`) on the context; past
that it raises :class:`AnalysisLimit`, a ``NotPolyhedral``, so the passes keep
the function as it is with a remark instead of running for minutes.
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import islpy as isl

from polyir.ir.nodes import Function
from polyir.polyhedral.dependences import Dependences, compute_dependences
from polyir.polyhedral.extract import NotPolyhedral, Scop, extract

DEPENDENCE_OPERATIONS = 20_000_000
"""isl operations the dependence analysis of one function may spend (a few
seconds; the classic kernels and the corpus need far less)."""


class AnalysisLimit(NotPolyhedral):
    """The dependence analysis of a function ran past its isl operation limit."""


@dataclass
class _Entry:
    function: Function          # kept alive, so its id() is not reused
    results: dict[Any, Any] = field(default_factory=dict)


class Analyses:
    """Cached polyhedral analyses on one isl context (see the module docstring).

    ``isl_context``: the context to use (default: a new one).
    ``max_operations``: isl's operation bound for one function's dependence
    analysis on this context (0: none).
    """

    def __init__(self, isl_context: isl.Context | None = None,
                 max_operations: int = DEPENDENCE_OPERATIONS):
        self.isl = isl.Context() if isl_context is None else isl_context
        self.max_operations = max_operations
        self.computed: Counter[str] = Counter()
        self._entries: dict[int, _Entry] = {}

    def __repr__(self) -> str:
        counts = ", ".join(f"{k}={v}" for k, v in sorted(self.computed.items())) or "nothing yet"
        return f"<Analyses of {len(self._entries)} function(s): computed {counts}>"

    def _entry(self, function: Function) -> _Entry:
        entry = self._entries.get(id(function))
        if entry is None or entry.function is not function:
            entry = _Entry(function)
            self._entries[id(function)] = entry
        return entry

    def _cached(self, function: Function, key: Any, compute: Any) -> Any:
        entry = self._entry(function)
        if key not in entry.results:
            kind = key if isinstance(key, str) else key[0]
            self.computed[kind] += 1
            try:
                entry.results[key] = (True, compute())
            except Exception as error:  # cached refusals (NotPolyhedral) re-raise every time
                entry.results[key] = (False, error)
        ok, value = entry.results[key]
        if not ok:
            raise value
        return value

    def scop(self, function: Function) -> Scop:
        """The :class:`Scop` of ``function`` (raises ``NotPolyhedral`` when it has none)."""
        return self._cached(function, "scop", lambda: extract(function, self.isl))

    def dependences(self, function: Function) -> Dependences:
        """Every dependence of ``function`` (``polyir.polyhedral.dependences``)."""
        return self._cached(function, "dependences",
                            lambda: self._bounded_dependences(function))

    def _bounded_dependences(self, function: Function) -> Dependences:
        scop = self.scop(function)
        with self.bounded(f"function '{function.name}': its dependence analysis"):
            return compute_dependences(scop)

    @contextmanager
    def bounded(self, what: str, max_operations: int | None = None) -> Iterator[None]:
        """Run the block with at most ``max_operations`` isl operations on this
        context (default: ``self.max_operations``; 0: no bound); an isl error
        inside (isl reports a spent quota as the failure of the call it stops)
        becomes :class:`AnalysisLimit`, its message starting with ``what``.
        Blocks do not nest: the inner one resets the count."""
        limit = self.max_operations if max_operations is None else max_operations
        if limit <= 0:
            yield
            return
        self.isl.reset_operations()
        self.isl.set_max_operations(limit)
        try:
            yield
        except isl.Error as error:
            raise AnalysisLimit(f"{what} needs more than {limit} isl operations ({error})") from None
        finally:
            self.isl.set_max_operations(0)
            self.isl.reset_operations()

    def footprints(self, function: Function, nest: int, depth: int = 0) -> Any:
        """``polyir.polyhedral.footprint.footprints`` of top-level node ``nest`` below ``depth`` loops."""
        from polyir.polyhedral.footprint import footprints
        return self._cached(function, ("footprints", nest, depth),
                            lambda: footprints(self.scop(function), nest, depth))

    def has(self, function: Function, kind: str) -> bool:
        """Whether ``kind`` (``"scop"``, ``"dependences"``) is already known for ``function``."""
        entry = self._entries.get(id(function))
        return entry is not None and entry.function is function and kind in entry.results

    def forget(self, function: Function) -> None:
        """Drop what is cached for ``function``."""
        entry = self._entries.get(id(function))
        if entry is not None and entry.function is function:
            del self._entries[id(function)]


__all__ = ["DEPENDENCE_OPERATIONS", "Analyses", "AnalysisLimit"]
