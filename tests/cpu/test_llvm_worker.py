"""The LLVM worker: an LLVM abort is an error and a retry, never the end of the process."""
from __future__ import annotations

import dataclasses
import logging
import sys

import numpy as np
import pytest

import polyir
from polyir.cpu import jit
from polyir.cpu.llvm_worker import LLVMCrash, LLVMWorker
from polyir.target import cpu

TEXT = """func double(y: f32[N], x: f32[N]) {
  for i = 0 to N {
    S0: y[i] = x[i] * 2.0
  }
}"""


def test_a_worker_that_dies_is_a_crash_with_its_last_words() -> None:
    dying = LLVMWorker([sys.executable, "-c", "import os, sys; sys.stderr.write('Assertion failed\\n'); "
                                              "sys.stderr.flush(); os.abort()"])
    with pytest.raises(LLVMCrash, match=r"signal 6\): Assertion failed"):
        dying.compile("", ("x86_64-unknown-linux-gnu", "generic", ""), 3, True)


def test_the_worker_restarts_after_it_is_killed(tmp_path) -> None:
    worker = LLVMWorker()
    module = polyir.parse(TEXT)
    jit.build_cpu(module, cpu(1), cache_dir=None)          # initialises the host facts
    ir_text = jit.lower_to_llvm(module, cpu(1), False)
    machine = (jit._STATE["triple"], jit._STATE["cpu"], jit._STATE["features"])
    code, _ = worker.compile(ir_text, machine, 3, True)
    assert code
    assert worker._process is not None
    worker._process.kill()
    worker._process.wait()
    again, _ = worker.compile(ir_text, machine, 3, True)    # a new worker, the same object
    assert again == code
    with pytest.raises(RuntimeError, match="expected"):      # an LLVM error is reported, not a crash
        worker.compile("this is not LLVM IR", machine, 3, True)
    worker.close()


def test_a_worker_is_replaced_after_its_quota_of_objects(monkeypatch) -> None:
    # llvmlite keeps memory per optimisation: a fresh worker every OBJECTS_PER_WORKER
    import polyir.cpu.llvm_worker as llvm_worker

    monkeypatch.setattr(llvm_worker, "OBJECTS_PER_WORKER", 2)
    worker = LLVMWorker()
    module = polyir.parse(TEXT)
    jit.build_cpu(module, cpu(1), cache_dir=None)
    ir_text = jit.lower_to_llvm(module, cpu(1), False)
    machine = (jit._STATE["triple"], jit._STATE["cpu"], jit._STATE["features"])
    pids = []
    codes = []
    for _ in range(3):
        codes.append(worker.compile(ir_text, machine, 3, True)[0])
        assert worker._process is not None
        pids.append(worker._process.pid)
    worker.close()
    assert pids[0] == pids[1] != pids[2]
    assert codes[0] == codes[1] == codes[2]


def test_an_abort_in_the_vectoriser_recompiles_without_it(monkeypatch, caplog) -> None:
    real = jit._WORKERS[0]
    asked: list[bool] = []

    class AbortsWhenVectorising:
        def compile(self, llvm_ir, machine, speed_level, vectorize):  # noqa: ANN001, ANN201
            asked.append(vectorize)
            if vectorize:
                raise LLVMCrash("the LLVM worker died (signal 6): VPlan cost model and legacy cost model disagreed")
            return real.compile(llvm_ir, machine, speed_level, vectorize)

    monkeypatch.setattr(jit, "_WORKERS", [AbortsWhenVectorising()])
    with caplog.at_level(logging.WARNING, logger="polyir"):
        executable = jit.build_cpu(polyir.parse(TEXT), cpu(1), cache_dir=None)
    x = np.arange(7, dtype=np.float32)
    y = np.zeros_like(x)
    executable(y, x)
    np.testing.assert_array_equal(y, 2 * x)
    # the whole function first, then its nest as a kernel and the entry, each
    # vectorised (and at 256 bits where the host preferred 512) before without
    assert asked[0] is True and asked.count(False) == 2, asked
    assert "compiling its nests as separate kernels" in caplog.text
    assert "without the loop vectoriser" in caplog.text


def test_an_abort_at_512_bits_is_retried_at_256(monkeypatch, caplog) -> None:
    real = jit._WORKERS[0]
    asked: list[tuple[bool, bool]] = []

    class AbortsAt512:
        def compile(self, llvm_ir, machine, speed_level, vectorize):  # noqa: ANN001, ANN201
            wide = "-prefer-256-bit" in machine[2]
            asked.append((vectorize, wide))
            if vectorize and wide:
                raise LLVMCrash("the LLVM worker died (signal 6): VPlan cost model and legacy cost model disagreed")
            return real.compile(llvm_ir, machine, speed_level, vectorize)

    monkeypatch.setattr(jit, "_WORKERS", [AbortsAt512()])
    target = dataclasses.replace(cpu(1), vector_bits=512)
    if not jit.vector_width_features(512):
        pytest.skip("the 256-bit retry is for x86 hosts")   # vector_width_features is empty elsewhere
    with caplog.at_level(logging.WARNING, logger="polyir"):
        executable = jit.build_cpu(polyir.parse(TEXT), target, cache_dir=None)
    x = np.arange(9, dtype=np.float32)
    y = np.zeros_like(x)
    executable(y, x)
    np.testing.assert_array_equal(y, 2 * x)
    assert (False, True) not in asked and (False, False) not in asked    # never without the vectoriser
    assert (True, False) in asked
    assert "preferring 256-bit vectors" in caplog.text


def test_two_aborts_are_a_compile_error(monkeypatch) -> None:
    class AlwaysAborts:
        def compile(self, *args, **kwargs):  # noqa: ANN002, ANN003, ANN201
            raise LLVMCrash("the LLVM worker died (signal 6): no message")

    monkeypatch.setattr(jit, "_WORKERS", [AlwaysAborts()])
    with pytest.raises(polyir.CompileError, match="again without the loop vectoriser"):
        jit.build_cpu(polyir.parse(TEXT), cpu(1), cache_dir=None)


def test_the_objects_of_one_build_compile_on_several_workers_at_once(monkeypatch) -> None:
    seen: list[int] = []

    class Recording:
        def __init__(self, k: int):
            self.k = k

        def compile(self, *args, **kwargs):  # noqa: ANN002, ANN003, ANN201
            seen.append(self.k)
            return real.compile(*args, **kwargs)

    real = LLVMWorker()
    monkeypatch.setattr(jit, "_WORKERS", [Recording(0), Recording(1)])
    monkeypatch.setattr(jit, "WHOLE_FUNCTION_NESTS", 0)       # every nest its own object
    executable = jit.build_cpu(polyir.parse(TWO_KERNELS), cpu(1), cache_dir=None)
    x = np.arange(6, dtype=np.float32)
    y, z = np.zeros_like(x), np.zeros_like(x)
    executable(y, z, x)
    np.testing.assert_array_equal(y, 2 * x)
    np.testing.assert_array_equal(z, x + 3)
    assert sorted(set(seen)) == [0, 1]
    real.close()


TWO_KERNELS = """func two(y: f32[N], z: f32[N], x: f32[N]) {
  for i = 0 to N {
    S0: y[i] = x[i] * 2.0
  }
  for i2 = 0 to N {
    S1: z[i2] = x[i2] + 3.0
  }
}"""
