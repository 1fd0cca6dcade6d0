"""What a pipeline changed, read from the IR before and after it.

Passes report their decisions as remarks; this module reports their effect,
observed on the IR alone, so that it works for any pass (fusion, tiling,
shrinking, parallel marks) without asking it: :func:`compare` pairs the
functions of two modules by name and returns, per function, a
:class:`FunctionChanges`:

* the top-level nests before and after (:class:`Nest`: statements, loops,
  loop-scoped buffers) and which nests' statements ended up together (a nest
  after that holds the statements of several nests before is a fused group;
  a statement copied into several nests, ``S0`` and ``S0_1``, is recomputed);
* every local buffer before and after (:class:`LocalBuffer`: shape, element
  type, the loops it is declared in) and what became of it (kept, shrunk,
  moved into a loop, removed, new);
* loops marked parallel or no longer parallel, loops that appeared or went,
  statements added or removed.

Statements are matched by name; a name with a ``_N`` suffix that is not in
the original function is a copy of the statement it extends.
"""
from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from polyir.ir.affine import Aff
from polyir.ir.nodes import Buffer, For, Function, If, Module, Node
from polyir.ir.types import DType
from polyir.ir.walk import STATEMENT_NODES, walk_nodes


@dataclass(frozen=True)
class LocalBuffer:
    """A buffer a function allocates: ``scope`` names the loops it is declared
    in (outermost first; empty for a function-level local), so a loop-scoped
    buffer is fresh in each of their iterations."""

    name: str
    dtype: DType
    shape: tuple[Aff, ...]
    scope: tuple[str, ...] = ()

    def elements(self, params: Mapping[str, int] | None = None) -> int | None:
        """Element count for the symbol values ``params`` (``None`` when a symbol has no value)."""
        try:
            return math.prod(d.evaluate(dict(params or {})) for d in self.shape)
        except (KeyError, ValueError):
            return None

    def bytes(self, params: Mapping[str, int] | None = None) -> int | None:
        count = self.elements(params)
        return None if count is None else count * self.dtype.storage_bytes()

    def type_text(self) -> str:
        return f"{self.dtype}[{', '.join(map(str, self.shape))}]"

    def size_text(self, params: Mapping[str, int] | None = None) -> str:
        """``4096 B`` at the given sizes, else the symbolic product ``4*N*M B``."""
        count = self.bytes(params)
        if count is not None:
            return f"{count} B"
        factors = [str(self.dtype.storage_bytes())] + [
            str(d) if len(d.terms) + bool(d.constant) <= 1 else f"({d})" for d in self.shape]
        return "*".join(factors) + " B"

    def where(self) -> str:
        return f"in loop {self.scope[-1]}" if self.scope else "function-level"

    def __str__(self) -> str:
        return f"{self.name}: {self.type_text()} ({self.where()})"


@dataclass(frozen=True)
class Nest:
    """One top-level node of a function body: its statements, every loop in it
    (pre-order) and the buffers declared in its loops."""

    index: int
    statements: tuple[str, ...]
    loops: tuple[str, ...]
    locals: tuple[LocalBuffer, ...] = ()

    def label(self) -> str:
        loops = f" (loops {', '.join(self.loops)})" if self.loops else ""
        return f"nest {self.index}: {', '.join(self.statements) or 'no statement'}{loops}"


@dataclass(frozen=True)
class BufferChange:
    """A local buffer before and after; ``status`` is one of ``kept``,
    ``shrunk``, ``grown``, ``reshaped``, ``moved`` (same shape, other scope),
    ``removed``, ``new``."""

    name: str
    before: LocalBuffer | None
    after: LocalBuffer | None
    status: str

    def text(self, params: Mapping[str, int] | None = None) -> str:
        if self.before is None and self.after is not None:
            return f"{self.name}: new, {self.after.type_text()} {self.after.where()} ({self.after.size_text(params)})"
        if self.after is None and self.before is not None:
            return f"{self.name}: removed ({self.before.type_text()}, {self.before.size_text(params)})"
        assert self.before is not None and self.after is not None
        if self.status == "kept":
            return f"{self.name}: kept, {self.before.type_text()} {self.before.where()}"
        return (f"{self.name}: {self.status}, {self.before.type_text()} {self.before.where()} "
                f"({self.before.size_text(params)}) -> {self.after.type_text()} {self.after.where()} "
                f"({self.after.size_text(params)})")


@dataclass(frozen=True)
class FunctionChanges:
    """The effect of a pipeline on one function (see the module docstring)."""

    function: str
    before: tuple[Nest, ...]
    after: tuple[Nest, ...]
    links: tuple[tuple[int, int], ...]          # (nest before, nest after) sharing a statement
    buffers: tuple[BufferChange, ...]
    parallel_added: tuple[str, ...] = ()
    parallel_removed: tuple[str, ...] = ()
    loops_added: tuple[str, ...] = ()
    loops_removed: tuple[str, ...] = ()
    statements_added: tuple[str, ...] = ()
    statements_removed: tuple[str, ...] = ()
    copies: dict[str, tuple[str, ...]] = field(default_factory=dict)  # statement -> its copies after
    identical: bool = False

    def fused_groups(self) -> list[tuple[int, tuple[int, ...]]]:
        """``(nest after, nests before)`` for every nest after that holds the
        statements of two or more nests before."""
        groups = []
        for nest in self.after:
            sources = tuple(sorted({b for b, a in self.links if a == nest.index}))
            if len(sources) > 1:
                groups.append((nest.index, sources))
        return groups

    def lines(self, params: Mapping[str, int] | None = None) -> list[str]:
        """One sentence per change (empty when nothing changed)."""
        if self.identical:
            return []
        found: list[str] = []
        if len(self.before) != len(self.after):
            found.append(f"top-level nests: {len(self.before)} -> {len(self.after)}")
        for after, sources in self.fused_groups():
            found.append(f"nests {', '.join(map(str, sources))} fused into nest {after} "
                         f"({', '.join(self.after[after].statements)})")
        for name, copies in self.copies.items():
            found.append(f"statement {name} recomputed: copies {', '.join(copies)}")
        if self.loops_added:
            found.append(f"new loop{'s' * (len(self.loops_added) > 1)} {', '.join(self.loops_added)}")
        if self.loops_removed:
            found.append(f"loop{'s' * (len(self.loops_removed) > 1)} {', '.join(self.loops_removed)} gone")
        if self.parallel_added:
            found.append(f"loop{'s' * (len(self.parallel_added) > 1)} {', '.join(self.parallel_added)} "
                         f"marked parallel")
        if self.parallel_removed:
            found.append(f"loop{'s' * (len(self.parallel_removed) > 1)} "
                         f"{', '.join(self.parallel_removed)} no longer parallel")
        new_statements = [s for s in self.statements_added if not any(s in c for c in self.copies.values())]
        if new_statements:
            found.append(f"new statements {', '.join(new_statements)}")
        if self.statements_removed:
            found.append(f"statements {', '.join(self.statements_removed)} removed")
        found.extend(change.text(params) for change in self.buffers if change.status != "kept")
        if not found:
            found.append("rewritten (same nests, loops, statements and buffers)")
        return found

    def __str__(self) -> str:
        body = self.lines()
        return f"{self.function}: " + ("; ".join(body) if body else "unchanged")


# ------------------------------------------------------------------ reading the IR
def statements_of(nodes: Sequence[Node]) -> tuple[str, ...]:
    return tuple(n.name for n in walk_nodes(nodes) if isinstance(n, STATEMENT_NODES))


def loops_of(nodes: Sequence[Node]) -> tuple[For, ...]:
    return tuple(n for n in walk_nodes(nodes) if isinstance(n, For))


def loop_locals(nodes: Sequence[Node], scope: tuple[str, ...] = ()) -> list[LocalBuffer]:
    """The buffers declared in the loops under ``nodes`` with the loops around them."""
    found: list[LocalBuffer] = []
    for node in nodes:
        if isinstance(node, For):
            inner = scope + (node.var,)
            found.extend(_local(b, inner) for b in node.locals)
            found.extend(loop_locals(node.body, inner))
        elif isinstance(node, If):
            found.extend(loop_locals(node.then_body, scope))
            found.extend(loop_locals(node.else_body, scope))
    return found


def _local(buffer: Buffer, scope: tuple[str, ...] = ()) -> LocalBuffer:
    return LocalBuffer(buffer.name, buffer.dtype, buffer.shape, scope)


def nests(function: Function) -> tuple[Nest, ...]:
    """The top-level nests of ``function``; a node with no statement is left out."""
    found: list[Nest] = []
    for node in function.body:
        statements = statements_of((node,))
        if statements:
            found.append(Nest(len(found), statements, tuple(lp.var for lp in loops_of((node,))),
                              tuple(loop_locals((node,)))))
    return tuple(found)


def local_buffers(function: Function) -> dict[str, LocalBuffer]:
    """Every buffer ``function`` allocates (function locals, then loop-scoped ones)."""
    found = {b.name: _local(b) for b in function.locals}
    found.update({b.name: b for b in loop_locals(function.body)})
    return found


def base_statement(name: str, originals: set[str]) -> str:
    """The original statement a name stands for: itself, or for a copy ``S0_1``
    (not an original name) the statement it extends."""
    if name in originals:
        return name
    stripped = name
    while True:
        shorter = re.sub(r"_\d+$", "", stripped)
        if shorter == stripped:
            return name
        if shorter in originals:
            return shorter
        stripped = shorter


def _buffer_status(old: LocalBuffer, new: LocalBuffer) -> str:
    if old.shape == new.shape and old.dtype == new.dtype:
        return "kept" if old.scope == new.scope else "moved"
    old_count, new_count = _symbolic_size(old), _symbolic_size(new)
    if new_count < old_count:
        return "shrunk"
    if new_count > old_count:
        return "grown"
    return "reshaped"


def _symbolic_size(buffer: LocalBuffer) -> tuple[int, int]:
    """An order on buffer sizes without symbol values: (number of symbolic
    dimensions, product of the constant ones); each symbol is taken as large."""
    symbolic = sum(1 for d in buffer.shape if not d.is_constant)
    constant = math.prod(d.constant for d in buffer.shape if d.is_constant)
    return symbolic, constant


def compare_functions(before: Function, after: Function) -> FunctionChanges:
    """The effect of a pipeline on one function (see the module docstring)."""
    if before is after or before == after:
        listed = nests(before)
        return FunctionChanges(before.name, listed, listed,
                               tuple((n.index, n.index) for n in listed), (), identical=True)
    old_nests, new_nests = nests(before), nests(after)
    originals = {s for n in old_nests for s in n.statements}
    home = {s: n.index for n in old_nests for s in n.statements}
    links: set[tuple[int, int]] = set()
    copies: dict[str, list[str]] = {}
    for nest in new_nests:
        for name in nest.statements:
            base = base_statement(name, originals)
            if base in home:
                links.add((home[base], nest.index))
            if base != name:
                copies.setdefault(base, []).append(name)
    old_buffers, new_buffers = local_buffers(before), local_buffers(after)
    buffers = []
    for name, old in old_buffers.items():
        new = new_buffers.get(name)
        buffers.append(BufferChange(name, old, new, "removed" if new is None else _buffer_status(old, new)))
    buffers.extend(BufferChange(name, None, new, "new") for name, new in new_buffers.items()
                   if name not in old_buffers)
    old_loops = {lp.var: lp for lp in loops_of(before.body)}
    new_loops = {lp.var: lp for lp in loops_of(after.body)}
    old_statements = statements_of(before.body)
    new_statements = statements_of(after.body)
    return FunctionChanges(
        before.name, old_nests, new_nests, tuple(sorted(links)), tuple(buffers),
        parallel_added=tuple(v for v, lp in new_loops.items()
                             if lp.parallel and not (v in old_loops and old_loops[v].parallel)),
        parallel_removed=tuple(v for v, lp in old_loops.items()
                               if lp.parallel and v in new_loops and not new_loops[v].parallel),
        loops_added=tuple(v for v in new_loops if v not in old_loops),
        loops_removed=tuple(v for v in old_loops if v not in new_loops),
        statements_added=tuple(s for s in new_statements if s not in old_statements),
        statements_removed=tuple(s for s in old_statements
                                 if s not in new_statements and s not in copies),
        copies={k: tuple(v) for k, v in copies.items()},
        identical=False)


def compare(before: Module | Function, after: Module | Function) -> list[FunctionChanges]:
    """Per function present in both (paired by name; a lone function is paired
    with the other side's entry), its :class:`FunctionChanges`."""
    old = before.functions if isinstance(before, Module) else (before,)
    new = after.functions if isinstance(after, Module) else (after,)
    if len(old) == 1 and len(new) == 1:
        return [compare_functions(old[0], new[0])]
    by_name = {f.name: f for f in new}
    return [compare_functions(f, by_name[f.name]) for f in old if f.name in by_name]


__all__ = ["LocalBuffer", "Nest", "BufferChange", "FunctionChanges", "compare", "compare_functions",
           "nests", "local_buffers", "base_statement"]
