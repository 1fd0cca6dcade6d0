"""MLIR as a second opinion: exported programs run natively through mlir-opt's
lowering and mlir-runner and agree with polyir's interpreter; MLIR's fusion
and tiling, run through the comparison harness, either keep the meaning or
say (warn) that they did not; polyir-opt reads and writes .mlir."""
from __future__ import annotations

import copy
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytest.importorskip("xdsl", reason="the MLIR tests read MLIR with xDSL")

import polyir  # noqa: E402
from polyir.cli import main  # noqa: E402
from polyir.errors import UnsupportedMLIR  # noqa: E402
from polyir.frontends.mlir import export_mlir, import_mlir  # noqa: E402
from polyir.frontends.mlir.compare import POLYIR_PIPELINES, compare, sizes_of, specialize  # noqa: E402
from polyir.frontends.mlir.tools import mlir_opt, mlir_runner, run_function, transform  # noqa: E402
from polyir.ir.nodes import Buffer  # noqa: E402
from polyir.testing import programs, random_arguments  # noqa: E402
from tests.conftest import examples  # noqa: E402

needs_runner = pytest.mark.skipif(mlir_runner() is None,
                                  reason="mlir-runner is not installed (apt-get install mlir-22-tools)")
needs_mlir_opt = pytest.mark.skipif(mlir_opt() is None,
                                    reason="mlir-opt is not installed (apt-get install mlir-22-tools)")


def _interpreted(module, args):
    copies = [copy.deepcopy(a) for a in args]
    polyir.interpret(module, *copies)
    return copies


def _assert_close(module, expected, got) -> None:
    for param, a, b in zip(module.entry.params, expected, got, strict=True):
        if isinstance(param, Buffer):
            tol = 1e-2 if param.dtype.value in ("f16", "bf16") else 1e-5
            np.testing.assert_allclose(np.asarray(b, np.float64), np.asarray(a, np.float64), rtol=tol, atol=tol,
                                       err_msg=param.name)


@needs_runner
@settings(max_examples=examples(6, 100), deadline=None, suppress_health_check=list(HealthCheck))
@given(programs(dtypes=("f16", "bf16", "f32", "f64"), max_statements=3))
def test_native_mlir_agrees_with_the_interpreter_on_random_programs(module) -> None:
    args = random_arguments(module, 0)
    expected = _interpreted(module, args)
    got = run_function(export_mlir(module), module.entry.name, args)
    _assert_close(module, expected, got)


LEGAL_PASSES = (
    ("-canonicalize",), ("-cse",), ("-affine-loop-normalize",), ("-affine-scalrep",),
    ("-affine-loop-invariant-code-motion",), ("-affine-simplify-structures",), ("-affine-loop-coalescing",),
    ("-affine-loop-fusion",), ("-affine-pipeline-data-transfer",),
    ("--pass-pipeline=builtin.module(func.func(affine-loop-unroll{unroll-factor=2}))",),
    ("--pass-pipeline=builtin.module(func.func(affine-loop-unroll-jam{unroll-jam-factor=2}))",),
)
"""MLIR passes whose output the importer must read back to the same meaning."""


@needs_mlir_opt
@settings(max_examples=examples(24, 400), deadline=None, suppress_health_check=list(HealthCheck))
@given(programs(), st.sampled_from(LEGAL_PASSES))
def test_the_output_of_mlir_passes_imports_to_the_same_meaning(module, passes) -> None:
    """mlir-opt renames every value, adds #map aliases, rewrites bounds and
    subscripts, unrolls, coalesces, fuses: the importer reads all of it."""
    try:
        transformed = import_mlir(transform(export_mlir(module), passes).text)
    except UnsupportedMLIR as refusal:
        # coalescing loops with symbolic bounds divides by a symbol, which no Aff can
        assert passes == ("-affine-loop-coalescing",) and "semi-affine" in str(refusal)
        return
    args = random_arguments(module, 0)
    _assert_close(module, _interpreted(module, args), _interpreted(transformed, args))


def test_the_mlir_frontend_does_not_import_torch() -> None:
    code = ("import sys\nimport polyir.frontends.mlir.compare, polyir.frontends.mlir.importer\n"
            "import polyir.frontends.mlir.exporter, polyir.frontends.mlir.tools\n"
            "assert 'torch' not in sys.modules, 'torch was imported'")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=Path(__file__).resolve().parents[2])


TILE_ILLEGAL = """
func f(A: f32[9]) {
  for i = 0 to 8 {
    for j = 0 to 8 {
      S0: A[i] = A[i + 1] * 0.5 + cast<f32>(j)
    }
  }
}
"""

CHAIN = """
func f(A: f32[16], B: f32[16], C: f32[16]) {
  local T: f32[16]
  for i = 0 to 16 {
    S0: T[i] = exp(A[i])
  }
  for k = 0 to 16 {
    S1: C[k] = T[k] + B[k]
  }
}
"""


@needs_mlir_opt
def test_mlir_fusion_of_a_producer_consumer_chain_is_checked_on_both_paths() -> None:
    module = polyir.parse(CHAIN)
    outcomes = {o.pipeline: o for o in compare(module, random_arguments(module, 0))}
    fused = outcomes["mlir-fuse"]
    assert fused.nests_before == 2 and fused.nests_after == 1 and fused.fused
    assert fused.correct and fused.interpreted is True
    assert fused.native is (True if mlir_runner() else None)


@needs_mlir_opt
def test_illegal_mlir_tiling_is_caught_by_the_harness() -> None:
    """MLIR 22's -affine-loop-tile tiles this band although its (1, -inf)
    dependence forbids it, and says nothing; the harness reports the wrong
    answer, and agrees with an independent check of the tiled program."""
    module = polyir.parse(TILE_ILLEGAL)
    args = random_arguments(module, 1)
    outcome = next(o for o in compare(module, args) if o.pipeline == "mlir-tile")
    tiled = import_mlir(transform(export_mlir(module), ["-affine-loop-tile=tile-size=4"]).text)
    expected, got = _interpreted(module, args), _interpreted(tiled, args)
    independent = bool(np.allclose(expected[0], got[0], rtol=1e-5))
    assert outcome.correct == independent
    if not independent:
        assert outcome.problem.startswith("A[") and outcome.native in (False, None)


@needs_mlir_opt
def test_a_polyir_pipeline_is_one_entry() -> None:
    module = polyir.parse(CHAIN)
    pipelines = {**POLYIR_PIPELINES, "polyir-simplify": "simplify-bounds"}
    outcomes = compare(module, random_arguments(module, 2), mlir_pipelines={}, polyir_pipelines=pipelines)
    assert [o.pipeline for o in outcomes] == list(pipelines)
    assert all(o.correct for o in outcomes), [o.problem for o in outcomes]
    broken = compare(module, random_arguments(module, 2), mlir_pipelines={},
                     polyir_pipelines={"no-such": "no-such-pass"})
    assert broken[0].nests_after is None and "no-such-pass" in broken[0].problem


def test_specialize_fixes_sizes_without_changing_the_signature() -> None:
    module = polyir.parse("func f(A: f32[N, M], n: index) {\n  for i = 0 to N {\n    for j = 0 to n {\n"
                          "      S0: A[i, j % M] = cast<f32>(N) + cast<f32>(n)\n    }\n  }\n}")
    args = random_arguments(module, 0, sizes={"N": 3, "M": 2, "n": 4})
    assert sizes_of(module.entry, args) == {"N": 3, "M": 2, "n": 4}
    fixed = specialize(module, sizes_of(module.entry, args))
    assert [str(d) for d in fixed.entry.params[0].shape] == ["3", "2"]
    expected = _interpreted(module, args)
    _assert_close(module, expected, _interpreted(fixed, args))


def test_polyir_opt_reads_mlir_and_writes_both_formats(tmp_path, capsys) -> None:
    source = tmp_path / "chain.mlir"
    source.write_text(export_mlir(polyir.parse(CHAIN)))
    assert main([str(source), "--pipeline", "simplify-bounds"]) == 0
    printed = capsys.readouterr().out
    assert polyir.parse(printed).entry.name == "f"
    out = tmp_path / "out.mlir"
    assert main([str(source), "-o", str(out)]) == 0
    assert out.read_text().startswith("module {")
    assert main([str(source), "--emit", "mlir"]) == 0
    assert "affine.for" in capsys.readouterr().out
    text_ir = tmp_path / "chain.pir"
    text_ir.write_text(CHAIN)
    assert main([str(text_ir), "--emit", "mlir"]) == 0
    assert import_mlir(capsys.readouterr().out).entry.name == "f"


def test_polyir_opt_reports_unsupported_mlir_with_position(tmp_path, capsys) -> None:
    bad = tmp_path / "bad.mlir"
    bad.write_text("func.func @f(%a: i32) {\n  %0 = arith.shli %a, %a : i32\n  return\n}\n")
    out = tmp_path / "never.mlir"
    assert main([str(bad), "-o", str(out)]) == 1
    error = capsys.readouterr().err
    assert error.startswith(f"polyir-opt: error: {bad}:2:3: unsupported MLIR operation 'arith.shli'")
    assert not out.exists()
