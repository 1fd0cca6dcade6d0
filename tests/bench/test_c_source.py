"""bench/c_source.py: the C written for every corpus kernel means what the plain Python means.

Each corpus kernel's IR is written as C, compiled with the system C compiler (the
Polly comparison uses clang-22; any C99 compiler with GNU statement expressions
will do for meaning) at -O1, run on the corpus' own small sizes and compared with
the plain Python function. The comparison in ``bench/polly.py`` relies on it.
"""
from __future__ import annotations

import ctypes
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

import polyir
from bench.c_source import CSourceError, c_arguments, c_function
from polyir.testing.corpus import CORPUS

COMPILER = shutil.which("clang-22") or shutil.which("cc") or shutil.which("gcc")


def _run_c(source: str, func, args: list, workdir: Path) -> None:
    c_file = workdir / "kernel.c"
    so_file = workdir / "kernel.so"
    c_file.write_text(source)
    done = subprocess.run([COMPILER, "-O1", "-fwrapv", "-shared", "-fPIC", "-o", str(so_file),
                           str(c_file), "-lm"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    library = ctypes.CDLL(str(so_file))
    arrays, symbols = c_arguments(func, args)
    fn = library.kernel
    fn.restype = None
    fn.argtypes = [ctypes.c_void_p] * len(arrays) + [ctypes.c_int64] * len(symbols)
    fn(*[a.ctypes.data for a in arrays], *symbols)


@pytest.mark.skipif(COMPILER is None, reason="no C compiler on this machine")
@pytest.mark.parametrize("entry", CORPUS, ids=lambda e: e.name)
def test_c_of_each_corpus_kernel_matches_python(entry, tmp_path: Path) -> None:
    pristine = entry.make_args(entry.sizes, np.random.default_rng(3), dtype=np.float32)
    func = polyir.kernel(entry.func).ir(*pristine).entry
    expected = [a.copy() if isinstance(a, np.ndarray) else a for a in pristine]
    entry.func(*expected)
    got = [a.copy() if isinstance(a, np.ndarray) else a for a in pristine]
    _run_c(c_function(func, "kernel"), func, got, tmp_path)
    for have, want in zip(got, expected, strict=True):
        if isinstance(want, np.ndarray):
            np.testing.assert_allclose(have, want, rtol=2e-5, atol=2e-5)


def test_gpu_nodes_and_half_precision_are_refused() -> None:
    module = polyir.parse("""func f(A: f16[n]) {
  for i = 0 to n {
    S0: A[i] = A[i] + A[i]
  }
}""")
    with pytest.raises(CSourceError, match="f16"):
        c_function(module.entry)
    mapped = polyir.parse("""func g(A: f32[n]) {
  for i = 0 to n gpu=thread.x {
    S0: A[i] = 0.0
    barrier
  }
}""")
    with pytest.raises(CSourceError, match="Barrier"):
        c_function(mapped.entry)


def test_symbols_come_from_shapes_and_explicit_parameters() -> None:
    module = polyir.parse("""func h(A: f32[n, m], k: index) {
  for i = 0 to n {
    for j = 0 to m {
      S0: A[i, j] = cast<f32>(k)
    }
  }
}""")
    arrays, symbols = c_arguments(module.entry, [np.zeros((3, 4), np.float32), 7])
    assert len(arrays) == 1 and dict(zip(module.entry.symbols, symbols, strict=True)) == \
        {"n": 3, "m": 4, "k": 7}
