"""Typed errors. Each says what went wrong and where."""
from __future__ import annotations


class PolyirError(Exception):
    """Base of every error polyir raises on purpose."""


class ParseError(PolyirError):
    """Malformed IR text; ``line`` and ``column`` are 1-based."""

    def __init__(self, message: str, line: int, column: int, source_name: str = "<text>"):
        self.message, self.line, self.column, self.source_name = message, line, column, source_name
        super().__init__(f"{source_name}:{line}:{column}: {message}")


class VerifyError(PolyirError):
    """Invalid IR; ``where`` names the function/statement (and text position if known)."""

    def __init__(self, message: str, where: str = ""):
        self.message, self.where = message, where
        super().__init__(f"{where}: {message}" if where else message)


class UnsupportedSyntax(PolyirError):
    """Python outside the ``@polyir.kernel`` subset, with file and line."""

    def __init__(self, message: str, filename: str, line: int, column: int = 0):
        self.message, self.filename, self.line, self.column = message, filename, line, column
        super().__init__(f"{filename}:{line}: {message}")


class UnsupportedOp(PolyirError):
    """A graph operator with no lowering rule; names the operator and the node."""

    def __init__(self, op: str, node: str, detail: str = ""):
        self.op, self.node, self.detail = op, node, detail
        extra = f": {detail}" if detail else ""
        super().__init__(f"unsupported operator {op} at graph node '{node}'{extra}")


class IllegalTransform(PolyirError):
    """A transformation that would violate a dependence; ``witness`` names the
    two statement instances whose order it would reverse."""

    def __init__(self, message: str, dependence: object = None, witness: object = None):
        self.message, self.dependence, self.witness = message, dependence, witness
        super().__init__(message if witness is None else f"{message}\n  witness: {witness}")


class PassError(PolyirError):
    """A pass failed; names the pass and the passes that ran before it."""

    def __init__(self, pass_name: str, ran_before: list[str], cause: BaseException):
        self.pass_name, self.ran_before, self.cause = pass_name, list(ran_before), cause
        before = ", ".join(ran_before) if ran_before else "none"
        super().__init__(f"pass '{pass_name}' failed (passes run before it: {before}): "
                         f"{type(cause).__name__}: {cause}")


class ArgumentError(PolyirError, TypeError):
    """Call-time arguments that do not fit the compiled signature (count, rank,
    dtype, shape); raised before any array is written."""


class CaptureError(PolyirError, RuntimeError):
    """``polyir.compile`` could not trace the model for its inputs; names the
    inputs and carries torch's error as the cause."""


class BoundsError(PolyirError, IndexError):
    """A call whose sizes or index values would access outside a buffer (checked
    before native code runs, so nothing is written): names the buffer, the
    statement (and so the subscript) and its source line (``buffer``,
    ``statement``, ``line``)."""

    def __init__(self, message: str, buffer: str | None = None, statement: str | None = None,
                 line: int | None = None):
        super().__init__(message)
        self.buffer, self.statement, self.line = buffer, statement, line


class CompileError(PolyirError):
    """A backend could not compile the IR (names the construct)."""


class DeviceError(PolyirError):
    """No GPU, no CuPy, or a CUDA driver failure."""


class MissingDependency(PolyirError, ModuleNotFoundError):
    """An optional dependency is not installed; the message names the feature
    that needs it and the ``pip install 'polyir[EXTRA]'`` that provides it
    (``polyir.extras``). ``name`` is the missing module."""


class UnsupportedMLIR(UnsupportedOp):
    """An MLIR operation (or type, attribute) outside the subset polyir imports;
    names the operation and its 1-based ``line`` and ``column`` in the text."""

    def __init__(self, op: str, line: int, column: int, detail: str = "", source_name: str = "<mlir>"):
        self.op, self.line, self.column, self.detail = op, line, column, detail
        self.source_name, self.node = source_name, f"{line}:{column}"
        extra = f": {detail}" if detail else ""
        PolyirError.__init__(self, f"{source_name}:{line}:{column}: unsupported MLIR operation "
                                   f"'{op}'{extra}")


class ExportError(PolyirError):
    """IR that has no affine-MLIR form (GPU-mapped IR, a construct with no MLIR
    equivalent); names the function and the construct."""
