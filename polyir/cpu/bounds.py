"""Checked bounds for native calls: every access inside its buffer, checked before the call.

Native code does not check subscripts, so a call whose sizes or index values
reach outside an array would write past it. :class:`BoundsCheck` prepares,
once per compiled function, what a call must satisfy, and checks it on the
raw argument words before the code runs (nothing is written on failure):

* **affine accesses** (the polyhedral footprints): for every buffer, the set
  of size-symbol values for which some access leaves ``0 <= index < extent``
  (an isl parameter set, usually empty: most kernels are in bounds for every
  size). A call is checked against it once per distinct tuple of symbol
  values (memoised), so repeated calls cost a dictionary lookup;
* **data-dependent subscripts** (gathers, embedding ids: ``W[cast<i64>(ids[i]), j]``),
  *hoisted*: when the subscript is built from loads of one buffer that the
  function does not write (with affine subscripts), constants and symbols,
  the subscript is evaluated with numpy on the region of that buffer the
  statement reads (its bounding box, from the footprint) and its minimum and
  maximum are compared with the extent, on every call (the ids change).
  A data-dependent subscript of any other form (its index buffer written by
  the function, several index buffers, loop variables in the index
  expression) is listed in :attr:`BoundsCheck.unchecked` and checked in the
  loop instead: native code compiled with ``check_bounds`` tests every
  data-dependent subscript before the access
  (``polyir.llvm.hooks.LoweringHooks.check_subscripts``) and returns a status
  that raises :class:`polyir.BoundsError` naming the function's data-dependent
  subscripts; outputs may then be partly written.

A violation raises :class:`polyir.BoundsError` naming the buffer, the
statement (its text, hence the subscript), the source line and an offending
index. ``check_bounds=False`` (``build_cpu``, ``polyir.kernel``,
``polyir.compile``) turns the check off.
"""
from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import islpy as isl
import numpy as np

from polyir.errors import BoundsError
from polyir.ir.affine import Aff
from polyir.ir.nodes import Assign, BinOp, Buffer, Cast, Compare, Const, Expr, Function, Load, Select, Var
from polyir.ir.printer import print_index, print_node
from polyir.ir.walk import node_exprs

LOGGER = logging.getLogger("polyir.bounds")


@dataclass(frozen=True)
class _Risk:
    """A buffer some affine access of which leaves it for the sizes in ``sizes``."""

    buffer: Buffer
    sizes: isl.Set              # parameter set
    accesses: tuple[Any, ...]   # polyhedral Access records on this buffer


@dataclass(frozen=True)
class _Region:
    """What a gather reads at given sizes: ``box`` of a ``source`` of ``shape``
    (numpy ``typestr``), whose subscript must stay in ``[0, extent)``."""

    box: tuple[slice, ...]
    shape: tuple[int, ...]
    typestr: str
    extent: int


class _View:
    """A numpy view of raw memory (``np.asarray`` reads ``__array_interface__``)."""

    def __init__(self, address: int, region: _Region):
        self.__array_interface__ = {"data": (address, True), "shape": region.shape,
                                    "typestr": region.typestr, "version": 3}


@dataclass(frozen=True)
class _Gather:
    """A data-dependent subscript ``expr`` at dimension ``dim`` of ``target``,
    reading values of ``source`` (not written by the function) in ``region``."""

    statement: Assign
    target: Buffer
    dim: int
    expr: Expr
    source: Buffer
    source_slot: int
    region: isl.Set             # the elements of ``source`` the statement reads (with params)
    plain: bool = False         # the subscript is the loaded value itself (maybe cast to int)


def _where(node: Any) -> str:
    line = f" (line {node.loc.line})" if node.loc is not None else ""
    return f"statement {node.name}{line}: {print_node(node).strip()}"


def data_dependent_subscripts(function: Function) -> list[str]:
    """Each data-dependent (non-affine) subscript of ``function``, as text naming
    the buffer, the subscript and the statement with its source line."""
    from polyir.ir.nodes import to_affine
    from polyir.ir.walk import loads, walk_nodes
    found: list[str] = []
    for node in walk_nodes(function.body):
        if not isinstance(node, Assign):
            continue
        accesses = [(node.buffer, node.indices)]
        accesses += [(load.buffer, load.indices) for value in node_exprs(node) for load in loads(value)]
        for buffer, indices in accesses:
            for index in indices:
                if not isinstance(index, Aff) and to_affine(index) is None:
                    text = f"{buffer}[... {print_index(index)} ...] in {_where(node)}"
                    if text not in found:
                        found.append(text)
    return found


def _gather_loads(expr: Expr) -> list[Load] | None:
    """The loads of a subscript expression we can evaluate before the call,
    or ``None`` when it uses anything else (loop variables, calls)."""
    found: list[Load] = []

    def visit(e: Any) -> bool:
        if isinstance(e, Const):
            return True
        if isinstance(e, Load):
            found.append(e)
            return True
        if isinstance(e, Cast):
            return visit(e.value)
        if isinstance(e, (BinOp, Compare)):
            return e.op in ("+", "-", "*", "<", "<=", ">", ">=", "==", "!=") \
                and visit(e.lhs) and visit(e.rhs)
        if isinstance(e, Select):
            return visit(e.cond) and visit(e.if_true) and visit(e.if_false)
        return False

    return found if visit(expr) else None


def _evaluate(expr: Any, values: Any, symbols: dict[str, int], xp: Any = np) -> Any:
    """``expr`` with every load replaced by ``values`` (elementwise, in the array
    namespace ``xp``: numpy, or CuPy for device arrays)."""
    if isinstance(expr, Const):
        return expr.value
    if isinstance(expr, Load):
        return values
    if isinstance(expr, Cast):
        inner = xp.asarray(_evaluate(expr.value, values, symbols, xp))
        if expr.dtype.is_int:
            return xp.trunc(inner).astype(np.int64) if inner.dtype.kind == "f" \
                else inner.astype(np.int64)
        return inner
    if isinstance(expr, Select):
        return xp.where(_evaluate(expr.cond, values, symbols, xp),
                        _evaluate(expr.if_true, values, symbols, xp),
                        _evaluate(expr.if_false, values, symbols, xp))
    if isinstance(expr, Var):
        return symbols[expr.name]
    if isinstance(expr, Aff):
        return expr.evaluate(symbols)
    lhs, rhs = _evaluate(expr.lhs, values, symbols, xp), _evaluate(expr.rhs, values, symbols, xp)
    operations = {"+": xp.add, "-": xp.subtract, "*": xp.multiply, "<": xp.less,
                  "<=": xp.less_equal, ">": xp.greater, ">=": xp.greater_equal,
                  "==": xp.equal, "!=": xp.not_equal}
    return operations[expr.op](lhs, rhs)


class BoundsCheck:
    """The bounds a call of ``function`` must satisfy (see the module docstring).

    ``slots``: the function's LLVM parameters (``polyir.llvm.lower.signature``),
    whose order the raw argument words follow. Attributes: ``risks`` (buffers
    with affine accesses that leave them for some sizes), ``gathers``
    (data-dependent subscripts checked before each call), ``unchecked`` (text
    of data-dependent subscripts not checked)."""

    def __init__(self, function: Function, slots: Sequence[Any]):
        from polyir.polyhedral.extract import extract, isl_name

        self.function = function
        self._slot_of = {slot.name: k for k, slot in enumerate(slots) if slot.kind != "extra"}
        self.risks: list[_Risk] = []
        self.gathers: list[_Gather] = []
        self.unchecked: list[str] = []
        self._seen: dict[tuple[int, ...], list[tuple[_Gather, _Region]]] = {}
        self._ctx = isl.Context()
        from polyir.polyhedral.extract import NotPolyhedral
        try:
            scop = extract(function, ctx=self._ctx)
        except NotPolyhedral as error:
            self.unchecked.append(f"the whole function ({error})")
            LOGGER.warning("%s(): not bounds-checked: %s", function.name, error)
            self._param_slots = []
            return
        self._scop = scop
        self._params = scop.params
        self._param_slots = [self._slot_of[p] for p in scop.params]
        checked = [b for b in function.params if isinstance(b, Buffer) and b.rank > 0]
        checked += [b for b in function.locals if b.rank > 0]
        by_buffer: dict[str, list[Any]] = {}
        for stmt in scop:
            for access in stmt.accesses:
                by_buffer.setdefault(access.buffer, []).append(access)
        for buffer in checked:
            accesses = by_buffer.get(buffer.name, [])
            if not accesses:
                continue
            box = self._box(buffer, isl_name)
            touched = accesses[0].relation.range()
            for access in accesses[1:]:
                touched = touched.union(access.relation.range())
            sizes = touched.subtract(box).params().intersect_params(scop.context).coalesce()
            if not sizes.is_empty():
                self.risks.append(_Risk(buffer, sizes, tuple(accesses)))
        self._find_gathers(scop, isl_name)
        for text in self.unchecked:
            LOGGER.info("%s(): data-dependent subscript checked in the loop only: %s",
                        function.name, text)

    @property
    def needed(self) -> bool:
        """Whether any call could fail the check."""
        return bool(self.risks or self.gathers)

    def _box(self, buffer: Buffer, isl_name: Any) -> isl.Set:
        from polyir.polyhedral.extract import aff_to_isl

        dims = [f"_o{d}" for d in range(buffer.rank)]
        conditions = " and ".join(f"0 <= {v} < {aff_to_isl(extent, {})}"
                                  for v, extent in zip(dims, buffer.shape, strict=True))
        return isl.Set(f"{self._scop.param_space} -> {{ {isl_name(buffer.name)}[{', '.join(dims)}] : "
                       f"{conditions} }}", context=self._ctx)

    def _find_gathers(self, scop: Any, isl_name: Any) -> None:
        buffers = self.function.buffers
        written = {stmt.node.buffer for stmt in scop if isinstance(stmt.node, Assign)}
        for stmt in scop:
            node = stmt.node
            if not isinstance(node, Assign):
                continue
            subscripts: list[tuple[str, tuple[Any, ...]]] = [(node.buffer, node.indices)]
            for value in node_exprs(node):
                from polyir.polyhedral.extract import expr_loads
                subscripts += [(load.buffer, load.indices) for load in expr_loads(value)]
            for target, indices in subscripts:
                for dim, index in enumerate(indices):
                    if isinstance(index, Aff) or target not in buffers:
                        continue
                    from polyir.polyhedral.extract import affine_index
                    if affine_index(index) is not None:
                        continue
                    self._add_gather(stmt, node, buffers[target], dim, index, written)

    def _add_gather(self, stmt: Any, node: Assign, target: Buffer, dim: int, index: Expr,
                    written: set[str]) -> None:
        loads = _gather_loads(index)
        text = f"{target.name}[... {print_index(index)} ...] in {_where(node)}"
        sources = {load.buffer for load in loads} if loads else set()
        if not loads or len(sources) != 1 or next(iter(sources)) in written or \
                any(not isinstance(i, Aff) for load in loads for i in load.indices):
            self.unchecked.append(text)
            return
        source = self.function.buffers[loads[0].buffer]
        if source.name not in self._slot_of:
            self.unchecked.append(text)
            return
        region = None
        for access in stmt.accesses:
            if access.buffer == source.name and access.kind == "read":
                part = access.relation.range()
                region = part if region is None else region.union(part)
        if region is None:
            self.unchecked.append(text)
            return
        plain = isinstance(index, Load) or (isinstance(index, Cast) and index.dtype.is_int
                                            and isinstance(index.value, Load))
        self.gathers.append(_Gather(node, target, dim, index, source,
                                    self._slot_of[source.name], region, plain))

    # ------------------------------------------------------------ at call time
    @classmethod
    def for_function(cls, function: Function) -> BoundsCheck:
        """The check of ``function`` for a backend without CPU argument words
        (the CUDA runtime: :meth:`check_symbols` before the launches)."""
        from polyir.cpu.hooks import CpuHooks
        from polyir.llvm.lower import signature
        return cls(function, signature(function, CpuHooks()))

    def check_symbols(self, symbols: dict[str, int]) -> None:
        """The affine part of the check for the size symbols' values (names as
        in the function); raises :class:`polyir.BoundsError` on a violation.
        Data-dependent subscripts are not checked here (their ids are not
        on the host)."""
        if not self.risks:
            return
        key = tuple(symbols[p] for p in self._params)
        if key not in self._seen:
            self._check_affine(dict(zip(self._params, key, strict=True)))
            if len(self._seen) > 4096:
                self._seen.clear()
            self._seen[key] = []

    def check_words(self, words: Any) -> None:
        """Check a call on raw argument words (``ctypes`` int64 array in slot
        order); raises :class:`polyir.BoundsError` on a violation."""
        key = tuple(words[k] for k in self._param_slots)
        boxes = self._seen.get(key)
        if boxes is None:
            symbols = dict(zip(self._params, key, strict=True))
            self._check_affine(symbols)
            boxes = []
            for gather in self.gathers:
                region = self._region(gather, symbols)
                if region is not None:
                    boxes.append((gather, region))
            if len(self._seen) > 4096:
                self._seen.clear()
            self._seen[key] = boxes
        for gather, region in boxes:
            self._check_gather(gather, region, words, key)

    def _point(self, symbols: dict[str, int]) -> isl.Set:
        from polyir.polyhedral.extract import isl_name
        body = " and ".join(f"{isl_name(p)} = {symbols[p]}" for p in self._params) or "true"
        return isl.Set(f"{self._scop.param_space} -> {{ : {body} }}", context=self._ctx)

    def _check_affine(self, symbols: dict[str, int]) -> None:
        if not self.risks:
            return
        point = self._point(symbols)
        for risk in self.risks:
            if risk.sizes.intersect_params(point).is_empty():
                continue
            raise self._affine_error(risk, point, symbols)

    def _affine_error(self, risk: _Risk, point: isl.Set, symbols: dict[str, int]) -> BoundsError:
        from polyir.polyhedral.extract import isl_name
        buffer = risk.buffer
        shape = tuple(extent.evaluate(symbols) for extent in buffer.shape)
        box = self._box(buffer, isl_name).intersect_params(point)
        for access in risk.accesses:
            outside = access.relation.intersect_params(point).range().subtract(box)
            if outside.is_empty():
                continue
            sample = outside.sample_point()
            index = [sample.get_coordinate_val(isl.dim_type.set, d).to_python()
                     for d in range(buffer.rank)]
            node = self._scop.statements[access.statement].node
            return BoundsError(f"{self.function.name}(): {access.kind} of '{buffer.name}' at "
                               f"index {index} is outside its shape {shape} in {_where(node)} "
                               f"(sizes {symbols})", buffer=buffer.name,
                               statement=access.statement,
                               line=node.loc.line if node.loc is not None else None)
        return BoundsError(f"{self.function.name}(): an access of '{buffer.name}' leaves its "
                           f"shape {shape} (sizes {symbols})", buffer=buffer.name)

    def _region(self, gather: _Gather, symbols: dict[str, int]) -> _Region | None:
        region = gather.region.intersect_params(self._point(symbols))
        if region.is_empty():
            return None
        box = []
        for d in range(gather.source.rank):
            low = region.dim_min_val(d).to_python()
            high = region.dim_max_val(d).to_python()
            box.append(slice(int(low), int(high) + 1))
        shape = tuple(extent.evaluate(symbols) for extent in gather.source.shape)
        if 0 in shape:
            return None
        return _Region(tuple(box), shape, gather.source.dtype.numpy.str,
                       gather.target.shape[gather.dim].evaluate(symbols))

    def _check_gather(self, gather: _Gather, region: _Region, words: Any,
                      key: tuple[int, ...]) -> None:
        values = np.asarray(_View(words[gather.source_slot], region))[region.box]
        self._check_values(gather, region, values, dict(zip(self._params, key, strict=True)), np)

    def check_arrays(self, symbols: dict[str, int], arrays: dict[str, Any], xp: Any = np) -> None:
        """The whole check for a backend that holds its arguments as arrays (the
        CUDA runtime, before any launch): :meth:`check_symbols`, then every
        hoisted data-dependent subscript evaluated on ``arrays[source]`` (numpy,
        or device arrays of the namespace ``xp``: min and max are reduced on
        the device, and only they come back). A source missing from ``arrays``
        is not checked. Raises :class:`polyir.BoundsError` on a violation."""
        self.check_symbols(symbols)
        if not self.gathers:
            return
        for gather in self.gathers:
            array = arrays.get(gather.source.name)
            if array is None:
                continue
            region = self._region(gather, symbols)
            if region is None:
                continue
            namespace = np if isinstance(array, np.ndarray) and type(array) is np.ndarray else xp
            self._check_values(gather, region, array[region.box], symbols, namespace)

    def _check_values(self, gather: _Gather, region: _Region, values: Any,
                      symbols: dict[str, int], xp: Any) -> None:
        if values.size == 0:
            return
        if gather.plain:          # min and max commute with truncation
            low, high = values.min(), values.max()
        else:
            index = xp.asarray(_evaluate(gather.expr, values, symbols, xp))
            low, high = index.min(), index.max()
        if xp is not np:          # one transfer back for both
            low, high = xp.stack([xp.asarray(low, dtype=np.float64),
                                  xp.asarray(high, dtype=np.float64)]).tolist()
        low, high = np.trunc(float(low)), np.trunc(float(high))
        extent = region.extent
        if low >= 0 and high < extent:
            return
        source = gather.source
        bad = low if not low >= 0 else high
        shown = int(bad) if np.isfinite(bad) else bad
        node = gather.statement
        raise BoundsError(f"{self.function.name}(): subscript {print_index(gather.expr)} of "
                          f"'{gather.target.name}' (dimension {gather.dim}, extent {extent}) takes "
                          f"the value {shown} from '{source.name}' in {_where(node)}",
                          buffer=gather.target.name, statement=node.name,
                          line=node.loc.line if node.loc is not None else None)
