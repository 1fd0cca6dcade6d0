"""Which generator features a program shows (used to check coverage of ``programs()``)."""
from __future__ import annotations

from polyir.ir.affine import Aff
from polyir.ir.nodes import (
    Assign,
    BinOp,
    Buffer,
    Call,
    Cast,
    Compare,
    For,
    Function,
    If,
    Load,
    Module,
    Select,
    Symbol,
)
from polyir.ir.types import DType
from polyir.ir.verifier import expr_dtype


def _loads(expr: object) -> list[Load]:
    found: list[Load] = []
    if isinstance(expr, Load):
        found.append(expr)
    for child in getattr(expr, "__dict__", {}).values():
        if isinstance(child, tuple):
            for item in child:
                found += _loads(item)
        elif not isinstance(child, (str, int, float, bool, DType, Aff)) and child is not None:
            found += _loads(child)
    return found


def _calls(expr: object, kinds: set[str]) -> None:
    if isinstance(expr, Call):
        kinds.add(f"call:{expr.fn}")
    if isinstance(expr, Select):
        kinds.add("select")
    if isinstance(expr, Cast):
        kinds.add("cast")
    if isinstance(expr, Compare):
        kinds.add("compare")
    if isinstance(expr, BinOp):
        kinds.add(f"binop:{expr.op}")
    for child in getattr(expr, "__dict__", {}).values():
        if isinstance(child, tuple):
            for item in child:
                _calls(item, kinds)
        elif isinstance(child, (Call, Select, Cast, Compare, BinOp, Load)):
            _calls(child, kinds)


def _typed_ops(expr: object, function: Function, kinds: set[str]) -> None:
    """Features that need operand types: float division, float-to-float casts."""
    if isinstance(expr, BinOp) and expr.op == "/" and expr_dtype(expr, function.buffers).is_float:
        kinds.add("float_division")
    if isinstance(expr, Cast) and expr.dtype.is_float and expr_dtype(expr.value, function.buffers).is_float:
        kinds.add("float_cast")
    for child in getattr(expr, "__dict__", {}).values():
        for item in child if isinstance(child, tuple) else (child,):
            if isinstance(item, (Call, Select, Cast, Compare, BinOp, Load)):
                _typed_ops(item, function, kinds)


def _is_perfect_nest(loop: For) -> bool:
    """A chain of at least two loops, each the only node of its parent's body,
    with only statements in the innermost body."""
    depth = 1
    while len(loop.body) == 1 and isinstance(loop.body[0], For):
        loop = loop.body[0]
        depth += 1
    return depth >= 2 and all(isinstance(n, Assign) for n in loop.body)


def _dependence_features(statements: list[tuple[Assign, tuple[For, ...]]], features: set[str]) -> None:
    """Flow/anti dependences through memory: reads of buffers the program writes."""
    writers: dict[str, set[str]] = {}
    for node, _ in statements:
        writers.setdefault(node.buffer, set()).add(node.name)
    for node, loops in statements:
        target = Load(node.buffer, node.indices)
        loads = _loads(node.value)
        if any(load.buffer in writers and writers[load.buffer] - {node.name} for load in loads):
            features.add("cross_statement_dependence")
        neighbours = {load.indices for load in loads if load.buffer == node.buffer and load != target}
        if neighbours:
            features.add("recurrence")
        if len(neighbours) >= 2:
            features.add("stencil")
        loop_names = {f.var for f in loops}
        target_vars = set().union(*[i.variables() for i in node.indices if isinstance(i, Aff)]) \
            if node.indices else set()
        if target in loads and loop_names - target_vars:
            if any(load.buffer in writers and load != target for load in loads):
                features.add("reduction_reads_updated")
            value = node.value
            additive = isinstance(value, BinOp) and value.op in ("+", "-") and value.lhs == target
            if not additive:
                features.add("bounded_reduction")


def program_features(module: Module) -> set[str]:
    """Names of the features ``module``'s entry function shows."""
    function: Function = module.entry
    features: set[str] = set()
    symbols = set(function.symbols)
    local_scalars = {b.name for b in function.locals if b.rank == 0}
    if any(isinstance(p, Symbol) for p in function.params):
        features.add("symbol_param")
    if any(isinstance(p, Buffer) and p.rank == 0 for p in function.params):
        features.add("scalar_param")
    if any(isinstance(p, Buffer) and p.dtype.is_int for p in function.params):
        features.add("int_buffer")
    if any(isinstance(p, Buffer) and p.dtype is DType.F64 for p in function.params):
        features.add("f64_buffer")
    if any(isinstance(p, Buffer) and any(not d.is_constant and not (len(d.terms) == 1 and d.terms[0][1] == 1
                                                                 and d.constant == 0) for d in p.shape)
           for p in function.params):
        features.add("affine_shape")
    if any(b.rank > 0 for b in function.locals):
        features.add("local_array")
    if any(isinstance(p, Buffer) and p.dtype is DType.BOOL for p in function.params):
        features.add("bool_buffer")
    if any(isinstance(p, Buffer) and p.dtype is DType.I64 for p in function.params):
        features.add("i64_buffer")
    statements: list[tuple[Assign, tuple[For, ...]]] = []
    written_scalars: set[str] = set()
    read_scalars: set[str] = set()

    def visit(nodes: tuple, loops: tuple[For, ...]) -> None:
        kinds = {type(n) for n in nodes}
        if For in kinds and (Assign in kinds or If in kinds) and loops:
            features.add("imperfect_nest")
        for node in nodes:
            if isinstance(node, For):
                if node.parallel:
                    features.add("parallel_mark")
                if not loops and _is_perfect_nest(node):
                    features.add("perfect_nest")
                depth = len(loops) + 1
                features.add(f"depth{depth}")
                outer = {f.var for f in loops}
                for bound in node.lower + node.upper:
                    names = bound.variables()
                    if names & symbols:
                        features.add("parametric_bound")
                    if not names:
                        features.add("constant_bound")
                    if names & outer:
                        features.add("triangular_bound")
                if len(node.lower) > 1:
                    features.add("max_bound")
                if len(node.upper) > 1:
                    features.add("min_bound")
                if node.step > 1:
                    features.add("step")
                visit(node.body, loops + (node,))
            elif isinstance(node, If):
                features.add("if")
                if node.else_body:
                    features.add("else")
                visit(node.then_body, loops)
                visit(node.else_body, loops)
            elif isinstance(node, Assign):
                statements.append((node, loops))
                if node.buffer in local_scalars:
                    written_scalars.add(node.buffer)
                loop_names = {f.var for f in loops}
                for load in _loads(node.value) + [Load(node.buffer, node.indices)]:
                    if load.buffer in local_scalars and load is not None and load in _loads(node.value):
                        read_scalars.add(load.buffer)
                    order = []
                    for index in load.indices:
                        if not isinstance(index, Aff):
                            features.add("gather")
                            continue
                        used = [n for n in index.variables() if n in loop_names]
                        for n in used:
                            c = index.coefficient(n)
                            if c >= 2:
                                features.add("strided_access")
                            if c < 0:
                                features.add("reversed_access")
                        if len(used) == 1 and index.coefficient(used[0]) == 1 and index.constant != 0:
                            features.add("shifted_access")
                        if len(used) == 1:
                            order.append(used[0])
                    level = {f.var: d for d, f in enumerate(loops)}
                    if len(set(order)) == len(order) >= 2 and \
                            [level[n] for n in order] != sorted(level[n] for n in order):
                        features.add("transposed_access")
                value_loads = _loads(node.value)
                target = Load(node.buffer, node.indices)
                if target in value_loads:
                    target_vars = set().union(*[i.variables() for i in node.indices if isinstance(i, Aff)]) \
                        if node.indices else set()
                    if loop_names - target_vars:
                        features.add("reduction")
                kinds_seen: set[str] = set()
                _calls(node.value, kinds_seen)
                _typed_ops(node.value, function, kinds_seen)
                features.update(kinds_seen)

    visit(function.body, ())
    if written_scalars & read_scalars:
        features.add("scalar_temporary")
    bool_scalars = {b.name for b in function.locals if b.rank == 0 and b.dtype is DType.BOOL}
    if written_scalars & read_scalars & bool_scalars:
        features.add("bool_temporary")
    _dependence_features(statements, features)
    if len(statements) >= 3:
        features.add("several_statements")
    return features
