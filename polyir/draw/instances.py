"""Statement instances at fixed sizes, where to draw them, and how a
transformed program's instances match the original's.

* :func:`check_params`: every size symbol of the function has a value.
* :func:`domain_instances`: the instances of each statement (isl point
  enumeration of its domain, ``polyir.polyhedral.bruteforce.instances``).
* :class:`Layout`: a position for each instance in one picture of at most
  three axes. Axis ``k`` is the ``k``-th enclosing loop of every statement
  (so ``S0[t, i]`` and ``S1[t, i_1]`` share the axes ``t`` and ``i / i_1``);
  a statement with fewer loops than axes sits just before (or after) the
  range of the missing axes, where the textual order puts it (``S0[i, j]``
  of a matrix product at ``k = -1``, before its ``k`` loop); statements that
  share a position are set slightly apart. One axis: each statement has its
  own row. More loops than axes: the instances are projected (``dims``
  chooses the axes).
* :func:`match_instances`: the brute-force traces of the original and the
  transformed program (``polyir.polyhedral.bruteforce.trace``), each
  transformed instance matched to an original one by its statement and the
  elements it reads and writes. Two instances of a statement that access the
  same elements both write one element, so a legal transformation keeps their
  order (a WAW dependence) and the ``k``-th such instance after is the
  ``k``-th before. An instance run once more than in the original is a
  recomputation (fusion with overlapping slices).
"""
from __future__ import annotations

from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from polyir.draw.picture import DrawError
from polyir.ir.nodes import Function
from polyir.polyhedral.extract import Scop, StatementInfo

Instance = tuple[str, tuple[int, ...]]

MAX_INSTANCES = 4000
MAX_ARROWS = 4000
JITTER = 0.28


def needed_symbols(scop: Scop) -> list[str]:
    """The symbols that decide which instances exist or what they touch: those
    in some statement's domain or access relation (beyond the context's
    ``>= 1``); a symbol that only sizes a buffer nothing gathers from is not needed."""
    import islpy as isl

    from polyir.polyhedral.extract import isl_name
    found = []
    for k, name in enumerate(scop.params):
        for stmt in scop.statements.values():
            domain = stmt.domain.gist_params(scop.context)
            sets = [domain] + [a.relation.gist_domain(stmt.domain).gist_params(scop.context).wrap()
                               for a in stmt.accesses]
            if any(s.involves_dims(isl.dim_type.param, _param_index(s, isl_name(name), k), 1) for s in sets):
                found.append(name)
                break
    return found


def _param_index(obj: object, name: str, default: int) -> int:
    import islpy as isl
    index = obj.find_dim_by_name(isl.dim_type.param, name)  # type: ignore[attr-defined]
    return default if index < 0 else index


def check_params(function: Function, params: Mapping[str, int] | None, what: str,
                 scop: Scop | None = None) -> dict[str, int]:
    """``params`` as a dict once every needed symbol of ``function`` has an
    integer value (:func:`needed_symbols`; the others, which only size
    buffers, take 1 unless given)."""
    from polyir.polyhedral.extract import extract
    given = dict(params or {})
    for name, value in given.items():
        if isinstance(value, bool) or not isinstance(value, int):
            raise DrawError(f"symbol {name} must be an int, not {value!r}")
    needed = needed_symbols(scop if scop is not None else extract(function))
    missing = [s for s in needed if s not in given]
    if missing:
        example = ", ".join(f"'{s}': 4" for s in needed)
        raise DrawError(f"{what} of {function.name} needs a value for each of its size symbols "
                        f"{', '.join(needed)}; missing {', '.join(missing)} (e.g. {{{example}}})")
    return {**{s: 1 for s in function.symbols}, **given}


def domain_instances(scop: Scop, statements: Sequence[str], params: Mapping[str, int]) -> dict[str, list[tuple[int, ...]]]:
    """Statement -> its instances for ``params`` (sorted), by isl point enumeration."""
    from polyir.polyhedral.bruteforce import instances
    found: dict[str, list[tuple[int, ...]]] = {}
    total = 0
    for name in statements:
        points = sorted(values for _, values in instances(scop.statements[name].domain, params))
        found[name] = points
        total += len(points)
        if total > MAX_INSTANCES:
            raise DrawError(f"more than {MAX_INSTANCES} instances at {_sizes(params)}: too many to "
                            f"draw; choose smaller sizes")
    return found


def _sizes(params: Mapping[str, int]) -> str:
    return ", ".join(f"{k}={v}" for k, v in params.items()) or "these sizes"


def select_statements(scop: Scop, statements: str | Sequence[str] | None) -> list[str]:
    if statements is None:
        return list(scop.statements)
    wanted = [statements] if isinstance(statements, str) else list(statements)
    unknown = [s for s in wanted if s not in scop.statements]
    if unknown:
        raise DrawError(f"{scop.function.name} has no statement {', '.join(unknown)} "
                        f"(its statements: {', '.join(scop.statements)})")
    return wanted


@dataclass
class Layout:
    """Positions for the instances of some statements (see the module docstring).

    ``axes``: the labels of the drawn axes; ``dims``: which enclosing-loop
    position each axis shows; ``rows``: one row per statement (one axis only).
    """

    scop: Scop
    statements: list[str]
    axes: list[str]
    dims: list[int]
    rows: bool
    projected: bool
    _missing: dict[tuple[str, int], float]
    _offset: dict[str, float]

    @property
    def ndim(self) -> int:
        """Coordinates per position: 2 (one or two axes) or 3."""
        return 3 if len(self.dims) == 3 else 2

    def position(self, statement: str, values: Sequence[int]) -> tuple[float, ...]:
        coords: list[float] = []
        for dim in self.dims:
            coords.append(float(values[dim]) if dim < len(values) else self._missing[(statement, dim)])
        if self.rows:
            return (coords[0], -float(self.statements.index(statement)))
        coords[-1] += self._offset[statement]
        return tuple(coords)


def make_layout(scop: Scop, statements: list[str], points: Mapping[str, Sequence[tuple[int, ...]]],
                dims: Sequence[int | str] | None = None) -> Layout:
    """A :class:`Layout` for ``points`` (statement -> instances)."""
    infos = [scop.statements[s] for s in statements]
    depth = max((len(s.loop_vars) for s in infos), default=0)
    deepest = max(infos, key=lambda s: len(s.loop_vars)) if infos else None
    if dims is None:
        chosen = list(range(min(depth, 3))) or [0]
    else:
        chosen = [_dim_position(d, deepest, depth) for d in dims]
        if not 1 <= len(chosen) <= 3 or len(set(chosen)) != len(chosen):
            raise DrawError(f"dims must name one to three different loop positions, not {list(dims)}")
    labels = []
    for dim in chosen:
        names = []
        for s in infos:
            if dim < len(s.loop_vars) and s.loop_vars[dim] not in names:
                names.append(s.loop_vars[dim])
        labels.append(" / ".join(names) or f"loop {dim}")
    lows: dict[int, int] = {}
    highs: dict[int, int] = {}
    for values_list in points.values():
        for values in values_list:
            for dim in chosen:
                if dim < len(values):
                    lows[dim] = min(lows.get(dim, values[dim]), values[dim])
                    highs[dim] = max(highs.get(dim, values[dim]), values[dim])
    missing: dict[tuple[str, int], float] = {}
    for s in infos:
        before = _comes_first(s, infos)
        for dim in chosen:
            if dim >= len(s.loop_vars):
                missing[(s.name, dim)] = (lows.get(dim, 0) - 1.0) if before else (highs.get(dim, 0) + 1.0)
    rows = len(chosen) == 1
    offsets: dict[str, float] = {}
    groups: dict[tuple, list[str]] = {}
    for s in infos:
        signature = tuple(missing.get((s.name, dim), "loop") for dim in chosen)
        groups.setdefault(signature, []).append(s.name)
    for members in groups.values():
        for k, name in enumerate(members):
            offsets[name] = 0.0 if len(members) == 1 else JITTER * (k / (len(members) - 1) - 0.5)
    projected = any(set(range(len(s.loop_vars))) - set(chosen) for s in infos)
    return Layout(scop, statements, labels, chosen, rows, projected, missing, offsets)


def _dim_position(dim: int | str, deepest: StatementInfo | None, depth: int) -> int:
    if isinstance(dim, int):
        if not 0 <= dim < max(depth, 1):
            raise DrawError(f"loop position {dim} is out of range (the statements have {depth} loops)")
        return dim
    if deepest is None or dim not in deepest.loop_vars:
        known = ", ".join(deepest.loop_vars) if deepest else "none"
        raise DrawError(f"no loop {dim!r} around the deepest statement (its loops: {known})")
    return deepest.loop_vars.index(dim)


def _comes_first(stmt: StatementInfo, infos: Sequence[StatementInfo]) -> bool:
    """Whether ``stmt`` runs before the deeper statements that share its loops
    (then its missing axes sit before their range)."""
    n = len(stmt.loop_vars)
    for other in infos:
        if len(other.loops) > n and other.loops[:n] == stmt.loops:
            return stmt.positions[n] < other.positions[n]
    deeper = [o for o in infos if len(o.loops) > n]
    return not deeper or stmt.order < min(o.order for o in deeper)


# ------------------------------------------------------------------ before and after
@dataclass
class Matching:
    """The transformed program's instances in the order it runs them, as
    original instances: ``order[t]`` is the original instance run at step ``t``,
    ``recomputed[t]`` whether it already ran before, ``events`` the transformed
    program's trace (with its own loop values)."""

    order: list[Instance]
    recomputed: list[bool]
    events: list  # list[polyir.polyhedral.bruteforce.Event]
    original: list[Instance]


def _key(statement: str, event: object) -> tuple:
    return (statement, event.reads, event.writes)  # type: ignore[attr-defined]


def match_instances(before: Function, after: Function, params: Mapping[str, int]) -> Matching:
    """Match the instances of ``after`` (a transformation of ``before``) to the
    original's (see the module docstring). Raises ``DrawError`` when an
    instance of either program has no counterpart."""
    from polyir.polyhedral.bruteforce import trace
    from polyir.report.changes import base_statement, statements_of
    old_events = trace(before, params)
    new_events = trace(after, params)
    if len(old_events) > MAX_INSTANCES or len(new_events) > MAX_INSTANCES:
        raise DrawError(f"more than {MAX_INSTANCES} instances at {_sizes(params)}: too many to draw; "
                        f"choose smaller sizes")
    originals = set(statements_of(before.body))
    waiting: dict[tuple, deque[int]] = {}
    for index, event in enumerate(old_events):
        waiting.setdefault(_key(event.instance[0], event), deque()).append(index)
    first_of = {key: queue[0] for key, queue in waiting.items()}
    order: list[Instance] = []
    recomputed: list[bool] = []
    for event in new_events:
        name, values = event.instance
        key = _key(base_statement(name, originals), event)
        queue = waiting.get(key)
        if queue:
            order.append(old_events[queue.popleft()].instance)
            recomputed.append(False)
        elif key in first_of:
            order.append(old_events[first_of[key]].instance)
            recomputed.append(True)
        else:
            raise DrawError(f"instance {name}{values} of the transformed {after.name} does the work of "
                            f"no instance of the original (it is not a reordering of the same statements)")
    left = [old_events[i].instance for queue in waiting.values() for i in queue]
    if left:
        name, values = left[0]
        raise DrawError(f"the transformed {after.name} never runs {name}{values} "
                        f"({len(left)} original instances are missing)")
    return Matching(order, recomputed, new_events, [e.instance for e in old_events])
