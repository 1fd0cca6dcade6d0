"""Dependences between statement instances, computed with isl.

Kinds:

* ``raw``, ``war``, ``waw``: memory-based (every earlier access to the same
  element, nothing killed);
* ``flow``: value-based: a read depends on the last write of the element
  before it, and on the may-writes (gathers) after that write
  (:func:`last_writers`).

Each :class:`Dependence` holds one pair of statements, one buffer and one
kind, with its isl map ``source instance -> sink instance``, the loop levels
that carry it (under the original schedule), its direction vector and, when
uniform, its distance vector over the loops the two statements share.
"""
from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass

import islpy as isl

from polyir.ir.nodes import Function, Module
from polyir.polyhedral.extract import Access, Scop, extract, isl_name
from polyir.polyhedral.memo import ISL_MEMO, bounded
from polyir.polyhedral.order import precedence

Pair = tuple[tuple[str, tuple[int, ...]], tuple[str, tuple[int, ...]]]
"""A dependence between two statement instances ``(statement, (loop values...))``."""

MEMORY_KINDS = ("raw", "war", "waw")
ALL_KINDS = ("raw", "war", "waw", "flow")
_SIGNS = {frozenset("+"): "<", frozenset("0"): "=", frozenset("-"): ">",
          frozenset("+0"): "<=", frozenset("-0"): ">=", frozenset("+-"): "!=",
          frozenset("+-0"): "*", frozenset(): "."}


@dataclass(frozen=True, eq=False)
class Dependence:
    """``source`` instances must run before ``sink`` instances.

    ``relation`` maps ``source[...]`` to ``sink[...]`` instances; ``common``
    lists the loop ids both statements share (outermost first); ``carried``
    the 1-based levels of ``common`` that carry some instance pair (``0`` in
    ``carried`` means some pair is loop-independent, i.e. equal on all common
    loops). ``direction`` has one of ``< = > <= >= != *`` per common loop
    (sink minus source); ``distance`` is the constant distance vector when
    the dependence is uniform, else ``None``.
    """

    kind: str
    source: str
    sink: str
    buffer: str
    relation: isl.Map
    common: tuple[int, ...]
    carried: tuple[int, ...] = ()
    direction: tuple[str, ...] = ()
    distance: tuple[int, ...] | None = None
    reduction: bool = False

    def carried_loops(self) -> tuple[int, ...]:
        """Ids of the loops that carry this dependence."""
        return tuple(self.common[level - 1] for level in self.carried if level > 0)

    def pairs(self, params: Mapping[str, int]) -> set[Pair]:
        """The ``(source instance, sink instance)`` pairs for fixed symbol values,
        each instance ``(statement, (loop values...))`` (isl point enumeration)."""
        from polyir.polyhedral.bruteforce import instance_pairs
        return instance_pairs(self.relation, params)

    def __repr__(self) -> str:
        return f"<Dependence {self}>"

    def __str__(self) -> str:
        vec = f" distance ({', '.join(map(str, self.distance))})" if self.distance is not None \
            else f" direction ({', '.join(self.direction)})" if self.direction else ""
        levels = ", ".join(str(x) for x in self.carried)
        return (f"{self.kind.upper()} {self.source} -> {self.sink} on {self.buffer}:"
                f" carried at levels [{levels}]{vec}")


@dataclass(frozen=True, eq=False)
class Dependences:
    """All dependences of a :class:`Scop` (iterable and indexable, in a stable
    order: by kind, then source and sink statement order, then buffer).
    ``str`` gives one line per dependence; in a notebook it is a table."""

    scop: Scop
    items: tuple[Dependence, ...] = ()

    def __iter__(self) -> Iterator[Dependence]:
        return iter(self.items)

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, index: int) -> Dependence:
        return self.items[index]

    def __repr__(self) -> str:
        from polyir.polyhedral.report import dependences_summary
        return f"<{dependences_summary(self)}>"

    def __str__(self) -> str:
        return "\n".join(str(d) for d in self.items) or "no dependences"

    def _repr_markdown_(self) -> str:
        from polyir.polyhedral.report import dependences_markdown
        return dependences_markdown(self)

    def filter(self, kinds: str | Sequence[str] | None = None, buffer: str | None = None,
               statement: str | None = None, carried_by: str | None = None,
               accept_reassociation: bool = False) -> Dependences:
        """The dependences of some ``kinds`` (``"raw"``, ... or ``"memory"`` for the
        three memory-based kinds), on ``buffer``, with ``statement`` as source or
        sink, carried by the loop named ``carried_by``; with ``accept_reassociation``
        the self-dependences of reductions are left out. Unknown kinds raise ``ValueError``."""
        wanted = kind_names(kinds)
        loop = self.scop.loop(carried_by).id if carried_by is not None else None
        return Dependences(self.scop, tuple(
            d for d in self.items
            if d.kind in wanted and (buffer is None or d.buffer == buffer)
            and (statement is None or statement in (d.source, d.sink))
            and (loop is None or loop in d.carried_loops())
            and not (accept_reassociation and d.reduction)))

    def pairs(self, params: Mapping[str, int]) -> set[Pair]:
        """Every ``(source, sink)`` instance pair of these dependences for fixed
        symbol values (a pair two dependences share counts once)."""
        found: set[Pair] = set()
        for d in self.items:
            found |= d.pairs(params)
        return found

    def of_kind(self, *kinds: str) -> list[Dependence]:
        return [d for d in self.items if d.kind in kinds]

    def memory(self, accept_reassociation: bool = False) -> list[Dependence]:
        """Memory-based dependences; with ``accept_reassociation`` the
        self-dependences of reduction statements on their accumulator are left out."""
        return [d for d in self.of_kind(*MEMORY_KINDS)
                if not (accept_reassociation and d.reduction)]

    def union(self, kinds: tuple[str, ...] = MEMORY_KINDS,
              accept_reassociation: bool = False) -> isl.UnionMap:
        result = isl.UnionMap.empty(self.scop.context.get_space())
        for d in self.items:
            if d.kind in kinds and not (accept_reassociation and d.reduction):
                result = result.union(isl.UnionMap.from_map(d.relation))
        return result

    def carrying_loops(self, accept_reassociation: bool = False) -> dict[int, list[Dependence]]:
        """Loop id -> the memory dependences it carries."""
        found: dict[int, list[Dependence]] = {}
        for d in self.memory(accept_reassociation):
            for loop in d.carried_loops():
                found.setdefault(loop, []).append(d)
        return found

    def graph(self):  # -> networkx.MultiDiGraph
        from polyir.polyhedral.graph import statement_graph
        return statement_graph(self)

    def nest_graph(self):  # -> networkx.MultiDiGraph
        from polyir.polyhedral.graph import nest_graph
        return nest_graph(self)


def kind_names(kinds: str | Sequence[str] | None) -> tuple[str, ...]:
    """Dependence kinds from ``None`` (all), ``"memory"`` (RAW, WAR, WAW), one
    kind or several; raises ``ValueError`` naming an unknown kind."""
    if kinds is None:
        return ALL_KINDS
    names = [kinds] if isinstance(kinds, str) else list(kinds)
    found: list[str] = []
    for name in names:
        expanded = MEMORY_KINDS if name == "memory" else (name.lower(),)
        for kind in expanded:
            if kind not in ALL_KINDS:
                raise ValueError(f"unknown dependence kind {name!r}: use {', '.join(ALL_KINDS)} or memory")
            if kind not in found:
                found.append(kind)
    return tuple(found)


# ------------------------------------------------------------ computation
def raw_relations(scop: Scop, kinds: tuple[str, ...] = ALL_KINDS) -> dict[str, dict[str, isl.UnionMap]]:
    """kind -> buffer -> union map of instance pairs (for the ``kinds`` asked).

    Each buffer is analysed over the statements that access it only (their
    accesses and their original time vectors), so a function of ``n``
    independent statements costs ``n`` small problems, not ``n`` problems over
    all ``n`` statements (300 statements: seconds, not minutes). The
    memory-based kinds are built one pair of accesses at a time
    (:func:`_memory_based`); ``flow`` by :func:`last_writers`."""
    space = scop.context.get_space()
    empty = isl.UnionMap.empty(space)
    result: dict[str, dict[str, isl.UnionMap]] = {k: {} for k in kinds}
    times: dict[str, isl.Map] | None = None
    groups: dict[str, list[Access]] = {}
    for statement in scop.statements.values():
        for access in statement.accesses:
            groups.setdefault(access.buffer, []).append(access)
    for buffer, accesses in groups.items():
        if not any(a.kind == "write" for a in accesses):
            for per_buffer in result.values():   # read-only: no dependence of any kind
                per_buffer[buffer] = empty
            continue
        read_accesses = [a for a in accesses if a.kind == "read"]
        write_accesses = [a for a in accesses if a.kind == "write"]
        if "raw" in result:
            result["raw"][buffer] = _memory_based(scop, write_accesses, read_accesses, empty)
        if "war" in result:
            result["war"][buffer] = _memory_based(scop, read_accesses, write_accesses, empty)
        if "waw" in result:
            result["waw"][buffer] = _memory_based(scop, write_accesses, write_accesses, empty)
        if "flow" in result:
            times = statement_time_maps(scop) if times is None else times
            time = empty
            for name in dict.fromkeys(a.statement for a in accesses):
                time = time.union(isl.UnionMap.from_map(times[name]))
            reads = _union_of(empty, accesses, lambda a: a.kind == "read")
            must = _union_of(empty, accesses, lambda a: a.kind == "write" and a.exact)
            may = _union_of(empty, accesses, lambda a: a.kind == "write" and not a.exact)
            result["flow"][buffer] = last_writers(scop, reads, must, may, time)
    return result


def _memory_based(scop: Scop, sources: list[Access], sinks: list[Access],
                  empty: isl.UnionMap) -> isl.UnionMap:
    """``{ source -> sink }`` for every pair of instances that access one element,
    the source first: each pair of accesses is joined on the element and
    intersected with its statements' :func:`polyir.polyhedral.order.precedence`
    (a disjunct per loop the two share, where isl's ``compute_flow`` with
    may-sources orders the instances over the whole padded time space, a
    few times the cost for the same set). Bounded like every isl problem
    (:func:`polyir.polyhedral.memo.bounded`), not memoised: a lookup would
    cost about as much."""
    def compute() -> isl.UnionMap:
        found = empty
        for source in sources:
            for sink in sinks:
                pairs = source.relation.apply_range(sink.relation.reverse())
                found = found.union(isl.UnionMap.from_map(
                    pairs.intersect(precedence(scop, source.statement, sink.statement))))
        return found

    return bounded("memory dependence", scop.ctx, compute)


def _union_of(empty: isl.UnionMap, accesses: list[Access],
              wanted: Callable[[Access], bool]) -> isl.UnionMap:
    found = empty
    for access in accesses:
        if wanted(access):
            found = found.union(isl.UnionMap.from_map(access.relation))
    return found


def last_writers(scop: Scop, reads: isl.UnionMap, must: isl.UnionMap,
                 may: isl.UnionMap, time: isl.UnionMap | None = None) -> isl.UnionMap:
    """Value-based flow dependences ``source -> sink``: for each read instance
    and element, the last must-write before it plus the may-writes after that.
    ``time``: :func:`as_time_map` of ``scop`` (or its restriction to the
    statements involved), when already computed.

    isl's ``compute_flow`` (and parametric ``lexmax``) give wrong answers on
    some strided loops (isl as shipped in islpy 2026.2.2: the last write of
    ``for k = 0 to N step 2`` is placed at ``k = 0``), so the kill is computed
    without parametric optimisation: a write is dropped when another must
    write of the same element falls between it and the read. The brute-force
    oracle (``polyir.polyhedral.bruteforce``) checks the result. Memoised
    (:data:`polyir.polyhedral.memo.ISL_MEMO`)."""
    if reads.is_empty():
        return isl.UnionMap.empty(scop.context.get_space())
    time = as_time_map(scop) if time is None else time
    return ISL_MEMO.answer("last_writers", reads.get_ctx(), (reads, must, may, time),
                           lambda: _last_writers(reads, must, may, time), isl.UnionMap)


def _last_writers(reads: isl.UnionMap, must: isl.UnionMap, may: isl.UnionMap,
                  time: isl.UnionMap) -> isl.UnionMap:
    """:func:`last_writers` of a non-empty ``reads``, computed."""
    sink_time = reads.domain_map().apply_range(time)           # [sink -> e] -> t_sink
    later = isl.UnionMap.from_map(_lex_gt_map(time))          # t1 -> t2 : t1 >lex t2

    def before_sink(writes: isl.UnionMap) -> isl.UnionMap:
        """[sink -> e] -> t_source for writes of e strictly before the sink."""
        cand = reads.range_map().apply_range(writes.reverse()).apply_range(time)
        paired = sink_time.range_product(cand)
        return paired.intersect_range(later.wrap()).range_factor_range()

    must_times = before_sink(must)
    overwritten = must_times.apply_range(later)   # times before some later must write
    result = must_times.subtract(overwritten)
    if not may.is_empty():
        result = result.union(before_sink(may).subtract(overwritten))
    # [sink -> e] -> t_source  ==>  source -> sink
    sources = result.apply_range(time.reverse())
    return sources.reverse().range_factor_domain().coalesce()


def as_time_map(scop: Scop) -> isl.UnionMap:
    """The original schedule as padded 2d+1 time vectors (injective)."""
    return scop.schedule_from_vectors(scop.schedule_vectors())


def statement_time_maps(scop: Scop) -> dict[str, isl.Map]:
    """Statement name -> its part of :func:`as_time_map` (every vector padded
    to the same width, so the parts compare as the whole does)."""
    vectors = scop.schedule_vectors()
    width = max((len(v) for v in vectors.values()), default=0)
    found: dict[str, isl.Map] = {}
    for name, vector in vectors.items():
        statement = scop.statements[name]
        padded = [str(x) for x in vector] + ["0"] * (width - len(vector))
        text = (f"{scop.param_space} -> {{ {isl_name(name)}[{', '.join(statement.dims)}] -> "
                f"[{', '.join(padded)}] }}")
        found[name] = scop.isl_map(text).intersect_domain(statement.domain)
    return found


def _lex_gt_map(time: isl.UnionMap) -> isl.Map:
    """``{ t1 -> t2 : t1 >lex t2 }`` over the time space of ``time``."""
    maps: list[isl.Map] = []
    time.foreach_map(maps.append)
    return isl.Map.lex_gt(maps[0].get_space().range())


def compute_dependences(target: Scop | Function | Module, kinds: tuple[str, ...] = ALL_KINDS) -> Dependences:
    """Every dependence of ``target`` (a function, a module's entry function or a ``Scop``), split per
    kind, buffer and pair of statements. ``kinds``: only these kinds
    (``MEMORY_KINDS`` is what legality checks need; the value-based ``flow``
    kind costs the most)."""
    scop = target if isinstance(target, Scop) else extract(target)
    by_isl_name = {isl_name(s): s for s in scop.statements}
    found: list[Dependence] = []
    for kind, per_buffer in raw_relations(scop, kinds).items():
        for buffer, umap in per_buffer.items():
            for rel in _maps(umap.coalesce()):
                if rel.is_empty():
                    continue
                source = by_isl_name[rel.get_tuple_name(isl.dim_type.in_)]
                sink = by_isl_name[rel.get_tuple_name(isl.dim_type.out)]
                found.append(describe(scop, kind, source, sink, buffer, rel))
    found.sort(key=lambda d: (ALL_KINDS.index(d.kind), scop.statements[d.source].order,
                              scop.statements[d.sink].order, d.buffer))
    return Dependences(scop, tuple(found))


def common_loops(scop: Scop, a: str, b: str) -> tuple[int, ...]:
    """Ids of the loops enclosing both statements, outermost first."""
    la, lb = scop.statements[a].loops, scop.statements[b].loops
    n = 0
    while n < min(len(la), len(lb)) and la[n] == lb[n]:
        n += 1
    return la[:n]


def level_relation(scop: Scop, source: str, sink: str, level: int, op: str = "<") -> isl.Map:
    """``{ source[a] -> sink[b] : a_k = b_k for k < level, a_level op b_level }``
    over the statements' common loops (``level`` 1-based; 0 = equal on all common loops)."""
    sa, sb = scop.statements[source], scop.statements[sink]
    common = len(common_loops(scop, source, sink))
    a = [f"a{k}" for k in range(len(sa.dims))]
    b = [f"b{k}" for k in range(len(sb.dims))]
    upto = common if level == 0 else level - 1
    cons = [f"a{k} = b{k}" for k in range(upto)]
    if level > 0:
        cons.append(f"a{level - 1} {op} b{level - 1}")
    text = (f"{scop.param_space} -> {{ {isl_name(source)}[{', '.join(a)}] -> "
            f"{isl_name(sink)}[{', '.join(b)}] : {' and '.join(cons) or 'true'} }}")
    return scop.isl_map(text)


def common_deltas(rel: isl.Map, common: int) -> isl.Set:
    """The set of ``sink - source`` vectors over the first ``common`` dims."""
    n_in = rel.dim(isl.dim_type.in_)
    n_out = rel.dim(isl.dim_type.out)
    proj = rel.project_out(isl.dim_type.out, common, n_out - common)
    proj = proj.project_out(isl.dim_type.in_, common, n_in - common)
    proj = proj.reset_tuple_id(isl.dim_type.in_).reset_tuple_id(isl.dim_type.out)
    return proj.deltas()


def describe(scop: Scop, kind: str, source: str, sink: str, buffer: str,
             rel: isl.Map) -> Dependence:
    """A :class:`Dependence` with carried levels, direction and distance.

    Every property is read off the distance set over the common loops (what
    ``rel`` intersected with :func:`level_relation` would say, since those
    constraints only involve ``sink - source`` on the common loops), bounded
    through isl's API rather than parsed probes."""
    common = common_loops(scop, source, sink)
    deltas = common_deltas(rel, len(common))
    carried = []
    prefix = deltas           # distances equal to 0 on the loops outside the current one
    for k in range(len(common)):
        if not prefix.lower_bound_val(isl.dim_type.set, k, 1).is_empty():
            carried.append(k + 1)
        prefix = prefix.fix_val(isl.dim_type.set, k, 0)
    if not prefix.is_empty():
        carried.insert(0, 0)
    direction = []
    for k in range(len(common)):
        signs = set()
        if not deltas.lower_bound_val(isl.dim_type.set, k, 1).is_empty():
            signs.add("+")
        if not deltas.fix_val(isl.dim_type.set, k, 0).is_empty():
            signs.add("0")
        if not deltas.upper_bound_val(isl.dim_type.set, k, -1).is_empty():
            signs.add("-")
        direction.append(_SIGNS[frozenset(signs)])
    distance = _uniform_distance(deltas, len(common))
    stmt = scop.statements[source]
    is_reduction = (source == sink and stmt.reduction is not None
                    and stmt.reduction[0] == buffer and kind in MEMORY_KINDS)
    return Dependence(kind, source, sink, buffer, rel, common, tuple(carried),
                      tuple(direction), distance, is_reduction)


def _uniform_distance(deltas: isl.Set, n: int) -> tuple[int, ...] | None:
    if deltas.is_empty() or n == 0:
        return None
    point = deltas.sample_point()
    values = [int(point.get_coordinate_val(isl.dim_type.set, k).to_python()) for k in range(n)]
    exact = isl.Set.universe(deltas.get_space())
    for k, value in enumerate(values):
        exact = exact.fix_val(isl.dim_type.set, k, value)
    return tuple(values) if deltas.is_subset(exact) else None


def _maps(umap: isl.UnionMap) -> list[isl.Map]:
    found: list[isl.Map] = []
    umap.foreach_map(found.append)
    return found
