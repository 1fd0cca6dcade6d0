"""Canonical forms of IR fragments: the same code up to the names it was given.

A stack of identical layers lowers to nests that differ only in their buffer,
loop and statement names, and a pass that analyses each nest (or each pair of
nests) with isl would otherwise repeat the same questions once per layer: the
compile time of a 32-layer model would be 32 times one layer's, all of it
spent on answers already known. :func:`canonical_form` gives a fragment a
key under which a pass may remember its decision, and the translation
between that fragment's names and any other fragment with the same key.

The key is the printed nodes (the text form, which says everything a node
holds), the declarations of every buffer they touch, and named sets of names
the caller says matter (which buffers are observed elsewhere, which one is
being shrunk), with each name the nodes bind or touch replaced by the order
of its first appearance. Size symbols keep their names: they mean the same in
the whole function. Two fragments with equal keys are the same program up
to a renaming, so every polyhedral answer about one (legality, slices,
footprints, dependences) holds for the other after renaming, as long as both
live in the same function (the same parameters and assumptions): callers
keep their memo for one function only.
"""
from __future__ import annotations

import dataclasses
import hashlib
import re
import weakref
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from polyir.ir.affine import Aff
from polyir.ir.names import base_name, claim_name
from polyir.ir.nodes import For, Function, Launch, Node, SourceLoc
from polyir.ir.printer import print_index, print_node
from polyir.ir.walk import STATEMENT_NODES, remembered, subtree_accesses, walk_nodes

_IDENTIFIER = re.compile(r"(?<![0-9A-Za-z_.])[A-Za-z_][A-Za-z0-9_]*")
_PLACEHOLDER = re.compile(r"\x00(\d+)\x00")


@dataclass(frozen=True)
class CanonicalForm:
    """``key`` identifies the fragment up to renaming; ``names`` are its own names
    in canonical order (name ``k`` of one fragment corresponds to name ``k`` of
    every fragment with the same key)."""

    key: str
    names: tuple[str, ...]

    def canonical(self, text: str) -> str:
        """``text`` (a reason, a witness) with this fragment's names made canonical."""
        index = {name: k for k, name in enumerate(self.names)}
        return _IDENTIFIER.sub(lambda m: f"\x00{index[m.group(0)]}\x00" if m.group(0) in index
                               else m.group(0), text)

    def actual(self, text: str) -> str:
        """Canonical ``text`` (from :meth:`canonical` of an equal-keyed form) in this
        fragment's names."""
        return _PLACEHOLDER.sub(lambda m: self.names[int(m.group(1))], text)

    def renaming(self, other: CanonicalForm) -> dict[str, str]:
        """``other``'s names -> this fragment's names (the forms have equal keys)."""
        if other.key != self.key:
            raise ValueError("renaming between fragments that are not the same up to names")
        return dict(zip(other.names, self.names, strict=True))


def bound_names(nodes: Iterable[Node]) -> set[str]:
    """Loop variables, statement names, loop-scoped locals and buffers of ``nodes``."""
    names: set[str] = set()
    for node in nodes:
        names |= remembered(node, _BOUND, _bound_names)
    return names


def _bound_names(node: Node) -> frozenset[str]:
    names = set().union(*subtree_accesses(node))
    for inner in walk_nodes((node,)):
        if isinstance(inner, For):
            names.add(inner.var)
            names.update(b.name for b in inner.locals)
        elif isinstance(inner, STATEMENT_NODES):
            names.add(inner.name)
    return frozenset(names)


_BOUND: dict[int, tuple[weakref.ref[Node], Any]] = {}
_TEXT: dict[int, tuple[weakref.ref[Node], Any]] = {}


def canonical_form(function: Function, nodes: Iterable[Node],
                   marks: Mapping[str, Collection[str]] | None = None) -> CanonicalForm:
    """The :class:`CanonicalForm` of ``nodes`` (top-level nodes or nests of
    ``function``), with the names in each set of ``marks`` recorded in the key
    under the set's label.

    Each node is written out, every field, with its names replaced by their
    order of appearance in a walk of its fields (loop variable, bounds, body,
    ...; a statement's name, target, value): the order of the code, not of the
    names. Writing the original names would not do: an affine subscript prints
    its terms sorted by variable name, so two layers whose loops are ``i_3,
    j_3`` and ``i_12, j_12`` print ``32*i_3 + j_3`` and ``j_12 + 32*i_12`` and
    would never match. The per-node forms are remembered (:func:`remembered`) and
    joined through the names the nodes share."""
    nodes = tuple(nodes)
    order: list[str] = []
    index: dict[str, int] = {}
    lines: list[str] = []
    for node in nodes:
        local_order, text = remembered(node, _FORM, _node_form)
        shared = []
        for name in local_order:
            if name not in index:
                index[name] = len(order)
                order.append(name)
            shared.append(f"%{index[name]}")
        lines.append(f"{text}\n<- {', '.join(shared)}")
    buffers = function.buffers
    for k, name in enumerate(order):
        buffer = buffers.get(name)
        if buffer is not None:
            shape = ", ".join(print_index(d) for d in buffer.shape)
            lines.append(f"%{k}: {buffer.dtype}[{shape}] @{buffer.space}")
    for label in sorted(marks or {}):
        chosen = sorted(index[name] for name in (marks or {})[label] if name in index)
        lines.append(f"{label}: {chosen}")
    key = hashlib.sha256("\n".join(lines).encode()).hexdigest()
    return CanonicalForm(key, tuple(order))


def _node_form(node: Node) -> tuple[tuple[str, ...], str]:
    """``node``'s bound names in the order of the code, and a text of every
    field of every node in it (source locations aside) with name ``k`` of that
    order written ``$k`` (a launch: its printed text, its names in the order
    the text shows them)."""
    bound = bound_names((node,))
    if any(isinstance(inner, Launch) for inner in walk_nodes((node,))):
        text = print_node(node)
        found: list[str] = []
        for match in _IDENTIFIER.finditer(text):
            if match.group(0) in bound and match.group(0) not in found:
                found.append(match.group(0))
        local = {name: k for k, name in enumerate(found)}
        return tuple(found), _IDENTIFIER.sub(
            lambda m: f"${local[m.group(0)]}" if m.group(0) in local else m.group(0), text)
    index: dict[str, int] = {}
    order: list[str] = []
    parts: list[str] = []

    def named(name: str) -> str:
        """``$k`` for the ``k``-th bound name met, other names as they are."""
        if name not in bound:
            return name
        k = index.get(name)
        if k is None:
            k = index[name] = len(order)
            order.append(name)
        return f"${k}"

    def emit(value: Any) -> None:
        if isinstance(value, Aff):
            variables = sorted(value.variables())   # loop variables: met at their loop
            for name in variables:
                named(name)
            parts.append(str(value.rename({v: f"${index[v]}" for v in variables if v in index})))
        elif isinstance(value, tuple):
            parts.append("(")
            for item in value:
                emit(item)
                parts.append(",")
            parts.append(")")
        elif isinstance(value, str):
            parts.append(repr(value))
        else:
            fields = _fields(value)
            if fields:
                parts.append(f"{type(value).__name__}{{")
                for name, holds_name in fields:
                    field_value = getattr(value, name)
                    if holds_name and isinstance(field_value, str):
                        parts.append(named(field_value))
                    else:
                        emit(field_value)
                    parts.append(";")
                parts.append("}")
            elif not isinstance(value, SourceLoc):
                parts.append(repr(value))

    emit(node)
    # every field of every node, each name written as its place in the order of the
    # code (one walk; no renamed copy of the nest is built): size symbols keep theirs
    return tuple(order) + tuple(sorted(bound - set(order))), "".join(parts)


_FORM: dict[int, tuple[weakref.ref[Node], Any]] = {}


_NAME_FIELDS = frozenset({"name", "buffer", "var", "fragment", "result", "a", "b", "acc"})
"""Fields of nodes, expressions and buffers that hold a buffer, loop or statement name."""


def rename_nodes(nodes: Iterable[Node], mapping: Mapping[str, str]) -> tuple[Node, ...]:
    """``nodes`` with every buffer, loop variable and statement name in ``mapping``
    renamed (simultaneously), source locations kept."""
    return tuple(_renamed(node, mapping) for node in nodes)


def _renamed(value: Any, mapping: Mapping[str, str]) -> Any:
    if isinstance(value, Aff):
        return value.rename(mapping)
    if isinstance(value, tuple):
        items = tuple(_renamed(item, mapping) for item in value)
        return value if all(a is b for a, b in zip(items, value, strict=True)) else items
    if isinstance(value, Launch):
        raise ValueError("rename_nodes: launches name kernels, not renamed here")
    fields = _fields(value)
    if fields:
        changes: dict[str, Any] = {}
        for name, holds_name in fields:
            old = getattr(value, name)
            if holds_name and isinstance(old, str):
                new = mapping.get(old, old)
            else:
                new = _renamed(old, mapping)
            if new is not old:
                changes[name] = new
        return dataclasses.replace(value, **changes) if changes else value
    return value


_FIELDS: dict[type, tuple[tuple[str, bool], ...]] = {}


def _fields(value: Any) -> tuple[tuple[str, bool], ...]:
    """``value``'s dataclass fields as ``(name, holds a name)`` (:data:`_NAME_FIELDS`),
    remembered per class; empty for anything else (and for source locations)."""
    kind = type(value)
    found = _FIELDS.get(kind)
    if found is None:
        found = ()
        if dataclasses.is_dataclass(kind) and kind is not SourceLoc:
            found = tuple((f.name, f.name in _NAME_FIELDS) for f in dataclasses.fields(kind))
        _FIELDS[kind] = found
    return found


def transfer(nodes: Iterable[Node], source: CanonicalForm, target: CanonicalForm,
             taken: set[str]) -> tuple[Node, ...]:
    """``nodes`` (what a pass made of the fragment ``source`` describes) made for the
    fragment ``target`` describes: ``source``'s names become ``target``'s, and the
    names the pass introduced become fresh ones (claimed in ``taken``)."""
    return transfer_names(nodes, source, target, taken)[0]


def transfer_names(nodes: Iterable[Node], source: CanonicalForm, target: CanonicalForm,
                   taken: set[str]) -> tuple[tuple[Node, ...], dict[str, str]]:
    """:func:`transfer`, and the renaming it applied (``source``'s names and the
    introduced ones -> ``target``'s and fresh ones), for the pass's remarks."""
    nodes = tuple(nodes)
    mapping = target.renaming(source)
    for name in sorted(bound_names(nodes) - set(mapping)):
        mapping[name] = claim_name(base_name(name), taken)
    return rename_nodes(nodes, mapping), mapping


def rename_text(text: str, mapping: Mapping[str, str]) -> str:
    """``text`` (a remark) with every whole identifier in ``mapping`` renamed."""
    return _IDENTIFIER.sub(lambda m: mapping.get(m.group(0), m.group(0)), text)


__all__ = ["CanonicalForm", "bound_names", "canonical_form", "rename_nodes", "rename_text", "transfer",
           "transfer_names"]
