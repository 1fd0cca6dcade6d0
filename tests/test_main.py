"""``python -m polyir``: --version, the cache commands, opt; ``polyir-opt --version``."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import polyir
from polyir.__main__ import main
from polyir.cpu.jit import build_cpu, open_cache
from polyir.target import cpu

TEXT = """
func f(y: f32[N], x: f32[N]) {
  for i = 0 to N {
    S0: y[i] = x[i] * 2.0
  }
}"""


def test_version(capsys):
    assert main(["--version"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"polyir {polyir.__version__} (llvmlite ") and "LLVM" in out


def test_cache_info_prune_and_clear(tmp_path, capsys):
    build_cpu(polyir.parse(TEXT), cpu(1), cache_dir=tmp_path)
    assert main(["cache", "info", "--dir", str(tmp_path)]) == 0
    info = capsys.readouterr().out
    assert f"directory: {tmp_path}" in info and "entries:   1 (" in info and "size cap:" in info
    assert main(["cache", "prune", "--dir", str(tmp_path)]) == 0
    assert "deleted 0 files" in capsys.readouterr().out
    assert main(["cache", "clear", "--dir", str(tmp_path)]) == 0
    assert "deleted 1 entries" in capsys.readouterr().out
    assert open_cache(tmp_path).entries() == []
    rebuilt = build_cpu(polyir.parse(TEXT), cpu(1), cache_dir=tmp_path)
    x = np.arange(5, dtype=np.float32)
    y = np.zeros_like(x)
    rebuilt(y, x)
    np.testing.assert_array_equal(y, 2 * x)


def test_cache_commands_use_the_environment_by_default(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("POLYIR_CACHE_DIR", str(tmp_path / "env"))
    assert main(["cache", "info"]) == 0
    assert str(tmp_path / "env") in capsys.readouterr().out


def test_opt_is_polyir_opt(tmp_path, capsys):
    source = tmp_path / "f.pir"
    source.write_text(TEXT)
    assert main(["opt", str(source), "--pipeline", "canonicalize-names"]) == 0
    assert "S0: y[i] = x[i] * 2.0" in capsys.readouterr().out


def test_no_command_prints_help(capsys):
    assert main([]) == 2
    assert "cache" in capsys.readouterr().out


@pytest.mark.parametrize("argv", [["-m", "polyir", "--version"], ["-m", "polyir.cli", "--version"]])
def test_commands_in_a_subprocess(argv):
    env = dict(os.environ, PYTHONPATH=str(Path.cwd()))
    result = subprocess.run([sys.executable, *argv], capture_output=True, text=True, env=env,
                            timeout=120)
    assert result.returncode == 0, result.stderr
    assert polyir.__version__ in result.stdout
