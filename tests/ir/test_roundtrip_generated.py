"""Round trip of generated programs: ``parse(str(m)) == m`` and the text is a fixed point."""
from __future__ import annotations

from hypothesis import HealthCheck, given, settings

from polyir.ir.nodes import Module
from polyir.ir.parser import parse
from polyir.ir.printer import print_module
from polyir.ir.verifier import verify
from polyir.testing import programs


@settings(max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(programs())
def test_generated_programs_round_trip(module: Module) -> None:
    verify(module)
    text = print_module(module)
    parsed = parse(text)
    assert parsed == module
    assert print_module(parsed) == text
    verify(parsed)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(programs(max_depth=3, symbolic=False, dtypes=("f16", "bf16", "f32", "f64"), steps=True))
def test_generated_constant_bound_programs_round_trip(module: Module) -> None:
    text = print_module(module)
    assert parse(text) == module
    verify(parse(text))
