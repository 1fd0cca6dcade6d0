"""``assert_equivalent`` and ``assert_preserves_or_refuses``: they pass on
equal programs and fail, saying where, on different ones."""
from __future__ import annotations

import re

import numpy as np
import pytest
from hypothesis import given, settings

import polyir
from polyir import IllegalTransform, PassError, UnsupportedOp
from polyir.ir.nodes import Module
from polyir.passes import transform
from polyir.testing import assert_equivalent, assert_preserves_or_refuses, programs, random_arguments
from tests.conftest import examples

SUM_ROWS = polyir.parse("""\
func f(C: f32[N], A: f32[N, M]) {
  for i = 0 to N {
    for k = 0 to M {
      S0: C[i] = C[i] + A[i, k]
    }
  }
}
""")
SUM_ROWS_INTERCHANGED = polyir.parse("""\
func f(C: f32[N], A: f32[N, M]) {
  for k = 0 to M {
    for i = 0 to N {
      S0: C[i] = C[i] + A[i, k]
    }
  }
}
""")
SUM_ROWS_OFF_BY_ONE = polyir.parse("""\
func f(C: f32[N], A: f32[N, M]) {
  for i = 0 to N {
    for k = 1 to M {
      S0: C[i] = C[i] + A[i, k]
    }
  }
}
""")
PREFIX = """\
func f(A: f32[N]) {
  for i = 1 to N PARALLEL{
    S0: A[i] = A[i - 1] + 1.0
  }
}
"""


def test_equal_programs_pass() -> None:
    assert_equivalent(SUM_ROWS, SUM_ROWS_INTERCHANGED)
    assert_equivalent(SUM_ROWS.entry, SUM_ROWS_INTERCHANGED, trials=3, sizes={"N": 3, "M": 1})
    assert_equivalent(SUM_ROWS, SUM_ROWS, sizes=1)


def test_mismatch_names_buffer_index_values_and_programs() -> None:
    with pytest.raises(AssertionError) as info:
        assert_equivalent(SUM_ROWS, SUM_ROWS_OFF_BY_ONE, sizes={"N": 4, "M": 3})
    message = str(info.value)
    assert "programs differ in buffer C (trial 0, seed 0, sizes {'N': 4, 'M': 3}" in message
    assert "4 of 4 elements differ; first at [0]: first program " in message
    # The values reported are the real ones: recompute them with numpy.
    c, a = random_arguments(SUM_ROWS, 0, {"N": 4, "M": 3})
    expected, actual = c[0] + np.float32(a[0].sum(dtype=np.float32)), c[0] + a[0, 1:].sum(dtype=np.float32)
    match = re.search(r"first program (\S+), second program (\S+)\n", message)
    assert match is not None
    assert np.isclose(float(match.group(1)), expected, rtol=1e-6)
    assert np.isclose(float(match.group(2)), actual, rtol=1e-6)
    assert "--- first program:\n" + str(SUM_ROWS).rstrip() in message
    assert "--- second program:\n" + str(SUM_ROWS_OFF_BY_ONE).rstrip() in message


def test_integer_buffers_compare_exactly() -> None:
    a = polyir.parse("func f(A: i32[N]) {\n  for i = 0 to N {\n    S0: A[i] = A[i] + 1:i32\n  }\n}")
    b = polyir.parse("func f(A: i32[N]) {\n  for i = 1 to N {\n    S0: A[i] = A[i] + 1:i32\n  }\n}")
    with pytest.raises(AssertionError, match=r"buffer A .*1 of \d+ elements differ; first at \[0\]"):
        assert_equivalent(a, b, atol=10.0)


def test_incompatible_signatures_are_explained() -> None:
    other = polyir.parse("func f(C: f64[N], B: f32[N, M]) {\n}")
    with pytest.raises(AssertionError) as info:
        assert_equivalent(SUM_ROWS, other)
    message = str(info.value)
    assert message.startswith("programs have incompatible signatures:")
    assert "parameter C: dtype f32 vs f64" in message and "parameter 1: named A vs B" in message
    with pytest.raises(AssertionError, match="first has 2 parameters, second has 1"):
        assert_equivalent(SUM_ROWS, polyir.parse("func f(C: f32[N]) {\n}"))
    with pytest.raises(AssertionError, match=r"shape \[N, M\] vs \[N, M \+ 1\]"):
        assert_equivalent(SUM_ROWS, polyir.parse("func f(C: f32[N], A: f32[N, M + 1]) {\n}"))


def test_parallel_order_exposes_a_wrong_parallel_loop() -> None:
    serial = polyir.parse(PREFIX.replace(" PARALLEL", " "))
    wrong = polyir.parse(PREFIX.replace(" PARALLEL", " parallel "))
    assert_equivalent(serial, wrong)  # forward order hides the bug
    with pytest.raises(AssertionError, match="buffer A .*parallel_order='reverse'"):
        assert_equivalent(serial, wrong, parallel_order="reverse")


def test_interpreter_faults_say_which_program() -> None:
    out_of_bounds = polyir.parse("func f(C: f32[N], A: f32[N, M]) {\n  S0: C[N] = 1.0\n}")
    with pytest.raises(Exception) as info:
        assert_equivalent(SUM_ROWS, out_of_bounds)
    assert any("while interpreting the second program (trial 0)" in note
               for note in getattr(info.value, "__notes__", []))


# ------------------------------------------------------ preserves or refuses
def _identity(module: Module) -> Module:
    return module


def _refuse(module: Module) -> Module:
    raise IllegalTransform("would reverse the flow dependence S0 -> S0", witness="S0[1] -> S0[2]")


def test_preserving_and_refusing_passes_satisfy_the_property() -> None:
    assert assert_preserves_or_refuses(_identity, SUM_ROWS) is SUM_ROWS
    refusal = assert_preserves_or_refuses(_refuse, SUM_ROWS)
    assert isinstance(refusal, IllegalTransform)
    wrapped = assert_preserves_or_refuses(lambda m: transform(m, [_RefusingPass()]), SUM_ROWS)
    assert isinstance(wrapped, PassError) and isinstance(wrapped.cause, IllegalTransform)
    unsupported = assert_preserves_or_refuses(lambda m: (_ for _ in ()).throw(UnsupportedOp("x", "n")),
                                              SUM_ROWS)
    assert isinstance(unsupported, UnsupportedOp)


class _RefusingPass:
    pass_name = "refuse"

    def run(self, module: Module) -> Module:
        return _refuse(module)


class _BuggyPass:
    pass_name = "buggy"

    def run(self, module: Module) -> Module:
        raise KeyError("S9")


def test_bugs_wrong_results_and_invalid_ir_fail_the_property() -> None:
    with pytest.raises(AssertionError, match="raised KeyError .*a bug, not a refusal"):
        assert_preserves_or_refuses(lambda m: {}["x"], SUM_ROWS)
    with pytest.raises(AssertionError, match="non-polyir error"):
        assert_preserves_or_refuses(lambda m: transform(m, [_BuggyPass()]), SUM_ROWS)
    with pytest.raises(AssertionError, match="programs differ in buffer C"):
        assert_preserves_or_refuses(lambda m: SUM_ROWS_OFF_BY_ONE, SUM_ROWS)
    with pytest.raises(AssertionError, match="produced invalid IR"):
        assert_preserves_or_refuses(
            lambda m: polyir.parse("func f(C: f32[N], A: f32[N, M]) {\n  S0: C[i] = 1.0\n}"), SUM_ROWS)
    with pytest.raises(AssertionError, match="returned NoneType"):
        assert_preserves_or_refuses(lambda m: None, SUM_ROWS)  # type: ignore[arg-type,return-value]
    with pytest.raises(AssertionError, match="gave no reason"):
        assert_preserves_or_refuses(lambda m: (_ for _ in ()).throw(IllegalTransform("")), SUM_ROWS)


@settings(max_examples=examples(20, 400))
@given(module=programs())
def test_every_generated_program_equals_itself_and_its_reparse(module: Module) -> None:
    assert_equivalent(module, polyir.parse(str(module)), trials=3)
