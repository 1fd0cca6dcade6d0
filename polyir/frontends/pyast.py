"""Lowering of a checked ``@polyir.kernel`` function body to a polyir ``Module``.

Entry point: :func:`lower_kernel` (source, argument specs) -> ``Module``.

* ``for v in range(a, b, s)`` becomes ``For``; bounds are affine (``max`` in a
  start, ``min`` in a stop). A negative step runs the loop on ``v' = -v``
  (``for v' = -a to -b step |s|``) and substitutes ``v = -v'`` in the body.
* ``if`` with affine conditions becomes ``If``: the condition is put in
  disjunctive normal form; each disjunct is one ``If`` of an else-chain that
  repeats the then-body. Data-dependent conditions are lowered to ``select``
  stores when the bodies are simple assignments (else refused); affine
  conjuncts of an ``and`` stay ``If``s around them.
* A local name assigned once with a value that reads no memory (``n = A.shape[0]``,
  ``k = i + 1``, ``eps = 1e-6``) is substituted where used; any other local is
  a scalar temporary: a 0-d ``local`` buffer whose type is the join of what is
  assigned to it (found by iterating the lowering to a fixpoint).
"""
from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import dataclass

from polyir.frontends.pycheck import KernelSource
from polyir.frontends.pycond import Dnf, atom, conjuncts, count_stores, negate_atom, product, simplify
from polyir.frontends.pyexpr import (
    BINARY_OPERATORS,
    COMPARE_OPERATORS,
    ArrayRef,
    Binding,
    ExprLowering,
    NotAffine,
    ScalarRef,
    contains_load,
    loaded_buffers,
)
from polyir.frontends.pytypes import BOOL, WEAK_INT, Val, VType, aff_val, convert, promote
from polyir.ir.affine import Aff
from polyir.ir.names import unique_loop_vars
from polyir.ir.nodes import (
    Assign,
    BinOp,
    Buffer,
    Call,
    Expr,
    For,
    Function,
    If,
    Load,
    Module,
    Node,
    Param,
    Select,
    SourceLoc,
    Symbol,
)
from polyir.ir.types import DType, MemorySpace

RESERVED = frozenset({
    "func", "kernel", "local", "for", "to", "step", "parallel", "unroll", "vectorize", "gpu", "if",
    "else", "barrier", "launch", "grid", "block", "shared", "select", "cast", "true", "false", "and",
    "or", "not", "inf", "nan", "index", "global", "fragment", "f16", "bf16", "f32", "f64", "i8",
    "i32", "i64", "bool", "neg", "abs", "exp", "exp2", "log", "log2", "sqrt", "rsqrt", "tanh", "erf",
    "sigmoid", "sin", "cos", "floor", "ceil", "max", "min", "pow", "fragment_fill", "fragment_load",
    "fragment_mma", "fragment_store",
})
_MAX_DISJUNCTS = 64
_MAX_PASSES = 12


@dataclass(frozen=True)
class ArgSpec:
    """What one argument is, as far as compilation cares.

    ``kind`` is ``"array"`` (``dtype``, ``rank``; ``shape`` when specialised),
    ``"int"`` (a size symbol; ``value`` when specialised) or ``"scalar"`` (a
    float held in a 0-d buffer; ``weak`` for Python floats).
    """

    kind: str
    dtype: DType | None = None
    rank: int = 0
    weak: bool = False
    shape: tuple[int, ...] | None = None
    value: int | None = None


def lower_kernel(src: KernelSource, specs: tuple[ArgSpec, ...]) -> Module:
    """Lower the kernel for arguments described by ``specs`` (one per parameter)."""
    temp_types: dict[str, VType] = {}
    forced: set[str] = set()
    for _ in range(_MAX_PASSES):
        lowering = FunctionLowering(src, specs, temp_types, forced)
        function = lowering.run()
        if lowering.temp_types == temp_types and lowering.forced == forced:
            return Module((unique_loop_vars(function),))  # sibling `for j` loops become j, j_1
        temp_types, forced = dict(lowering.temp_types), set(lowering.forced)
    raise src.error(src.tree, "the types of local variables do not settle")


class FunctionLowering(ExprLowering):
    """One lowering pass over the function body."""

    def __init__(self, src: KernelSource, specs: tuple[ArgSpec, ...],
                 temp_types: dict[str, VType], forced: set[str]):
        self.src = src
        self.temp_types = dict(temp_types)
        self.forced = set(forced)
        self.temp_names: dict[str, str] = {}
        self.extra_locals: list[Buffer] = []
        self.scopes: list[dict[str, Binding]] = []
        self.active_loops: list[str] = []
        self.statement_count = 0
        self.used = set(src.locals) | RESERVED
        self.ir_names = {name: self._sanitise(name) for name in sorted(src.locals)}
        self.params: list[Param] = []
        self.bindings: dict[str, Binding] = {}
        self._bind_params(specs)

    # -- names ------------------------------------------------------------
    def _sanitise(self, name: str) -> str:
        if name not in RESERVED:
            return name
        return self.fresh(name + "_")

    def fresh(self, base: str) -> str:
        name, n = base, 0
        while name in self.used:
            n += 1
            name = f"{base}{n}"
        self.used.add(name)
        return name

    def _preferred_symbols(self) -> dict[tuple[str, int], str]:
        """``n, m = A.shape`` / ``n = A.shape[0]`` / ``n = len(A)`` at the top
        level name the symbols of A's dimensions after ``n`` and ``m``."""
        preferred: dict[tuple[str, int], str] = {}

        def take(target: ast.AST, array: str, dim: int) -> None:
            if isinstance(target, ast.Name) and self.src.assign_counts.get(target.id) == 1 \
                    and target.id not in self.forced and target.id not in RESERVED:
                preferred.setdefault((array, dim), target.id)

        for stmt in self.src.tree.body:
            if not isinstance(stmt, ast.Assign) or len(stmt.targets) != 1:
                continue
            target, value = stmt.targets[0], stmt.value
            if isinstance(value, ast.Attribute) and value.attr == "shape" \
                    and isinstance(value.value, ast.Name) and isinstance(target, ast.Tuple):
                for dim, elt in enumerate(target.elts):
                    take(elt, value.value.id, dim)
            elif isinstance(value, ast.Subscript) and isinstance(value.value, ast.Attribute) \
                    and value.value.attr == "shape" and isinstance(value.value.value, ast.Name) \
                    and isinstance(value.slice, ast.Constant) and isinstance(value.slice.value, int) \
                    and value.slice.value >= 0:
                take(target, value.value.value.id, value.slice.value)
            elif isinstance(value, ast.Call) and isinstance(value.func, ast.Name) \
                    and value.func.id == "len" and len(value.args) == 1 \
                    and isinstance(value.args[0], ast.Name):
                take(target, value.args[0].id, 0)
        return preferred

    def _bind_params(self, specs: tuple[ArgSpec, ...]) -> None:
        preferred = self._preferred_symbols()
        for py_name, spec in zip(self.src.params, specs, strict=True):
            name = self.ir_names[py_name]
            if spec.kind == "array":
                assert spec.dtype is not None
                shape = []
                for dim in range(spec.rank):
                    if spec.shape is not None:
                        shape.append(Aff.const(spec.shape[dim]))
                    else:
                        symbol = preferred.get((py_name, dim)) or self.fresh(f"{name}_{dim}")
                        shape.append(Aff.var(self.ir_names.get(symbol, symbol)))
                buffer = Buffer(name, spec.dtype, tuple(shape))
                self.params.append(buffer)
                self.bindings[py_name] = ArrayRef(buffer)
            elif spec.kind == "int":
                self.params.append(Symbol(name))
                value = Aff.const(spec.value) if spec.value is not None else Aff.var(name)
                self.bindings[py_name] = aff_val(value)
            else:
                assert spec.dtype is not None
                buffer = Buffer(name, spec.dtype, ())
                self.params.append(buffer)
                self.bindings[py_name] = ScalarRef(buffer, VType(spec.dtype, spec.weak))

    # -- lookup -----------------------------------------------------------
    def lookup(self, node: ast.Name) -> Binding:
        name = node.id
        for scope in reversed(self.scopes):
            if name in scope:
                return scope[name]
        if name in self.bindings:
            return self.bindings[name]
        if name in self.src.assign_counts:
            if name not in self.temp_names:
                self.forced.add(name)
            return Val(self.temp_types.get(name, WEAK_INT), Load(self.temp_buffer(name), ()))
        if name in self.src.loop_vars:
            raise self.unsupported(node, f"loop variable '{name}' used after its loop")
        raise self.unsupported(node, f"unsupported syntax: '{name}' used as a value")

    def temp_buffer(self, name: str) -> str:
        if name not in self.temp_names:
            self.temp_names[name] = self.ir_names[name]
        return self.temp_names[name]

    def extra_local(self, base: str, dtype: DType) -> str:
        """A fresh 0-d local buffer made by the lowering (not a Python name)."""
        name = self.fresh(base)
        self.extra_locals.append(Buffer(name, dtype, (), MemorySpace.LOCAL))
        return name

    def location(self, node: ast.AST) -> SourceLoc:
        return SourceLoc(getattr(node, "lineno", 0), getattr(node, "col_offset", 0) + self.src.indent + 1)

    def statement_name(self) -> str:
        name = f"S{self.statement_count}"
        self.statement_count += 1
        return name

    # -- function ---------------------------------------------------------
    def run(self) -> Function:
        body = self.block(self.src.tree.body)
        temps = tuple(Buffer(ir, self.temp_types.get(py, WEAK_INT).dtype, (), MemorySpace.LOCAL)
                      for py, ir in self.temp_names.items())
        name = self.src.tree.name + ("_" if self.src.tree.name in RESERVED else "")
        return Function(name, tuple(self.params), tuple(body), temps + tuple(self.extra_locals),
                        loc=self.location(self.src.tree))

    def block(self, stmts: list[ast.stmt]) -> list[Node]:
        self.scopes.append({})
        try:
            nodes: list[Node] = []
            for stmt in stmts:
                nodes.extend(self.statement(stmt))
            return nodes
        finally:
            self.scopes.pop()

    def statement(self, stmt: ast.stmt) -> list[Node]:
        if isinstance(stmt, (ast.Pass, ast.Return, ast.Expr)):
            return []     # docstrings; the checker refused everything else
        if isinstance(stmt, ast.AnnAssign):
            return [] if stmt.value is None else self.assign(stmt.target, stmt.value, stmt)
        if isinstance(stmt, ast.Assign):
            nodes: list[Node] = []
            for target in stmt.targets:
                nodes.extend(self.assign(target, stmt.value, stmt))
            return nodes
        if isinstance(stmt, ast.AugAssign):
            return self.aug_assign(stmt, None)
        if isinstance(stmt, ast.For):
            return self.for_loop(stmt)
        if isinstance(stmt, ast.If):
            return self.if_statement(stmt)
        raise self.unsupported(stmt, f"unsupported syntax: '{type(stmt).__name__}' statement")

    # -- assignments ------------------------------------------------------
    def assign(self, target: ast.expr, value: ast.expr, stmt: ast.stmt,
               guard: Expr | None = None) -> list[Node]:
        if isinstance(target, ast.Tuple):
            return self.unpack(target, value, stmt, guard)
        return self.assign_value(target, self.lower(value), stmt, guard)

    def unpack(self, target: ast.Tuple, value: ast.expr, stmt: ast.stmt,
               guard: Expr | None) -> list[Node]:
        if isinstance(value, ast.Attribute) and value.attr == "shape" and isinstance(value.value, ast.Name):
            shape = self.shape_of(value, value.value.id)
            if len(shape) != len(target.elts):
                raise self.argument_error(stmt, f"'{ast.unparse(stmt)}' unpacks {len(target.elts)} "
                                                f"sizes from an array of rank {len(shape)}")
            vals = [aff_val(dim) for dim in shape]
        elif isinstance(value, ast.Tuple) and len(value.elts) == len(target.elts):
            vals = [self.lower(v) for v in value.elts]
        else:
            raise self.unsupported(stmt, f"unsupported syntax: tuple assignment '{ast.unparse(stmt)}'")
        nodes: list[Node] = []
        if len(vals) > 1 and any(contains_load(v.as_expr()) for v in vals):
            # Python evaluates the whole right side first (``a, b = b, a``):
            # park every value that reads memory in a fresh scalar.
            parked = []
            for val in vals:
                if not contains_load(val.as_expr()):
                    parked.append(val)
                    continue
                name = self.extra_local("tuple", val.dtype)
                nodes.append(Assign(self.statement_name(), name, (), val.as_expr(), self.location(stmt)))
                parked.append(Val(val.vtype, Load(name, ())))
            vals = parked
        for elt, val in zip(target.elts, vals, strict=True):
            if isinstance(elt, ast.Tuple):
                raise self.unsupported(stmt, "unsupported syntax: nested tuple assignment")
            nodes.extend(self.assign_value(elt, val, stmt, guard))
        return nodes

    def assign_value(self, target: ast.expr, val: Val, stmt: ast.stmt,
                     guard: Expr | None) -> list[Node]:
        """Store an already lowered value into a name or subscript."""
        if isinstance(target, ast.Name):
            return self.assign_name(target.id, val, stmt, guard)
        if not isinstance(target, ast.Subscript):
            raise self.unsupported(stmt, f"unsupported syntax: assignment to '{ast.unparse(target)}'")
        if isinstance(target.value, ast.Attribute):
            raise self.unsupported(stmt, f"unsupported syntax: assignment to '{ast.unparse(target)}'")
        name_node, index_nodes = self.split_subscript(target)
        buffer = self.subscripted_buffer(name_node, len(index_nodes), target)
        indices = tuple(self.lower_index(ix, buffer, d) for d, ix in enumerate(index_nodes))
        value = convert(val, buffer.dtype)
        if guard is not None:
            value = Select(guard, value, Load(buffer.name, indices))
        return [Assign(self.statement_name(), buffer.name, indices, value, self.location(stmt))]

    def assign_name(self, name: str, val: Val, stmt: ast.stmt, guard: Expr | None) -> list[Node]:
        if guard is None and self.src.assign_counts.get(name) == 1 and not contains_load(val.as_expr()):
            # A value fixed for the rest of the block: substitute it there.
            self.scopes[-1][name] = val
            if name not in self.forced:
                return []
            # ... and also store it, for uses outside the block (Python's
            # loop-carried or after-the-loop reads of the name).
        buffer = self.temp_buffer(name)
        previous = self.temp_types.get(name)
        vtype = val.vtype if previous is None else promote(previous, val.vtype)
        self.temp_types[name] = vtype
        value = convert(val, vtype.dtype)
        if guard is not None:
            value = Select(guard, value, Load(buffer, ()))
        return [Assign(self.statement_name(), buffer, (), value, self.location(stmt))]

    def aug_assign(self, stmt: ast.AugAssign, guard: Expr | None) -> list[Node]:
        op = BINARY_OPERATORS.get(type(stmt.op))
        if op is None:
            raise self.unsupported(stmt, f"unsupported syntax: operator in '{ast.unparse(stmt)}'")
        target = stmt.target
        if isinstance(target, ast.Name):
            current = self.lower(ast.copy_location(ast.Name(id=target.id, ctx=ast.Load()), target))
        elif isinstance(target, ast.Subscript):
            current = self.lower(target)
        else:
            raise self.unsupported(stmt, f"unsupported syntax: assignment to '{ast.unparse(target)}'")
        new = self.arith(op, current, self.lower(stmt.value), stmt)
        return self.assign_value(target, new, stmt, guard)

    # -- loops ------------------------------------------------------------
    def for_loop(self, stmt: ast.For) -> list[Node]:
        assert isinstance(stmt.target, ast.Name) and isinstance(stmt.iter, ast.Call)
        py_name = stmt.target.id
        if py_name in self.active_loops:
            raise self.unsupported(stmt, f"loop variable '{py_name}' reused by a nested loop")
        args = stmt.iter.args
        step = 1
        if len(args) == 3:
            try:
                step_aff = self.lower_affine(args[2])
            except NotAffine:
                step_aff = None
            if step_aff is None or not step_aff.is_constant or step_aff.constant == 0:
                raise self.unsupported(args[2], f"range() step '{ast.unparse(args[2])}' is not a "
                                                f"nonzero integer constant")
            step = step_aff.constant
        start: ast.expr | None = args[0] if len(args) > 1 else None
        stop = args[1] if len(args) > 1 else args[0]
        var = self.ir_names[py_name]
        if step > 0:
            lower = self.bound(start, "max", "start") if start is not None else (Aff.const(0),)
            upper = self.bound(stop, "min", "stop")
            binding = aff_val(Aff.var(var))
        else:
            if start is None:
                raise self.unsupported(stmt.iter, "range() with a negative step needs a start")
            lower = tuple(-a for a in self.bound(start, "min", "start"))
            upper = tuple(-a for a in self.bound(stop, "max", "stop"))
            binding = aff_val(-Aff.var(var))
        self.active_loops.append(py_name)
        self.scopes.append({py_name: binding})
        try:
            body = self.block(stmt.body)
        finally:
            self.scopes.pop()
            self.active_loops.pop()
        if not body:
            return []
        return [For(var, lower, upper, tuple(body), step=abs(step), loc=self.location(stmt))]

    def bound(self, node: ast.expr, combine: str, which: str) -> tuple[Aff, ...]:
        """A loop bound: one affine expression or ``combine(...)`` of several."""
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
                and self.src.resolve_global(node.func.id) in (("builtin", "min"), ("builtin", "max")) \
                and node.func.id not in self.src.locals:
            if node.func.id != combine:
                raise self.unsupported(node, f"{node.func.id}(...) in a range() {which} here is not "
                                             f"convex (only {combine}(...) is supported there)")
            return tuple(aff for arg in node.args for aff in self.bound(arg, combine, which))
        val = self.lower(node)
        if val.aff is not None:
            return (val.aff,)
        expr = val.as_expr()
        scalars = {b.buffer.name for b in self.bindings.values() if isinstance(b, ScalarRef)}
        if loaded_buffers(expr) & scalars:
            raise self.argument_error(node, f"range() {which} '{ast.unparse(node)}' needs an int "
                                            f"argument, got a float")
        if contains_load(expr):
            raise self.unsupported(node, f"data-dependent loop bound '{ast.unparse(node)}' "
                                         f"(reads {', '.join(sorted(loaded_buffers(expr)))})")
        raise self.unsupported(node, f"non-affine loop bound '{ast.unparse(node)}'")

    # -- conditionals -----------------------------------------------------
    def if_statement(self, stmt: ast.If) -> list[Node]:
        try:
            dnf = self.dnf(stmt.test, False)
        except NotAffine:
            pass
        else:
            return self.chain(dnf, lambda: self.block(stmt.body), lambda: self.block(stmt.orelse), stmt)
        parts = conjuncts(stmt.test)
        affine: list[Dnf] = []
        data: list[ast.expr] = []
        for part in parts:
            try:
                affine.append(self.dnf(part, False))
            except NotAffine:
                data.append(part)
        if not affine:
            return self.select_if(data, stmt.body, stmt.orelse, stmt, None)
        combined: Dnf = [[]]
        for part_dnf in affine:
            combined = self._product(combined, part_dnf, stmt)
        return self.chain(combined, lambda: self.select_if(data, stmt.body, stmt.orelse, stmt, None),
                          lambda: self.block(stmt.orelse), stmt)

    def chain(self, dnf: Dnf, then: Callable[[], list[Node]],
              otherwise: Callable[[], list[Node]], stmt: ast.stmt) -> list[Node]:
        """``if d1: then elif d2: then ... else: otherwise`` for a DNF ``[d1, d2, ...]``."""
        if not dnf:
            return otherwise()
        if not dnf[0]:
            return then()
        then_nodes = then()
        else_nodes = self.chain(dnf[1:], then, otherwise, stmt)
        if not then_nodes and not else_nodes:
            return []
        if not then_nodes and len(dnf[0]) == 1:
            negated = negate_atom([dnf[0]])       # if c: pass else: E  ->  if not c: E
            if len(negated) == 1:
                return [If(tuple(negated[0]), tuple(else_nodes), (), loc=self.location(stmt))]
        return [If(tuple(dnf[0]), tuple(then_nodes), tuple(else_nodes), loc=self.location(stmt))]

    def dnf(self, node: ast.expr, negated: bool) -> Dnf:
        """An affine condition as a list of conjunctions; ``NotAffine`` otherwise."""
        if isinstance(node, ast.BoolOp):
            parts = [self.dnf(v, negated) for v in node.values]
            conjunctive = isinstance(node.op, ast.And) != negated
            result = parts[0]
            for part in parts[1:]:
                result = self._product(result, part, node) if conjunctive else result + part
            return simplify(result)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            return self.dnf(node.operand, not negated)
        if isinstance(node, ast.Constant) and isinstance(node.value, (bool, int, float)):
            return [[]] if bool(node.value) != negated else []
        if isinstance(node, ast.Compare):
            atoms: list[Dnf] = []
            left = self.lower_affine(node.left)
            for op_node, right_node in zip(node.ops, node.comparators, strict=True):
                op = COMPARE_OPERATORS.get(type(op_node))
                if op is None:
                    raise NotAffine(node)
                right = self.lower_affine(right_node)
                atoms.append(atom(left, op, right))
                left = right
            if negated:      # not (a < b < c) == not (a < b) or not (b < c)
                return simplify([conj for one in atoms for conj in negate_atom(one)])
            conjunction: Dnf = [[]]
            for one in atoms:
                conjunction = self._product(conjunction, one, node)
            return conjunction
        val = self.lower(node)
        if val.aff is None:
            raise NotAffine(node)
        truth = atom(val.aff, "!=", Aff.const(0))
        return negate_atom(truth) if negated else truth

    def _product(self, a: Dnf, b: Dnf,
                 node: ast.AST) -> Dnf:
        result = product(a, b)
        if len(result) > _MAX_DISJUNCTS:
            raise self.unsupported(node, f"condition '{ast.unparse(node)}' has more than "
                                         f"{_MAX_DISJUNCTS} disjuncts")
        return result

    # -- data-dependent conditions: selects ---------------------------------
    def select_if(self, conditions: list[ast.expr], body: list[ast.stmt], orelse: list[ast.stmt],
                  stmt: ast.If, outer: Expr | None) -> list[Node]:
        """Lower ``if <data-dependent>: body else: orelse`` to guarded ``select`` stores."""
        self._require_simple(body + orelse, stmt)
        cond: Expr = self.lower_truth(conditions[0])
        for extra in conditions[1:]:
            cond = BinOp("and", cond, self.lower_truth(extra))
        merged = self._merged_select(cond, body, orelse, outer)
        if merged is not None:
            return merged
        nodes: list[Node] = []
        if count_stores(body) + count_stores(orelse) > 1:
            flag = self.extra_local("cond", BOOL)
            nodes.append(Assign(self.statement_name(), flag, (), cond, self.location(stmt)))
            cond = Load(flag, ())
        then_guard = cond if outer is None else BinOp("and", outer, cond)
        not_cond = Call("not", (cond,))
        else_guard = not_cond if outer is None else BinOp("and", outer, not_cond)
        nodes.extend(self.guarded_block(body, then_guard))
        nodes.extend(self.guarded_block(orelse, else_guard))
        return nodes

    def _merged_select(self, cond: Expr, body: list[ast.stmt], orelse: list[ast.stmt],
                       outer: Expr | None) -> list[Node] | None:
        """``if c: X = a else: X = b`` -> ``X = select(c, a, b)``."""
        if outer is not None or len(body) != 1 or len(orelse) != 1:
            return None
        a, b = body[0], orelse[0]
        if not (isinstance(a, ast.Assign) and isinstance(b, ast.Assign) and len(a.targets) == 1
                and len(b.targets) == 1 and not isinstance(a.targets[0], ast.Tuple)
                and ast.dump(a.targets[0]) == ast.dump(b.targets[0])):
            return None
        va, vb = self.lower(a.value), self.lower(b.value)
        rtype = promote(va.vtype, vb.vtype)
        value = Val(rtype, Select(cond, convert(va, rtype.dtype), convert(vb, rtype.dtype)))
        target = a.targets[0]
        if isinstance(target, ast.Name):
            self.forced.add(target.id)      # conditionally assigned: a temporary, never an alias
        return self.assign_value(target, value, a, None)

    def guarded_block(self, stmts: list[ast.stmt], guard: Expr) -> list[Node]:
        nodes: list[Node] = []
        for stmt in stmts:
            if isinstance(stmt, (ast.Assign, ast.AnnAssign)):
                if stmt.value is None:
                    continue
                targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
                for target in targets:
                    nodes.extend(self.assign(target, stmt.value, stmt, guard))
            elif isinstance(stmt, ast.AugAssign):
                nodes.extend(self.aug_assign(stmt, guard))
            elif isinstance(stmt, ast.If):
                nodes.extend(self.select_if(conjuncts(stmt.test), stmt.body, stmt.orelse, stmt, guard))
        return nodes

    def _require_simple(self, stmts: list[ast.stmt], stmt: ast.If) -> None:
        for inner in stmts:
            if isinstance(inner, ast.If):
                self._require_simple(inner.body + inner.orelse, stmt)
            elif not isinstance(inner, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Pass, ast.Expr)):
                raise self.unsupported(inner, f"data-dependent 'if {ast.unparse(stmt.test)}' (line "
                                              f"{stmt.lineno}) whose body has a "
                                              f"'{type(inner).__name__.lower()}' statement; only "
                                              f"assignments can be lowered to selects")


__all__ = ["ArgSpec", "FunctionLowering", "lower_kernel"]
