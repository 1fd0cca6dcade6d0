"""``polyir.compilelog.fewer_collections``: the garbage collector's youngest
threshold raised while compiles run, restored when the last one ends, never
turned on where it was off; a compile leaves the thresholds as it found them."""
from __future__ import annotations

import gc
import threading

import numpy as np
import pytest

import polyir
from polyir.compilelog import COLLECT_EVERY, fewer_collections
from polyir.driver import compile_ir


def test_thresholds_are_raised_inside_and_restored_after_nested_blocks() -> None:
    before = gc.get_threshold()
    with fewer_collections():
        assert gc.get_threshold() == (COLLECT_EVERY, *before[1:])
        with fewer_collections():
            assert gc.get_threshold()[0] == COLLECT_EVERY
        assert gc.get_threshold()[0] == COLLECT_EVERY
    assert gc.get_threshold() == before


def test_the_last_of_overlapping_compiles_restores_the_thresholds() -> None:
    before = gc.get_threshold()
    first_in, second_in, first_out = threading.Event(), threading.Event(), threading.Event()
    seen: list[tuple[int, int, int]] = []

    def first() -> None:
        with fewer_collections():
            first_in.set()
            second_in.wait(10)
        first_out.set()

    def second() -> None:
        first_in.wait(10)
        with fewer_collections():
            second_in.set()
            first_out.wait(10)
            seen.append(gc.get_threshold())   # the first one ended: still raised

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert seen == [(COLLECT_EVERY, *before[1:])]
    assert gc.get_threshold() == before


def test_a_threshold_of_zero_and_a_disabled_collector_stay_as_they_are() -> None:
    before = gc.get_threshold()
    enabled = gc.isenabled()
    try:
        gc.set_threshold(0, before[1], before[2])
        with fewer_collections():
            assert gc.get_threshold()[0] == 0
        gc.set_threshold(*before)
        gc.disable()
        with fewer_collections():
            assert not gc.isenabled()
        assert not gc.isenabled()
    finally:
        gc.set_threshold(*before)
        if enabled:
            gc.enable()


def test_a_compile_and_a_failed_compile_leave_the_thresholds_as_they_were() -> None:
    before = gc.get_threshold()
    module = polyir.parse("func f(A: f32[N]) {\n  for i = 0 to N {\n    S: A[i] = A[i] * 2.0\n  }\n}")
    executable = compile_ir(module, "cpu", "", cache_dir=None)
    a = np.ones(5, np.float32)
    executable(a)
    assert np.array_equal(a, np.full(5, 2.0, np.float32))
    assert gc.get_threshold() == before
    with pytest.raises(polyir.PolyirError):
        compile_ir(module, "cpu", "no-such-pass", cache_dir=None)
    assert gc.get_threshold() == before
