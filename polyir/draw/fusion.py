"""A fusion plan as a picture, read from the IR before and after a pipeline.

The top row holds the top-level nests before (a box each: statements, loops,
the buffers declared in its loops), the bottom row the nests after; a line
joins a nest before to each nest after that holds one of its statements, so
a fused group is a box after with several lines coming in (it is shaded),
and a dashed line is a recomputed statement (a copy ``S0_1`` in a second
nest). Above and below the rows, every local buffer with its type, where it
is declared and its size (in bytes at ``params`` when given, else as a
product of the symbols), and what fusion made of it: kept, shrunk, moved
into a loop, removed or new. The comparison is :mod:`polyir.report.changes`,
so the picture works for any pass that fuses, whatever its own remarks.
"""
from __future__ import annotations

import textwrap
from collections.abc import Mapping
from typing import Any

from polyir.draw.picture import Picture, new_figure
from polyir.ir.nodes import Function, Module
from polyir.polyhedral.extract import function_of
from polyir.report.changes import BufferChange, FunctionChanges, LocalBuffer, Nest, compare_functions

IR = Module | Function
SPACING = 3.4
STATUS_COLORS = {"kept": "#555555", "shrunk": "#2a7d2a", "moved": "#2a7d2a", "removed": "#2a7d2a",
                 "new": "#1f5fa8", "grown": "#b03030", "reshaped": "#8a6d00"}


def _nest_label(nest: Nest) -> str:
    lines = [f"nest {nest.index}"]
    lines += textwrap.wrap(", ".join(nest.statements), 26)
    if nest.loops:
        lines += textwrap.wrap("for " + ", ".join(nest.loops), 26)
    lines += [f"local {b.name}: {b.type_text()} in {b.scope[-1]}" for b in nest.locals]
    return "\n".join(lines)


def _x(k: int, n: int, width: float) -> float:
    return (k + 0.5) * width / max(n, 1)


def _total(buffers: list[LocalBuffer], params: Mapping[str, int] | None) -> str | None:
    sizes = [b.bytes(params) for b in buffers]
    if params is None or any(s is None for s in sizes):
        return None
    return f"{sum(s for s in sizes if s is not None)} B"


def _buffer_rows(ax: Any, changes: FunctionChanges, params: Mapping[str, int] | None, width: float,
                 y_before: float, y_after: float) -> None:
    befores = [c for c in changes.buffers if c.before is not None]
    afters = [c for c in changes.buffers if c.after is not None or c.status == "removed"]
    for k, change in enumerate(befores):
        assert change.before is not None
        ax.text(_x(k, len(befores), width), y_before,
                f"{change.name}: {change.before.type_text()}\n{change.before.where()}, "
                f"{change.before.size_text(params)}",
                ha="center", va="center", fontsize=7, gid=f"buffer-before:{change.name}",
                bbox={"boxstyle": "square,pad=0.3", "facecolor": "#f4f4f4", "edgecolor": "#999999"})
    for k, change in enumerate(afters):
        ax.text(_x(k, len(afters), width), y_after, _after_text(change, params), ha="center", va="center",
                fontsize=7, color=STATUS_COLORS.get(change.status, "black"), gid=f"buffer-after:{change.name}",
                bbox={"boxstyle": "square,pad=0.3", "facecolor": "#f4f4f4",
                      "edgecolor": STATUS_COLORS.get(change.status, "#999999")})


def _after_text(change: BufferChange, params: Mapping[str, int] | None) -> str:
    if change.after is None:
        return f"{change.name}: removed"
    return (f"{change.name}: {change.after.type_text()} ({change.status})\n{change.after.where()}, "
            f"{change.after.size_text(params)}")


def fusion(before: IR, after: IR, params: Mapping[str, int] | None = None, *, title: str | None = None) -> Picture:
    """The fusion of ``before`` into ``after`` (see the module docstring);
    ``params``: symbol values for buffer sizes in bytes (optional). ``counts``:
    ``nests_before``, ``nests_after``, ``links``, ``fused`` (groups),
    ``buffers_before``, ``buffers_after``."""
    old, new = function_of(before), function_of(after)
    changes = compare_functions(old, new)
    width = SPACING * max(len(changes.before), len(changes.after), 1)
    has_buffers = bool(changes.buffers)
    figure = new_figure(min(16.0, max(5.0, width * 0.95 + 0.8)), 5.6 if has_buffers else 3.6)
    ax = figure.add_subplot(111)
    y_before, y_after = 2.0, 0.0
    fused = {a for a, _ in changes.fused_groups()}
    for nest in changes.before:
        ax.text(_x(nest.index, len(changes.before), width), y_before, _nest_label(nest), ha="center",
                va="center", fontsize=7.5, zorder=3, gid=f"nest-before:{nest.index}",
                bbox={"boxstyle": "round,pad=0.4", "facecolor": "#eef3fb", "edgecolor": "#4c72b0"})
    for nest in changes.after:
        shade = "#fde3c2" if nest.index in fused else "#eef3fb"
        ax.text(_x(nest.index, len(changes.after), width), y_after, _nest_label(nest), ha="center",
                va="center", fontsize=7.5, zorder=3, gid=f"nest-after:{nest.index}",
                bbox={"boxstyle": "round,pad=0.4", "facecolor": shade,
                      "edgecolor": "#c66a00" if nest.index in fused else "#4c72b0"})
    for b, a in changes.links:
        recomputed = any(copy in changes.after[a].statements
                         for original in changes.before[b].statements
                         for copy in changes.copies.get(original, ()))
        ax.plot([_x(b, len(changes.before), width), _x(a, len(changes.after), width)], [y_before, y_after],
                color="#888888", linewidth=1.2, linestyle="--" if recomputed else "-", zorder=1, gid="link")
    _buffer_rows(ax, changes, params, width, 3.15, -1.2)
    ax.set_xlim(0, width)
    ax.set_ylim(*((-1.85, 3.8) if has_buffers else (-0.8, 2.8)))
    ax.set_axis_off()
    ax.text(-0.05, y_before, "before", rotation=90, va="center", ha="right", fontsize=9, transform=ax.transData)
    ax.text(-0.05, y_after, "after", rotation=90, va="center", ha="right", fontsize=9, transform=ax.transData)
    old_buffers = [c.before for c in changes.buffers if c.before is not None]
    new_buffers = [c.after for c in changes.buffers if c.after is not None]
    sizes = _total(old_buffers, params), _total(new_buffers, params)
    memory = f"; local buffers {sizes[0]} -> {sizes[1]}" if sizes[0] is not None else ""
    ax.set_title(title or f"{old.name}: {len(changes.before)} nests -> {len(changes.after)}, "
                          f"{len(fused)} fused group{'s' * (len(fused) != 1)}{memory}", fontsize=9)
    return Picture(figure, "fusion", old.name, {
        "nests_before": len(changes.before), "nests_after": len(changes.after), "links": len(changes.links),
        "fused": len(fused), "buffers_before": len(old_buffers), "buffers_after": len(new_buffers)})
