"""The fast path of repeated ``@polyir.kernel`` calls (``ArgumentBinder.fast_binding``):
calls that differ from a checked one only in their arrays' data re-read the data
pointers and nothing else; every other difference (shapes, symbol values,
overlapping arguments, read-only outputs, bad gather ids) still meets the full
checks."""
from __future__ import annotations

import numpy as np
import pytest

import polyir
from polyir.cpu.args import ArgumentBinder
from polyir.errors import ArgumentError, BoundsError


def _saxpy(a, x, y):
    for i in range(x.shape[0]):
        y[i] += a * x[i]


def _scale(x, n: int):
    for i in range(n):
        x[i] = x[i] * 2.0


def _gather(out, W, idx):
    for i in range(idx.shape[0]):
        out[i] = W[idx[i]]


@pytest.fixture
def full_binds(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the full argument checks (``ArgumentBinder.bind``)."""
    count: list[int] = []
    original = ArgumentBinder.bind

    def counting(self, args):  # type: ignore[no-untyped-def]
        count.append(1)
        return original(self, args)
    monkeypatch.setattr(ArgumentBinder, "bind", counting)
    return count


def test_new_arrays_of_the_same_shapes_skip_the_full_checks(full_binds: list[int]) -> None:
    kernel = polyir.kernel(_saxpy)
    rng = np.random.default_rng(0)
    x, y = rng.random(100, np.float32), rng.random(100, np.float32)
    kernel(2.0, x, y)
    checked = len(full_binds)
    for k in range(5):
        x, y = rng.random(100, np.float32), rng.random(100, np.float32)
        expected = y.copy()
        _saxpy(np.float32(0.5 * k), x, expected)
        kernel(0.5 * k, x, y)
        np.testing.assert_array_equal(y, expected)
    assert len(full_binds) == checked, "repeated calls went through the full binder"


def test_other_shapes_and_symbol_values_take_the_full_path(full_binds: list[int]) -> None:
    kernel = polyir.kernel(_saxpy)
    kernel(1.0, np.ones(10), np.ones(10))
    before = len(full_binds)
    x, y = np.arange(7.0), np.ones(7)
    kernel(3.0, x, y)
    np.testing.assert_array_equal(y, 1.0 + 3.0 * np.arange(7.0))
    assert len(full_binds) > before
    scale = polyir.kernel(_scale)
    x = np.ones(8)
    scale(x, 4)
    scale(x, 6)                          # another n: the template's symbol word is stale
    np.testing.assert_array_equal(x, [4, 4, 4, 4, 2, 2, 1, 1])
    with pytest.raises(BoundsError):
        scale(x, 9)


def test_overlapping_and_read_only_arguments_are_still_refused() -> None:
    kernel = polyir.kernel(_saxpy)
    kernel(1.0, np.ones(10), np.ones(10))
    shared = np.ones(10)
    with pytest.raises(ArgumentError, match="overlap"):
        kernel(1.0, shared, shared)
    frozen = np.ones(10)
    frozen.setflags(write=False)
    with pytest.raises(ArgumentError, match="read-only"):
        kernel(1.0, np.ones(10), frozen)


def test_gather_ids_are_checked_on_every_fast_call() -> None:
    kernel = polyir.kernel(_gather)
    W = np.arange(5.0)
    out = np.zeros(3)
    kernel(out, W, np.array([0, 1, 2]))
    kernel(out, W, np.array([4, 3, 2]))
    np.testing.assert_array_equal(out, [4.0, 3.0, 2.0])
    with pytest.raises(BoundsError):
        kernel(np.zeros(3), W, np.array([0, 5, 1]))
