"""The polyhedral analysis API: what isl knows about a loop nest.

::

    from polyir.polyhedral import scop, dependences, check_parallel, footprints

    print(scop(ir))                     # statements: domains, accesses, schedules
    deps = dependences(ir)              # iterable; str: one line each; a table in a notebook
    for d in deps.filter("flow"): print(d.source, d.sink, d.buffer, d.distance)
    answer = check_parallel(ir, "k")    # Legality: bool(answer), answer.reason, answer.witness
    print(footprints(ir, nest=0, depth=1))

Every function takes IR (a ``Module``: its entry function; or a ``Function``)
and returns a record: ``str`` is a few readable lines, ``repr`` one short
line, ``_repr_markdown_`` a table for notebooks, and collections iterate.

=====================  =====================================================
``scop``               the polyhedral view (:class:`Scop`, iterates statements)
``domains``            statement -> iteration domain (``isl.Set``)
``accesses``           every read and write (:class:`Accesses`)
``schedules``          statement -> original schedule (2d+1 ``isl.Map``)
``instances``          the instances run for fixed sizes, in order
``dependences``        :class:`Dependences` (RAW, WAR, WAW, FLOW)
``check_parallel``     may a loop run in parallel? (:class:`Legality`)
``check_permutable``   may a band be permuted / tiled?
``check_permutation``  one loop order of a band
``check_fusion``       may two top-level nests be fused at a depth?
``check_schedule``     is a schedule (isl map or text) valid?
``check_rewrite``      does a rewritten function keep every dependence?
``apply_schedule``     the code for a (checked) schedule, by isl's code generator
``footprints``         per buffer, the region a nest touches below a depth
``loop_footprints``    the same below one loop
=====================  =====================================================

Slices (the producer instances a consumer needs) come with the fusion work
(issue 12) as ``polyir.polyhedral.slices``; ``polyir.polyhedral.slices``
resolves to that module once it exists and says so until then.
"""
from __future__ import annotations

import importlib
from typing import Any

from polyir.polyhedral.analysis import Analyses
from polyir.polyhedral.api import (
    Accesses,
    accesses,
    apply_schedule,
    dependences,
    domains,
    instances,
    schedules,
    scop,
)
from polyir.polyhedral.dependences import ALL_KINDS, MEMORY_KINDS, Dependence, Dependences
from polyir.polyhedral.extract import Access, NotPolyhedral, Scop, StatementInfo
from polyir.polyhedral.footprint import Footprint, Footprints, footprints, loop_footprints
from polyir.polyhedral.legality import (
    Instance,
    Legality,
    Witness,
    check_fusion,
    check_parallel,
    check_permutable,
    check_permutation,
    check_rewrite,
    check_schedule,
)

__all__ = [
    "scop", "domains", "accesses", "schedules", "instances", "dependences",
    "check_parallel", "check_permutable", "check_permutation", "check_fusion",
    "check_schedule", "check_rewrite", "apply_schedule", "footprints", "loop_footprints",
    "Scop", "StatementInfo", "Access", "Accesses", "Dependence", "Dependences",
    "Legality", "Witness", "Instance", "Footprint", "Footprints", "Analyses",
    "NotPolyhedral", "ALL_KINDS", "MEMORY_KINDS",
]

COMING = {
    "slices": ("polyir.polyhedral.slices", "exact producer slices come with the fusion work (issue 12)"),
}
"""Names of the analysis API that other work adds: name -> (module, what it is)."""


def __getattr__(name: str) -> Any:
    """The hook for :data:`COMING` names: their module once it exists."""
    if name in COMING:
        module, what = COMING[name]
        try:
            return importlib.import_module(module)
        except ModuleNotFoundError as error:
            if error.name != module:
                raise
            raise AttributeError(f"polyir.polyhedral.{name} is not there yet: {what}") from None
    raise AttributeError(f"module 'polyir.polyhedral' has no attribute {name!r}")
