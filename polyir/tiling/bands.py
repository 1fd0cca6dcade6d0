"""Bands and the small structural helpers the tiling mechanisms share.

A *band* is a chain of loops, outer to inner, each the only node in the body
of the previous one (``for i { for j { for k { ... } } }``): tiling,
interchange and unroll-and-jam act on bands. Loops are named by their
variables (unique in a verified function).

* :func:`band`: the loops of a named band, checked;
* :func:`perfect_chain`: the longest band starting at a loop;
* :func:`replace_node`: a function with one node (by identity) replaced;
* :func:`nest_of`: which top-level node holds a loop (transformations inside
  one nest are analysed on that nest alone);
* :func:`renamed_copy`: a copy of some nodes with fresh loop variables,
  statement names and loop-scoped buffers, and the origin of each copied
  statement (for :func:`polyir.polyhedral.legality.check_rewrite`);
* :class:`UnsupportedNest`: the refusal of a nest whose shape a mechanism
  does not handle (names the loop and why).
"""
from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import replace

from polyir.errors import PolyirError
from polyir.ir.affine import Aff
from polyir.ir.names import claim_name, find_loop
from polyir.ir.nodes import Assign, Buffer, Expr, For, Function, If, Load, Node
from polyir.ir.walk import STATEMENT_NODES, map_loads, substitute_node, subtree_names, walk_nodes
from polyir.polyhedral.dependences import MEMORY_KINDS, Dependences, compute_dependences
from polyir.polyhedral.extract import extract
from polyir.polyhedral.legality import Origin


class UnsupportedNest(PolyirError):
    """A loop nest whose shape a mechanism does not handle; names the loop and why."""


def band(function: Function, loops: Sequence[str]) -> list[For]:
    """The loops named by ``loops`` (outer to inner), each the only node in the
    body of the one before. Raises ``UnknownLoop`` for an unknown name and
    :class:`UnsupportedNest` when they do not form a band."""
    if not loops:
        raise UnsupportedNest("no loops named")
    if len(set(loops)) != len(loops):
        raise UnsupportedNest(f"loops {', '.join(loops)} name a loop twice")
    found = [find_loop(function, name) for name in loops]
    for outer, inner in zip(found, found[1:], strict=False):
        if len(outer.body) != 1 or outer.body[0] is not inner:
            raise UnsupportedNest(f"function '{function.name}': loop '{inner.var}' is not the only "
                                  f"node in the body of loop '{outer.var}', so {', '.join(loops)} "
                                  f"are not a band")
    return found


def perfect_chain(loop: For) -> list[For]:
    """``loop`` and the loops below it while each body is exactly one loop."""
    chain = [loop]
    while len(chain[-1].body) == 1 and isinstance(chain[-1].body[0], For):
        chain.append(chain[-1].body[0])
    return chain


def replace_node(function: Function, old: Node, new: Sequence[Node]) -> Function:
    """``function`` with node ``old`` (found by identity) replaced by ``new``."""
    found = [False]

    def visit(nodes: tuple[Node, ...]) -> tuple[Node, ...]:
        out: list[Node] = []
        for node in nodes:
            if node is old:
                out.extend(new)
                found[0] = True
                continue
            if isinstance(node, For):
                body = visit(node.body)
                node = node if body == node.body and all(a is b for a, b in zip(body, node.body, strict=True)) \
                    else replace(node, body=body)
            elif isinstance(node, If):
                node = replace(node, then_body=visit(node.then_body), else_body=visit(node.else_body))
            out.append(node)
        return tuple(out)

    holding = [k for k, node in enumerate(function.body)
               if node is old or (isinstance(old, For) and id(old) in subtree_names(node).loop_ids)]
    if len(holding) == 1:      # only that nest is rebuilt (a loop's nest found by its id)
        k = holding[0]
        body = function.body[:k] + visit(function.body[k:k + 1]) + function.body[k + 1:]
    else:
        body = visit(function.body)
    if not found[0]:
        raise ValueError(f"node not found in function '{function.name}'")
    return replace(function, body=body)


def enclosing_loops(function: Function, var: str) -> list[For]:
    """The loops enclosing loop ``var`` of ``function``, outermost first (none when
    ``var`` is outermost or not there)."""
    def visit(nodes: Sequence[Node], path: list[For]) -> list[For] | None:
        for node in nodes:
            if isinstance(node, For):
                if node.var == var:
                    return path
                found = visit(node.body, path + [node])
                if found is not None:
                    return found
            elif isinstance(node, If):
                found = visit(node.then_body, path) or visit(node.else_body, path)
                if found is not None:
                    return found
        return None
    return visit(function.body, []) or []


def nest_of(function: Function, loop: For) -> int:
    """Index of the top-level node of ``function`` that holds ``loop``."""
    for index, node in enumerate(function.body):
        if id(loop) in subtree_names(node).loop_ids:
            return index
    raise ValueError(f"loop '{loop.var}' is not in function '{function.name}'")


def nest_function(function: Function, index: int) -> Function:
    """``function`` reduced to its top-level node ``index`` (same parameters and
    locals): what is analysed when a transformation stays inside that nest."""
    return replace(function, body=(function.body[index],))


def nest_dependences(function: Function, index: int) -> Dependences:
    """The memory dependences (what legality needs) of top-level node ``index``
    of ``function``, analysed alone."""
    return compute_dependences(extract(nest_function(function, index)), MEMORY_KINDS)


def reused_dependences(known: tuple[Function, Dependences] | None, function: Function,
                       index: int) -> Dependences:
    """:func:`nest_dependences` of top-level node ``index`` of ``function``, or
    ``known[1]`` when ``known`` analysed the same nest (the function it holds,
    reduced to node ``index``, equals ``function`` reduced to it)."""
    if known is not None and nest_function(known[0], index) == nest_function(function, index):
        return known[1]
    return nest_dependences(function, index)


BandPath = tuple[int, tuple[tuple[int, int], ...], int]
"""Where a band sits (:func:`band_path`): its top-level nest, the ``(branch,
position)`` steps from that nest down to the band's loop (branch 1 is an
``if``'s else), and how many nodes the band's level held."""


def band_path(function: Function, loop: For) -> BandPath:
    """The :data:`BandPath` of ``loop`` in ``function``."""
    index = nest_of(function, loop)
    node: Node = function.body[index]
    steps: list[tuple[int, int]] = []
    siblings = len(function.body)
    while node is not loop:
        levels = [node.body] if isinstance(node, For) else \
            [node.then_body, node.else_body] if isinstance(node, If) else []
        for branch, children in enumerate(levels):
            position = next((k for k, child in enumerate(children)
                             if child is loop or id(loop) in subtree_names(child).loop_ids), None)
            if position is not None:
                steps.append((branch, position))
                siblings, node = len(children), children[position]
                break
        else:
            raise ValueError(f"loop '{loop.var}' is not in function '{function.name}'")
    return index, tuple(steps), siblings


def _band_level(function: Function, path: BandPath, keep: bool) -> Function:
    """The nest at ``path`` reduced to the band's level's slot (``keep``) or
    with that slot emptied (not ``keep``); see :func:`band_scope`."""
    index, steps, siblings = path

    def down(node: Node, rest: tuple[tuple[int, int], ...]) -> Node:
        branch, position = rest[0]
        if isinstance(node, For):
            children = node.body
        else:
            assert isinstance(node, If)
            children = node.else_body if branch else node.then_body
        end = position + 1 + len(children) - siblings
        if len(rest) == 1:
            kept = children[position:end] if keep else children[:position] + children[end:]
        elif keep:
            kept = (down(children[position], rest[1:]),)
        else:
            kept = children[:position] + (down(children[position], rest[1:]),) + children[position + 1:]
        if isinstance(node, For):
            return replace(node, body=kept)
        if keep:
            return replace(node, then_body=() if branch else kept, else_body=kept if branch else ())
        return replace(node, else_body=kept) if branch else replace(node, then_body=kept)

    return replace(function, body=(down(function.body[index], steps),))


def band_surroundings(function: Function, path: BandPath) -> Function:
    """The nest of the band at ``path`` (a non-empty path) with the band's slot
    emptied and no loop-scoped locals: equal before and after a rewrite (its
    copy statements left out, :func:`without_statements`) exactly when the
    rewrite changed no loop or statement but those in that slot, the
    condition under which :func:`band_scope`'s proof stands for the whole
    nest."""
    def bare(nodes: tuple[Node, ...]) -> tuple[Node, ...]:
        out: list[Node] = []
        for node in nodes:
            if isinstance(node, For):
                node = replace(node, body=bare(node.body), locals=())
            elif isinstance(node, If):
                node = replace(node, then_body=bare(node.then_body), else_body=bare(node.else_body))
            out.append(node)
        return tuple(out)

    emptied = _band_level(function, path, keep=False)
    return replace(emptied, body=bare(emptied.body))


def without_statements(function: Function, names: set[str]) -> Function:
    """``function`` without the statements ``names`` (a rewrite's copies) and
    the loops and conditions left empty by their removal; locals are kept."""
    if not names:
        return function

    def prune(nodes: tuple[Node, ...]) -> tuple[Node, ...]:
        out: list[Node] = []
        for node in nodes:
            if isinstance(node, For):
                body = prune(node.body)
                if body or not node.body:
                    out.append(node if body == node.body else replace(node, body=body))
            elif isinstance(node, If):
                then_body, else_body = prune(node.then_body), prune(node.else_body)
                if then_body or else_body:
                    out.append(replace(node, then_body=then_body, else_body=else_body))
            elif not (isinstance(node, Assign) and node.name in names):
                out.append(node)
        return tuple(out)

    return replace(function, body=prune(function.body))


def band_scope(function: Function, path: BandPath) -> Function:
    """``function`` reduced to the band at ``path`` and the loops and
    conditions around it, every other node of its nest dropped; at the band's
    level the band and the nodes a rewrite put in its place (as many as that level
    now holds more than ``path`` recorded). A rewrite inside the band reorders
    only the band's statement instances among themselves, and their memory
    dependences are the same here as in the whole nest: the analysis of the
    scope before and after the rewrite is the proof (a fused nest's other
    statements, attention's softmax beside a projection, can cost most of
    it)."""
    index, steps, siblings = path
    if not steps:
        return replace(function, body=function.body[index:index + 1 + len(function.body) - siblings])
    return _band_level(function, path, keep=True)


def loops_inside(nodes: Sequence[Node]) -> list[For]:
    """Every loop under ``nodes``, in pre-order."""
    return [n for n in walk_nodes(nodes) if isinstance(n, For)]


def statements_inside(nodes: Sequence[Node]) -> list[Node]:
    """Every statement under ``nodes``, in program order."""
    return [n for n in walk_nodes(nodes) if isinstance(n, STATEMENT_NODES)]


def _base(name: str) -> str:
    return re.sub(r"_\d+$", "", name) or name


def rename_buffers_expr(expr: Expr, names: dict[str, str]) -> Expr:
    """``expr`` with loads of the buffers in ``names`` renamed (gathers too)."""
    return map_loads(expr, lambda load: Load(names.get(load.buffer, load.buffer), load.indices))


def renamed_copy(nodes: Sequence[Node], taken: set[str],
                 values: dict[str, Aff] | None = None, names: Mapping[str, str] | None = None
                 ) -> tuple[tuple[Node, ...], dict[str, Origin]]:
    """A copy of ``nodes`` with every loop variable, statement name and
    loop-scoped buffer renamed to a fresh name (added to ``taken``), and the
    variables in ``values`` replaced by their affine values; a loop named in
    ``names`` gets the name given there (which must be free). Returns the copy and,
    for each copied statement, its :class:`Origin` (the statement it copies,
    each original loop variable as an expression of the new ones; the
    variables of ``values`` as given)."""
    origins: dict[str, Origin] = {}
    outer = dict(values or {})

    def visit(items: Sequence[Node], env: dict[str, Aff], buffers: dict[str, str],
              chain: list[tuple[str, str]]) -> tuple[Node, ...]:
        out: list[Node] = []
        for node in items:
            if isinstance(node, For):
                if names and node.var in names:
                    new_var = names[node.var]
                    taken.add(new_var)
                else:
                    new_var = claim_name(_base(node.var), taken)
                inner_buffers = dict(buffers)
                new_locals: list[Buffer] = []
                for local in node.locals:
                    inner_buffers[local.name] = claim_name(_base(local.name), taken)
                    new_locals.append(replace(local, name=inner_buffers[local.name]))
                lower = tuple(a.substitute(env) for a in node.lower)
                upper = tuple(a.substitute(env) for a in node.upper)
                inner_env = dict(env)
                inner_env[node.var] = Aff.var(new_var)
                body = visit(node.body, inner_env, inner_buffers, chain + [(node.var, new_var)])
                out.append(replace(node, var=new_var, lower=lower, upper=upper, body=body,
                                   locals=tuple(new_locals)))
            elif isinstance(node, If):
                conditions = tuple(c.substitute(env) for c in node.conditions)
                out.append(replace(node, conditions=conditions,
                                   then_body=visit(node.then_body, env, buffers, chain),
                                   else_body=visit(node.else_body, env, buffers, chain)))
            elif isinstance(node, Assign):
                moved = substitute_node(node, env)
                assert isinstance(moved, Assign)
                new_name = claim_name(_base(node.name), taken)
                moved = replace(moved, name=new_name, buffer=buffers.get(moved.buffer, moved.buffer),
                                indices=tuple(i if isinstance(i, Aff) else rename_buffers_expr(i, buffers)
                                              for i in moved.indices),
                                value=rename_buffers_expr(moved.value, buffers))
                mapping = {old: Aff.var(new) for old, new in chain}
                mapping.update(outer)
                origins[new_name] = Origin.of(node.name, mapping)
                out.append(moved)
            else:
                raise UnsupportedNest(f"cannot copy a {type(node).__name__} node")
        return tuple(out)

    copied = visit(nodes, dict(outer), {}, [])
    return copied, origins


__all__ = ["UnsupportedNest", "band", "enclosing_loops", "perfect_chain", "replace_node", "nest_of", "nest_function",
           "nest_dependences", "BandPath", "band_path", "band_scope", "band_surroundings", "without_statements", "loops_inside", "statements_inside", "renamed_copy", "rename_buffers_expr"]
