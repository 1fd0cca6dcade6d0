"""Pictures of statement instances: the iteration domain with its dependences,
the order a transformed program runs the instances in, and tiles.

* :func:`domain`: every instance of the chosen statements as a point, every
  dependence between two instances (of the chosen kinds) as an arrow from
  the instance that must run first.
* :func:`schedule`: the original instances, numbered and coloured by the
  step at which the original and the transformed program run them (a path
  joins them in that order), or by the values of some loops of the
  transformed program (``color_by=("c0",)``: one colour per wavefront).
* :func:`tiles`: the instances coloured by the tile of the transformed
  program that runs them, with each tile's outline and its place in the order.

Sizes are fixed by ``params`` (a value for every size symbol); instances come
from isl's point enumeration (``polyir.polyhedral.bruteforce``), orders from
the brute-force trace. See :mod:`polyir.draw.instances` for the layout.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from polyir.draw.instances import (
    MAX_ARROWS,
    Layout,
    check_params,
    domain_instances,
    make_layout,
    match_instances,
    select_statements,
)
from polyir.draw.picture import KIND_COLORS, DrawError, Picture, new_figure, statement_style
from polyir.ir.nodes import Function, Module
from polyir.polyhedral.dependences import compute_dependences, kind_names
from polyir.polyhedral.extract import extract, function_of
from polyir.polyhedral.legality import Witness

IR = Module | Function
NUMBERS_UP_TO = 64
"""Instances are numbered with their step when there are at most this many."""


def _sizes(params: Mapping[str, int]) -> str:
    return ", ".join(f"{k}={v}" for k, v in params.items())


def _axes(figure: Any, layout: Layout, position: int = 111) -> Any:
    if layout.ndim == 3:
        import mpl_toolkits.mplot3d  # noqa: F401  (registers the 3d projection)
        from matplotlib.ticker import MaxNLocator
        ax = figure.add_subplot(position, projection="3d")
        ax.set_xlabel(layout.axes[0])
        ax.set_ylabel(layout.axes[1])
        ax.set_zlabel(layout.axes[2])
        for axis in (ax.xaxis, ax.yaxis, ax.zaxis):
            axis.set_major_locator(MaxNLocator(integer=True))
        return ax
    from matplotlib.ticker import MaxNLocator
    ax = figure.add_subplot(position)
    ax.set_xlabel(layout.axes[0])
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    if layout.rows:
        ax.set_yticks([-k for k in range(len(layout.statements))], layout.statements)
        ax.set_ylim(-len(layout.statements) + 0.4, 0.6)
    else:
        ax.set_ylabel(layout.axes[1] if len(layout.axes) > 1 else "")
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_aspect("equal", adjustable="box")
    ax.margins(0.08)
    return ax


def _figure_size(layout: Layout, points: Mapping[str, Sequence[tuple[int, ...]]], panels: int = 1) -> tuple[float, float]:
    if layout.ndim == 3:
        return 6.4 * panels, 5.6
    xs = [layout.position(s, v)[0] for s, vs in points.items() for v in vs] or [0.0]
    ys = [layout.position(s, v)[1] for s, vs in points.items() for v in vs] or [0.0]
    width = min(11.0, max(3.6, 0.55 * (max(xs) - min(xs) + 2)))
    height = min(9.0, max(2.2, 0.55 * (max(ys) - min(ys) + 2) + 1.2))
    return min(16.0, width * panels + 0.6), height


def _fit(ax: Any, layout: Layout, positions: Sequence[tuple[float, ...]]) -> None:
    """Limits around the integer points (positions are integers, give or take the
    small offsets that set statements apart), so every tick is a loop value."""
    if layout.ndim == 3 or not positions:
        return
    xs = [round(p[0]) for p in positions]
    ax.set_xlim(min(xs) - 0.7, max(xs) + 0.7)
    if not layout.rows:
        ys = [round(p[1]) for p in positions]
        ax.set_ylim(min(ys) - 0.7, max(ys) + 0.7)


def _scatter(ax: Any, layout: Layout, positions: Sequence[tuple[float, ...]], gid: str, **style: Any) -> Any:
    if not positions:
        return None
    columns = list(zip(*positions, strict=True))
    artist = ax.scatter(*columns, gid=gid, **style)
    return artist


def _arrows(ax: Any, layout: Layout, segments: Sequence[tuple[tuple[float, ...], tuple[float, ...]]],
            kind: str, bend: float) -> None:
    """One arrow per segment (source point -> sink point), all with ``gid``
    ``dependence:KIND``; in 3-d one quiver whose segments are 3 per arrow."""
    if not segments:
        return
    color = KIND_COLORS.get(kind, "black")
    if layout.ndim == 3:
        starts = list(zip(*(a for a, _ in segments), strict=True))
        deltas = [[b[k] - a[k] for a, b in segments] for k in range(3)]
        ax.quiver(*starts, *deltas, color=color, arrow_length_ratio=0.15, linewidth=0.8,
                  gid=f"dependence:{kind}")
        return
    from matplotlib.patches import FancyArrowPatch
    # add_artist, not add_patch: the points already set the limits, and add_patch's
    # limit update computes each arrow's path (most of the drawing time)
    for a, b in segments:
        rad = bend + (0.45 if layout.rows and a[1] == b[1] else 0.0)
        ax.add_artist(FancyArrowPatch((a[0], a[1]), (b[0], b[1]), arrowstyle="-|>", mutation_scale=9, shrinkA=5, shrinkB=5,
                                     connectionstyle=f"arc3,rad={rad}", color=color, linewidth=0.9,
                                     alpha=0.85, zorder=2, gid=f"dependence:{kind}"))


def _legend(ax: Any, statements: Sequence[str], kinds: Sequence[str], drawn: Mapping[str, int]) -> None:
    from matplotlib.lines import Line2D
    handles = [Line2D([], [], linestyle="", label=name, **statement_style(k)) for k, name in enumerate(statements)]
    handles += [Line2D([], [], color=KIND_COLORS[kind], label=f"{kind.upper()} ({drawn.get(kind, 0)})")
                for kind in kinds]
    ax.legend(handles=handles, fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0),
              borderaxespad=0.0, frameon=False)


def domain(ir: IR, params: Mapping[str, int], *, statements: str | Sequence[str] | None = None,
           kinds: str | Sequence[str] | None = "flow", dims: Sequence[int | str] | None = None,
           witness: Witness | None = None, title: str | None = None) -> Picture:
    """The iteration domain of ``statements`` (default: all) of ``ir`` at the
    sizes ``params``, one point per instance, and an arrow per dependence
    between two drawn instances of the given ``kinds`` (``"flow"`` by default:
    value flow; ``"memory"``: RAW, WAR and WAW; ``None``: all four).

    One to three loops are drawn as axes (``dims``: loop positions or the
    deepest statement's loop variables, default the outer three); deeper nests
    are projected (points and arrows that coincide are drawn once; ``counts``
    says how many instances and dependences there are and how many points
    and arrows were drawn). ``witness`` (from a legality query) rings its two
    instances and draws the arrow between them. Raises ``DrawError`` for a
    missing symbol, an unknown statement or kind, or more instances than can
    be drawn.
    """
    function = function_of(ir)
    scop = extract(function)
    sizes = check_params(function, params, "a picture", scop)
    names = select_statements(scop, statements)
    try:
        wanted = kind_names(kinds)
    except ValueError as error:
        raise DrawError(str(error)) from None
    points = domain_instances(scop, names, sizes)
    layout = make_layout(scop, names, points, dims)
    figure = new_figure(*_figure_size(layout, points))
    ax = _axes(figure, layout)
    drawn: list[tuple[float, ...]] = []
    for k, name in enumerate(names):
        positions = sorted({layout.position(name, v) for v in points[name]})
        drawn += positions
        _scatter(ax, layout, positions, f"instances:{name}", s=28, zorder=3, **statement_style(k))
    _fit(ax, layout, drawn)
    drawn_points = len(drawn)
    deps = compute_dependences(scop)
    selected = set(names)
    pair_counts: dict[str, int] = {}
    arrow_counts: dict[str, int] = {}
    for index, kind in enumerate(wanted):
        pairs = {p for d in deps.filter(kind) if d.source in selected and d.sink in selected
                 for p in d.pairs(sizes)}
        pair_counts[kind] = len(pairs)
        segments = sorted({(layout.position(*a), layout.position(*b)) for a, b in pairs
                           if layout.position(*a) != layout.position(*b)})
        if sum(arrow_counts.values()) + len(segments) > MAX_ARROWS:
            raise DrawError(f"more than {MAX_ARROWS} dependence arrows at {_sizes(params)}: choose smaller "
                            f"sizes or fewer kinds")
        arrow_counts[kind] = len(segments)
        bend = 0.0 if len(wanted) == 1 else (0.0, 0.15, -0.15, 0.3)[index]
        _arrows(ax, layout, segments, kind, bend)
    if witness is not None:
        _draw_witness(ax, layout, witness, points)
    counts = {"instances": sum(len(v) for v in points.values()), "points": drawn_points,
              "dependences": sum(pair_counts.values()), "arrows": sum(arrow_counts.values())}
    kinds_text = "/".join(k.upper() for k in wanted) or "no"
    ax.set_title(title or f"{function.name}: {counts['instances']} instances, {counts['dependences']} "
                          f"{kinds_text} dependences\nat {_sizes(params)}"
                          + (" (projected)" if layout.projected else ""), fontsize=9)
    _legend(ax, names, wanted, pair_counts)
    return Picture(figure, "domain", function.name, counts)


def _draw_witness(ax: Any, layout: Layout, witness: Witness, points: Mapping[str, Sequence[tuple[int, ...]]]) -> None:
    ends = []
    for instance in witness:
        values = instance.point
        if instance.statement not in points or values not in points[instance.statement]:
            raise DrawError(f"the witness instance {instance} is not drawn at these sizes (the witness "
                            f"holds at {', '.join(f'{k}={v}' for k, v in witness.params)})")
        ends.append(layout.position(instance.statement, values))
    _scatter(ax, layout, ends, "witness", s=190, facecolors="none", edgecolors="black", linewidths=1.6,
             zorder=4)
    if layout.ndim == 2:
        from matplotlib.patches import FancyArrowPatch
        ax.add_artist(FancyArrowPatch((ends[0][0], ends[0][1]), (ends[1][0], ends[1][1]), arrowstyle="-|>", mutation_scale=14, shrinkA=7,
                                     shrinkB=7, color="black", linewidth=2.0, zorder=5, gid="witness"))
        ax.annotate("witness", ends[1], xytext=(8, 8), textcoords="offset points", fontsize=8)


# ------------------------------------------------------------------ schedules and tiles
def _palette(n: int) -> list[Any]:
    import matplotlib
    cmap = matplotlib.colormaps["tab20"] if n > 10 else matplotlib.colormaps["tab10"]
    return [cmap(k % cmap.N) for k in range(n)]


def _order_panel(ax: Any, layout: Layout, order: Sequence[tuple[str, tuple[int, ...]]],
                 colors: Sequence[Any], numbers: bool, path: bool) -> None:
    """Points at the original positions in execution order, coloured by ``colors``
    (one per step), numbered, joined by a path."""
    seen: dict[tuple[str, tuple[int, ...]], int] = {}
    for step, instance in enumerate(order):
        seen.setdefault(instance, step)
    for k, name in enumerate(layout.statements):
        steps = [step for instance, step in seen.items() if instance[0] == name]
        positions = [layout.position(*order[step]) for step in steps]
        _scatter(ax, layout, positions, f"instances:{name}", s=60, zorder=3, marker=statement_style(k)["marker"],
                 c=[colors[step] for step in steps], edgecolors="black", linewidths=0.4)
    if len(layout.statements) > 1:
        from matplotlib.lines import Line2D
        ax.legend(handles=[Line2D([], [], linestyle="", marker=statement_style(k)["marker"], color="gray",
                                  label=name) for k, name in enumerate(layout.statements)],
                  fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    _fit(ax, layout, [layout.position(*instance) for instance in seen])
    if path and layout.ndim == 2:
        xs, ys = zip(*(layout.position(*instance) for instance in order), strict=True)
        ax.plot(xs, ys, color="gray", linewidth=0.7, alpha=0.55, zorder=1, gid="path")
    if numbers:
        for instance, step in seen.items():
            place = layout.position(*instance)
            if layout.ndim == 3:
                ax.text(*place, str(step), fontsize=6, gid="order")
            else:
                ax.annotate(str(step), place, xytext=(0, 5.5), textcoords="offset points", ha="center",
                            fontsize=6, gid="order", zorder=4)


def _step_colors(n: int) -> list[Any]:
    import matplotlib
    cmap = matplotlib.colormaps["viridis"]
    return [cmap(step / max(1, n - 1)) for step in range(n)]


def _group_colors(events: Sequence[Any], loops: Sequence[str] | None,
                  per_statement: Mapping[str, tuple[str, ...]] | None) -> tuple[list[Any], list[tuple]]:
    """Per step, the group (values of ``loops``, or of the statement's own tile
    loops) and its colour; groups numbered by first run."""
    keys: list[tuple] = []
    for event in events:
        env = dict(event.env)
        names = loops if loops is not None else (per_statement or {}).get(event.instance[0], ())
        keys.append(tuple(env.get(v) for v in names))
    first: dict[tuple, int] = {}
    for key in keys:
        first.setdefault(key, len(first))
    palette = _palette(len(first))
    return [palette[first[key]] for key in keys], list(first)


def schedule(before: IR, after: IR, params: Mapping[str, int], *, color_by: Sequence[str] | None = None,
             dims: Sequence[int | str] | None = None, numbers: bool | None = None, path: bool = True,
             title: str | None = None) -> Picture:
    """Two panels over the original instances of ``before`` at the sizes
    ``params``: the order ``before`` runs them in and the order ``after`` (a
    transformation of it: the same statements, rescheduled, distributed,
    fused, tiled) runs them in. Each instance is coloured by its step (or, with
    ``color_by``, by the values of those loops of ``after``: a wavefront, a
    tile) and numbered with it (``numbers``; default up to 64 instances); a
    path joins them in order. Instances that ``after`` runs again
    (recomputation) are marked with a cross. Raises ``DrawError`` when
    ``after`` does not run the same instances or a symbol has no value."""
    old, new = function_of(before), function_of(after)
    scop = extract(old)
    sizes = check_params(old, params, "a picture", scop)
    sizes = check_params(new, sizes, "a picture")
    matching = match_instances(old, new, sizes)
    points: dict[str, list[tuple[int, ...]]] = {name: [] for name in scop.statements}
    for name, values in matching.original:
        points[name].append(values)
    layout = make_layout(scop, list(scop.statements), points, dims)
    show_numbers = len(matching.original) <= NUMBERS_UP_TO if numbers is None else numbers
    figure = new_figure(*_figure_size(layout, points, panels=2))
    left = _axes(figure, layout, 121)
    _order_panel(left, layout, matching.original, _step_colors(len(matching.original)), show_numbers, path)
    left.set_title(f"{old.name} as written", fontsize=9)
    right = _axes(figure, layout, 122)
    counts = {"instances": len(matching.original), "steps": len(matching.order),
              "recomputed": sum(matching.recomputed)}
    if color_by is not None:
        missing = [v for v in color_by if not any(v == name for name, _ in _loop_items(new))]
        if missing:
            raise DrawError(f"the transformed {new.name} has no loop {', '.join(missing)}")
        colors, groups = _group_colors(matching.events, list(color_by), None)
        counts["groups"] = len(groups)
    else:
        colors = _step_colors(len(matching.order))
    _order_panel(right, layout, matching.order, colors, show_numbers, path)
    again = [layout.position(*inst) for inst, twice in zip(matching.order, matching.recomputed, strict=True)
             if twice]
    _scatter(right, layout, again, "recomputed", marker="x", s=70, color="black", zorder=5)
    by = f" (colour: {', '.join(color_by)})" if color_by else ""
    right.set_title(title or f"transformed{by}", fontsize=9)
    figure.suptitle(f"{old.name}: the order of {counts['instances']} instances at {_sizes(params)}",
                    fontsize=10)
    return Picture(figure, "schedule", old.name, counts)


def _loop_items(function: Function) -> list[tuple[str, Any]]:
    from polyir.ir.nodes import For
    from polyir.ir.walk import walk_nodes
    return [(n.var, n) for n in walk_nodes(function.body) if isinstance(n, For)]


def tiles(before: IR, after: IR, params: Mapping[str, int], *, loops: Sequence[str] | None = None,
          dims: Sequence[int | str] | None = None, numbers: bool = True, title: str | None = None) -> Picture:
    """The original instances of ``before`` at the sizes ``params``, coloured by
    the tile of ``after`` (its tiled form) that runs them, each tile outlined
    (in one or two dimensions) and labelled with its place in the order.

    A tile is a value of the tile loops: ``loops`` names them (variables of
    ``after``); by default, for each statement, the loops ``after`` has around
    it beyond the original's (the outer ones: a tiling adds its tile loops
    outside the point loops). Raises ``DrawError`` when no statement has more
    loops than before and ``loops`` is not given."""
    from polyir.polyhedral.api import loop_vars_of
    old, new = function_of(before), function_of(after)
    scop = extract(old)
    sizes = check_params(old, params, "a picture", scop)
    sizes = check_params(new, sizes, "a picture")
    matching = match_instances(old, new, sizes)
    per_statement: dict[str, tuple[str, ...]] | None = None
    if loops is None:
        from polyir.report.changes import base_statement
        old_loops, new_loops = loop_vars_of(old), loop_vars_of(new)
        per_statement = {}
        for name, around in new_loops.items():
            base = base_statement(name, set(old_loops))
            extra = len(around) - len(old_loops.get(base, ()))
            per_statement[name] = around[:max(0, extra)]
        if not any(per_statement.values()):
            raise DrawError(f"the transformed {new.name} has no more loops around any statement than "
                            f"{old.name}: nothing looks tiled (name the tile loops with loops=...)")
    else:
        known = {v for v, _ in _loop_items(new)}
        missing = [v for v in loops if v not in known]
        if missing:
            raise DrawError(f"the transformed {new.name} has no loop {', '.join(missing)}")
    colors, groups = _group_colors(matching.events, loops, per_statement)
    points: dict[str, list[tuple[int, ...]]] = {name: [] for name in scop.statements}
    for name, values in matching.original:
        points[name].append(values)
    layout = make_layout(scop, list(scop.statements), points, dims)
    figure = new_figure(*_figure_size(layout, points))
    ax = _axes(figure, layout)
    _order_panel(ax, layout, matching.order, colors, False, False)
    members: dict[int, list[tuple[float, ...]]] = {}
    group_of = {key: k for k, key in enumerate(groups)}
    for event, instance in zip(matching.events, matching.order, strict=True):
        env = dict(event.env)
        names = loops if loops is not None else (per_statement or {}).get(event.instance[0], ())
        members.setdefault(group_of[tuple(env.get(v) for v in names)], []).append(layout.position(*instance))
    if layout.ndim == 2:
        from matplotlib.patches import Rectangle
        palette = _palette(len(groups))
        for k, positions in members.items():
            xs, ys = [p[0] for p in positions], [p[1] for p in positions]
            pad = 0.38
            ax.add_patch(Rectangle((min(xs) - pad, min(ys) - pad), max(xs) - min(xs) + 2 * pad,
                                   max(ys) - min(ys) + 2 * pad, fill=False, edgecolor=palette[k],
                                   linewidth=1.6, zorder=2, gid="tile"))
            if numbers:
                ax.annotate(str(k), (min(xs) - pad, max(ys) + pad), xytext=(2, -2), textcoords="offset points",
                            ha="left", va="top", fontsize=7, color=palette[k], gid="tile-order")
    if loops is not None:
        tile_loops = list(loops)
    else:
        tile_loops = []
        for around in (per_statement or {}).values():
            tile_loops += [v for v in around if v not in tile_loops]
    names_text = "tile loops " + ", ".join(tile_loops)
    ax.set_title(title or f"{old.name}: {len(groups)} tiles ({names_text}) over {len(matching.original)} "
                          f"instances at {_sizes(params)}", fontsize=9)
    return Picture(figure, "tiles", old.name, {"instances": len(matching.original), "tiles": len(groups),
                                               "recomputed": sum(matching.recomputed)})
