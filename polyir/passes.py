"""Pass registry, pipeline strings and the pass manager.

A pass is a frozen dataclass whose fields are its options, with a docstring
and a ``run(self, module, ctx) -> Module`` method, registered under a name::

    @register_pass("unroll-inner")
    @dataclass(frozen=True)
    class UnrollInner:
        \"\"\"Mark every innermost loop for unrolling.\"\"\"
        factor: int = 4

        def run(self, module: Module, ctx: PassContext) -> Module: ...

``ctx`` (:class:`PassContext`) carries the ``Target`` (``ctx.target``), the
polyhedral analyses shared by the passes of one pipeline (``ctx.analyses``) and
the remarks channel (``ctx.remark(pass, where, why)``). A pass whose ``run``
takes only the module is still accepted.

Pipeline syntax (see docs/passes.md)::

    pipeline := [pass ("," pass)*]
    pass     := NAME ["{" [option (" " option)*] "}"]
    option   := KEY "=" value ("," value)*        # several values: a tuple option
    value    := INT | FLOAT | true | false | WORD | "quoted string"

for example ``simplify-bounds,tile{loops=i,j sizes=32,32},canonicalize-names``.
"""
from __future__ import annotations

import dataclasses
import importlib
import inspect
import re
import typing
from collections.abc import Callable, Iterable, Sequence
from typing import Any, TextIO, Union

from polyir.context import PassContext, Remark, make_context  # noqa: F401  (Remark: re-exported)
from polyir.errors import PassError, PolyirError
from polyir.ir.nodes import Module
from polyir.target import Target

PASS_MODULES: list[str] = [
    "polyir.transforms",
    "polyir.polyhedral.passes",
    "polyir.gpu.passes",
    "polyir.tiling.passes",
    "polyir.fusion.passes",
]
"""Modules imported (once, on first use of the registry) so that their passes
register. An import error (a missing module included) propagates."""

OPTION_TYPES: dict[Any, str] = {
    int: "int", float: "float", bool: "bool", str: "str",
    tuple[int, ...]: "tuple[int, ...]", tuple[float, ...]: "tuple[float, ...]",
    tuple[str, ...]: "tuple[str, ...]", tuple[bool, ...]: "tuple[bool, ...]",
}

_REGISTRY: dict[str, type] = {}
_loaded = False


class PipelineError(PolyirError):
    """A malformed pipeline string, an unknown pass or option, or an option
    value of the wrong type. ``position`` is the 0-based offset into
    ``pipeline``; ``column`` is 1-based."""

    def __init__(self, message: str, pipeline: str, position: int):
        self.message, self.pipeline, self.position = message, pipeline, position
        self.column = position + 1
        caret = " " * position + "^"
        super().__init__(f"pipeline column {self.column}: {message}\n  {pipeline}\n  {caret}")


# ------------------------------------------------------------------ registry
def register_pass(name: str) -> Callable[[type], type]:
    """Class decorator registering a pass under ``name``.

    The class must be a frozen dataclass (a plain class is made one) whose
    fields have types from ``OPTION_TYPES``, with a ``run(module)`` method
    and a docstring. Raises ``TypeError`` otherwise, or ``ValueError`` when
    another class already has the name.
    """
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_\-]*", name):
        raise ValueError(f"invalid pass name {name!r}: use letters, digits, '-' and '_'")

    def decorate(cls: type) -> type:
        if not dataclasses.is_dataclass(cls):
            cls = dataclasses.dataclass(frozen=True)(cls)
        if not cls.__dataclass_params__.frozen:  # type: ignore[attr-defined]
            raise TypeError(f"pass {name!r}: {cls.__name__} must be a frozen dataclass")
        if not callable(getattr(cls, "run", None)):
            raise TypeError(f"pass {name!r}: {cls.__name__} has no run(self, module, ctx) method")
        doc = cls.__doc__ or ""
        if not doc.strip() or doc.startswith(f"{cls.__name__}("):  # dataclass's generated docstring
            raise TypeError(f"pass {name!r}: {cls.__name__} needs a docstring saying what it does")
        option_types(cls)  # validates the field types
        existing = _REGISTRY.get(name)
        if existing is not None and existing.__qualname__ != cls.__qualname__:
            raise ValueError(f"pass name {name!r} is already registered by {existing.__module__}."
                             f"{existing.__qualname__}")
        cls.pass_name = name  # type: ignore[attr-defined]
        _REGISTRY[name] = cls
        return cls

    return decorate


def option_types(cls: type) -> dict[str, Any]:
    """Field name -> type of a pass class's options; TypeError for unsupported types."""
    hints = typing.get_type_hints(cls)
    types: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        if not f.init:
            continue
        hint = hints.get(f.name)
        if hint not in OPTION_TYPES:
            raise TypeError(f"pass option {cls.__name__}.{f.name} has type {hint!r}; option types are "
                            f"{', '.join(OPTION_TYPES.values())}")
        types[f.name] = hint
    return types


def load_pass_modules(modules: Iterable[str] | None = None) -> None:
    """Import the modules of ``PASS_MODULES`` (or ``modules``) so their passes
    register; without ``modules``, then the pass plugins of other packages
    (the ``polyir.passes`` entry points, :mod:`polyir.plugins`), once."""
    global _loaded
    for module in (PASS_MODULES if modules is None else modules):
        importlib.import_module(module)
    if modules is None and not _loaded:
        _loaded = True  # first: a plugin that asks for the registry while loading sees it loaded
        from polyir.plugins import load_plugins
        load_plugins(register_pass, lambda: dict(_REGISTRY))


def available_passes() -> dict[str, type]:
    """Every registered pass, name -> class, sorted by name."""
    if not _loaded:
        load_pass_modules()
    return dict(sorted(_REGISTRY.items()))


def pass_name(instance: Any) -> str:
    """The registered name of a pass instance (or class)."""
    name = getattr(instance, "pass_name", None)
    return name if isinstance(name, str) else type(instance).__name__


def describe_pass(cls: type) -> str:
    """One help entry: name, first docstring line, options with types and defaults."""
    summary = " ".join((cls.__doc__ or "").strip().split("\n\n")[0].split())
    lines = [f"{cls.pass_name}: {summary}"]  # type: ignore[attr-defined]
    for name, hint in option_types(cls).items():
        f = next(f for f in dataclasses.fields(cls) if f.name == name)
        if f.default is not dataclasses.MISSING:
            default = f" = {_format_value(f.default)}"
        elif f.default_factory is not dataclasses.MISSING:
            default = f" = {_format_value(f.default_factory())}"
        else:
            default = " (required)"
        lines.append(f"    {name}: {OPTION_TYPES[hint]}{default}")
    return "\n".join(lines)


# ------------------------------------------------------------------ pipelines
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_\-]*")
_WORD = re.compile(r"[^\s,{}=\"()]+")


@dataclasses.dataclass(frozen=True)
class _RawValue:
    text: str
    position: int
    quoted: bool


class _PipelineParser:
    def __init__(self, text: str):
        self.text, self.pos = text, 0

    def error(self, message: str, position: int | None = None) -> PipelineError:
        return PipelineError(message, self.text, self.pos if position is None else position)

    def skip_space(self) -> None:
        while self.pos < len(self.text) and self.text[self.pos].isspace():
            self.pos += 1

    def peek(self) -> str:
        return self.text[self.pos] if self.pos < len(self.text) else ""

    def describe_here(self) -> str:
        return f"'{self.peek()}'" if self.peek() else "the end of the pipeline"

    def parse(self) -> list[Any]:
        passes: list[Any] = []
        self.skip_space()
        if not self.peek():
            return passes
        while True:
            passes.append(self.parse_pass())
            self.skip_space()
            if not self.peek():
                return passes
            if self.peek() != ",":
                raise self.error(f"expected ',' between passes, found {self.describe_here()}")
            self.pos += 1
            self.skip_space()
            if not self.peek():
                raise self.error("expected a pass name after ','")

    def parse_pass(self) -> Any:
        start = self.pos
        match = _NAME.match(self.text, self.pos)
        if not match:
            raise self.error(f"expected a pass name, found {self.describe_here()}")
        name = match.group()
        self.pos = match.end()
        passes = available_passes()
        if name not in passes:
            raise self.error(f"unknown pass '{name}'; available passes: {', '.join(passes) or 'none'}",
                             start)
        cls = passes[name]
        raw: dict[str, tuple[int, list[_RawValue]]] = {}
        self.skip_space()
        if self.peek() == "{":
            self.pos += 1
            self.parse_options(cls, raw)
        return _instantiate(cls, raw, self)

    def parse_options(self, cls: type, raw: dict[str, tuple[int, list[_RawValue]]]) -> None:
        while True:
            self.skip_space()
            if self.peek() == "}":
                self.pos += 1
                return
            if not self.peek():
                raise self.error(f"expected '}}' to close the options of pass '{pass_name(cls)}'")
            key_start = self.pos
            match = _NAME.match(self.text, self.pos)
            if not match:
                raise self.error(f"expected an option name, found {self.describe_here()}")
            key = match.group()
            self.pos = match.end()
            if key in raw:
                raise self.error(f"option '{key}' given twice", key_start)
            self.skip_space()
            if self.peek() != "=":
                raise self.error(f"expected '=' after option '{key}', found {self.describe_here()}")
            self.pos += 1
            self.skip_space()
            values = [self.parse_value()]
            while self.peek() == ",":
                self.pos += 1
                self.skip_space()
                if _NAME.match(self.text, self.pos) and re.match(r"[A-Za-z_][A-Za-z0-9_\-]*\s*=",
                                                                  self.text[self.pos:]):
                    raise self.error("options are separated by spaces, not commas "
                                     "(write '{a=1 b=2}'; commas separate tuple elements)")
                values.append(self.parse_value())
            raw[key] = (key_start, values)
            if self.peek() and not self.peek().isspace() and self.peek() != "}":
                raise self.error(f"expected a space or '}}' after the value of '{key}', "
                                 f"found {self.describe_here()}")

    def parse_value(self) -> _RawValue:
        start = self.pos
        if self.peek() == '"':
            end = self.text.find('"', self.pos + 1)
            if end < 0:
                raise self.error("unterminated string")
            self.pos = end + 1
            return _RawValue(self.text[start + 1:end], start, True)
        if self.text.startswith("()", self.pos):
            self.pos += 2
            return _RawValue("()", start, False)
        match = _WORD.match(self.text, self.pos)
        if not match:
            raise self.error(f"expected a value, found {self.describe_here()}")
        self.pos = match.end()
        return _RawValue(match.group(), start, False)


def _convert(value: _RawValue, kind: type, key: str, cls: type, parser: _PipelineParser) -> Any:
    def bad() -> PipelineError:
        return parser.error(f"option '{key}' of pass '{cls.pass_name}' expects "  # type: ignore[attr-defined]
                            f"{kind.__name__}, got '{value.text}'", value.position)
    if kind is str:
        return value.text
    if value.quoted:
        raise bad()
    if kind is bool:
        if value.text not in ("true", "false"):
            raise bad()
        return value.text == "true"
    try:
        return kind(value.text) if kind is float else int(value.text, 10)
    except ValueError:
        raise bad() from None


def _instantiate(cls: type, raw: dict[str, tuple[int, list[_RawValue]]], parser: _PipelineParser) -> Any:
    types = option_types(cls)
    name = cls.pass_name  # type: ignore[attr-defined]
    options: dict[str, Any] = {}
    for key, (position, values) in raw.items():
        if key not in types:
            valid = ", ".join(f"{k}: {OPTION_TYPES[t]}" for k, t in types.items()) or "none"
            raise parser.error(f"unknown option '{key}' for pass '{name}'; its options: {valid}", position)
        hint = types[key]
        if typing.get_origin(hint) is tuple:
            element = typing.get_args(hint)[0]
            if len(values) == 1 and values[0].text == "()" and not values[0].quoted:
                options[key] = ()
            else:
                options[key] = tuple(_convert(v, element, key, cls, parser) for v in values)
        elif len(values) != 1:
            raise parser.error(f"option '{key}' of pass '{name}' takes one {OPTION_TYPES[hint]}, "
                               f"got {len(values)} values", values[1].position)
        else:
            options[key] = _convert(values[0], hint, key, cls, parser)
    try:
        return cls(**options)
    except TypeError as error:
        missing = [f.name for f in dataclasses.fields(cls) if f.init and f.name not in options
                   and f.default is dataclasses.MISSING
                   and f.default_factory is dataclasses.MISSING]
        message = f"pass '{name}' needs option(s) {', '.join(missing)}" if missing else str(error)
        raise parser.error(message, parser.pos) from None
    except (ValueError, PolyirError) as error:
        raise parser.error(f"bad options for pass '{name}': {error}", parser.pos) from None


def parse_pipeline(text: str) -> list[Any]:
    """The configured pass instances of a pipeline string, in order.

    Raises ``PipelineError`` (with the position) for malformed text, unknown
    passes or options (listing the valid ones) and ill-typed values.
    """
    return _PipelineParser(text).parse()


def _format_value(value: Any) -> str:
    if value == ():
        return "()"
    if isinstance(value, tuple):
        return ",".join(_format_value(v) for v in value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str) and not re.fullmatch(r"[^\s,{}=\"()]+", value):
        return f'"{value}"'
    return str(value)


def format_pass(instance: Any) -> str:
    """The pipeline text of one pass instance: its name and its non-default options."""
    options = []
    for f in (dataclasses.fields(instance) if dataclasses.is_dataclass(instance) else ()):
        value = getattr(instance, f.name)
        default = f.default if f.default_factory is dataclasses.MISSING else f.default_factory()
        if value != default:
            options.append(f"{f.name}={_format_value(value)}")
    name = pass_name(instance)
    return f"{name}{{{' '.join(options)}}}" if options else name


def format_pipeline(passes: Sequence[Any]) -> str:
    """The pipeline text that ``parse_pipeline`` turns back into ``passes``."""
    return ",".join(format_pass(p) for p in passes)


# --------------------------------------------------------------- pass manager
DumpTarget = Union[Callable[[str], Any], TextIO, None]


def _dump(target: DumpTarget, title: str, module: Module) -> None:
    if target is None:
        return
    text = f"// -----// IR after {title} //----- //\n{str(module).rstrip()}\n"
    write = getattr(target, "write", None)
    if callable(write):
        write(text)
    else:
        target(text)  # type: ignore[operator]


def run_pass(instance: Any, module: Module, ctx: PassContext) -> Module:
    """``instance.run(module, ctx)``; a pass whose ``run`` takes only the module
    is called as ``run(module)``."""
    run = instance.run
    if _takes_context(type(instance)):
        return run(module, ctx)
    return run(module)


_TAKES_CONTEXT: dict[type, bool] = {}


def _takes_context(cls: type) -> bool:
    known = _TAKES_CONTEXT.get(cls)
    if known is None:
        parameters = list(inspect.signature(cls.run).parameters.values())[1:]  # type: ignore[attr-defined]
        known = len(parameters) >= 2 or any(p.kind is p.VAR_POSITIONAL for p in parameters)
        _TAKES_CONTEXT[cls] = known
    return known


def transform(module: Module, pipeline: str | Sequence[Any], verify_each: bool = False,
              dump_after_each: DumpTarget = None, *, target: Target | str | None = None,
              ctx: PassContext | None = None) -> Module:
    """Run ``pipeline`` (a pipeline string or pass instances) on ``module``.

    ``target`` (a ``Target`` or a name such as ``"cuda:sm_80"``; default the
    host CPU) is what the passes see as ``ctx.target``; ``ctx`` is an existing
    :class:`PassContext` to reuse (its analyses and remarks carry over).

    The output of every pass is verified: a pass whose output is invalid IR
    has failed. With ``verify_each`` the input is verified too.
    ``dump_after_each`` (a callable taking a string, or a text stream)
    receives ``// -----// IR after PASS //----- //`` and the module text after
    every pass. An error inside a pass (including a ``VerifyError`` of its
    output, or a result that is not a Module) becomes ``PassError`` naming the
    pass and those run before it; the original error is ``.cause``.
    """
    from polyir.ir.verifier import verify
    passes = parse_pipeline(pipeline) if isinstance(pipeline, str) else list(pipeline)
    context = make_context(target, ctx)
    if verify_each:
        verify(module)
    ran: list[str] = []
    for instance in passes:
        title = format_pass(instance)
        try:
            with context.timed(f"pass {title}"):
                result = run_pass(instance, module, context)
            if not isinstance(result, Module):
                raise TypeError(f"run() returned {type(result).__name__}, not a Module")
            verify(result)
        except Exception as error:
            raise PassError(title, ran, error) from error
        module = result
        ran.append(title)
        _dump(dump_after_each, title, module)
    return module
