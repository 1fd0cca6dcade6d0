"""The corpus kernels: polyir against clang -O3 with and without Polly, on the same source.

``python -m bench --sections polly [--quick]`` (or ``python -m bench.polly``). For every
kernel of ``polyir.testing.corpus.CORPUS`` at ``bench.kernels``' benchmark sizes, f32:

1. the kernel's polyir IR, as the frontend makes it (no pass run), is written as C by
   ``bench.c_source`` (``restrict`` pointers to variable-length rows);
2. the C is compiled with ``clang-22 -O3 -march=native -fwrapv`` in each variant of
   :data:`VARIANTS` (plain, ``-mllvm -polly``, Polly with its strip-mining vectoriser, and
   on more than one thread Polly's OpenMP code generation);
3. polyir (``polyir.kernel``, its default pipeline; no ``fast_math``, like the C, which
   has no ``-ffast-math``) runs the same arguments; every C variant's results are checked
   against polyir's;
4. all are timed interleaved, inputs restored (untimed) before each call.

``ratio_vs_polly_best`` is polyir's time over the fastest Polly variant's; below 1 polyir
is faster. Kernels that a variant cannot build or that disagree carry a note and no ratio.
Without ``clang-22`` (``apt-get install clang-22 libpolly-22-dev``) the section has one row
saying so.
"""
from __future__ import annotations

import ctypes
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from bench import config
from bench.c_source import CSourceError, c_arguments, c_function
from bench.caches import warm_up_polyir
from bench.config import cpu_target
from bench.kernels import DTYPE, MEDIUM, _copy, _mismatch, sizes_for
from bench.timing import interleaved_medians, ratio

CLANG = "clang-22"
BASE_FLAGS = ("-O3", "-march=native", "-fwrapv", "-shared", "-fPIC")
VARIANTS: dict[str, tuple[str, ...]] = {
    "clang": (),
    "polly": ("-mllvm", "-polly"),
    "polly_stripmine": ("-mllvm", "-polly", "-mllvm", "-polly-vectorizer=stripmine"),
}
"""clang variants: name -> flags added to :data:`BASE_FLAGS`."""
PARALLEL_VARIANT = ("-mllvm", "-polly", "-mllvm", "-polly-vectorizer=stripmine",
                    "-mllvm", "-polly-parallel", "-mllvm", "-polly-omp-backend=GNU",
                    "-l:libgomp.so.1")
"""Polly's best on more than one thread (``polly_parallel``; OMP_NUM_THREADS set by
--threads). Polly's GNU backend calls libgomp, linked by soname, so the library
resolves to the one libgomp the process already has (torch's, which polyir
uses too): one team of threads for both contenders (``-fopenmp`` would want
LLVM's ``libomp``, which this machine does not have)."""
POLLY = ("polly", "polly_stripmine", "polly_parallel")
QUICK_KERNELS = ("gemm", "2mm", "jacobi-2d", "covariance", "cholesky", "saxpy")
"""``--quick`` measures these only (a product, a chain, a stencil, a reduction, a
triangular solve and a stream)."""

NOTE = ("corpus kernels written as C from their polyir IR; clang-22 -O3 -march=native, with and "
        "without Polly; ratio = polyir / fastest Polly variant")


def variants(threads: int | None) -> dict[str, tuple[str, ...]]:
    """The clang variants measured on ``threads`` (``None``: every core)."""
    chosen = dict(VARIANTS)
    if threads is None or threads > 1:
        chosen["polly_parallel"] = PARALLEL_VARIANT
    return chosen


def compile_c(source: str, name: str, flags: tuple[str, ...], workdir: Path) -> ctypes.CDLL:
    """``source`` compiled by clang with ``flags`` into a shared object, loaded."""
    stem = workdir / f"{name}_{abs(hash(flags)) % 10**8}"
    c_file = stem.with_suffix(".c")
    c_file.write_text(source)
    libraries = [f for f in flags if f.startswith("-l")]   # after the source (--as-needed)
    options = [f for f in flags if not f.startswith("-l")]
    command = [CLANG, *BASE_FLAGS, *options, "-o", str(stem.with_suffix(".so")), str(c_file),
               *libraries, "-lm"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        raise RuntimeError(f"clang failed: {done.stderr.strip()[-300:]}")
    return ctypes.CDLL(str(stem.with_suffix(".so")))


def c_caller(library: ctypes.CDLL, symbol: str, func: Any, args: list[Any]) -> Any:
    """A no-argument callable that runs ``symbol`` of ``library`` on ``args``' storage."""
    arrays, symbols = c_arguments(func, args)
    fn = getattr(library, symbol)
    fn.restype = None
    fn.argtypes = [ctypes.c_void_p] * len(arrays) + [ctypes.c_int64] * len(symbols)
    pointers = [a.ctypes.data for a in arrays]
    call_args = [*pointers, *symbols]

    def call(keep: list[np.ndarray] = arrays) -> None:  # ``keep``: the arrays stay alive
        fn(*call_args)
    return call


def bench_kernel(name: str, sizes: dict[str, int], repeats: int, workdir: Path) -> dict[str, Any]:
    """One row: polyir and each clang variant on corpus kernel ``name`` at ``sizes``."""
    import polyir
    from polyir.testing.corpus import corpus_kernel

    kernel = corpus_kernel(name)
    row: dict[str, Any] = {"name": name, "shape": ",".join(f"{k}={v}" for k, v in sizes.items())}
    notes: list[str] = []
    pristine = kernel.make_args(sizes, np.random.default_rng(0), dtype=DTYPE)
    row["dtype"] = ",".join(dict.fromkeys(a.dtype.name for a in pristine if isinstance(a, np.ndarray)))
    compiled = polyir.kernel(kernel.func, target=cpu_target())
    func = compiled.ir(*pristine).entry
    work: dict[str, list[Any]] = {"polyir": _copy(pristine)}
    contenders: dict[str, Any] = {"polyir": lambda: compiled(*work["polyir"])}
    compiled(*work["polyir"])
    try:
        source = c_function(func, "kernel")
    except CSourceError as error:
        row["note"] = f"no C translation: {error}"
        return row
    for variant, flags in variants(config.THREADS).items():
        try:
            library = compile_c(source, name.replace("-", "_"), flags, workdir)
        except (RuntimeError, subprocess.TimeoutExpired) as error:
            notes.append(f"{variant}: {str(error)[:120]}")
            continue
        work[variant] = _copy(pristine)
        call = c_caller(library, "kernel", func, work[variant])
        call()
        problem = _mismatch(name, work[variant], work["polyir"])
        if problem:
            notes.append(f"{variant} differs from polyir: {problem}")
            continue
        contenders[variant] = call

    def restore(who: str) -> None:
        for target, source_array in zip(work[who], pristine, strict=True):
            if isinstance(source_array, np.ndarray):
                np.copyto(target, source_array)

    samples = interleaved_medians(contenders, repeats, setup=restore)
    for who, sample in samples.items():
        row[f"{who}_s"] = sample.median
        row[f"{who}_spread"] = round(sample.spread, 3)
    polly = [row[f"{v}_s"] for v in POLLY if f"{v}_s" in row]
    if polly:
        best = min(polly)
        row["polly_best"] = next(v for v in POLLY if row.get(f"{v}_s") == best)
        row["ratio_vs_polly_best"] = ratio(row["polyir_s"], best)
    row["ratio_vs_clang"] = ratio(row["polyir_s"], row.get("clang_s"))
    if notes:
        row["note"] = "; ".join(notes)
    return row


def run(quick: bool) -> list[dict[str, Any]]:
    """Every corpus kernel with a benchmark size (see the module docstring)."""
    from polyir.testing.corpus import CORPUS

    if shutil.which(CLANG) is None:
        return [{"name": "all", "note": f"{CLANG} not found: apt-get install clang-22 libpolly-22-dev"}]
    warm_up_polyir()
    repeats = 3 if quick else 11
    rows = []
    with tempfile.TemporaryDirectory(prefix="polyir-polly-") as tmp:
        for entry in CORPUS:
            if entry.name not in MEDIUM or (quick and entry.name not in QUICK_KERNELS):
                continue
            row = bench_kernel(entry.name, sizes_for(entry.name, quick), repeats, Path(tmp))
            print(f"  {entry.name}: polyir {row.get('polyir_s')}, clang {row.get('clang_s')}, "
                  f"best Polly {row.get('polly_best')} ratio {row.get('ratio_vs_polly_best')}"
                  f"{', ' + row['note'] if row.get('note') else ''}", flush=True)
            rows.append(row)
    return rows




def main() -> None:
    import argparse
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    from bench.config import configure_threads
    configure_threads(args.threads)
    from bench.report import TABLES, print_table
    print_table(*TABLES["polly"][:1], run(args.quick), TABLES["polly"][1])


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    main()
