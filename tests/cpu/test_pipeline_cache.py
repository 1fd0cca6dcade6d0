"""The pipeline cache: a warm compile runs no pass and gives the same code, remarks and positions."""
from __future__ import annotations

import json
import pickle
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

import polyir
from polyir import passes as registry
from polyir import pipeline_cache
from polyir.driver import compile_ir
from polyir.ir.nodes import Module
from polyir.ir.walk import STATEMENT_NODES, walk_nodes
from polyir.target import cpu

TEXT = """func chain(y: f32[N, 8], x: f32[N, 8]) {
  local t: f32[N, 8]
  for i = 0 to N {
    for j = 0 to 8 {
      S0: t[i, j] = x[i, j] * 2.0
    }
  }
  for i2 = 0 to N {
    for j2 = 0 to 8 {
      S1: y[i2, j2] = t[i2, j2] + 1.0
    }
  }
}"""


def _positions(module: Module) -> dict[str, object]:
    return {n.name: n.loc for n in walk_nodes(module.entry.body) if isinstance(n, STATEMENT_NODES)}


def _run(executable) -> np.ndarray:  # noqa: ANN001
    x = np.arange(40, dtype=np.float32).reshape(5, 8)
    y = np.zeros_like(x)
    executable(y, x)
    np.testing.assert_array_equal(y, x * 2 + 1)
    return y


def test_a_second_compile_takes_the_pipelines_result_from_the_cache(tmp_path) -> None:
    first = compile_ir(polyir.parse(TEXT), cpu(1), cache_dir=tmp_path)
    second = compile_ir(polyir.parse(TEXT), cpu(1), cache_dir=tmp_path)
    assert [stage for stage, _ in first.timings if stage.startswith("passes")] == ["passes"]
    assert [stage for stage, _ in second.timings if stage.startswith("passes")] == ["passes (cached)"]
    assert str(second.ir) == str(first.ir) and "fuse" in " ".join(map(str, first.remarks))
    assert second.remarks == first.remarks
    assert _positions(second.ir) == _positions(first.ir) and all(_positions(first.ir).values())
    _run(first)
    _run(second)


def test_a_damaged_entry_is_a_miss_and_the_passes_run_again(tmp_path) -> None:
    compile_ir(polyir.parse(TEXT), cpu(1), cache_dir=tmp_path)
    entries = list(Path(tmp_path, pipeline_cache.SECTION).rglob("*.entry"))
    assert len(entries) == 1
    data = bytearray(entries[0].read_bytes())
    data[-3] ^= 0xFF
    entries[0].write_bytes(bytes(data))
    with pytest.warns(RuntimeWarning, match="unusable compile-cache entry"):
        again = compile_ir(polyir.parse(TEXT), cpu(1), cache_dir=tmp_path)
    assert [stage for stage, _ in again.timings if stage.startswith("passes")] == ["passes"]
    _run(again)


def test_what_is_not_cached(tmp_path, monkeypatch) -> None:
    compile_ir(polyir.parse(TEXT), "interpret", cache_dir=tmp_path)
    compile_ir(polyir.parse(TEXT), cpu(1), cache_dir=None)
    assert not Path(tmp_path, pipeline_cache.SECTION).exists()

    @dataclass(frozen=True)
    class Outside:
        def run(self, module: Module) -> Module:
            return module

    Outside.__module__ = "someones_plugin"
    monkeypatch.setitem(registry._REGISTRY, "someones-pass", Outside)
    assert pipeline_cache.cacheable("fuse,auto-tile")
    assert not pipeline_cache.cacheable("fuse,someones-pass")   # its code is not in the key


def test_an_entry_of_another_format_or_not_a_module_is_a_miss(tmp_path) -> None:
    module = polyir.parse(TEXT)
    pipeline = "fuse"
    cache = pipeline_cache.open_cache(tmp_path)
    assert cache is not None
    key = pipeline_cache.key(module, pipeline, cpu(1))
    cache.store(key, TEXT.encode(), '{"format": "text-0", "remarks": []}', {"kind": "pipeline"})
    assert pipeline_cache.load(cache, key) is None       # an older entry: a miss, dropped
    assert cache.load(key) is None
    record = json.dumps({"format": pipeline_cache.FORMAT, "remarks": []})
    cache.store(key, pickle.dumps([1, 2]), record, {"kind": "pipeline"})
    assert pipeline_cache.load(cache, key) is None
    executable = compile_ir(module, cpu(1), pipeline, cache_dir=tmp_path)
    assert [stage for stage, _ in executable.timings if stage.startswith("passes")] == ["passes"]
    _run(executable)
