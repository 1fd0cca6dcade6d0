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
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import islpy as isl

from polyir.ir.nodes import Function
from polyir.polyhedral.dependences import Dependences, compute_dependences
from polyir.polyhedral.extract import Scop, extract


@dataclass
class _Entry:
    function: Function          # kept alive, so its id() is not reused
    results: dict[Any, Any] = field(default_factory=dict)


class Analyses:
    """Cached polyhedral analyses on one isl context (see the module docstring).

    ``isl_context``: the context to use (default: a new one).
    ``max_operations``: isl's operation bound for this context's long
    computations (0: none); see ``polyir.polyhedral.schedule``.
    """

    def __init__(self, isl_context: isl.Context | None = None, max_operations: int = 0):
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
                            lambda: compute_dependences(self.scop(function)))

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


__all__ = ["Analyses"]
