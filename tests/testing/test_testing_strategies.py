"""``polyir.testing.programs``: valid, varied, in-bounds, fast and small when shrunk."""
from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import find as hypothesis_find

import polyir
from polyir.ir.interpreter import interpret
from polyir.ir.nodes import Assign, Buffer, For, Function, If, Module, Symbol
from polyir.ir.parser import parse
from polyir.ir.types import DType
from polyir.ir.verifier import verify
from polyir.testing import programs, random_arguments, symbol_values
from tests.conftest import DEEP, examples
from tests.testing.program_features import program_features

FEATURES = (
    "imperfect_nest", "depth1", "depth2", "depth3", "depth4", "parametric_bound", "constant_bound",
    "triangular_bound", "max_bound", "min_bound", "step", "shifted_access", "strided_access",
    "transposed_access", "reversed_access", "reduction", "scalar_temporary", "if", "else",
    "symbol_param", "scalar_param", "int_buffer", "f64_buffer", "affine_shape", "local_array",
    "several_statements", "select", "call:max", "call:min", "cast",
    # dependences through memory, kept bounded
    "cross_statement_dependence", "recurrence", "stencil", "reduction_reads_updated", "bounded_reduction",
    # nests and value forms
    "perfect_nest", "gather", "bool_buffer", "bool_temporary", "i64_buffer", "compare", "call:abs",
    "call:tanh", "call:exp", "call:sigmoid", "call:sqrt", "float_division", "float_cast",
)


def _statements(nodes: tuple) -> list[Assign]:
    found: list[Assign] = []
    for node in nodes:
        if isinstance(node, Assign):
            found.append(node)
        elif isinstance(node, For):
            found += _statements(node.body)
        elif isinstance(node, If):
            found += _statements(node.then_body) + _statements(node.else_body)
    return found


def _depth(nodes: tuple) -> int:
    best = 0
    for node in nodes:
        if isinstance(node, For):
            best = max(best, 1 + _depth(node.body))
        elif isinstance(node, If):
            best = max(best, _depth(node.then_body), _depth(node.else_body))
    return best


def _sample(strategy, count: int) -> list[Module]:
    found: list[Module] = []

    @settings(max_examples=count, derandomize=True, database=None, deadline=None,
              suppress_health_check=list(HealthCheck))
    @given(strategy)
    def collect(module: Module) -> None:
        found.append(module)

    collect()
    return found


@settings(max_examples=examples(120, 3000))
@given(programs())
def test_generated_programs_verify_and_round_trip(module: Module) -> None:
    verify(module)
    assert len(module.functions) == 1 and module.entry.kind == "host"
    assert parse(str(module)) == module


def test_every_feature_appears_in_a_batch() -> None:
    batch = _sample(programs(), 300)
    counts: Counter[str] = Counter()
    for module in batch:
        counts.update(program_features(module))
    missing = [name for name in FEATURES if counts[name] == 0]
    assert not missing, f"features never generated in 300 programs: {missing}; counts {dict(counts)}"
    # Every feature should be common, not a fluke of one example.
    rare = [name for name in FEATURES if counts[name] < 5]
    assert not rare, f"features seen fewer than 5 times in 300 programs: {rare}"


@pytest.mark.parametrize("sizes", [1, None, {"N": 7, "M": 2, "P": 3}])
@settings(max_examples=examples(40, 800))
@given(module=programs())
def test_programs_run_in_bounds_and_stay_finite(module: Module, sizes: object) -> None:
    args = random_arguments(module, np.random.default_rng(0), sizes)  # type: ignore[arg-type]
    interpret(module, *args)  # raises on any out-of-bounds access
    for param, value in zip(module.entry.params, args, strict=True):
        if isinstance(param, Buffer) and param.dtype.is_float:
            assert np.all(np.isfinite(value)), f"{param.name} is not finite:\n{module}"
            assert np.max(np.abs(value), initial=0) < 1e6, f"{param.name} grew too large:\n{module}"


def test_options_restrict_what_is_generated() -> None:
    for module in _sample(programs(max_depth=1, max_statements=2, symbolic=False, allow_ifs=False,
                                   dtypes=("f64",), ints=False, locals=False, steps=False), 60):
        function = module.entry
        body = function.body
        assert _depth(body) <= 1
        assert 1 <= len(_statements(body)) <= 2
        assert function.symbols == () and not any(isinstance(p, Symbol) for p in function.params)
        assert function.locals == ()
        assert all(p.dtype is DType.F64 for p in function.params if isinstance(p, Buffer))
        text = str(module)
        assert "if (" not in text and " step " not in text
    depths = [_depth(m.entry.body) for m in _sample(programs(max_depth=2), 100)]
    assert max(depths) == 2


def test_options_are_checked() -> None:
    with pytest.raises(ValueError, match="floating types only"):
        programs(dtypes=("i32",))
    with pytest.raises(ValueError, match="max_statements"):
        programs(max_statements=0)


def test_shrinking_gives_small_programs() -> None:
    nested = hypothesis_find(programs(), lambda m: _depth(m.entry.body) >= 2,
                             settings=settings(database=None, max_examples=200, derandomize=True,
                                               suppress_health_check=list(HealthCheck)))
    assert _depth(nested.entry.body) == 2 and len(_statements(nested.entry.body)) == 1
    assert len(str(nested).rstrip().splitlines()) <= 8, str(nested)


SHRUNK_FEATURES = ["bool_temporary", "perfect_nest", "gather"] + (["stencil", "recurrence"] if DEEP else [])


@pytest.mark.parametrize("feature", SHRUNK_FEATURES)
def test_new_features_shrink_to_small_programs(feature: str) -> None:
    found = hypothesis_find(programs(), lambda m: feature in program_features(m),
                            settings=settings(database=None, max_examples=500, derandomize=True,
                                              suppress_health_check=list(HealthCheck)))
    assert len(_statements(found.entry.body)) <= 4, str(found)
    assert len(str(found).rstrip().splitlines()) <= 9, str(found)


def test_symbol_values_defaults_int_and_mapping() -> None:
    function = polyir.parse("func f(A: f32[N, M], K: index) {\n}").entry
    assert function.symbols == ("K", "N", "M")
    assert symbol_values(function) == {"K": 5, "N": 4, "M": 3}
    assert symbol_values(function, variant=2) == {"K": 1, "N": 2, "M": 1}
    assert symbol_values(function, 9) == {"K": 9, "N": 9, "M": 9}
    assert symbol_values(function, {"N": 11, "Q": 3}) == {"K": 5, "N": 11, "M": 3}
    with pytest.raises(ValueError, match=">= 1"):
        symbol_values(function, {"M": 0})


def test_random_arguments_follow_the_calling_convention() -> None:
    module = polyir.parse("func f(A: f32[N, 2*M + 1], s: f64[], B: i32[3], M: index) {\n}")
    a, s, b, m = random_arguments(module, 0, {"N": 4, "M": 2})
    assert a.shape == (4, 5) and a.dtype == np.float32 and np.all(np.abs(a) <= 1)
    assert s.shape == () and s.dtype == np.float64
    assert b.shape == (3,) and b.dtype == np.int32 and np.all(np.abs(b) <= 4)
    assert m == 2 and isinstance(m, int)
    again = random_arguments(module.entry, np.random.default_rng(0), {"N": 4, "M": 2})
    assert np.array_equal(again[0], a) and np.array_equal(again[2], b)
    other = random_arguments(module, 1, {"N": 4, "M": 2})
    assert not np.array_equal(other[0], a)


def test_generated_function_is_interpretable_as_a_function_object() -> None:
    module = _sample(programs(), 5)[-1]
    assert isinstance(module.entry, Function)
    args = random_arguments(module.entry, 3)
    interpret(module, *args)


@settings(max_examples=examples(20, 400))
@given(module=programs(max_depth=6, max_statements=9, dtypes=("f16", "bf16", "f32")))
def test_half_precision_and_deep_programs_are_valid_and_in_bounds(module: Module) -> None:
    verify(module)
    assert parse(str(module)) == module
    assert _depth(module.entry.body) <= 6 and len(_statements(module.entry.body)) <= 9
    interpret(module, *random_arguments(module, 1, sizes=2))
