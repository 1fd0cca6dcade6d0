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


@settings(max_examples=examples(12), deadline=None)
@given(data=st.data())
def test_aliased_inputs_agree_and_an_output_overlapping_an_input_is_refused(data: st.DataObject) -> None:
    # opt-in aliasing (issue 16, item 6): both inputs one array (read-only overlap,
    # allowed) agree bit for bit; the output sharing memory with an input is an
    # ArgumentError of the native code before anything is written
    from polyir.errors import ArgumentError

    dtype = data.draw(st.sampled_from(("f32", "f64", "i64")), label="dtype")
    text = data.draw(edge_programs(dtype), label="program")
    n = data.draw(st.integers(2, 6), label="N")
    X = data.draw(edge_arrays(dtype, n), label="X")
    module = polyir.parse(text)
    native = build_cpu(module, cpu(1), cache_dir=None)
    expected = _outcome(lambda Y, A, B: polyir.interpret(module, Y, A, A), np.zeros_like(X), X.copy(), X)
    got = _outcome(lambda Y, A, B: native(Y, A, A), np.zeros_like(X), X.copy(), X)
    assert got == expected, f"{text}N = {n}, X = {X!r}"
    base = np.resize(X, n + 1)
    before = base.copy()
    shared = data.draw(st.sampled_from(("same", "shifted")), label="overlap")
    Y, A = (base[:n], base[:n]) if shared == "same" else (base[1:], base[:-1])
    with pytest.raises(ArgumentError, match="overlap in memory"):
        native(Y, A, X.copy())
    assert base.tobytes() == before.tobytes()
