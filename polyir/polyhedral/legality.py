"""Legality of loop transformations, with witnesses.

Every query returns a :class:`Legality`: ``.legal`` and, when illegal, the
``dependence`` that forbids the change and a concrete :class:`Witness`: two
statement instances (with values for the symbols) that access the same
element and whose order the change would reverse::

    S1(i=3, j=2) writes C[3, 2] before S2(i=3, j=1) reads it; the new schedule runs S2(i=3, j=1) first  [N=4]

``Legality.require()`` (or :func:`require`) raises ``polyir.IllegalTransform``
carrying the dependence and the witness.

Queries: :func:`check_schedule` (is a proposed schedule valid),
:func:`check_parallel` (may a loop run its iterations in any order),
:func:`check_permutable` (may a band be permuted / tiled),
:func:`check_permutation` (one given loop order), :func:`check_fusion`
(may two top-level nests be fused at depth ``d``).
"""
from __future__ import annotations

from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

import islpy as isl

from polyir.errors import IllegalTransform
from polyir.ir.affine import Aff
from polyir.ir.nodes import Function, Module
from polyir.polyhedral.dependences import (
    MEMORY_KINDS,
    Dependence,
    Dependences,
    compute_dependences,
    level_relation,
)
from polyir.polyhedral.extract import Scop, StatementInfo, extract, isl_name

_PARAM_BOUNDS = (2, 4, 8, 16, 64, 1024)


@dataclass(frozen=True)
class Instance:
    """A statement instance: statement name and loop variable values."""

    statement: str
    values: tuple[tuple[str, int], ...]

    def __str__(self) -> str:
        return f"{self.statement}({', '.join(f'{v}={x}' for v, x in self.values)})"

    def __repr__(self) -> str:
        return f"<Instance {self}>"

    @property
    def point(self) -> tuple[int, ...]:
        return tuple(x for _, x in self.values)


@dataclass(frozen=True)
class Witness:
    """Two conflicting instances whose order a transformation would reverse
    (iterable: ``source, sink = witness``)."""

    source: Instance
    sink: Instance
    buffer: str
    element: tuple[int, ...]
    source_access: str   # "writes" | "reads"
    sink_access: str
    params: tuple[tuple[str, int], ...]
    consequence: str

    def __str__(self) -> str:
        elem = ", ".join(map(str, self.element))
        verb = "reads" if self.sink_access == "reads" else "writes"
        params = ", ".join(f"{k}={v}" for k, v in self.params)
        text = (f"{self.source} {self.source_access} {self.buffer}[{elem}] before "
                f"{self.sink} {verb} it; {self.consequence}")
        return f"{text}  [{params}]" if params else text

    def __iter__(self) -> Iterator[Instance]:
        return iter((self.source, self.sink))

    def __repr__(self) -> str:
        elem = ", ".join(map(str, self.element))
        return f"<Witness {self.source} -> {self.sink} on {self.buffer}[{elem}]>"

    def _repr_markdown_(self) -> str:
        from polyir.polyhedral.report import witness_markdown
        return witness_markdown(self)


@dataclass
class Legality:
    """The answer to a legality query: true when legal; iterating gives the
    dependences the change would violate (none when legal)."""

    legal: bool
    reason: str = ""
    dependence: Dependence | None = None
    witness: Witness | None = None
    violations: list[Dependence] = field(default_factory=list)

    def __bool__(self) -> bool:
        return self.legal

    def require(self) -> None:
        """Raise ``IllegalTransform`` (with dependence and witness) when illegal."""
        if not self.legal:
            raise IllegalTransform(self.reason, dependence=self.dependence, witness=self.witness)

    def __str__(self) -> str:
        if self.legal:
            return "legal"
        return f"illegal: {self.reason}" + (f"\n  witness: {self.witness}" if self.witness else "")

    def __iter__(self) -> Iterator[Dependence]:
        if self.violations:
            return iter(self.violations)
        return iter(() if self.dependence is None else (self.dependence,))

    def __repr__(self) -> str:
        from polyir.polyhedral.report import short
        return short("<Legality: legal>" if self.legal else f"<Legality: illegal: {self.reason}>")

    def _repr_markdown_(self) -> str:
        from polyir.polyhedral.report import legality_markdown
        return legality_markdown(self)


def require(result: Legality) -> Legality:
    """``result`` when legal; else raises ``IllegalTransform``."""
    result.require()
    return result


def _analysis(target: Scop | Function | Module | Dependences) -> Dependences:
    if isinstance(target, Dependences):
        return target
    # the checks read memory-based dependences only: the value-based kind costs the most
    return compute_dependences(target if isinstance(target, Scop) else extract(target), MEMORY_KINDS)


# ------------------------------------------------------------ witnesses
def _point_values(point: isl.Point, dim: isl.dim_type, n: int) -> list[int]:
    return [int(point.get_coordinate_val(dim, k).to_python()) for k in range(n)]


def _small_sample(relation: isl.Map, scop: Scop) -> isl.Point:
    """A point of ``relation``, preferring small symbol values."""
    n_params = relation.dim(isl.dim_type.param)
    for bound in _PARAM_BOUNDS:
        box = scop.isl_set(f"{scop.param_space} -> {{ : "
                      + (" and ".join(f"0 <= {isl_name(p)} <= {bound}" for p in scop.params)
                         or "true") + " }")
        limited = relation.intersect_params(box)
        if not limited.is_empty():
            return limited.wrap().sample_point()
    del n_params
    return relation.wrap().sample_point()


def make_witness(scop: Scop, dep: Dependence, violating: isl.Map, consequence: str) -> Witness:
    """A :class:`Witness` drawn from ``violating`` (a non-empty subset of ``dep.relation``).

    ``consequence`` may use ``{source}`` and ``{sink}`` placeholders."""
    point = _small_sample(violating, scop)
    src, snk = scop.statements[dep.source], scop.statements[dep.sink]
    n_params = violating.dim(isl.dim_type.param)
    param_names = [str(violating.get_dim_name(isl.dim_type.param, k)) for k in range(n_params)]
    param_values = _point_values(point, isl.dim_type.param, n_params)
    coords = _point_values(point, isl.dim_type.set, len(src.dims) + len(snk.dims))
    source = Instance(src.name, tuple(zip(src.loop_vars, coords[:len(src.dims)], strict=False)))
    sink = Instance(snk.name, tuple(zip(snk.loop_vars, coords[len(src.dims):], strict=False)))
    plain = {isl_name(p): p for p in scop.params}
    params = tuple((plain.get(n, n), v) for n, v in zip(param_names, param_values, strict=False))
    source_kind = "read" if dep.kind == "war" else "write"
    sink_kind = "write" if dep.kind in ("war", "waw") else "read"
    element = common_element(scop, src, source.point, source_kind,
                             snk, sink.point, sink_kind, dep.buffer, dict(params))
    return Witness(source, sink, dep.buffer, element,
                   "reads" if source_kind == "read" else "writes",
                   "reads" if sink_kind == "read" else "writes",
                   params, consequence.format(source=source, sink=sink))


def _fixed(scop: Scop, params: Mapping[str, int]) -> isl.Set:
    cons = " and ".join(f"{isl_name(p)} = {params[p]}" for p in scop.params) or "true"
    return scop.isl_set(f"{scop.param_space} -> {{ : {cons} }}")


def elements_touched(scop: Scop, stmt: StatementInfo, point: tuple[int, ...], kind: str,
                     buffer: str, params: Mapping[str, int]) -> isl.Set:
    """Elements of ``buffer`` that instance ``stmt(point)`` accesses with ``kind``."""
    cons = " and ".join(f"{d} = {v}" for d, v in zip(stmt.dims, point, strict=False)) or "true"
    inst = scop.isl_set(f"{scop.param_space} -> {{ {isl_name(stmt.name)}[{', '.join(stmt.dims)}] : {cons} }}")
    inst = inst.intersect_params(_fixed(scop, params))
    result: isl.Set | None = None
    for acc in stmt.accesses:
        if acc.kind == kind and acc.buffer == buffer:
            part = acc.relation.intersect_domain(inst).range()
            result = part if result is None else result.union(part)
    if result is None:
        raise ValueError(f"{stmt.name} has no {kind} of {buffer}")
    return result


def common_element(scop: Scop, a: StatementInfo, pa: tuple[int, ...], kind_a: str,
                   b: StatementInfo, pb: tuple[int, ...], kind_b: str, buffer: str,
                   params: Mapping[str, int]) -> tuple[int, ...]:
    both = elements_touched(scop, a, pa, kind_a, buffer, params).intersect(
        elements_touched(scop, b, pb, kind_b, buffer, params))
    if both.is_empty():
        raise AssertionError(f"instances {a.name}{pa} and {b.name}{pb} share no element of {buffer}")
    point = both.sample_point()
    return tuple(_point_values(point, isl.dim_type.set, both.dim(isl.dim_type.set)))


# ------------------------------------------------------------ schedule validity
def _pad(umap: isl.UnionMap) -> isl.UnionMap:
    maps: list[isl.Map] = []
    umap.foreach_map(maps.append)
    width = max((m.dim(isl.dim_type.out) for m in maps), default=0)
    result = isl.UnionMap.empty(umap.get_space())
    for m in maps:
        n = m.dim(isl.dim_type.out)
        m = m.reset_tuple_id(isl.dim_type.out).add_dims(isl.dim_type.out, width - n)
        for k in range(n, width):
            m = m.fix_si(isl.dim_type.out, k, 0)  # type: ignore[attr-defined]
        result = result.union(isl.UnionMap.from_map(m))
    return result


def as_schedule_map(scop: Scop, schedule: isl.UnionMap | isl.Schedule | str) -> isl.UnionMap:
    """A schedule (tree, union map or isl text) as a padded union map on the domain."""
    if isinstance(schedule, str):
        schedule = scop.isl_union_map(schedule)
    if isinstance(schedule, isl.Schedule):
        schedule = schedule.get_map()
    schedule = schedule.intersect_domain(scop.domain)
    covered = schedule.domain()
    if not scop.domain.is_subset(covered):
        missing = scop.domain.subtract(covered)
        raise ValueError(f"schedule does not cover every statement instance: {missing}")
    return _pad(schedule)


def _runs_before(times: isl.Map) -> bool:
    """Is every source time of ``times`` (source time -> sink time) strictly
    lexicographically before its sink time? Decided level by level (a sink
    earlier at the first level where the two differ; then only the pairs
    equal there go on), which is much cheaper for isl than intersecting with
    the full lexicographic order when the times have many dimensions."""
    current = times
    for level in range(times.dim(isl.dim_type.out)):
        if not current.order_gt(isl.dim_type.in_, level, isl.dim_type.out, level).is_empty():
            return False
        current = current.equate(isl.dim_type.in_, level, isl.dim_type.out, level)
        if current.is_empty():
            return True
    return current.is_empty()


def check_schedule(target: Scop | Function | Module | Dependences,
                   schedule: isl.UnionMap | isl.Schedule | str,
                   accept_reassociation: bool = False) -> Legality:
    """Is ``schedule`` (instances -> time vectors, lexicographic order) valid:
    does it run every dependence's source strictly before its sink?"""
    deps = _analysis(target)
    scop = deps.scop
    new = as_schedule_map(scop, schedule)
    per_statement: dict[str, isl.Map] = {}
    new.foreach_map(lambda m: per_statement.__setitem__(m.get_tuple_name(isl.dim_type.in_), m))
    # the dependences of one pair of statements (several buffers and kinds) are asked
    # together: their union runs every source first exactly when each of them does;
    # only a pair that fails is asked dependence by dependence
    pairs: dict[tuple[str, str], list[tuple[int, Dependence]]] = {}
    for index, dep in enumerate(deps.memory(accept_reassociation)):
        pairs.setdefault((dep.source, dep.sink), []).append((index, dep))
    bad_at: list[tuple[int, Dependence, isl.Map]] = []
    for (source, sink), members in pairs.items():
        # the times of the dependences' pairs: none may run the sink first or together
        first, then = per_statement[isl_name(source)], per_statement[isl_name(sink)]
        relation = members[0][1].relation
        for _, dep in members[1:]:
            relation = relation.union(dep.relation)
        if _runs_before(relation.apply_domain(first).apply_range(then)):
            continue
        for index, dep in members:
            if len(members) == 1 or not _runs_before(dep.relation.apply_domain(first).apply_range(then)):
                bad_at.append((index, dep, dep.relation.intersect(first.lex_ge_map(then))))
    bad = [(dep, violating) for _, dep, violating in sorted(bad_at, key=lambda item: item[0])]
    if not bad:
        return Legality(True)
    dep, violating = bad[0]
    witness = make_witness(scop, dep, violating, "")
    moments = [_time(new, scop, inst) for inst in (witness.source, witness.sink)]
    consequence = (f"the new schedule runs {witness.sink} first" if moments[0] != moments[1]
                   else f"the new schedule runs {witness.source} and {witness.sink} at the same time")
    witness = Witness(witness.source, witness.sink, witness.buffer, witness.element,
                      witness.source_access, witness.sink_access, witness.params, consequence)
    return Legality(False, f"schedule violates {dep}", dep, witness, [d for d, _ in bad])


def _time(schedule: isl.UnionMap, scop: Scop, inst: Instance) -> list[int]:
    stmt = scop.statements[inst.statement]
    cons = " and ".join(f"{d} = {v}" for d, (_, v) in zip(stmt.dims, inst.values, strict=False)) or "true"
    point = scop.isl_union_set(f"{scop.param_space} -> {{ {isl_name(stmt.name)}[{', '.join(stmt.dims)}] : {cons} }}")
    image = point.apply(schedule)
    sets: list[isl.Set] = []
    image.foreach_set(sets.append)
    values: list[int] = []
    for s in sets:
        # the time of one instance is one point once the parameters are fixed
        fixed = s.sample_point() if not s.is_empty() else None
        if fixed is not None:
            values = _point_values(fixed, isl.dim_type.set, s.dim(isl.dim_type.set))
    return values


# ------------------------------------------------------------ loop queries
def check_parallel(target: Scop | Function | Module | Dependences, loop: int | str,
                   accept_reassociation: bool = False) -> Legality:
    """May ``loop`` (id or unique variable name) run its iterations in any order?"""
    deps = _analysis(target)
    scop = deps.scop
    info = scop.loop(loop)
    carried = [d for d in deps.memory(accept_reassociation) if info.id in d.carried_loops()]
    if not carried:
        return Legality(True)
    dep = carried[0]
    violating = dep.relation.intersect(level_relation(scop, dep.source, dep.sink, info.depth))
    witness = make_witness(
        scop, dep, violating,
        f"running loop {info.var} in parallel (e.g. in reverse order) runs {{sink}} first")
    return Legality(False, f"loop {info.var} carries {dep}", dep, witness, carried)


def band_loops(scop: Scop, loops: Sequence[int | str]) -> list[int]:
    """Loop ids of a band given outer to inner; checks each is directly nested in the previous
    and that every statement inside the outermost is inside the innermost."""
    ids = [scop.loop(x).id for x in loops]
    for outer, inner in zip(ids, ids[1:], strict=False):
        if scop.loops[inner].parent != outer:
            raise ValueError(f"loop {scop.loops[inner].var} is not directly inside {scop.loops[outer].var}")
    inside = {s.name for s in scop.statements_in(ids[0])}
    if inside != {s.name for s in scop.statements_in(ids[-1])}:
        raise ValueError("the band is not perfectly nested: some statements sit between its loops")
    return ids


def check_permutable(target: Scop | Function | Module | Dependences, loops: Sequence[int | str],
                     accept_reassociation: bool = False) -> Legality:
    """May the band ``loops`` (outer to inner, perfectly nested) be permuted in any
    order and tiled? True when every dependence inside it that is not carried
    outside it has non-negative distance along every band loop."""
    deps = _analysis(target)
    scop = deps.scop
    ids = band_loops(scop, loops)
    first = scop.loops[ids[0]].depth
    for dep in deps.memory(accept_reassociation):
        if ids[0] not in dep.common:
            continue
        for loop in ids:
            level = scop.loops[loop].depth
            violating = dep.relation.intersect(_negative_at(scop, dep, first, level))
            if violating.is_empty():
                continue
            var = scop.loops[loop].var
            witness = make_witness(scop, dep, violating,
                                   f"running loop {var} outermost in the band runs {{sink}} first")
            return Legality(False, f"band {[scop.loops[x].var for x in ids]} is not permutable: "
                                   f"{dep} has a negative component along {var}", dep, witness, [dep])
    return Legality(True)


def _negative_at(scop: Scop, dep: Dependence, first: int, level: int) -> isl.Map:
    """Pairs equal on loops outside the band (depth < first) with sink < source at ``level``."""
    sa, sb = scop.statements[dep.source], scop.statements[dep.sink]
    a = [f"a{k}" for k in range(len(sa.dims))]
    b = [f"b{k}" for k in range(len(sb.dims))]
    cons = [f"a{k} = b{k}" for k in range(first - 1)] + [f"b{level - 1} < a{level - 1}"]
    return scop.isl_map(f"{scop.param_space} -> {{ {isl_name(dep.source)}[{', '.join(a)}] -> "
                   f"{isl_name(dep.sink)}[{', '.join(b)}] : {' and '.join(cons)} }}")


def check_permutation(target: Scop | Function | Module | Dependences, loops: Sequence[int | str],
                      order: Sequence[int], accept_reassociation: bool = False) -> Legality:
    """Is it legal to reorder the band ``loops`` (outer to inner) so that position
    ``k`` holds ``loops[order[k]]``?"""
    deps = _analysis(target)
    scop = deps.scop
    ids = band_loops(scop, loops)
    if sorted(order) != list(range(len(ids))):
        raise ValueError(f"{list(order)} is not a permutation of {len(ids)} loops")
    depths = [scop.loops[x].depth for x in ids]
    vectors = scop.schedule_vectors()
    for stmt in scop.statements_in(ids[0]):
        vec = vectors[stmt.name]
        dims = [vec[2 * d - 1] for d in depths]
        for k, d in enumerate(depths):
            vec[2 * d - 1] = dims[order[k]]
    return check_schedule(deps, scop.schedule_from_vectors(vectors), accept_reassociation)


def check_fusion(target: Scop | Function | Module | Dependences, first: int, second: int, depth: int,
                 accept_reassociation: bool = False) -> Legality:
    """May top-level nests ``first`` < ``second`` (indices in the function body) be
    fused at ``depth``: their outer ``depth`` loops merged (same iteration
    values), ``first``'s body before ``second``'s inside, at ``first``'s place?"""
    deps = _analysis(target)
    scop = deps.scop
    if not first < second:
        raise ValueError("fusion needs first < second")
    vectors = scop.schedule_vectors()
    nests = {first: scop.statements_in_nest(first), second: scop.statements_in_nest(second)}
    for nest, members in nests.items():
        if not members:
            raise ValueError(f"top-level node {nest} holds no statement")
        for stmt in members:
            if len(stmt.loops) < depth or stmt.loops[:depth] != members[0].loops[:depth] \
                    or any(p != 0 for p in stmt.positions[1:depth]):
                raise ValueError(f"nest {nest} is not a perfect chain of {depth} loops "
                                 f"(statement {stmt.name})")
    first_pos = nests[first][0].positions[0]
    for name, vec in vectors.items():
        stmt = scop.statements[name]
        tag = 1 if stmt.nest == second else 0
        if stmt.nest in nests:
            vec[0] = first_pos
        cut = 2 * depth
        if len(vec) > cut:
            vec.insert(cut, tag)
        else:
            vec.append(tag)
    result = check_schedule(deps, scop.schedule_from_vectors(vectors), accept_reassociation)
    if not result.legal and result.witness is not None:
        w = result.witness
        consequence = f"fusing nests {first} and {second} at depth {depth} runs {w.sink} first"
        result.reason = f"fusing nests {first} and {second} at depth {depth} violates {result.dependence}"
        result.witness = Witness(w.source, w.sink, w.buffer, w.element, w.source_access,
                                 w.sink_access, w.params, consequence)
    return result


@dataclass(frozen=True)
class Origin:
    """Where the instances of a statement of a rewritten function come from:
    ``statement`` of the original function, with each of its loop variables
    given as an affine expression (``values``: variable -> ``Aff``) of the new
    statement's loop variables and the symbols. A statement that keeps its name
    and all of its original loop variables (tiling adds loops around them)
    needs no ``Origin``: it maps to itself by those variables."""

    statement: str
    values: tuple[tuple[str, Aff], ...] = ()

    @staticmethod
    def of(statement: str, values: Mapping[str, Aff] | None = None) -> Origin:
        return Origin(statement, tuple(sorted((values or {}).items())))


def compose_origins(first: Mapping[str, Origin], then: Mapping[str, Origin]) -> dict[str, Origin]:
    """The origins of a second rewrite (``then``: newest statement -> statement of
    the middle program) composed with those of a first (``first``: middle ->
    original); statements absent from a mapping map to themselves by name."""
    result: dict[str, Origin] = dict(first)
    for name, origin in then.items():
        before = first.get(origin.statement)
        if before is None:
            result[name] = origin
            continue
        middle = dict(origin.values)
        result[name] = Origin.of(before.statement,
                                 {var: aff.substitute(middle) for var, aff in before.values})
    return result


def check_rewrite(target: Scop | Function | Module | Dependences, rewritten: Function | Module,
                  accept_reassociation: bool = False, what: str = "the rewrite",
                  origins: Mapping[str, Origin] | None = None,
                  ignore: Collection[str] = ()) -> Legality:
    """Does ``rewritten`` run the original's statement instances, each exactly
    once, in an order that respects every dependence of the original?

    Each statement of ``rewritten`` is mapped to original instances: through
    ``origins`` (statement name -> :class:`Origin`) when named there, else by
    its own name and the original loop variables, which must still enclose it
    (tiling and interchange keep them; the extra tile loops are ignored), or,
    when its loops were all renamed and are as many (distribution's later
    parts), position by position. Statements named in ``ignore`` (copies into local buffers, which
    their own pass proves) are left out. The mapping must be injective and
    cover the original instances; then the new program's schedule, carried
    back to the original instances, is checked against the original's full
    dependence set (:func:`check_schedule`). The witness of a violation names
    two original instances. A rewrite that drops, adds or duplicates instances
    is refused (``legal=False`` with the reason), never accepted."""
    deps = _analysis(target)
    scop = deps.scop
    from polyir.polyhedral.dependences import as_time_map
    from polyir.polyhedral.extract import aff_to_isl, extract
    new = extract(rewritten, scop.ctx)
    origins = dict(origins or {})
    skipped = set(ignore)
    to_old = isl.UnionMap.empty(scop.context.get_space())
    covered: set[str] = set()
    for name, stmt in new.statements.items():
        if name in skipped:
            continue
        origin = origins.get(name)
        if origin is None:
            if name not in scop.statements:
                return Legality(False, f"{what} adds statement {name}, which the original does not have")
            origin = Origin(name)
        old = scop.statements.get(origin.statement)
        if old is None:
            return Legality(False, f"{what}: statement {name} comes from {origin.statement}, which the "
                                   f"original does not have")
        values = dict(origin.values)
        names = dict(zip(stmt.loop_vars, stmt.dims, strict=True))
        if origin.statement == name and not values and len(stmt.loop_vars) == len(old.loop_vars) \
                and not set(old.loop_vars) <= set(names):
            # renamed loops (distribution's later parts): the same loops, position by position
            values = {o: Aff.var(n) for o, n in zip(old.loop_vars, stmt.loop_vars, strict=True)}
        exprs: list[str] = []
        for var in old.loop_vars:
            aff = values.get(var)
            if aff is None:
                if var not in names:
                    return Legality(False, f"{what}: loop {var} no longer encloses statement {name}")
                aff = Aff.var(var)
            unknown = sorted(v for v in aff.variables() if v not in names and v not in scop.params)
            if unknown:
                return Legality(False, f"{what}: the origin of {name} uses {', '.join(unknown)}, "
                                       f"which are not loops around it")
            exprs.append(aff_to_isl(aff, names))
        text = (f"{scop.param_space} -> {{ {isl_name(name)}[{', '.join(stmt.dims)}] -> "
                f"{isl_name(old.name)}[{', '.join(exprs)}] }}")
        part = scop.isl_map(text).intersect_domain(stmt.domain)
        to_old = to_old.union(isl.UnionMap.from_map(part))
        covered.add(old.name)
    missing = sorted(set(scop.statements) - covered)
    if missing:
        return Legality(False, f"{what} drops statement(s) {', '.join(missing)}")
    image = to_old.range()
    if not image.is_equal(scop.domain):
        extra, lost = image.subtract(scop.domain), scop.domain.subtract(image)
        detail = f"runs instances the original does not have: {extra}" if not extra.is_empty() \
            else f"loses instances: {lost}"
        return Legality(False, f"{what} changes the statement instances: it {detail}")
    if not to_old.is_injective():
        return Legality(False, f"{what} runs some statement instances more than once")
    new_time = as_time_map(new)
    kept = isl.UnionSet.empty(scop.context.get_space())
    for name, stmt in new.statements.items():
        if name not in skipped:
            kept = kept.union(isl.UnionSet.from_set(stmt.domain))
    old_time = to_old.reverse().apply_range(new_time.intersect_domain(kept))
    result = check_schedule(deps, old_time, accept_reassociation)
    if not result.legal:
        result.reason = f"{what} violates {result.dependence}"
    return result
