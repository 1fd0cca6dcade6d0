"""Pass registry, pipeline strings and the pass manager (``polyir.passes``)."""
from __future__ import annotations

import io
import sys
from dataclasses import dataclass

import pytest

import polyir
from polyir import IllegalTransform, PassError, PolyirError, VerifyError
from polyir.ir.nodes import Module
from polyir.passes import (
    PASS_MODULES,
    PipelineError,
    available_passes,
    format_pipeline,
    load_pass_modules,
    parse_pipeline,
    register_pass,
    transform,
)

PROGRAM = polyir.parse("""\
func f(A: f32[N]) {
  for i = max(0, 1) to N {
    S4: A[i] = A[i] + 1.0
  }
}
""")


@register_pass("test-options")
@dataclass(frozen=True)
class _OptionsPass:
    """A pass with one option of each type (used by these tests only)."""

    sizes: tuple[int, ...] = (32, 32)
    factor: float = 1.0
    flag: bool = False
    label: str = "x"
    names: tuple[str, ...] = ()
    count: int = 0

    def run(self, module: Module) -> Module:
        return module


@register_pass("test-fail")
@dataclass(frozen=True)
class _FailingPass:
    """Fails: ``kind=illegal`` raises IllegalTransform, ``kind=bug`` a KeyError,
    ``kind=invalid`` returns IR the verifier rejects, ``kind=none`` returns None."""

    kind: str = "illegal"

    def run(self, module: Module) -> Module:
        if self.kind == "illegal":
            raise IllegalTransform("would reverse a flow dependence S4 -> S4")
        if self.kind == "bug":
            raise KeyError("oops")
        if self.kind == "invalid":
            return polyir.parse("func f(A: f32[N]) {\n  S0: A[i] = 1.0\n}")  # i is unbound
        return None  # type: ignore[return-value]


def test_registry_lists_the_simple_passes_and_the_test_passes() -> None:
    passes = available_passes()
    for name in ("simplify-bounds", "remove-dead-statements", "canonicalize-names", "test-options"):
        assert name in passes
    assert list(passes) == sorted(passes)
    assert passes["test-options"] is _OptionsPass and _OptionsPass.pass_name == "test-options"
    assert "polyir.transforms" in PASS_MODULES


@pytest.mark.parametrize("text, expected", [
    ("", []),
    ("   ", []),
    ("test-options", [_OptionsPass()]),
    ("test-options{}", [_OptionsPass()]),
    ("test-options{sizes=8,16,4}", [_OptionsPass(sizes=(8, 16, 4))]),
    ("test-options{sizes=8, 16 flag=true}", [_OptionsPass(sizes=(8, 16), flag=True)]),
    ("test-options{ factor=2.5  count=-3 label=abc }", [_OptionsPass(factor=2.5, count=-3, label="abc")]),
    ('test-options{label="a b,c" names=x,"y z"}', [_OptionsPass(label="a b,c", names=("x", "y z"))]),
    ("test-options{sizes=() factor=1e-3}", [_OptionsPass(sizes=(), factor=1e-3)]),
    ("test-options{sizes=7}", [_OptionsPass(sizes=(7,))]),
    ("test-options{label=32}", [_OptionsPass(label="32")]),
    (" test-options , test-options{flag=false} ", [_OptionsPass(), _OptionsPass()]),
])
def test_parse_good_pipelines(text: str, expected: list) -> None:
    assert parse_pipeline(text) == expected


@pytest.mark.parametrize("text, position, fragment", [
    ("nope", 0, "unknown pass 'nope'; available passes: "),
    ("test-options,nope{a=1}", 13, "unknown pass 'nope'"),
    ("test-options,", 13, "expected a pass name after ','"),
    (",test-options", 0, "expected a pass name"),
    ("test-options test-options", 13, "expected ',' between passes"),
    ("test-options{sizes=1", 20, "expected '}' to close the options of pass 'test-options'"),
    ("test-options{bogus=1}", 13, "unknown option 'bogus' for pass 'test-options'; its options: "
                                  "sizes: tuple[int, ...], factor: float, flag: bool"),
    ("test-options{sizes=1,x}", 21, "option 'sizes' of pass 'test-options' expects int, got 'x'"),
    ("test-options{count=1.5}", 19, "expects int, got '1.5'"),
    ("test-options{flag=yes}", 18, "expects bool, got 'yes'"),
    ("test-options{factor=fast}", 20, "expects float, got 'fast'"),
    ("test-options{count=1,2}", 21, "takes one int, got 2 values"),
    ("test-options{count=1 count=2}", 21, "option 'count' given twice"),
    ("test-options{sizes=1, count=2}", 22, "options are separated by spaces, not commas"),
    ("test-options{count}", 18, "expected '=' after option 'count'"),
    ("test-options{count=}", 19, "expected a value"),
    ('test-options{label="abc}', 19, "unterminated string"),
    ("test-options{=3}", 13, "expected an option name"),
    ("test-options{count=\"3\"}", 19, "expects int"),
])
def test_bad_pipelines_say_what_and_where(text: str, position: int, fragment: str) -> None:
    with pytest.raises(PipelineError) as info:
        parse_pipeline(text)
    error = info.value
    assert isinstance(error, PolyirError)
    assert fragment in error.message, error.message
    assert error.position == position, (error.position, error.message)
    assert error.column == position + 1 and error.pipeline == text
    assert f"\n  {text}\n  {' ' * position}^" in str(error)


def test_unknown_pass_lists_the_valid_ones() -> None:
    with pytest.raises(PipelineError) as info:
        parse_pipeline("simplify-bound")
    for name in available_passes():
        assert name in info.value.message


def test_format_pipeline_round_trips() -> None:
    for text in ("test-options{sizes=8,16 flag=true label=\"a b\"},simplify-bounds",
                 "test-options{names=() sizes=()}", "canonicalize-names{prefix=T}"):
        passes = parse_pipeline(text)
        assert parse_pipeline(format_pipeline(passes)) == passes
    assert format_pipeline(parse_pipeline("test-options{count=0 flag=true}")) == "test-options{flag=true}"


def test_register_pass_refuses_bad_classes() -> None:
    with pytest.raises(TypeError, match="frozen dataclass"):
        @register_pass("bad-mutable")
        @dataclass
        class Mutable:
            """Doc."""

            def run(self, module: Module) -> Module:
                return module
    with pytest.raises(TypeError, match="run"):
        @register_pass("bad-norun")
        @dataclass(frozen=True)
        class NoRun:
            """Doc."""
    with pytest.raises(TypeError, match="option types are"):
        @register_pass("bad-type")
        @dataclass(frozen=True)
        class BadType:
            """Doc."""

            sizes: list = None  # type: ignore[assignment]

            def run(self, module: Module) -> Module:
                return module
    with pytest.raises(TypeError, match="docstring"):
        @register_pass("bad-doc")
        @dataclass(frozen=True)
        class NoDoc:
            def run(self, module: Module) -> Module:
                return module
    with pytest.raises(ValueError, match="already registered"):
        @register_pass("simplify-bounds")
        @dataclass(frozen=True)
        class Impostor:
            """Doc."""

            def run(self, module: Module) -> Module:
                return module
    with pytest.raises(ValueError, match="invalid pass name"):
        register_pass("bad name")
    assert "bad-mutable" not in available_passes() and "bad-type" not in available_passes()


def test_plain_class_becomes_a_frozen_dataclass_with_required_option() -> None:
    @register_pass("test-required")
    class Required:
        """Needs ``depth``."""

        depth: int

        def run(self, module: Module) -> Module:
            return module

    assert parse_pipeline("test-required{depth=2}") == [Required(depth=2)]
    with pytest.raises(PipelineError, match="needs option"):
        parse_pipeline("test-required")


def test_transform_runs_passes_in_order_and_dumps() -> None:
    chunks: list[str] = []
    result = transform(PROGRAM, "simplify-bounds,canonicalize-names", dump_after_each=chunks.append)
    expected = "func f(A: f32[N]) {\n  for i = 1 to N {\n    S0: A[i] = A[i] + 1.0\n  }\n}"
    assert str(result).rstrip() == expected
    assert chunks[0].startswith("// -----// IR after simplify-bounds //----- //\n")
    assert "S4: A[i]" in chunks[0] and "for i = 1 to N" in chunks[0]
    assert chunks[1] == f"// -----// IR after canonicalize-names //----- //\n{expected}\n"
    stream = io.StringIO()
    transform(PROGRAM, "canonicalize-names{prefix=T}", dump_after_each=stream)
    assert stream.getvalue().startswith("// -----// IR after canonicalize-names{prefix=T} //----- //\n")
    assert "T0: A[i]" in stream.getvalue()
    assert transform(PROGRAM, "") is PROGRAM
    assert polyir.transform(PROGRAM, "simplify-bounds,canonicalize-names") == result
    assert transform(PROGRAM, parse_pipeline("simplify-bounds,canonicalize-names")) == result


@pytest.mark.parametrize("kind, cause", [("illegal", IllegalTransform), ("bug", KeyError),
                                         ("none", TypeError)])
def test_errors_in_a_pass_become_pass_error(kind: str, cause: type) -> None:
    with pytest.raises(PassError) as info:
        transform(PROGRAM, f"simplify-bounds,canonicalize-names,test-fail{{kind={kind}}},simplify-bounds")
    error = info.value
    assert error.pass_name == f"test-fail{{kind={kind}}}" if kind != "illegal" else error.pass_name == "test-fail"
    assert error.ran_before == ["simplify-bounds", "canonicalize-names"]
    assert isinstance(error.cause, cause) and error.__cause__ is error.cause
    assert "passes run before it: simplify-bounds, canonicalize-names" in str(error)


def test_invalid_pass_output_is_always_a_pass_error() -> None:
    with pytest.raises(PassError) as info:
        transform(PROGRAM, "test-fail{kind=invalid}")  # the output is verified even without verify_each
    assert isinstance(info.value.cause, VerifyError)
    with pytest.raises(PassError) as info:
        transform(PROGRAM, "canonicalize-names,test-fail{kind=invalid}", verify_each=True)
    assert info.value.pass_name == "test-fail{kind=invalid}" and isinstance(info.value.cause, VerifyError)
    assert info.value.ran_before == ["canonicalize-names"]
    bad_input = polyir.parse("func f(A: f32[N]) {\n  S0: A[i] = 1.0\n}")
    with pytest.raises(VerifyError):
        transform(bad_input, "canonicalize-names", verify_each=True)


def test_missing_and_broken_pass_modules_raise(tmp_path, monkeypatch) -> None:
    for missing in ("polyir.no_such_package.passes", "polyir.transforms.no_such_pass"):
        with pytest.raises(ModuleNotFoundError, match="no_such"):
            load_pass_modules([missing])
    (tmp_path / "polyir_broken_passes.py").write_text("import polyir_dependency_that_is_missing\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ModuleNotFoundError, match="polyir_dependency_that_is_missing"):
        load_pass_modules(["polyir_broken_passes"])
    sys.modules.pop("polyir_broken_passes", None)
