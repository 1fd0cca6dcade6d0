"""Differential: the interpreter and native code agree bit for bit (NaN
payloads aside) on the edge programs of ``polyir.testing.edges``: signed
zeros, infinities, NaN, subnormals and extreme integers through arithmetic,
max/min, floor/ceil and integer division, reversed and constant subscripts,
and empty arrays (a constant subscript then is refused by both)."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import polyir
from polyir.cpu.jit import build_cpu
from polyir.target import cpu
from polyir.testing.edges import edge_arrays, edge_programs, edge_sizes
from tests.conftest import examples


def _outcome(run, Y: np.ndarray, X: np.ndarray, Z: np.ndarray) -> tuple[str, bytes]:
    try:
        with np.errstate(all="ignore"):
            run(Y, X, Z)
    except IndexError:                        # BoundsError is an IndexError
        return "refused", b""
    if Y.dtype.kind == "f":
        Y = np.where(np.isnan(Y), np.nan, Y).astype(Y.dtype)   # one NaN payload
    return "ran", Y.tobytes()


@pytest.mark.parametrize("dtype", ["f32", "f64", "i64"])
@settings(max_examples=examples(12), deadline=None)
@given(data=st.data())
def test_edge_programs_agree_between_interpreter_and_native(dtype: str, data: st.DataObject) -> None:
    text = data.draw(edge_programs(dtype), label="program")
    n = data.draw(edge_sizes(), label="N")
    X = data.draw(edge_arrays(dtype, n), label="X")
    Z = data.draw(edge_arrays(dtype, n), label="Z")
    module = polyir.parse(text)
    native = build_cpu(module, cpu(1), cache_dir=None)
    expected = _outcome(lambda *a: polyir.interpret(module, *a), np.zeros_like(X), X.copy(), Z.copy())
    got = _outcome(native, np.zeros_like(X), X.copy(), Z.copy())
    assert got == expected, f"{text}N = {n}, X = {X!r}, Z = {Z!r}"
