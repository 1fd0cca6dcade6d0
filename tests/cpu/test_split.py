"""One LLVM module per loop nest: canonical kernels, reuse of identical nests,
shared and private locals, symbols, parallel loops, and the compile log."""
from __future__ import annotations

import copy
import logging
import re

import numpy as np
import pytest
from hypothesis import given, settings

import polyir
from polyir.cpu.jit import build_cpu
from polyir.cpu.split import _Canonicaliser, split_function
from polyir.ir.affine import Aff, FloorDiv
from polyir.ir.interpreter import interpret
from polyir.target import cpu
from polyir.testing import programs, random_arguments
from tests.conftest import examples

TWO_LAYERS = """
func two(out: f32[N, 8], x: f32[N, 8], w1: f32[8, 8], w2: f32[8, 8]) {
  local h: f32[N, 8] @global
  local s: f32[]
  for i = 0 to N {
    for j = 0 to 8 {
      S0: h[i, j] = 0.0
      for k = 0 to 8 {
        S1: h[i, j] = h[i, j] + x[i, k] * w1[k, j]
      }
    }
  }
  for a = 0 to N {
    for b = 0 to 8 {
      S2: out[a, b] = 0.0
      for c = 0 to 8 {
        S3: out[a, b] = out[a, b] + h[a, c] * w2[c, b]
      }
    }
  }
  for q = 0 to N {
    S5: s[] = s[] + out[q, 0]
  }
  S6: out[0, 0] = out[0, 0] + s[] * 0.0
}"""


@pytest.fixture(autouse=True)
def split_every_function(monkeypatch):
    """Split even the small functions here into kernels (an entry and kernel objects)."""
    from polyir.cpu import jit
    monkeypatch.setattr(jit, "WHOLE_FUNCTION_NESTS", 0)


def _reference(module, args):
    expected = copy.deepcopy(args)
    interpret(module, *expected)
    return expected


def _inputs(n: int = 5):
    rng = np.random.default_rng(0)
    return [np.zeros((n, 8), np.float32), rng.standard_normal((n, 8)).astype(np.float32),
            rng.standard_normal((8, 8)).astype(np.float32),
            rng.standard_normal((8, 8)).astype(np.float32)]


def test_identical_nests_are_one_kernel():
    module = polyir.parse(TWO_LAYERS)
    split = split_function(module.entry)
    assert len(split.kernels) == 3
    assert split.kernels[0].key == split.kernels[1].key, "the two products differ only in names"
    assert split.kernels[0].buffers == ("h", "x", "w1") and split.kernels[1].buffers == ("out", "h", "w2")
    assert [b.name for b in split.shared_locals] == ["h"]
    assert split.kernels[2].function.locals, "s is used by the last kernel only: its own local"
    assert split.kernels[0].symbols == ("N",)
    assert polyir.parse(split.kernels[0].text).entry == split.kernels[0].function


def _rebuilt(canon, aff, scope):  # noqa: ANN001, ANN202
    """The canonical subscript built term by term (the path for ``//`` and ``%``)."""
    result = Aff.const(aff.constant)
    for atom, coeff in aff.terms:
        if isinstance(atom, str):
            result = result + Aff.var(canon.variable(atom, scope)) * coeff
        else:
            inner = _rebuilt(canon, atom.expr, scope)
            result = result + (inner // atom.divisor if isinstance(atom, FloorDiv)
                               else inner % atom.divisor) * coeff
    return result


@settings(max_examples=examples(20))
@given(programs(dtypes=("f32",)))
def test_kernel_texts_rename_subscripts_as_rebuilding_them_would(module):
    """The canonicaliser renames a subscript without ``//`` or ``%`` in place
    (the terms re-sorted, nothing re-derived): the kernels, their texts and
    keys are those of building every subscript term by term."""
    fast = split_function(module.entry)
    original = _Canonicaliser.aff
    try:
        _Canonicaliser.aff = _rebuilt  # type: ignore[method-assign]
        slow = split_function(module.entry)
    finally:
        _Canonicaliser.aff = original  # type: ignore[method-assign]
    assert [k.text for k in fast.kernels] == [k.text for k in slow.kernels]
    assert fast.entry_text() == slow.entry_text()


@pytest.mark.parametrize("cores", [1, 2])
def test_split_build_matches_the_interpreter(cores):
    module = polyir.parse(TWO_LAYERS)
    executable = build_cpu(module, cpu(cores), cache_dir=None)
    assert (executable.kernels, executable.distinct_kernels) == (3, 2)
    args = _inputs()
    expected = _reference(module, args)
    executable(*args)
    np.testing.assert_allclose(args[0], expected[0], rtol=1e-5, atol=1e-5)


def test_kernels_keep_noalias_and_constant_sizes_and_vectorise():
    module = polyir.parse(TWO_LAYERS)
    executable = build_cpu(module, cpu(1), cache_dir=None)
    kernel = next(text for text in executable.llvm_modules if 'define i32 @"polyir.k.' in text)
    assert 'ptr noalias %"b0"' in kernel
    assert re.search(r'icmp slt i64 %"v\d(\.t)?", 8', kernel), "the constant extent stays a constant"
    assert any(op in executable.asm for op in ("mulps", "vfmadd", "vmulps", "fmadd"))


def test_a_kernel_compiled_for_one_function_is_reused_by_another(tmp_path):
    first = build_cpu(polyir.parse(TWO_LAYERS), cpu(1), cache_dir=tmp_path)
    renamed = TWO_LAYERS.replace("two(", "other(").replace("w2", "weights")
    second = build_cpu(polyir.parse(renamed), cpu(1), cache_dir=tmp_path)
    assert not first.cache_hit and not second.cache_hit  # a new entry function
    assert "polyir.k." in second.llvm_ir
    args = _inputs()
    expected = _reference(polyir.parse(renamed), args)
    second(*args)
    np.testing.assert_allclose(args[0], expected[0], rtol=1e-5, atol=1e-5)


@settings(max_examples=examples(20))
@given(programs(dtypes=("f32", "f64")))
def test_random_programs_split_into_kernels_match_the_interpreter(module):
    args = random_arguments(module, 0, None)
    expected = _reference(module, args)
    executable = build_cpu(module, cpu(2), cache_dir=None)
    assert executable.kernels == len(split_function(module.entry).kernels)
    executable(*args)
    for want, got in zip(expected, args, strict=True):
        if isinstance(want, np.ndarray):
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_compile_stages_are_logged(caplog, monkeypatch):
    from polyir import compilelog

    monkeypatch.setattr(compilelog, "PROGRESS_AFTER_SECONDS", 0.0)
    monkeypatch.setattr(compilelog, "PROGRESS_EVERY_SECONDS", 0.0)
    with caplog.at_level(logging.DEBUG, logger="polyir"):
        build_cpu(polyir.parse(TWO_LAYERS), cpu(1), cache_dir=None)
    messages = [r.getMessage() for r in caplog.records if r.name.startswith("polyir")]
    summary = [m for m in messages if "kernel calls" in m]
    assert summary and all(stage in summary[0] for stage in ("optimise", "codegen", "load"))
    assert any("kernel 1/3" in m for m in messages), messages
    debug = [r.getMessage() for r in caplog.records if r.levelno == logging.DEBUG]
    assert any("optimise" in m and "kernel" in m for m in debug), "per-kernel times at DEBUG"


def test_small_functions_stay_one_llvm_function(monkeypatch):
    """A few nests, none the same as another: one LLVM function."""
    from polyir.cpu import jit

    monkeypatch.setattr(jit, "WHOLE_FUNCTION_NESTS", 8)
    distinct = TWO_LAYERS.replace("h[a, c] * w2[c, b]", "h[a, c] * w2[c, b] * 0.5")
    executable = build_cpu(polyir.parse(distinct), cpu(1), cache_dir=None)
    assert len(executable.objects) == 1 and "polyir.k." not in executable.llvm_ir
    args = _inputs()
    expected = _reference(polyir.parse(distinct), args)
    executable(*args)
    np.testing.assert_allclose(args[0], expected[0], rtol=1e-5, atol=1e-5)


def test_small_functions_with_repeated_kernels_compile_each_once(monkeypatch):
    """A few nests of which two are the same up to names (two layers): split,
    the repeated kernel compiled once and called twice (an 8-layer encoder
    fused into 8 nests compiled 8 copies of one layer as one function: 4.6 s
    of LLVM against 0.5 s)."""
    from polyir.cpu import jit

    monkeypatch.setattr(jit, "WHOLE_FUNCTION_NESTS", 8)
    executable = build_cpu(polyir.parse(TWO_LAYERS), cpu(1), cache_dir=None)
    kernels = re.findall(r"define [^@]*@\"?(polyir\.k\.[\w.]+)", executable.llvm_ir)
    assert len(kernels) == 2, kernels          # the product once, the sum once
    args = _inputs()
    expected = _reference(polyir.parse(TWO_LAYERS), args)
    executable(*args)
    np.testing.assert_allclose(args[0], expected[0], rtol=1e-5, atol=1e-5)


PARALLEL_LAYERS = """
func layers(y: f32[N, 8], x: f32[N, 8], z: f32[N, 8]) {
  for i = 0 to N parallel {
    for j = 0 to 8 {
      S0: z[i, j] = x[i, j] * 2.0 + 1.0
    }
  }
  for a = 0 to N parallel {
    for b = 0 to 8 {
      S1: y[a, b] = z[a, b] * 2.0 + 1.0
    }
  }
}"""


def test_parallel_kernels_share_one_set_of_runtime_globals():
    """Parallel loops in kernels dispatch on the OpenMP team; the counters and
    the size threshold are the entry module's, one set for the executable (the
    threshold is what a fork() raises to keep every loop serial)."""
    from dataclasses import replace

    target = replace(cpu(2), parallel_dispatch_ns=0.0, team_late_ns=2**62)
    module = polyir.parse(PARALLEL_LAYERS)
    executable = build_cpu(module, target, cache_dir=None)
    assert (executable.kernels, executable.distinct_kernels) == (2, 1)
    rng = np.random.default_rng(1)
    args = [np.zeros((37, 8), np.float32), rng.standard_normal((37, 8)).astype(np.float32),
            np.zeros((37, 8), np.float32)]
    expected = _reference(module, args)
    executable(*args)
    np.testing.assert_allclose(args[0], expected[0], rtol=1e-6)
    assert executable.parallel_stats() == {"dispatches": 2, "team": 2, "deferred": 0}
    executable._keep_serial()  # what the fork handler does
    args[0][:] = 0
    executable(*args)
    np.testing.assert_allclose(args[0], expected[0], rtol=1e-6)
    assert executable.parallel_stats()["dispatches"] == 2, "serial after the threshold rose"


def test_fused_parallel_model_split_into_kernels_matches_eager():
    """The default pipeline's fused nests (loop-scoped locals) with mark-parallel
    on the OpenMP runtime, every nest its own kernel: the result is eager's."""
    from dataclasses import replace

    import torch
    from torch import nn

    class RowsThenColumns(nn.Module):
        """Per-row work that fuses into one nest, then a mean over the rows."""

        def __init__(self) -> None:
            super().__init__()
            self.rows = nn.Sequential(nn.Linear(16, 32), nn.LayerNorm(32), nn.GELU())

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            h = self.rows(x)
            return h - h.mean(0, keepdim=True)

    torch.manual_seed(0)
    model = RowsThenColumns().eval()
    x = torch.randn(6, 16)
    target = replace(cpu(2), parallel_dispatch_ns=0.0, team_late_ns=2**62)
    compiled = polyir.compile(model, x, target=target,
                              pipeline="fuse,shrink-buffers,mark-parallel")
    (segment,) = compiled.last_plan.segments
    executable = segment.executable
    assert executable.kernels > 1 and "polyir.k." in executable.llvm_ir
    assert executable.ir.entry.loop_locals, "fusion left loop-scoped locals"
    assert "GOMP_parallel" in executable.llvm_ir
    with torch.no_grad():
        expected = model(x)
    np.testing.assert_allclose(compiled(x).numpy(), expected.numpy(), rtol=2e-4, atol=2e-5)
    assert executable.parallel_stats()["dispatches"] > 0
