"""The on-disk compile cache: hits, misses, corrupt and stale entries."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import polyir
from polyir.cpu.cache import default_cache_dir
from polyir.cpu.jit import build_cpu
from polyir.target import cpu

TEXT = """
func f(y: f32[N], x: f32[N]) {
  for i = 0 to N {
    S0: y[i] = exp(x[i]) + 1.0
  }
}"""


def _run(ex) -> np.ndarray:
    x = np.linspace(-2, 2, 33, dtype=np.float32)
    y = np.zeros_like(x)
    ex(y, x)
    return y


def _entry(tmp_path: Path, suffix: str) -> Path:
    files = list((tmp_path / "cpu").glob(f"*{suffix}"))
    assert len(files) == 1, files
    return files[0]


def test_second_build_is_a_hit(tmp_path):
    module = polyir.parse(TEXT)
    first = build_cpu(module, cpu(1), cache_dir=tmp_path)
    second = build_cpu(module, cpu(1), cache_dir=tmp_path)
    assert (first.cache_hit, second.cache_hit) == (False, True)
    assert second.llvm_ir == first.llvm_ir
    np.testing.assert_array_equal(_run(second), _run(first))
    np.testing.assert_allclose(_run(second), np.exp(np.linspace(-2, 2, 33)) + 1, rtol=1e-6)
    metadata = json.loads(_entry(tmp_path, ".json").read_text())
    assert metadata["function"] == "f" and polyir.__version__ in metadata["compiler"]


def test_key_depends_on_ir_and_target(tmp_path):
    build_cpu(polyir.parse(TEXT), cpu(1), cache_dir=tmp_path)
    build_cpu(polyir.parse(TEXT.replace("1.0", "2.0")), cpu(1), cache_dir=tmp_path)
    build_cpu(polyir.parse(TEXT), cpu(2), cache_dir=tmp_path)
    assert len(list((tmp_path / "cpu").glob("*.o"))) == 3


@pytest.mark.parametrize("damage", ["garbage_object", "truncated_object", "bad_json",
                                    "stale_version", "bad_llvm_ir", "missing_object"])
def test_damaged_entry_is_recompiled_with_a_warning(tmp_path, damage):
    module = polyir.parse(TEXT)
    reference = _run(build_cpu(module, cpu(1), cache_dir=tmp_path))
    obj, meta, ll = _entry(tmp_path, ".o"), _entry(tmp_path, ".json"), _entry(tmp_path, ".ll")
    if damage == "garbage_object":
        obj.write_bytes(b"\x7fELF" + b"\x00\xff" * 300)
    elif damage == "truncated_object":
        obj.write_bytes(obj.read_bytes()[:100])
    elif damage == "bad_json":
        meta.write_text("{not json")
    elif damage == "stale_version":
        data = json.loads(meta.read_text())
        data["compiler"] = "polyir 0.0.0; llvmlite 0.1"
        meta.write_text(json.dumps(data))
    elif damage == "bad_llvm_ir":
        ll.write_text("garbage")
    else:
        obj.unlink()
    with pytest.warns(RuntimeWarning, match="compile-cache entry"):
        rebuilt = build_cpu(module, cpu(1), cache_dir=tmp_path)
    assert not rebuilt.cache_hit
    np.testing.assert_array_equal(_run(rebuilt), reference)
    again = build_cpu(module, cpu(1), cache_dir=tmp_path)
    assert again.cache_hit


def test_no_cache_dir_writes_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("POLYIR_CACHE_DIR", str(tmp_path / "env"))
    ex = build_cpu(polyir.parse(TEXT), cpu(1), cache_dir=None)
    assert not ex.cache_hit
    assert not (tmp_path / "env").exists()


def test_default_dir_and_driver_use_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("POLYIR_CACHE_DIR", str(tmp_path / "env"))
    assert default_cache_dir() == tmp_path / "env"
    from polyir.driver import build
    ex = build(polyir.parse(TEXT), "cpu")
    assert ex.ptx is None and "addps" in ex.asm
    assert len(list((tmp_path / "env" / "cpu").glob("*.o"))) == 1
    monkeypatch.delenv("POLYIR_CACHE_DIR")
    assert default_cache_dir() == Path.home() / ".cache" / "polyir"
