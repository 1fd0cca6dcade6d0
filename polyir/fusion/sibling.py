"""Sibling (input-reuse) fusion: nests that read the same data share one traversal.

Two top-level nests ``a`` before ``b`` that read a common buffer, and of
which neither writes what the other touches, are merged at depth ``d`` when
their first ``d`` loops have the same bounds and steps: ``b``'s loop
variables are renamed to ``a``'s and ``b``'s innermost body follows ``a``'s
inside the shared loops, at ``a``'s place. Every statement keeps its
instances, so the proof is :func:`polyir.polyhedral.legality.check_rewrite`
over the nodes from ``a`` to ``b`` (a node in between that ``b`` depends on
forbids it, with the witness).
"""
from __future__ import annotations

from dataclasses import replace

import islpy as isl

from polyir.fusion.producer_consumer import FusionRefused
from polyir.ir.affine import Aff
from polyir.ir.nodes import For, Function
from polyir.ir.walk import substitute
from polyir.polyhedral.dependences import MEMORY_KINDS, compute_dependences
from polyir.polyhedral.extract import extract
from polyir.polyhedral.legality import check_rewrite
from polyir.polyhedral.slices import loop_chain


def common_depth(a: For, b: For) -> int:
    """How many outer loops of ``a`` and ``b`` have the same bounds and step
    (``b``'s bounds read with ``a``'s variables)."""
    chain_a, chain_b = loop_chain(a), loop_chain(b)
    mapping: dict[str, Aff] = {}
    depth = 0
    for la, lb in zip(chain_a, chain_b, strict=False):
        lower = tuple(x.substitute(mapping) for x in lb.lower)
        upper = tuple(x.substitute(mapping) for x in lb.upper)
        if (lower, upper, lb.step) != (la.lower, la.upper, la.step) or la.locals or lb.locals:
            break
        mapping[lb.var] = Aff.var(la.var)
        depth += 1
    return depth


def fuse_siblings(function: Function, first: int, second: int, depth: int,
                  ctx: isl.Context | None = None) -> Function:
    """``function`` with nest ``second`` merged into nest ``first`` at ``depth``;
    raises :class:`~polyir.fusion.producer_consumer.FusionRefused` with the reason."""
    a, b = function.body[first], function.body[second]
    if not isinstance(a, For) or not isinstance(b, For):
        raise FusionRefused("sibling fusion needs two loop nests")
    if not 1 <= depth <= common_depth(a, b):
        raise FusionRefused(f"the nests' outer loops do not match to depth {depth}")
    chain_a, chain_b = loop_chain(a, depth), loop_chain(b, depth)
    mapping = {lb.var: Aff.var(la.var) for la, lb in zip(chain_a, chain_b, strict=True)}
    tail = substitute(chain_b[-1].body, mapping)
    merged: For = replace(chain_a[-1], body=chain_a[-1].body + tail)
    for loop in reversed(chain_a[:-1]):
        merged = replace(loop, body=(merged,))
    body = list(function.body)
    body[first] = merged
    del body[second]
    result = replace(function, body=tuple(body))
    window = replace(function, body=function.body[first:second + 1])
    new_window = replace(result, body=result.body[first:second])
    deps = compute_dependences(extract(window, ctx), MEMORY_KINDS)  # what check_rewrite uses
    answer = check_rewrite(deps, new_window, what=f"fusing sibling nests {first} and {second} at depth {depth}")
    if not answer.legal:
        raise FusionRefused(answer.reason, answer.dependence, answer.witness)
    return result


__all__ = ["common_depth", "fuse_siblings"]
