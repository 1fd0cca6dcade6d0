"""On-disk cache of pass pipeline results: a warm compile runs no pass.

The passes (fusion, tiling, their isl questions) are most of a cold compile,
and they are a pure function of the module's text, the pipeline and the
target. :func:`load` and :func:`store` keep, under
``<cache_dir>/passes/<version>/``, the module a pipeline made (pickled: it
keeps every statement's and loop's source position, so errors still name
source lines) and the remarks its passes made, keyed by the input module's
text, the pipeline, the target and the compiler (every polyir source file and
the islpy version, so the pickled classes are the ones that wrote it).
Unpickling is about ten times faster than parsing the module's text (an
18-nest transformer layer: 1.7 ms against 17 ms), which was a third of a warm
compile.

The entries live in :class:`polyir.cpu.cache.CompileCache` files (an HMAC tag
under the per-user key; the same trust rules, size cap and eviction as object
code): nothing is unpickled that this user's polyir did not write. That is
the trust the object code next to it already needs, since it is executed;
an entry that fails its tag or does not unpickle to a
:class:`~polyir.ir.nodes.Module` is a miss. Pipelines naming a pass from
outside polyir (a plugin, whose code the key cannot cover) are not cached.
"""
from __future__ import annotations

import hashlib
import json
import logging
import pickle
from pathlib import Path
from typing import Any

from polyir.context import Remark
from polyir.cpu.cache import CompileCache, cache_key
from polyir.ir.nodes import Module
from polyir.target import Target

LOGGER = logging.getLogger("polyir.driver")
SECTION = "passes"
FORMAT = "pickle-1"
"""How an entry holds its module (an entry in another format is a miss)."""
_STATE: dict[str, str] = {}


def fingerprint() -> str:
    """polyir's version with a hash of every polyir source file, and islpy's version
    (computed once per process)."""
    known = _STATE.get("fingerprint")
    if known is None:
        import islpy

        import polyir
        root = Path(polyir.__file__).parent
        digest = hashlib.sha256()
        for path in sorted(root.rglob("*.py")):
            digest.update(str(path.relative_to(root)).encode())
            digest.update(path.read_bytes())
        known = f"polyir {polyir.__version__}; islpy {islpy.__version__}; passes {digest.hexdigest()[:16]}"
        _STATE["fingerprint"] = known
    return known


def cacheable(pipeline: str) -> bool:
    """Whether every pass of ``pipeline`` is polyir's own (a plugin's code is not in the key)."""
    from polyir.passes import parse_pipeline
    try:
        passes = parse_pipeline(pipeline)
    except Exception:  # the transform itself reports a bad pipeline
        return False
    return all(type(p).__module__.startswith("polyir.") for p in passes)


def open_cache(cache_dir: Any) -> CompileCache | None:
    """The pipeline cache under ``cache_dir`` (``None``: no caching)."""
    if cache_dir is None:
        return None
    cache = CompileCache(cache_dir, fingerprint(), section=SECTION)
    return cache if cache.enabled else None


def key(module: Module, pipeline: str, target: Target) -> str:
    """What a pipeline result depends on: the module text, the pipeline, the target."""
    return cache_key("pipeline", str(module), pipeline, repr(target))


def load(cache: CompileCache, entry_key: str) -> tuple[Module, list[Remark]] | None:
    """The transformed module and remarks stored under ``entry_key``, or ``None``."""
    entry = cache.load(entry_key)   # None unless its HMAC tag is this user's
    if entry is None:
        return None
    try:
        record = json.loads(entry.llvm_ir)
        if record.get("format") != FORMAT:
            raise ValueError(f"entry format {record.get('format')!r}, expected {FORMAT!r}")
        module = pickle.loads(entry.object_code)
        if not isinstance(module, Module):
            raise TypeError(f"entry holds a {type(module).__name__}, not a Module")
        remarks = [Remark(*item) for item in record["remarks"]]
    except Exception as error:  # anything unreadable is a miss
        LOGGER.warning("polyir: ignoring unreadable pipeline-cache entry (%s: %s)", type(error).__name__, error)
        cache.invalidate(entry_key)
        return None
    return module, remarks


def store(cache: CompileCache, entry_key: str, module: Module, remarks: list[Remark]) -> None:
    """Keep what a pipeline made (see the module docstring); a module too deep for
    ``pickle`` is not kept."""
    try:
        data = pickle.dumps(module, protocol=pickle.HIGHEST_PROTOCOL)
    except RecursionError:
        LOGGER.info("polyir: pipeline result too deeply nested to cache; not stored")
        return
    record = {"format": FORMAT, "remarks": [[r.pass_name, r.where, r.why, r.kind] for r in remarks]}
    cache.store(entry_key, data, json.dumps(record), {"kind": "pipeline"})
    if cache.stored:
        cache.evict()


__all__ = ["SECTION", "cacheable", "fingerprint", "key", "load", "open_cache", "store"]
