"""``forward-inits``: the copies that read an initialised buffer read the
initial value itself, and the initialisation goes.

A convolution or a ``Linear`` with a bias lowers to a nest that fills the
output with the bias and a nest that accumulates the products into it.
After ``auto-tile`` the accumulating nest reads each output tile once, in a
copy into its register tile, and writes it back once::

    for c, h, w { S0: out[0, c, h, w] = bias[c] }
    for ... tiles ... {
      out_t_in: out_t[...] = out[0, c', h', w']     # the copy in
      ... products into out_t ...
      out_t_out: out[0, c', h', w'] = out_t[...]    # the copy out
    }

The first nest writes the whole output and the copy in reads it all back:
two passes over a buffer that is often larger than L2 for nothing (a 1x1
convolution from 64 to 256 channels at 56x56: 3.2 MB written and read
again). This pass makes the copy in read ``bias[c']`` and removes ``S0``.

**When.** ``S0`` is the only statement of a top-level perfect nest (an
*initialiser*): each loop variable alone, with coefficient +-1, in one of
its subscripts (so the instance that wrote an element is its subscripts
solved for the variables), a value that reads neither its own buffer nor
any buffer the function writes (the value is then the same at every later
point). The first later top-level nest that touches the buffer must write it
too. isl's dataflow analysis of the two nests (of the second, only its
statements that touch the buffer) then decides: every read of the buffer
there takes its value from ``S0`` for all its instances (those statements
get ``S0``'s value, its variables replaced by the read's subscripts) or for
none (left alone), and ``S0`` writes no element last (the second nest
overwrites all of them, so nothing after it can read ``S0``'s values).
Otherwise nothing changes and a remark says why. The analysis runs under
a bound of isl operations (:data:`OPERATIONS`).

The rewrite keeps every value read: a forwarded read gets the value ``S0``
wrote into that element, recomputed from operands that nothing changes in
between; ``S0``'s writes are read by no one after it and are overwritten.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import islpy as isl

from polyir.context import PassContext
from polyir.ir.affine import Aff
from polyir.ir.nodes import Assign, For, Function, If, Load, Module, Node
from polyir.ir.printer import print_node
from polyir.ir.walk import (
    buffer_accesses,
    loads,
    map_loads,
    node_accesses,
    substitute_expr,
)
from polyir.passes import register_pass
from polyir.polyhedral.equivalence import final_writers, read_sources
from polyir.polyhedral.extract import NotPolyhedral, StatementInfo, extract
from polyir.transforms._util import prune_leaves, rebuild_if

OPERATIONS = 2_000_000
"""isl operations the dataflow analysis of one initialiser may take."""


@dataclass(frozen=True)
class Initializer:
    """A top-level nest matched by :func:`initializer`: ``statement`` writes
    ``buffer``; ``solve[d]`` gives, for subscript ``d`` holding a loop variable,
    ``(variable, rest, sign)`` with ``subscript == sign * variable + rest``."""

    statement: Assign
    loops: tuple[For, ...]
    solve: tuple[tuple[str, Aff, int] | None, ...]

    @property
    def buffer(self) -> str:
        return self.statement.buffer

    def value_at(self, indices: Sequence[object]) -> object:
        """The statement's value at the instance that writes ``indices``."""
        mapping: dict[str, Aff] = {}
        for index, solved in zip(indices, self.solve, strict=True):
            if solved is not None:
                var, rest, sign = solved
                assert isinstance(index, Aff)
                mapping[var] = (index - rest) * sign
        return substitute_expr(self.statement.value, mapping)


def initializer(node: Node, written: set[str]) -> Initializer | None:
    """``node`` as an initialiser (module docstring), or ``None``.
    ``written``: the buffers the function writes anywhere."""
    loops: list[For] = []
    while isinstance(node, For) and len(node.body) == 1 and not node.locals:
        loops.append(node)
        node = node.body[0]
    if not loops or not isinstance(node, Assign):
        return None
    names = [lp.var for lp in loops]
    solve: list[tuple[str, Aff, int] | None] = []
    seen: set[str] = set()
    for index in node.indices:
        if not isinstance(index, Aff) or not index.is_linear:
            return None
        present = [v for v in names if index.coefficient(v)]
        if not present:
            solve.append(None)
            continue
        if len(present) > 1 or abs(index.coefficient(present[0])) != 1 or present[0] in seen:
            return None
        var = present[0]
        sign = index.coefficient(var)
        seen.add(var)
        solve.append((var, index - Aff.var(var) * sign, sign))
    if seen != set(names):
        return None          # a loop whose iterations write the same element
    if any(load.buffer in written for load in loads(node.value)):
        return None
    return Initializer(node, tuple(loops), tuple(solve))


def _touching(nodes: Sequence[Node], buffer: str) -> tuple[Node, ...]:
    """``nodes`` with only the statements that access ``buffer`` (loops and
    conditions around them kept; those left empty dropped)."""
    return prune_leaves(nodes, lambda node: buffer in set().union(*node_accesses(node)))


class Refused(Exception):
    """Why an initialiser stays (a remark)."""


def forwarded_readers(function: Function, init_node: Node, init: Initializer, reader: Node,
                      ctx: isl.Context) -> set[str]:
    """The statements of ``reader`` (the next top-level nest touching the
    buffer) whose reads of it all take ``init``'s values, when after them no
    element holds ``init``'s value; raises :class:`Refused` otherwise."""
    buffer = init.buffer
    scoped = replace(function, body=(init_node,) + _touching((reader,), buffer))
    try:
        scop = extract(scoped, ctx)
        if any(not a.exact for s in scop for a in s.accesses if a.buffer == buffer):
            raise Refused(f"a statement of the next nest touching '{buffer}' reads or writes "
                          "it at data-dependent subscripts")
        sources, _ = read_sources(scop, buffer)
        source = scop.statements[init.statement.name].domain
        from_init = sources.intersect_range(isl.UnionSet.from_set(source)).domain()
        forwarded: set[str] = set()
        for info in scop:
            if info.name == init.statement.name or not info.reads:
                continue
            own = _pairs_of(info, buffer, sources.get_space())
            if own.is_empty():
                continue
            shared = own.intersect(from_init)
            if shared.is_empty():
                continue
            if not own.is_subset(from_init):
                raise Refused(f"statement {info.name} reads '{buffer}' from {init.statement.name} "
                              "at some instances only")
            forwarded.add(info.name)
        last = final_writers(scop, buffer).range()
        if not last.intersect(isl.UnionSet.from_set(source)).is_empty():
            raise Refused(f"the next nest touching '{buffer}' does not overwrite every element "
                          f"{init.statement.name} writes")
    except isl.Error:
        raise Refused(f"the dataflow analysis needs more than {OPERATIONS} isl operations") from None
    except NotPolyhedral as error:
        raise Refused(f"the next nest has no polyhedral model ({error})") from None
    return forwarded


def _pairs_of(info: StatementInfo, buffer: str, space: isl.Space) -> isl.UnionSet:
    """The ``[statement[x] -> element]`` pairs of one statement's reads of ``buffer``."""
    result = isl.UnionSet.empty(space)
    for access in info.reads:
        if access.buffer == buffer:
            result = result.union(isl.UnionSet.from_set(access.relation.wrap()))
    return result


def _forward(nodes: Sequence[Node], readers: set[str], init: Initializer) -> tuple[Node, ...]:
    out: list[Node] = []
    for node in nodes:
        if isinstance(node, For):
            out.append(replace(node, body=_forward(node.body, readers, init)))
        elif isinstance(node, If):
            out.append(rebuild_if(node, _forward(node.then_body, readers, init),
                                  _forward(node.else_body, readers, init)))
        elif isinstance(node, Assign) and node.name in readers:
            def change(load: Load) -> object:
                return init.value_at(load.indices) if load.buffer == init.buffer else load
            out.append(replace(node, value=map_loads(node.value, change)))  # type: ignore[arg-type]
        else:
            out.append(node)
    return tuple(out)


def forward_inits(function: Function, ctx: PassContext | None = None) -> Function:
    """``function`` with its initialisers forwarded (module docstring);
    ``ctx`` gets a remark per initialiser forwarded or kept."""
    _, written = buffer_accesses(function.body)
    body = list(function.body)
    where = f"function '{function.name}'"
    index = 0
    while index < len(body):
        init = initializer(body[index], written)
        after = None if init is None else next(
            (k for k in range(index + 1, len(body)) if init.buffer in
             set().union(*buffer_accesses((body[k],)))), None)
        if init is None or after is None or init.buffer not in buffer_accesses((body[after],))[1]:
            index += 1
            continue
        budget = isl.Context()
        budget.set_max_operations(OPERATIONS)
        try:
            readers = forwarded_readers(function, body[index], init, body[after], budget)
        except Refused as why:
            if ctx is not None:
                ctx.remark("forward-inits", where, f"{init.statement.name} kept: {why}")
            index += 1
            continue
        body[after] = _forward((body[after],), readers, init)[0]
        del body[index]
        if ctx is not None:
            names = ", ".join(sorted(readers)) or "no statement"
            ctx.remark("forward-inits", where,
                       f"'{print_node(init.statement).strip()}' removed: "
                       f"{names} read its value directly; the next nest overwrites every element",
                       "applied")
    if len(body) == len(function.body) and all(a is b for a, b in zip(body, function.body, strict=True)):
        return function
    return replace(function, body=tuple(body))


@register_pass("forward-inits")
@dataclass(frozen=True)
class ForwardInits:
    """Initialisations whose every later reader is a copy of them forwarded
    into those readers and removed (``polyir.transforms.forward_inits``)."""

    def run(self, module: Module, ctx: PassContext) -> Module:
        """``module`` with every function's initialisers forwarded where the
        dataflow allows; a remark for each one forwarded or kept."""
        functions = tuple(forward_inits(f, ctx) for f in module.functions)
        if all(a is b for a, b in zip(functions, module.functions, strict=True)):
            return module
        return replace(module, functions=functions)


__all__ = ["forward_inits", "initializer", "Initializer", "ForwardInits", "OPERATIONS"]
