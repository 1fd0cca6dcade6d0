"""A brute-force dependence oracle for small concrete sizes.

It runs the loop structure of a function (not its arithmetic) for fixed
symbol values, recording each statement instance in execution order with
the buffer elements it reads and writes, then finds dependences by
comparing every pair of accesses to the same element. Its answers use the
same conventions as :mod:`polyir.polyhedral.dependences` (a gather
subscript may touch every element of that buffer dimension), so for a
function and symbol values the two must agree exactly::

    oracle = brute_force_dependences(function, {"N": 4})
    assert oracle["raw"] == instance_pairs(isl_raw_union_map, {"N": 4})

Instances are ``(statement name, (loop values...))``.
"""
from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import dataclass

import islpy as isl

from polyir.ir.affine import Aff
from polyir.ir.fragments import MMA_SHAPES
from polyir.ir.nodes import (
    Assign,
    For,
    FragmentFill,
    FragmentLoad,
    FragmentMMA,
    FragmentStore,
    Function,
    If,
    Node,
)
from polyir.polyhedral.extract import NotPolyhedral, affine_index, expr_loads, isl_name

Instance = tuple[str, tuple[int, ...]]
Pair = tuple[Instance, Instance]


@dataclass(frozen=True)
class Event:
    """One statement instance: what it reads and writes.

    ``reads``/``writes`` are ``(buffer, element, exact)`` triples; a may
    access (gather) lists every element it might touch with ``exact=False``.
    """

    instance: Instance
    env: tuple[tuple[str, int], ...]
    reads: tuple[tuple[str, tuple[int, ...], bool], ...]
    writes: tuple[tuple[str, tuple[int, ...], bool], ...]


def trace(function: Function, params: Mapping[str, int]) -> list[Event]:
    """Statement instances of ``function`` in execution order for ``params``."""
    shapes = {name: tuple(d.evaluate(params) for d in buf.shape)
              for name, buf in function.buffers.items()}
    scoped = scoped_buffers(function)
    events: list[Event] = []

    def elements(buffer: str, indices: tuple[object, ...] | None, env: dict[str, int],
                 region: tuple[int, int] | None = None) -> tuple[list[tuple[int, ...]], bool]:
        shape = shapes[buffer]
        ranges: list[range] = []
        exact = True
        for k, extent in enumerate(shape):
            aff = None if indices is None else affine_index(indices[k])
            if aff is None:
                ranges.append(range(extent))
                exact = exact and indices is None
                continue
            start = aff.evaluate(env)
            size = 1
            if region is not None and k >= len(shape) - 2:
                size = region[k - (len(shape) - 2)]
            ranges.append(range(start, start + size))
        copy = tuple(env[v] for v in scoped.get(buffer, ()))  # a loop-scoped local's instance
        return [copy + e for e in itertools.product(*ranges)], exact

    def accesses(node: Node, env: dict[str, int]):
        reads: list[tuple[str, tuple[int, ...], bool]] = []
        writes: list[tuple[str, tuple[int, ...], bool]] = []

        def add(target: list, buffer: str, indices, region=None) -> None:
            elems, exact = elements(buffer, indices, env, region)
            target.extend((buffer, e, exact) for e in elems)

        if isinstance(node, Assign):
            for load in expr_loads(node.value):
                add(reads, load.buffer, load.indices)
            for index in node.indices:
                if not isinstance(index, Aff):
                    for load in expr_loads(index):
                        add(reads, load.buffer, load.indices)
            add(writes, node.buffer, node.indices)
        elif isinstance(node, FragmentFill):
            for load in expr_loads(node.value):
                add(reads, load.buffer, load.indices)
            add(writes, node.fragment, None)
        elif isinstance(node, FragmentLoad):
            rows, cols = MMA_SHAPES[node.shape].role_shape(node.role)
            add(reads, node.buffer, node.indices, (rows, cols) if node.layout == "row" else (cols, rows))
            add(writes, node.fragment, None)
        elif isinstance(node, FragmentMMA):
            for operand in (node.a, node.b, node.acc):
                add(reads, operand, None)
            add(writes, node.result, None)
        elif isinstance(node, FragmentStore):
            rows, cols = MMA_SHAPES[node.shape].role_shape("acc")
            add(reads, node.fragment, None)
            add(writes, node.buffer, node.indices, (rows, cols) if node.layout == "row" else (cols, rows))
        else:
            raise NotPolyhedral(f"no brute-force model for {type(node).__name__}")
        return tuple(reads), tuple(writes)

    def run(nodes: tuple[Node, ...], env: dict[str, int], values: tuple[int, ...]) -> None:
        for node in nodes:
            if isinstance(node, For):
                lo = max(b.evaluate(env) for b in node.lower)
                hi = min(b.evaluate(env) for b in node.upper)
                for v in range(lo, hi, node.step):
                    run(node.body, {**env, node.var: v}, values + (v,))
            elif isinstance(node, If):
                if all(c.holds(env) for c in node.conditions):
                    run(node.then_body, env, values)
                else:
                    run(node.else_body, env, values)
            else:
                reads, writes = accesses(node, env)
                events.append(Event((node.name, values), tuple(sorted(env.items())),  # type: ignore[union-attr]
                                    reads, writes))

    run(function.body, dict(params), ())
    return events


def scoped_buffers(function: Function) -> dict[str, tuple[str, ...]]:
    """Loop-scoped local -> the variables of its loop and the loops around it
    (outermost first): each value of them has its own copy of the buffer."""
    found: dict[str, tuple[str, ...]] = {}

    def visit(nodes: tuple[Node, ...], loops: tuple[str, ...]) -> None:
        for node in nodes:
            if isinstance(node, For):
                inner = loops + (node.var,)
                for local in node.locals:
                    found[local.name] = inner
                visit(node.body, inner)
            elif isinstance(node, If):
                visit(node.then_body, loops)
                visit(node.else_body, loops)

    visit(function.body, ())
    return found


def brute_force_dependences(function: Function, params: Mapping[str, int]) -> dict[str, set[Pair]]:
    """``{"raw", "war", "waw", "flow"} -> set of (source, sink) instance pairs``."""
    events = trace(function, params)
    per_element: dict[tuple[str, tuple[int, ...]], list[tuple[int, str, bool]]] = {}
    for t, ev in enumerate(events):
        # within one instance reads happen before the write
        for buffer, elem, exact in ev.reads:
            per_element.setdefault((buffer, elem), []).append((t, "r", exact))
        for buffer, elem, exact in ev.writes:
            per_element.setdefault((buffer, elem), []).append((t, "w", exact))
    found: dict[str, set[Pair]] = {"raw": set(), "war": set(), "waw": set(), "flow": set()}
    kinds = {("w", "r"): "raw", ("r", "w"): "war", ("w", "w"): "waw"}
    for accesses in per_element.values():
        for n, (t2, k2, _) in enumerate(accesses):
            for t1, k1, _ in accesses[:n]:
                if t1 == t2 or (k1, k2) not in kinds:
                    continue
                found[kinds[(k1, k2)]].add((events[t1].instance, events[t2].instance))
            if k2 != "r":
                continue
            for t1, k1, exact1 in reversed(accesses[:n]):
                if t1 == t2 or k1 != "w":
                    continue
                found["flow"].add((events[t1].instance, events[t2].instance))
                if exact1:
                    break
    return found


def instance_pairs(relation: isl.UnionMap | isl.Map, params: Mapping[str, int],
                   names: Mapping[str, str] | None = None) -> set[Pair]:
    """The instance pairs of an isl relation with its parameters fixed to ``params``.

    ``names`` maps isl tuple names back to statement names (default: identity
    up to :func:`isl_name` escaping)."""
    umap = relation if isinstance(relation, isl.UnionMap) else isl.UnionMap.from_map(relation)
    fixed = _fixed_params(umap.get_space(), params)
    found: set[Pair] = set()
    maps: list[isl.Map] = []
    umap.intersect_params(fixed).foreach_map(maps.append)
    for m in maps:
        src = _statement_name(m.get_tuple_name(isl.dim_type.in_), names)
        dst = _statement_name(m.get_tuple_name(isl.dim_type.out), names)
        n_in = m.dim(isl.dim_type.in_)
        n_out = m.dim(isl.dim_type.out)

        def add(point: isl.Point, src: str = src, dst: str = dst, n_in: int = n_in,
                n_out: int = n_out) -> None:
            coords = [int(point.get_coordinate_val(isl.dim_type.set, k).to_python())
                      for k in range(n_in + n_out)]
            found.add(((src, tuple(coords[:n_in])), (dst, tuple(coords[n_in:]))))

        m.wrap().foreach_point(add)
    return found


def instances(domain: isl.UnionSet | isl.Set, params: Mapping[str, int]) -> set[Instance]:
    """The points of an isl domain with its parameters fixed."""
    uset = domain if isinstance(domain, isl.UnionSet) else isl.UnionSet.from_set(domain)
    uset = uset.intersect_params(_fixed_params(uset.get_space(), params))
    found: set[Instance] = set()
    sets: list[isl.Set] = []
    uset.foreach_set(sets.append)
    for s in sets:
        name = _statement_name(s.get_tuple_name(), None)
        n = s.dim(isl.dim_type.set)
        def add(p: isl.Point, name: str = name, n: int = n) -> None:
            found.add((name, tuple(int(p.get_coordinate_val(isl.dim_type.set, k).to_python())
                                   for k in range(n))))

        s.foreach_point(add)
    return found


def _statement_name(tuple_name: str, names: Mapping[str, str] | None) -> str:
    if names is not None:
        return names.get(tuple_name, tuple_name)
    return tuple_name[:-1] if tuple_name.endswith("_") and tuple_name[:-1] and \
        isl_name(tuple_name[:-1]) == tuple_name else tuple_name


def _fixed_params(space: isl.Space, params: Mapping[str, int]) -> isl.Set:
    names = [str(space.get_dim_name(isl.dim_type.param, k)) for k in range(space.dim(isl.dim_type.param))]
    plain = {isl_name(k): v for k, v in params.items()}
    cons = " and ".join(f"{n} = {plain[n]}" for n in names if n in plain) or "true"
    return isl.Set(f"[{', '.join(names)}] -> {{ : {cons} }}", context=space.get_ctx())
