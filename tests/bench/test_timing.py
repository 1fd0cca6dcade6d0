"""bench.timing: interleaved timing calls set-up before every timed call, takes
the requested number of samples, and batches fast calls."""
from __future__ import annotations

import statistics
import time

from bench.timing import Samples, interleaved_medians, ratio


def test_setup_runs_before_every_call_in_turn() -> None:
    log: list[str] = []
    contenders = {"a": lambda: log.append("a"), "b": lambda: log.append("b")}
    samples = interleaved_medians(contenders, 3, warmup=1, setup=lambda who: log.append(f"setup {who}"))
    assert log == ["setup a", "a", "setup b", "b"] * 4      # one warm-up round, then three
    assert [len(samples[who].seconds) for who in ("a", "b")] == [3, 3]


def test_fast_calls_are_batched_and_divided() -> None:
    calls = []
    samples = interleaved_medians({"fast": lambda: calls.append(1)}, 4, warmup=0, min_seconds=0.002)
    assert len(calls) > 4 * 10                                  # batches, not single calls
    assert samples["fast"].median < 0.002


def test_medians_order_a_slow_and_a_fast_contender() -> None:
    samples = interleaved_medians({"slow": lambda: time.sleep(0.004), "fast": lambda: None}, 3)
    assert samples["slow"].median >= 0.004 > samples["fast"].median


def test_samples_median_spread_and_ratio() -> None:
    values = [1.0, 2.0, 3.0, 4.0, 10.0]
    s = Samples(values)
    assert s.median == statistics.median(values)
    q1, _, q3 = statistics.quantiles(values, n=4)
    assert s.spread == (q3 - q1) / 3.0
    assert ratio(2.0, 4.0) == 0.5 and ratio(None, 1.0) is None and ratio(1.0, 0.0) is None
