"""The isl context's assumptions are the real argument domains, checked at call time.

Every pass proves its rewrite under ``polyir.polyhedral.assumptions``: symbols
``>= 0``, buffer dimensions ``>= 0`` (an empty array is a legal argument, so no
pass may assume a dimension is at least 1). Backends refuse a symbol value the
proofs do not cover."""
from __future__ import annotations

import copy
import itertools

import numpy as np
import pytest

import polyir
from polyir.errors import ArgumentError
from polyir.polyhedral.assumptions import assumptions
from polyir.polyhedral.extract import extract
from polyir.testing.corpus import CORPUS, corpus_kernel


def test_context_is_the_argument_domains() -> None:
    module = polyir.parse("func f(A: f32[N, M + 1], k: index) {\n"
                          "  for i = 0 to N {\n    S0: A[i, 0] = 1.0\n  }\n}\n")
    scop = extract(module.entry)
    assert [str(a) for a in assumptions(module.entry)] == ["k", "N", "M + 1"]
    assert scop.context.is_equal(scop.isl_set("[k, N, M] -> { : k >= 0 and N >= 0 and M >= -1 }"))


def _recurrence(A, n, k):
    for i in range(1, n):
        A[i] = A[i + n + k] + 1.0


def test_negative_symbol_is_refused_at_call_time() -> None:
    # With k >= 0 the read A[i + n + k] never meets a write, so mark-parallel
    # marks the loop parallel; k = -n - 1 makes it the recurrence A[i] = A[i - 1] + 1.
    compiled = polyir.kernel(_recurrence, pipeline="mark-parallel")
    A = np.zeros(64)
    assert "parallel" in str(polyir.transform(compiled.ir(A, 16, 0), "mark-parallel"))
    with pytest.raises(ArgumentError, match="symbol 'k' = -17 is negative"):
        compiled(A, 16, -17)
    assert not A.any(), "nothing may be written on a refused call"
    with pytest.raises(ArgumentError, match="does not fit in int64"):
        compiled(A, 16, 2 ** 63)
    compiled(A, 16, 0)
    expected = np.zeros(64)
    _recurrence(expected, 16, 0)
    np.testing.assert_array_equal(A, expected)


def test_boundary_stencil_on_an_empty_array_after_reschedule() -> None:
    entry = corpus_kernel("boundary-stencil")
    A, B = np.zeros((0, 5)), np.zeros((0, 5))
    module = polyir.kernel(entry.func).ir(A, B)
    transformed = polyir.transform(module, "reschedule,mark-parallel")
    polyir.interpret(transformed, A, B)            # checks bounds: must not fault
    executable = polyir.driver.build(transformed, "cpu", cache_dir=None)
    guard = np.full((3, 5), 7.0)
    A, B = guard[1:1], guard[2:2]
    executable(A, B)
    assert (guard == 7.0).all()


_SLOW_TO_RESCHEDULE = {"heat-3d", "conv2d-pad", "correlation", "covariance"}


def _zero_size_cases(pipeline: str) -> list[tuple[str, dict[str, int]]]:
    cases = []
    for entry in CORPUS:
        if "reschedule" in pipeline and entry.name in _SLOW_TO_RESCHEDULE:
            continue                                # seconds each; the fusion pipeline runs them
        for name in entry.sizes:
            for value in (0, 1):
                cases.append((entry.name, {**entry.sizes, name: value}))
    return cases


@pytest.mark.parametrize("pipeline", ["reschedule,mark-parallel", "fuse,shrink-buffers,mark-parallel"])
def test_corpus_with_zero_and_unit_sizes_after_passes(pipeline: str) -> None:
    """Differential: every corpus kernel, each size in turn 0 or 1, through the
    passes and the interpreter (parallel loops reversed) against plain Python."""
    modules: dict[str, polyir.ir.nodes.Module] = {}
    ran = 0
    for name, sizes in _zero_size_cases(pipeline):
        entry = corpus_kernel(name)
        try:
            args = entry.make_args(sizes, np.random.default_rng(3))
            expected = copy.deepcopy(args)
            with np.errstate(all="ignore"):
                entry.func(*expected)
        except (ValueError, IndexError, ZeroDivisionError, np.linalg.LinAlgError):
            continue                                # no valid arguments of these sizes
        if name not in modules:
            modules[name] = polyir.transform(polyir.kernel(entry.func).ir(*args), pipeline)
        polyir.interpret(modules[name], *args, parallel_order="reverse")
        for position, (got, want) in enumerate(zip(args, expected, strict=True)):
            if isinstance(want, np.ndarray):
                np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12,
                                           err_msg=f"{name} {sizes} argument {position}")
        ran += 1
    assert ran >= 50


def test_negative_and_zero_symbols_in_text_ir() -> None:
    text = ("func f(A: f64[N], k: index) {\n  for i = 0 to N - k {\n"
            "    S0: A[i + k] = A[i + k] + 1.0:f64\n  }\n}\n")
    executable = polyir.driver.build(polyir.transform(polyir.parse(text), "mark-parallel"),
                                     "cpu", cache_dir=None)
    for n, k in itertools.product((0, 1, 3), (0, 2)):
        A = np.zeros(n)
        executable(A, k)
        np.testing.assert_array_equal(A, [1.0 if i >= k else 0.0 for i in range(n)])
    with pytest.raises(ArgumentError, match="'k' = -1"):
        executable(np.zeros(3), -1)
