"""Loop distribution: split a loop whose body holds several nodes into several
loops, so that a band becomes perfect.

The ATen reductions lower to ``for i, j { init; for k { update } }``; tiling
and register blocking want ``for i, j { init }`` and a perfect ``for i, j, k``
band. :func:`distribute_loop` splits one loop; :func:`distribute_function`
splits every imperfect loop, innermost first, as far as legality allows.

Mechanism (Allen and Kennedy's loop distribution, one level at a time): the
children of the loop's body are the candidate groups; a dependence from one
child to another (any kind, at the loop's level or inside it) is an edge; the
strongly connected components must stay in one loop, and the loops follow a
topological order of the components (ties in textual order). Each new loop
copies the original's bounds, step and attributes (a parallel loop's parts
stay parallel: distribution removes dependences, it adds none); every loop
after the first gets fresh variable names, loop variables staying unique.
The result is checked against the original's full dependence set
(:func:`polyir.polyhedral.legality.check_rewrite`): the components are the
proposal, the check is the proof.

Refused (``IllegalTransform`` with the witness, or the loop left as it is
with a remark in the pass) where a dependence cycle joins all children.
"""
from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace

import islpy as isl
import networkx as nx

from polyir.errors import IllegalTransform
from polyir.ir.affine import Aff
from polyir.ir.canonical import CanonicalForm, canonical_form, transfer
from polyir.ir.names import claim_name, find_loop, names_in
from polyir.ir.nodes import Assign, Buffer, For, Function, If, Node
from polyir.ir.walk import (
    STATEMENT_NODES,
    buffer_accesses,
    buffers_used,
    loads,
    substitute,
    walk_nodes,
)
from polyir.polyhedral.dependences import MEMORY_KINDS, Dependences, compute_dependences
from polyir.polyhedral.extract import extract
from polyir.polyhedral.legality import check_rewrite
from polyir.tiling.bands import band_path, band_scope
from polyir.tiling.expand import expand_scalar_locals


def _statements_of(node: Node) -> set[str]:
    return {n.name for n in walk_nodes((node,)) if isinstance(n, STATEMENT_NODES)}


def distribution_groups(deps: Dependences, loop: For) -> list[list[int]]:
    """The children of ``loop``'s body (by position) grouped into the loops they
    can be distributed into, in the order those loops run."""
    children = loop.body
    owner: dict[str, int] = {}
    for position, child in enumerate(children):
        for name in _statements_of(child):
            owner[name] = position
    graph: nx.DiGraph = nx.DiGraph()
    graph.add_nodes_from(range(len(children)))
    for dep in deps.memory():
        a, b = owner.get(dep.source), owner.get(dep.sink)
        if a is not None and b is not None and a != b:
            graph.add_edge(a, b)
    condensed = nx.condensation(graph)
    members = {c: sorted(condensed.nodes[c]["members"]) for c in condensed.nodes}
    order = list(nx.lexicographical_topological_sort(condensed, key=lambda c: members[c][0]))
    return [members[c] for c in order]


def _copy_loop(loop: For, body: tuple[Node, ...], taken: set[str]) -> For:
    """``loop`` over ``body`` with fresh names for the loop variable and for
    every loop inside (loop variables stay unique in the function)."""
    def rename(nodes: tuple[Node, ...]) -> tuple[Node, ...]:
        out: list[Node] = []
        for node in nodes:
            if isinstance(node, For):
                new = claim_name(re.sub(r"_\d+$", "", node.var) or node.var, taken)
                inner = substitute(node.body, {node.var: Aff.var(new)})
                node = replace(node, var=new, body=rename(inner))
            elif isinstance(node, If):
                node = replace(node, then_body=rename(node.then_body), else_body=rename(node.else_body))
            out.append(node)
        return tuple(out)

    (copy,) = rename((replace(loop, body=body),))
    assert isinstance(copy, For)
    return copy


def split_loop(function: Function, loop: For, groups: Sequence[Sequence[int]],
               taken: set[str] | None = None, expand_accumulators: bool = True) -> Function:
    """``function`` with ``loop`` replaced by one loop per group of its children
    (the first keeps the names; new names avoid ``taken``, default the
    function's names; no legality check here). A loop-scoped local goes to the
    part that uses it; a scalar that several parts use is expanded along the
    loop (see :func:`_locals_per_part` for ``expand_accumulators``)."""
    if len(groups) < 2:
        return function
    function, loop, part_locals = _locals_per_part(function, loop, groups, expand_accumulators)
    taken = names_in(function) if taken is None else taken
    parts: list[Node] = []
    for k, group in enumerate(groups):
        body = tuple(loop.body[p] for p in group)
        part = replace(loop, body=body, locals=part_locals[k])
        parts.append(part if k == 0 else _copy_loop(part, body, taken))

    def visit(nodes: tuple[Node, ...]) -> tuple[Node, ...]:
        out: list[Node] = []
        for node in nodes:
            if node is loop:
                out.extend(parts)
                continue
            if isinstance(node, For):
                node = replace(node, body=visit(node.body))
            elif isinstance(node, If):
                node = replace(node, then_body=visit(node.then_body), else_body=visit(node.else_body))
            out.append(node)
        return tuple(out)

    return replace(function, body=visit(function.body))


def _accumulator_left_to_auto_tile(loop: For, name: str) -> bool:
    """Whether automatic distribution leaves scalar ``name`` of ``loop`` alone: no
    loop in the body reads it without writing it (it is an accumulator with an
    epilogue of plain statements, not a value broadcast into a loop) and
    ``loop`` has constant bounds, the shape ``auto-tile`` widens to a tile or
    spills into the output (``polyir.tiling.widen``, ``polyir.tiling.spill``)."""
    for child in loop.body:
        if isinstance(child, For):
            read, written = buffer_accesses((child,))
            if name in read and name not in written:
                return False
    constant = len(loop.lower) == 1 and len(loop.upper) == 1 and loop.lower[0].is_constant \
        and loop.upper[0].is_constant
    return constant


def _tied(loop: For, local: Buffer, expand_accumulators: bool) -> bool:
    """Whether the parts of ``loop`` that use ``local`` must stay in one loop
    (it cannot, or may not, be expanded along the loop)."""
    return bool(local.shape) or \
        (not expand_accumulators and _accumulator_left_to_auto_tile(loop, local.name))


def _require_untied(loop: For, expand_accumulators: bool) -> None:
    """Raise the ``IllegalTransform`` that :func:`_locals_per_part` would when
    the loop-scoped locals that cannot be expanded (:func:`_tied`) join every
    child of ``loop``'s body: any split leaves one of them in two loops.
    Checked before the dependence analysis, which such a loop would pay for
    nothing."""
    if len(loop.body) < 2 or not loop.locals:
        return
    tied = {b.name for b in loop.locals if _tied(loop, b, expand_accumulators)}
    if not tied:
        return
    # children joined by a tied local they share; connected, no split keeps them apart
    graph: nx.Graph = nx.Graph()
    graph.add_nodes_from(range(len(loop.body)))
    for name in tied:
        users = [k for k, child in enumerate(loop.body) if name in buffers_used((child,))]
        graph.add_edges_from(zip(users, users[1:], strict=False))
    if not nx.is_connected(graph):
        return
    # the split into every child raises what any split would (on a stand-in
    # function: it raises before expanding anything)
    _locals_per_part(Function("scope", (), (loop,)), loop, [[k] for k in range(len(loop.body))],
                     expand_accumulators)


def _locals_per_part(function: Function, loop: For, groups: Sequence[Sequence[int]],
                     expand_accumulators: bool = True
                     ) -> tuple[Function, For, list[tuple[Buffer, ...]]]:
    """Each loop-scoped local of ``loop`` goes to the one part that uses it; the
    scalars that several parts use are expanded along the loop first
    (:func:`polyir.tiling.expand.expand_scalar_locals`; with ``expand_accumulators``
    false, not those :func:`_accumulator_left_to_auto_tile` keeps). Returns the
    function, the loop (expanded) and each part's locals; ``IllegalTransform`` when
    a shared local cannot or may not be expanded."""
    users: dict[str, set[int]] = {b.name: set() for b in loop.locals}
    for k, group in enumerate(groups):
        used = buffers_used(tuple(loop.body[p] for p in group))
        for name in users:
            if name in used:
                users[name].add(k)
    shared = [name for name, parts in users.items() if len(parts) > 1]
    if shared and not expand_accumulators:
        kept = [name for name in shared if _accumulator_left_to_auto_tile(loop, name)]
        if kept:
            raise IllegalTransform(f"loop '{loop.var}' declares loop-scoped accumulators "
                                   f"({', '.join(kept)}) that only statements of its body read "
                                   f"and it has a constant trip count: auto-tile widens or "
                                   f"spills such an accumulator in place")
    if shared:
        try:
            function, loop = expand_scalar_locals(function, loop, shared)
        except IllegalTransform as error:
            raise IllegalTransform(f"loop '{loop.var}' declares loop-scoped locals "
                                   f"({', '.join(shared)}) that several parts use, and they "
                                   f"cannot be expanded: {error.message}") from error
    part_locals = [tuple(b for b in loop.locals if k in users[b.name] or
                         (not users[b.name] and k == 0)) for k in range(len(groups))]
    return function, loop, part_locals


def loop_scope(function: Function, loop: For) -> Function:
    """``function`` reduced to ``loop`` and the loops and conditions around it:
    every node beside that path is dropped. Distributing ``loop`` reorders only
    instances of the statements inside it, and their memory dependences (access
    relations and relative order) are the same in this reduction as in the
    whole function, so its analysis is the proof at a fraction of the cost (a
    fused nest's other statements, with the floor divisions of reshapes in
    their subscripts, can multiply it past the analysis budget)."""
    return band_scope(function, band_path(function, loop))


def distribute_loop(function: Function, name: str, deps: Dependences | None = None,
                    taken: set[str] | None = None, ctx: isl.Context | None = None,
                    expand_accumulators: bool = True) -> Function:
    """``function`` with loop ``name`` distributed as far as its dependences allow.

    Without ``deps``, the analysis and the check run on :func:`loop_scope`
    (the loop and what encloses it); ``deps`` given, on ``function`` whole.
    Raises ``polyir.ir.names.UnknownLoop`` for an unknown loop and
    ``IllegalTransform`` (with a witness) when the checked result would
    violate a dependence. Returns ``function`` itself when nothing splits."""
    loop = find_loop(function, name)
    _require_untied(loop, expand_accumulators)
    scope = function
    if deps is None:
        scope = loop_scope(function, loop)
        deps = compute_dependences(extract(scope, ctx), MEMORY_KINDS)  # all the proof uses
    groups = distribution_groups(deps, loop)
    names = set(taken or ()) | names_in(function)
    if len(groups) < 2:
        if len(loop.body) < 2:
            return function
        # one dependence cycle joins every part: the check of the maximal split names it
        apart = split_loop(scope, loop, [[k] for k in range(len(loop.body))], set(names))
        answer = check_rewrite(deps, apart, what=f"distributing loop '{name}'")
        raise IllegalTransform(f"loop '{name}' cannot be distributed: a dependence cycle joins its "
                               f"parts ({answer.reason})", answer.dependence, answer.witness)
    if scope is not function:
        proposal = split_loop(scope, loop, groups, set(names), expand_accumulators)
        check_rewrite(deps, proposal, what=f"distributing loop '{name}'").require()
    result = split_loop(function, loop, groups, taken, expand_accumulators)
    if scope is function:
        check_rewrite(deps, result, what=f"distributing loop '{name}'").require()
    return result


def imperfect_loops(function: Function) -> list[str]:
    """Variables of the loops whose body holds more than one node and at least
    one loop (the ones distribution can make perfect), innermost first."""
    found: list[str] = []

    def visit(nodes: tuple[Node, ...]) -> None:
        for node in nodes:
            if isinstance(node, For):
                visit(node.body)
                if len(node.body) > 1 and any(isinstance(c, For) for c in node.body):
                    found.append(node.var)
            elif isinstance(node, If):
                visit(node.then_body)
                visit(node.else_body)

    visit(function.body)
    return found


def _reduces_along(statement: Assign, var: str) -> bool:
    """Whether ``statement`` accumulates into one element for every value of ``var``
    (``q[i] = q[i] + A[i, j] * p[j]`` along ``j``): its target's subscripts do not
    use ``var`` and its value reads the target."""
    if any(not isinstance(i, Aff) or var in i.variables() for i in statement.indices):
        return False
    return any(ld.buffer == statement.buffer and ld.indices == statement.indices
               for ld in loads(statement.value))


def mixed_reduction_loops(function: Function) -> list[str]:
    """Variables of the innermost loops whose body holds statements only, at least
    one reducing along the loop and one not (``for j { s[j] += r[i] * A[i, j];
    q[i] += A[i, j] * p[j] }``): apart, the element-wise statements vectorise along
    the loop and the reductions get ``auto-tile``'s rows of independent sums;
    together neither does."""
    found: list[str] = []
    for node in walk_nodes(function.body):
        if not isinstance(node, For) or len(node.body) < 2 \
                or not all(isinstance(c, Assign) for c in node.body):
            continue
        kinds = {_reduces_along(c, node.var) for c in node.body if isinstance(c, Assign)}
        if kinds == {True, False}:
            found.append(node.var)
    return found


__all__ = ["distribution_groups", "loop_scope", "split_loop", "distribute_loop", "imperfect_loops",
           "mixed_reduction_loops"]


AUTOMATIC_OPERATIONS = 3_000_000
"""isl operations one automatic distribution of a nest may spend (its own isl
context's limit); beyond it the nest is kept as it is, with the reason."""


class AnalysisBudget(Exception):
    """The dependence analysis of a nest ran past its isl operation limit."""


def distribute_function(function: Function, loops: Sequence[str] = (),
                        refused: list[tuple[str, Exception]] | None = None) -> Function:
    """``function`` with the named ``loops`` distributed (default: every imperfect
    loop, innermost first, again after each split, as far as legality allows).

    Each top-level nest is distributed alone (a split inside one nest does not
    move its instances past any other nest), so the analysis cost is linear
    in the number of nests. Named loops that cannot be split raise
    ``IllegalTransform``; automatic candidates that cannot are kept, and
    ``(loop, error)`` is appended to ``refused`` when given. Automatic
    distribution analyses each nest on its own isl context limited to
    :data:`AUTOMATIC_OPERATIONS` operations: a nest whose analysis costs more
    (symbolic sizes with derived products can) is kept whole, with an
    :class:`AnalysisBudget` error in ``refused``."""
    body: list[Node] = []
    wanted = set(loops)
    for name in wanted:
        find_loop(function, name)  # UnknownLoop before any work
    taken = names_in(function)
    seen: dict[str, tuple[CanonicalForm, tuple[Node, ...] | None, list[tuple[str, Exception]]]] = {}
    added: list[Buffer] = []
    for node in function.body:
        if not isinstance(node, For):
            body.append(node)
            continue
        form = None if wanted else canonical_form(function, (node,))
        if form is not None and form.key in seen:  # a nest the same up to names: its result renamed
            first, nodes, before = seen[form.key]
            body.extend((node,) if nodes is None else transfer(nodes, first, form, taken))
            if refused is not None:
                refused.extend(_translated(before, first, form))
            continue
        errors: list[tuple[str, Exception]] = []
        nest = _distribute_nest(replace(function, body=(node,)), wanted, taken, errors)
        if refused is not None:
            refused.extend(errors)
        expanded = nest.locals[len(function.locals):]  # scalars expanded along a top-level loop
        added.extend(expanded)
        if form is not None and not expanded:
            unchanged = len(nest.body) == 1 and nest.body[0] is node
            seen[form.key] = (form, None if unchanged else nest.body, errors)
        body.extend(nest.body)
    if all(a is b for a, b in zip(body, function.body, strict=False)) and len(body) == len(function.body):
        return function
    return replace(function, body=tuple(body), locals=function.locals + tuple(added))


def _distribute_nest(original: Function, wanted: set[str], taken: set[str],
                     refused: list[tuple[str, Exception]], settled: frozenset[str] = frozenset()
                     ) -> Function:
    """One top-level nest (``original``'s only node) distributed; see
    :func:`distribute_function`. ``settled``: loops left as they are (loops an
    earlier distribution already tried, whose bodies and enclosing loops'
    bounds are unchanged: the same analysis would give the same answer)."""
    nest = original
    tried: set[str] = set()
    budget = None
    if not wanted:
        budget = isl.Context()
        budget.set_max_operations(AUTOMATIC_OPERATIONS)
    while True:
        candidates = [v for v in mixed_reduction_loops(nest) + imperfect_loops(nest)
                      if v not in tried and (not wanted or v in wanted)
                      and v not in settled]
        if not candidates:
            break
        name = candidates[0]
        tried.add(name)
        try:
            nest = distribute_loop(nest, name, taken=taken, ctx=budget,
                                   expand_accumulators=bool(wanted))
        except IllegalTransform as error:
            if wanted:
                raise
            refused.append((name, error))
        except isl.Error:
            if budget is None or budget.get_max_operations() == 0:
                raise
            refused.append((name, AnalysisBudget(
                f"its dependence analysis needs more than {AUTOMATIC_OPERATIONS} isl "
                f"operations; the nest is kept whole")))
            return nest       # the splits before it were each checked
    return nest


def _translated(errors: list[tuple[str, Exception]], first: CanonicalForm,
                form: CanonicalForm) -> list[tuple[str, Exception]]:
    """The refusals recorded for nest ``first`` told in the names of nest ``form``."""
    mapping = form.renaming(first)
    out: list[tuple[str, Exception]] = []
    for name, error in errors:
        if isinstance(error, IllegalTransform):
            witness = None if error.witness is None else form.actual(first.canonical(str(error.witness)))
            copy: Exception = IllegalTransform(form.actual(first.canonical(error.message)), None, witness)
        else:
            copy = type(error)(form.actual(first.canonical(str(error))))
        out.append((mapping.get(name, name), copy))
    return out


__all__ += ["AUTOMATIC_OPERATIONS", "AnalysisBudget", "distribute_function"]
