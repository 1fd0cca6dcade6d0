"""On-disk cache of pass pipeline results: a warm compile runs no pass.

The passes (fusion, tiling, their isl questions) are most of a cold compile,
and they are a pure function of the module's text, the pipeline and the
target. :func:`load` and :func:`store` keep, under
``<cache_dir>/passes/<version>/``, the text of the module a pipeline made,
the remarks its passes made and the source positions of its statements and
loops, keyed by the input module's text, the pipeline, the target and the
compiler (every polyir source file and the islpy version). A hit parses the
text back (the text form round-trips) and puts the positions back, so errors
still name source lines.

The entries live in :class:`polyir.cpu.cache.CompileCache` files (an HMAC tag
under the per-user key; the same trust rules, size cap and eviction as object
code): nothing is trusted that this user's polyir did not write, and an entry
that fails to parse is a miss. Pipelines naming a pass from outside polyir (a
plugin, whose code the key cannot cover) are not cached.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
from pathlib import Path
from typing import Any

from polyir.context import Remark
from polyir.cpu.cache import CompileCache, cache_key
from polyir.ir.nodes import For, If, Module, Node, SourceLoc
from polyir.ir.walk import STATEMENT_NODES, walk_nodes
from polyir.target import Target

LOGGER = logging.getLogger("polyir.driver")
SECTION = "passes"
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
    entry = cache.load(entry_key)
    if entry is None:
        return None
    from polyir.ir.parser import parse
    try:
        record = json.loads(entry.llvm_ir)
        module = parse(entry.object_code.decode(), "<pipeline cache>")
        remarks = [Remark(*item) for item in record["remarks"]]
        module = _with_positions(module, record["positions"])
    except Exception as error:  # anything unreadable is a miss
        LOGGER.warning("polyir: ignoring unreadable pipeline-cache entry (%s: %s)", type(error).__name__, error)
        cache.invalidate(entry_key)
        return None
    return module, remarks


def store(cache: CompileCache, entry_key: str, module: Module, remarks: list[Remark]) -> None:
    """Keep what a pipeline made (see the module docstring)."""
    record = {"remarks": [[r.pass_name, r.where, r.why, r.kind] for r in remarks],
              "positions": _positions(module)}
    cache.store(entry_key, str(module).encode(), json.dumps(record), {"kind": "pipeline"})
    if cache.stored:
        cache.evict()


def _label(node: Node) -> str | None:
    if isinstance(node, For):
        return f"for {node.var}"
    if isinstance(node, STATEMENT_NODES):
        return f"statement {node.name}"
    return None


def _positions(module: Module) -> dict[str, dict[str, list[int]]]:
    """Per function: loops (by variable) and statements (by name) -> line, column."""
    found: dict[str, dict[str, list[int]]] = {}
    for function in module.functions:
        table = found.setdefault(function.name, {})
        if function.loc is not None:
            table["function"] = [function.loc.line, function.loc.column]
        for node in walk_nodes(function.body):
            label = _label(node)
            loc = getattr(node, "loc", None)
            if label is not None and loc is not None:
                table[label] = [loc.line, loc.column]
    return found


def _with_positions(module: Module, positions: dict[str, dict[str, list[int]]]) -> Module:
    """``module`` (parsed from the cache, so holding positions in the cached text)
    with the original positions: those recorded, none elsewhere."""
    def place(table: dict[str, list[int]], label: str | None) -> SourceLoc | None:
        where = table.get(label) if label is not None else None
        return SourceLoc(int(where[0]), int(where[1])) if where else None

    def rebuild(nodes: tuple[Node, ...], table: dict[str, list[int]]) -> tuple[Node, ...]:
        out: list[Node] = []
        for node in nodes:
            changes: dict[str, Any] = {"loc": place(table, _label(node))}
            if isinstance(node, For):
                changes["body"] = rebuild(node.body, table)
                changes["locals"] = tuple(dataclasses.replace(b, loc=None) for b in node.locals)
            elif isinstance(node, If):
                changes["then_body"] = rebuild(node.then_body, table)
                changes["else_body"] = rebuild(node.else_body, table)
            out.append(dataclasses.replace(node, **changes))
        return tuple(out)

    functions = []
    for function in module.functions:
        table = positions.get(function.name, {})
        functions.append(dataclasses.replace(
            function, body=rebuild(function.body, table), loc=place(table, "function"),
            params=tuple(dataclasses.replace(p, loc=None) for p in function.params),
            locals=tuple(dataclasses.replace(b, loc=None) for b in function.locals)))
    return Module(tuple(functions))


__all__ = ["SECTION", "cacheable", "fingerprint", "key", "load", "open_cache", "store"]
