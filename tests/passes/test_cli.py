"""``polyir-opt``: through ``main()`` and as a subprocess."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import polyir
from polyir.cli import main

SOURCE = """\
func f(A: f32[N]) {
  for i = max(0, 1) to N {
    S7: A[i] = A[i] + 1.0
  }
  if (2 < 1) {
    S8: A[0] = 0.0
  }
}
"""
EXPECTED = """\
func f(A: f32[N]) {
  for i = 1 to N {
    S0: A[i] = A[i] + 1.0
  }
}
"""


@pytest.fixture
def source_file(tmp_path: Path) -> Path:
    path = tmp_path / "in.pir"
    path.write_text(SOURCE)
    return path


def test_main_prints_the_transformed_ir(source_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([str(source_file), "--pipeline", "simplify-bounds,canonicalize-names"]) == 0
    out, err = capsys.readouterr()
    assert out == EXPECTED and err == ""
    assert polyir.parse(out) == polyir.parse(EXPECTED)


def test_main_without_pipeline_round_trips(source_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([str(source_file)]) == 0
    assert polyir.parse(capsys.readouterr().out) == polyir.parse(SOURCE)


def test_main_writes_output_file_and_dumps(source_file: Path, tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    out_path = tmp_path / "out.pir"
    code = main([str(source_file), "-p", "simplify-bounds,canonicalize-names", "-o", str(out_path),
                 "--dump-after-each", "--verify-each"])
    assert code == 0
    assert out_path.read_text() == EXPECTED
    out, err = capsys.readouterr()
    assert out == ""
    assert err.count("// -----// IR after ") == 2
    assert err.index("IR after simplify-bounds") < err.index("IR after canonicalize-names")
    assert err.endswith(EXPECTED)


def test_main_lists_passes(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--list-passes"]) == 0
    out = capsys.readouterr().out
    assert "simplify-bounds: Drop dominated" in out
    assert "canonicalize-names: " in out and "    prefix: str = S" in out


@pytest.mark.parametrize("text, pipeline, expected_error", [
    ("func f(A: f32[N]) {\n  S0: A[0] = = 1.0\n}\n", "", r"^polyir-opt: error: .*in\.pir:2:\d+: "),
    ("func f(A: f32[N]) {\n  S0: A[i] = 1.0\n}\n", "", r"^polyir-opt: error: .*in\.pir: invalid IR: "),
    (SOURCE, "simplify-bounds,nope", r"^polyir-opt: error: <pipeline>:1:17: unknown pass 'nope'"),
    (SOURCE, "canonicalize-names{prefix=}", r"^polyir-opt: error: <pipeline>:1:27: expected a value"),
])
def test_main_reports_errors_without_writing_output(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                    text: str, pipeline: str, expected_error: str) -> None:
    path = tmp_path / "in.pir"
    path.write_text(text)
    out_path = tmp_path / "out.pir"
    assert main([str(path), "--pipeline", pipeline, "-o", str(out_path)]) == 1
    out, err = capsys.readouterr()
    assert out == "" and "Traceback" not in err
    assert re.search(expected_error, err), err
    assert not out_path.exists()
    assert list(tmp_path.iterdir()) == [path]  # no temporary file left behind either


def test_main_reports_pass_failures_and_missing_files(tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    assert main([str(tmp_path / "missing.pir")]) == 1
    assert capsys.readouterr().err.startswith(f"polyir-opt: error: {tmp_path / 'missing.pir'}: cannot read")
    assert main([]) == 1
    assert "no input file" in capsys.readouterr().err


def _polyir_opt(*args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "polyir.cli", *args], input=stdin, capture_output=True,
                          text=True, timeout=60)


def test_subprocess_reads_stdin_and_prints_golden_output() -> None:
    done = _polyir_opt("-", "--pipeline", "simplify-bounds,canonicalize-names", stdin=SOURCE)
    assert done.returncode == 0, done.stderr
    assert done.stdout == EXPECTED and done.stderr == ""


def test_subprocess_parse_error_has_position_and_no_traceback(tmp_path: Path) -> None:
    out_path = tmp_path / "out.pir"
    done = _polyir_opt("-", "-o", str(out_path), stdin="func f(A: f32[N]) {\n  S0: A[0] = 1.0\n  }}\n")
    assert done.returncode == 1
    assert done.stderr.startswith("polyir-opt: error: <stdin>:3:"), done.stderr
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert done.stdout == "" and not out_path.exists()


def test_subprocess_pass_error_names_the_pass(tmp_path: Path) -> None:
    path = tmp_path / "in.pir"
    path.write_text(SOURCE)
    plugin = tmp_path / "polyir_test_plugin.py"
    plugin.write_text(
        "from dataclasses import dataclass\n"
        "from polyir import IllegalTransform\n"
        "from polyir.passes import register_pass\n"
        "@register_pass('always-refuse')\n"
        "@dataclass(frozen=True)\n"
        "class AlwaysRefuse:\n"
        "    '''Refuses every module.'''\n"
        "    def run(self, module):\n"
        "        raise IllegalTransform('would reverse a dependence S0 -> S0')\n")
    code = ("import sys, polyir.passes as p; p.PASS_MODULES.append('polyir_test_plugin'); "
            "from polyir.cli import main; sys.exit(main(sys.argv[1:]))")
    done = subprocess.run([sys.executable, "-c", code, str(path), "-p", "canonicalize-names,always-refuse"],
                          capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": f"{tmp_path}:{Path.cwd()}"})
    assert done.returncode == 1
    assert "pass 'always-refuse' failed (passes run before it: canonicalize-names): IllegalTransform: " \
           "would reverse a dependence" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr and done.stdout == ""


def test_console_script_runs_when_installed(source_file: Path) -> None:
    pyproject = (Path(__file__).resolve().parents[2] / "pyproject.toml").read_text()
    assert 'polyir-opt = "polyir.cli:main"' in pyproject
    script = shutil.which("polyir-opt")
    if script is None:  # not installed in this environment: `python -m polyir.cli` is tested above
        return
    done = subprocess.run([script, str(source_file), "--pipeline", "simplify-bounds,canonicalize-names"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout == EXPECTED
