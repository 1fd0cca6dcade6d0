"""Deep differential fuzzing, outside CI (issue 16's "measure and report" run).

Draws random programs for as long as ``--minutes`` allows and checks, per
program:

* ``native``: ``programs()`` through the native CPU backend (default pipeline;
  for half of them on a two-thread target that dispatches every parallel loop
  the pipeline marks) against the reference interpreter;
* ``passes``: one pass of :data:`PASSES` (in turn) with
  ``assert_preserves_or_refuses``;
* ``gpu``: ``mark-parallel,gpu-map`` run in the interpreter with shuffled
  parallel order against the original;
* ``edges``: ``polyir.testing.edges`` programs, interpreter against native,
  bit for bit;
* ``reductions``: ``edge_reductions`` marked parallel under
  ``accept_reassociation``, native on two threads against the serial
  interpreter.

Every failure is appended to ``--failures`` (program text and error); the
counts are printed as one JSON line at the end. Usage::

    PYTHONPATH=. nice -n 19 python scripts/fuzz.py --minutes 30 --failures /tmp/fuzz.txt
"""
from __future__ import annotations

import argparse
import json
import time
import traceback
from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

import polyir
from polyir.cpu.jit import build_cpu
from polyir.driver import compile_ir
from polyir.ir.nodes import Module
from polyir.target import cpu
from polyir.testing import (
    assert_equivalent,
    assert_preserves_or_refuses,
    edge_arrays,
    edge_programs,
    edge_reductions,
    edge_sizes,
    programs,
    random_arguments,
)

PASSES = ("fuse", "online-reductions", "shrink-buffers", "distribute", "auto-tile", "mark-parallel",
          "reschedule", "simplify-bounds", "remove-dead-statements", "canonicalize-names",
          "split-guards", "single-pass-moments", "simplify-subscripts", "forward-inits", "split-tiles", "copies", "pack", "interchange",
          "unroll-jam", "tile", "gpu-tensorcore")
KINDS = ("native", "passes", "gpu", "edges", "reductions")
TEAM = replace(cpu(2), parallel_dispatch_ns=0.0, team_late_ns=2**62)
"""Two threads for every parallel loop, however little work it has."""
CHUNK = 25
"""Programs per Hypothesis run; the time budget is checked between runs."""


def _native(module: Module, seed: int) -> None:
    # odd seeds: two threads for every parallel loop the default pipeline marks
    executable = compile_ir(module, TEAM if seed % 2 else "cpu", cache_dir=None)
    expected = random_arguments(module, seed)
    got = [a.copy() if isinstance(a, np.ndarray) else a for a in expected]
    polyir.interpret(module, *expected)
    executable(*got)
    for k, (e, g) in enumerate(zip(expected, got, strict=True)):
        if isinstance(e, np.ndarray):
            np.testing.assert_allclose(g, e, rtol=1e-4, atol=1e-5, err_msg=f"argument {k}")


def _passes(module: Module, index: int) -> None:
    name = PASSES[index % len(PASSES)]
    assert_preserves_or_refuses(lambda m: polyir.transform(m, name), module)


def _gpu(module: Module) -> None:
    mapped = polyir.transform(module, "mark-parallel,gpu-map")
    assert_equivalent(module, mapped, parallel_order="shuffle")


def _edges(text: str, n: int, X: np.ndarray, Z: np.ndarray) -> None:
    module = polyir.parse(text)
    native = build_cpu(module, cpu(1), cache_dir=None)
    outcomes = []
    for run in (lambda *a: polyir.interpret(module, *a), native):
        Y = np.zeros_like(X)
        try:
            with np.errstate(all="ignore"):
                run(Y, X.copy(), Z.copy())
        except IndexError:
            outcomes.append(("refused", b""))
            continue
        if Y.dtype.kind == "f":
            Y = np.where(np.isnan(Y), np.nan, Y).astype(Y.dtype)
        outcomes.append(("ran", Y.tobytes()))
    assert outcomes[0] == outcomes[1], f"N = {n}: interpreter {outcomes[0][0]}, native {outcomes[1][0]}"


def _reductions(text: str, A: np.ndarray, start: np.ndarray) -> None:
    serial = polyir.parse(text)
    marked = polyir.transform(serial, "mark-parallel{accept_reassociation=true}")
    expected, got = start.copy(), start.copy()
    with np.errstate(all="ignore"):
        polyir.interpret(serial, expected, A.copy())
        build_cpu(marked, TEAM, cache_dir=None)(got, A.copy())
    if A.dtype.kind == "f":   # the sign of a zero max/min and NaN payloads are unspecified
        expected, got = (np.where(np.isnan(v), np.nan, np.where(v == 0, 0, v)) for v in (expected, got))
    assert expected.tobytes() == got.tobytes(), f"serial {expected}, parallel {got}"


def main() -> None:
    """Run the fuzzing loop (see the module docstring)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=30.0)
    parser.add_argument("--failures", type=Path, default=Path("fuzz-failures.txt"))
    parser.add_argument("--progress", type=Path, default=None,
                        help="rewritten with the counts after every chunk of programs")
    parser.add_argument("--current", type=Path, default=None,
                        help="rewritten with each program before it runs (to name a hang)")
    options = parser.parse_args()
    deadline = time.monotonic() + 60 * options.minutes
    counts: Counter[str] = Counter()
    failures: Counter[str] = Counter()

    def record(kind: str, what: str) -> None:
        failures[kind] += 1
        with options.failures.open("a") as out:
            out.write(f"==== {kind}\n{what}\n{traceback.format_exc()}\n")

    @settings(max_examples=CHUNK, deadline=None, database=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @given(data=st.data())
    def one(data: Any) -> None:
        kind = data.draw(st.sampled_from(KINDS))
        index = data.draw(st.integers(0, 2**20))
        counts[kind] += 1
        if kind == "edges":
            dtype = ("f32", "f64", "i64")[index % 3]
            text = data.draw(edge_programs(dtype))
            n = data.draw(edge_sizes())
            X, Z = data.draw(edge_arrays(dtype, n)), data.draw(edge_arrays(dtype, n))
            try:
                _edges(text, n, X, Z)
            except Exception:
                record(kind, f"{text}N = {n}\nX = {X!r}\nZ = {Z!r}")
            return
        if kind == "reductions":
            dtype = ("f32", "f64", "i64")[index % 3]
            text = data.draw(edge_reductions(dtype))
            n = data.draw(st.sampled_from((0, 1, 7, 5000, 40_001)))
            A = np.resize(data.draw(edge_arrays(dtype, 61)), n)
            start = data.draw(edge_arrays(dtype, 1))
            try:
                _reductions(text, A, start)
            except Exception:
                record(kind, f"{text}N = {n}\nA[:61] = {A[:61]!r}\nY = {start!r}")
            return
        module = data.draw(programs(mark_parallel=kind == "gpu"))
        if options.current is not None:
            options.current.write_text(f"{kind} {index}\n{module}")
        try:
            if kind == "native":
                _native(module, index)
            elif kind == "passes":
                _passes(module, index)
            else:
                _gpu(module)
        except Exception:
            record(kind, str(module) + (f"pass: {PASSES[index % len(PASSES)]}" if kind == "passes" else ""))

    def report() -> str:
        return json.dumps({"programs": dict(counts), "failures": dict(failures),
                           "total": counts.total(), "failed": failures.total()})

    while time.monotonic() < deadline:
        one()        # records failures itself, so Hypothesis never stops to shrink
        if options.progress is not None:
            options.progress.write_text(report() + "\n")
    print(report())


if __name__ == "__main__":
    main()
