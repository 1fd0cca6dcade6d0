"""Source loading and the syntactic check of the ``@polyir.kernel`` subset.

:func:`load_source` finds a function's source, parses it and shifts line
numbers to the real file. :func:`check_syntax` walks the tree once, at
decoration time, and refuses constructs outside the subset (``while``,
``break``, nested functions, calls to other functions, numpy calls, slicing,
globals other than ``math``/``min``/``max``/``abs``/``range``, ...) with a
:class:`polyir.UnsupportedSyntax` that names the construct and its line.
Refusals that depend on meaning (non-affine loop bounds, data-dependent
conditions with complex bodies) come later, from the lowering.
"""
from __future__ import annotations

import ast
import builtins
import inspect
import math
import textwrap
import types
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NoReturn

from polyir.errors import UnsupportedSyntax

ALLOWED_BUILTINS = ("range", "min", "max", "abs", "len", "float", "int")
# math.<name> -> IR call name
MATH_FUNCTIONS: dict[str, str] = {
    "sqrt": "sqrt", "exp": "exp", "log": "log", "tanh": "tanh", "pow": "pow",
    "sin": "sin", "cos": "cos", "erf": "erf", "log2": "log2", "exp2": "exp2",
    "fabs": "abs", "floor": "floor", "ceil": "ceil",
}
MATH_CONSTANTS: dict[str, float] = {
    "pi": math.pi, "e": math.e, "tau": math.tau, "inf": math.inf, "nan": math.nan,
}

_STATEMENT_NAMES: dict[type, str] = {
    ast.While: "while loop", ast.Break: "break", ast.Continue: "continue",
    ast.FunctionDef: "nested function definition",
    ast.AsyncFunctionDef: "nested function definition", ast.ClassDef: "class definition",
    ast.Global: "global statement", ast.Nonlocal: "nonlocal statement",
    ast.Import: "import", ast.ImportFrom: "import", ast.With: "with statement",
    ast.AsyncWith: "with statement", ast.AsyncFor: "async for", ast.Try: "try statement",
    ast.Raise: "raise", ast.Assert: "assert", ast.Delete: "del statement",
}
_EXPRESSION_NAMES: dict[type, str] = {
    ast.Lambda: "lambda (nested function definition)", ast.List: "list display",
    ast.Dict: "dict display", ast.Set: "set display", ast.ListComp: "list comprehension",
    ast.SetComp: "set comprehension", ast.DictComp: "dict comprehension",
    ast.GeneratorExp: "generator expression", ast.Starred: "starred expression",
    ast.JoinedStr: "f-string", ast.FormattedValue: "f-string", ast.NamedExpr: "assignment expression (:=)",
    ast.Await: "await", ast.Yield: "yield", ast.YieldFrom: "yield", ast.Slice: "slicing",
}
_OPERATOR_NAMES: dict[type, str] = {
    ast.BitAnd: "bitwise operator '&'", ast.BitOr: "bitwise operator '|'",
    ast.BitXor: "bitwise operator '^'", ast.LShift: "shift operator '<<'",
    ast.RShift: "shift operator '>>'", ast.MatMult: "matrix multiplication '@'",
    ast.Invert: "bitwise operator '~'", ast.Is: "'is' comparison", ast.IsNot: "'is not' comparison",
    ast.In: "'in' test", ast.NotIn: "'not in' test",
}


@dataclass
class KernelSource:
    """A kernel's parsed source: the ``FunctionDef`` with real line numbers."""

    func: Callable[..., Any]
    filename: str
    text: str
    tree: ast.FunctionDef
    first_line: int
    indent: int
    params: tuple[str, ...] = ()
    loop_vars: set[str] = field(default_factory=set)
    assign_counts: dict[str, int] = field(default_factory=dict)

    def error(self, node: ast.AST, message: str) -> UnsupportedSyntax:
        """An ``UnsupportedSyntax`` at ``node``'s line in the real file."""
        line = getattr(node, "lineno", self.first_line)
        column = getattr(node, "col_offset", 0) + self.indent + 1
        return UnsupportedSyntax(f"{message} (in kernel '{self.tree.name}')", self.filename, line, column)

    def where(self, node: ast.AST) -> str:
        return f"{self.filename}:{getattr(node, 'lineno', self.first_line)}"

    @property
    def globals(self) -> dict[str, Any]:
        return getattr(self.func, "__globals__", {})

    @property
    def locals(self) -> set[str]:
        return set(self.params) | self.loop_vars | set(self.assign_counts)

    def resolve_global(self, name: str) -> tuple[str, str] | None:
        """What a global name means: ``("builtin", name)``, ``("math", "")``,
        ``("math_function", call)`` or ``None`` when it is not allowed."""
        if name in self.globals:
            value = self.globals[name]
            if value is math:
                return ("math", "")
            for attr, call in MATH_FUNCTIONS.items():
                if value is getattr(math, attr, None):
                    return ("math_function", call)
            return None
        if name in ALLOWED_BUILTINS and hasattr(builtins, name):
            return ("builtin", name)
        return None

    def is_numpy(self, name: str) -> bool:
        value = self.globals.get(name)
        return isinstance(value, types.ModuleType) and value.__name__.split(".")[0] in ("numpy", "torch")


def load_source(func: Callable[..., Any]) -> KernelSource:
    """Parse ``func``'s source; raises ``UnsupportedSyntax`` when it is not a plain ``def``."""
    filename = getattr(getattr(func, "__code__", None), "co_filename", "<unknown>")
    name = getattr(func, "__name__", repr(func))
    if not inspect.isfunction(func):
        raise UnsupportedSyntax(f"@polyir.kernel needs a Python function, not {type(func).__name__}",
                                filename, 0)
    try:
        lines, first_line = inspect.getsourcelines(func)
        filename = inspect.getsourcefile(func) or filename
    except (OSError, TypeError) as exc:
        raise UnsupportedSyntax(f"source of kernel '{name}' is not available ({exc})",
                                filename, func.__code__.co_firstlineno) from None
    text = "".join(lines)
    dedented = textwrap.dedent(text)
    first = lines[0]
    indent = len(first) - len(first.lstrip()) if dedented != text else 0
    module = ast.parse(dedented)
    ast.increment_lineno(module, first_line - 1)
    tree = module.body[0] if module.body else None
    if isinstance(tree, ast.AsyncFunctionDef):
        raise UnsupportedSyntax(f"async function '{name}'", filename, tree.lineno)
    if not isinstance(tree, ast.FunctionDef) or tree.name != name:
        raise UnsupportedSyntax(f"kernel '{name}' is not a plain 'def' (lambdas are not supported)",
                                filename, first_line)
    source = KernelSource(func, filename, dedented, tree, first_line, indent)
    _collect_names(source)
    return source


def _collect_names(source: KernelSource) -> None:
    args = source.tree.args
    if args.vararg or args.kwarg or args.kwonlyargs:
        raise source.error(source.tree, "*args, **kwargs and keyword-only parameters")
    source.params = tuple(a.arg for a in args.posonlyargs + args.args)
    for node in ast.walk(source.tree):
        if isinstance(node, ast.For) and isinstance(node.target, ast.Name):
            source.loop_vars.add(node.target.id)
        elif isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if isinstance(node, ast.AnnAssign) and node.value is None:
                continue
            for target in targets:
                for name in _target_names(target):
                    source.assign_counts[name] = source.assign_counts.get(name, 0) + 1
                    if isinstance(node, ast.AugAssign):
                        source.assign_counts[name] += 1


def _target_names(target: ast.AST) -> list[str]:
    if isinstance(target, ast.Name):
        return [target.id]
    if isinstance(target, (ast.Tuple, ast.List)):
        return [n for elt in target.elts for n in _target_names(elt)]
    return []


def check_syntax(source: KernelSource) -> None:
    """Refuse constructs outside the kernel subset (see the module docstring)."""
    freevars = getattr(source.func.__code__, "co_freevars", ())
    for name in source.params:
        if name in source.assign_counts or name in source.loop_vars:
            node = _first_assignment(source.tree, name)
            raise source.error(node, f"assignment to parameter '{name}'")
    for name in source.loop_vars & set(source.assign_counts):
        raise source.error(_first_assignment(source.tree, name),
                           f"assignment to loop variable '{name}'")
    body = source.tree.body
    for position, stmt in enumerate(body):
        if isinstance(stmt, ast.Return) and stmt.value is None and position != len(body) - 1:
            raise source.error(stmt, "'return' before the end of the kernel")
    _refuse_misread(source)
    _Checker(source, set(freevars)).visit_body(body)


_DIVISIONS = (ast.Div, ast.FloorDiv, ast.Mod)


def _is_constant_zero(node: ast.AST) -> bool:
    while isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        node = node.operand
    return isinstance(node, ast.Constant) and not isinstance(node.value, bool) \
        and isinstance(node.value, (int, float)) and node.value == 0


def _refuse_misread(source: KernelSource) -> None:
    """Refuse what Python would reject or read differently from the IR:
    non-ASCII names (IR names are ASCII identifiers), a ``bool`` constant as a
    subscript (numpy reads ``A[True]`` as a mask, not as index 1) and a
    division by the constant zero (Python raises ``ZeroDivisionError``)."""
    for node in ast.walk(source.tree):
        names: list[str] = []
        if isinstance(node, ast.Name):
            names = [node.id]
        elif isinstance(node, ast.arg):
            names = [node.arg]
        elif isinstance(node, ast.FunctionDef):
            names = [node.name]
        for name in names:
            if not name.isascii():
                raise source.error(node, f"unsupported syntax: non-ASCII name {name!r} "
                                         f"(polyir names are ASCII identifiers)")
        if isinstance(node, ast.Subscript):
            parts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
            for part in parts:
                if isinstance(part, ast.Constant) and isinstance(part.value, bool):
                    raise source.error(node, f"unsupported syntax: boolean subscript "
                                             f"'{ast.unparse(node)}' (numpy reads it as a mask, "
                                             f"not as the index {int(part.value)})")
        divisor = None
        if isinstance(node, ast.BinOp) and isinstance(node.op, _DIVISIONS):
            divisor = node.right
        elif isinstance(node, ast.AugAssign) and isinstance(node.op, _DIVISIONS):
            divisor = node.value
        if divisor is not None and _is_constant_zero(divisor):
            raise source.error(node, f"division by the constant zero in '{ast.unparse(node)}' "
                                     f"(Python raises ZeroDivisionError on numbers)")


def _first_assignment(tree: ast.AST, name: str) -> ast.AST:
    for node in ast.walk(tree):
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(name in _target_names(t) for t in targets):
                return node
    return tree


class _Checker:
    def __init__(self, source: KernelSource, freevars: set[str]):
        self.source, self.freevars = source, freevars
        self.locals = source.locals
        self.depth = 0          # loops and ifs around the statement being checked

    def fail(self, node: ast.AST, what: str) -> NoReturn:
        raise self.source.error(node, f"unsupported syntax: {what}")

    # statements -----------------------------------------------------------
    def visit_body(self, stmts: list[ast.stmt]) -> None:
        for stmt in stmts:
            self.visit_stmt(stmt)

    def visit_stmt(self, stmt: ast.stmt) -> None:
        kind = type(stmt)
        if kind in _STATEMENT_NAMES:
            self.fail(stmt, _STATEMENT_NAMES[kind])
        if isinstance(stmt, ast.Return):
            if stmt.value is not None:
                self.fail(stmt, "return with a value (kernels update arrays in place)")
            if self.depth:
                self.fail(stmt, "'return' inside a loop or an 'if' (an early exit; move the "
                                "condition into the loop bounds or an 'if' around the work)")
        elif isinstance(stmt, ast.Pass):
            pass
        elif isinstance(stmt, ast.Expr):
            if not (isinstance(stmt.value, ast.Constant) and isinstance(stmt.value.value, str)):
                what = "call whose result is discarded" if isinstance(stmt.value, ast.Call) \
                    else "expression statement"
                self.visit_expr(stmt.value)
                self.fail(stmt, what)
        elif isinstance(stmt, ast.For):
            self.depth += 1
            self.visit_for(stmt)
            self.depth -= 1
        elif isinstance(stmt, ast.If):
            self.visit_expr(stmt.test)
            self.depth += 1
            self.visit_body(stmt.body)
            self.visit_body(stmt.orelse)
            self.depth -= 1
        elif isinstance(stmt, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            if isinstance(stmt, ast.AugAssign) and type(stmt.op) in _OPERATOR_NAMES:
                self.fail(stmt, _OPERATOR_NAMES[type(stmt.op)])
            for target in targets:
                self.visit_target(target)
            if stmt.value is not None:
                self.visit_expr(stmt.value, allow_shape=isinstance(stmt, ast.Assign))
        else:
            self.fail(stmt, f"'{kind.__name__}' statement")

    def visit_for(self, stmt: ast.For) -> None:
        if stmt.orelse:
            self.fail(stmt, "for-else")
        if not isinstance(stmt.target, ast.Name):
            self.fail(stmt, "for loop with a target that is not a single name")
        it = stmt.iter
        if not (isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and it.func.id == "range"
                and it.func.id not in self.locals
                and self.source.resolve_global("range") == ("builtin", "range")):
            self.fail(stmt, f"for loop over '{ast.unparse(it)}' (only range(...) loops are supported)")
        assert isinstance(it, ast.Call)
        if it.keywords or not 1 <= len(it.args) <= 3:
            self.fail(it, "range() takes 1 to 3 positional arguments here")
        for arg in it.args:
            self.visit_expr(arg)
        self.visit_body(stmt.body)

    def visit_target(self, target: ast.AST) -> None:
        if isinstance(target, ast.Name):
            return
        if isinstance(target, ast.Tuple):
            for elt in target.elts:
                self.visit_target(elt)
            return
        if isinstance(target, ast.Subscript):
            self.visit_expr(target)
            return
        what = {ast.Attribute: "assignment to an attribute", ast.Starred: "starred assignment",
                ast.List: "assignment to a list"}.get(type(target), "assignment target")
        self.fail(target, what)

    # expressions ----------------------------------------------------------
    def visit_expr(self, node: ast.AST, allow_shape: bool = False) -> None:
        kind = type(node)
        if kind in _EXPRESSION_NAMES:
            self.fail(node, _EXPRESSION_NAMES[kind])
        if isinstance(node, ast.Constant):
            if not isinstance(node.value, (int, float, bool)):
                self.fail(node, f"constant {node.value!r} (only int, float and bool literals)")
        elif isinstance(node, ast.Name):
            self.visit_name(node)
        elif isinstance(node, (ast.BinOp, ast.UnaryOp)):
            if type(node.op) in _OPERATOR_NAMES:
                self.fail(node, _OPERATOR_NAMES[type(node.op)])
            operands: list[ast.expr] = [node.left, node.right] if isinstance(node, ast.BinOp) \
                else [node.operand]
            for operand in operands:
                self.visit_expr(operand)
        elif isinstance(node, ast.Compare):
            for op in node.ops:
                if type(op) in _OPERATOR_NAMES:
                    self.fail(node, _OPERATOR_NAMES[type(op)])
            for child in [node.left, *node.comparators]:
                self.visit_expr(child)
        elif isinstance(node, (ast.BoolOp, ast.IfExp)):
            for part in ast.iter_child_nodes(node):
                if isinstance(part, ast.expr):
                    self.visit_expr(part)
        elif isinstance(node, ast.Tuple):
            for elt in node.elts:
                self.visit_expr(elt, allow_shape)
        elif isinstance(node, ast.Subscript):
            self.visit_subscript(node)
        elif isinstance(node, ast.Attribute):
            self.visit_attribute(node, allow_shape)
        elif isinstance(node, ast.Call):
            self.visit_call(node)
        else:
            self.fail(node, f"'{kind.__name__}' expression")

    def visit_name(self, node: ast.Name) -> None:
        name = node.id
        if name in self.locals:
            return
        if name in self.freevars:
            self.fail(node, f"free variable '{name}' from an enclosing function")
        resolved = self.source.resolve_global(name)
        if resolved is None:
            self.fail(node, f"global variable '{name}' (only math, min, max, abs, range are allowed)")
        if resolved[0] in ("math", "math_function") or resolved == ("builtin", "range"):
            self.fail(node, f"'{name}' used as a value")

    def visit_subscript(self, node: ast.Subscript) -> None:
        index = node.slice
        for part in (index.elts if isinstance(index, ast.Tuple) else [index]):
            if isinstance(part, ast.Slice):
                self.fail(node, f"slicing '{ast.unparse(node)}'")
            self.visit_expr(part)
        value = node.value
        if isinstance(value, ast.Attribute) and value.attr == "shape":
            self.visit_attribute(value, allow_shape=True)
        elif isinstance(value, (ast.Name, ast.Subscript, ast.Attribute)):
            self.visit_expr(value)
        else:
            self.fail(node, f"subscript of '{ast.unparse(value)}'")

    def visit_attribute(self, node: ast.Attribute, allow_shape: bool) -> None:
        text = ast.unparse(node)
        base = node.value
        if isinstance(base, ast.Name) and base.id not in self.locals:
            resolved = self.source.resolve_global(base.id)
            if resolved == ("math", "") and node.attr in MATH_CONSTANTS:
                return
            if self.source.is_numpy(base.id):
                self.fail(node, f"numpy/torch attribute '{text}'")
        if node.attr == "shape" and isinstance(base, ast.Name) and base.id in self.source.params:
            if not allow_shape:
                self.fail(node, f"'{text}' used other than as {text}[d] or in 'n, m = {text}'")
            return
        self.fail(node, f"attribute '{text}'")

    def visit_call(self, node: ast.Call) -> None:
        func = node.func
        text = ast.unparse(func)
        if node.keywords:
            self.fail(node, f"keyword arguments in call to '{text}'")
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) \
                and func.value.id not in self.locals:
            if self.source.is_numpy(func.value.id):
                self.fail(node, f"numpy/torch call '{text}(...)'")
            if self.source.resolve_global(func.value.id) == ("math", "") and func.attr in MATH_FUNCTIONS:
                self.visit_args(node)
                return
            self.fail(node, f"call to '{text}' (only math.{', math.'.join(MATH_FUNCTIONS)})")
        if isinstance(func, ast.Name) and func.id not in self.locals:
            resolved = self.source.resolve_global(func.id)
            if resolved == ("builtin", "range"):
                self.fail(node, "range() outside a for loop header")
            if resolved is not None and resolved[0] in ("builtin", "math_function"):
                self.visit_args(node)
                return
            if func.id in self.freevars:
                self.fail(node, f"call to function '{func.id}' from an enclosing scope")
            self.fail(node, f"call to function '{func.id}' (calls to other functions are not supported)")
        if isinstance(func, ast.Attribute):
            self.fail(node, f"method call '{text}(...)'")
        self.fail(node, f"call of '{text}'")

    def visit_args(self, node: ast.Call) -> None:
        for arg in node.args:
            self.visit_expr(arg)
