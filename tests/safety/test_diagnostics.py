"""LLVM's diagnostics go to the ``polyir.llvm`` logger, not the process's stderr
(in this process and in the LLVM worker processes)."""
from __future__ import annotations

import logging

import llvmlite.binding as llvm
import pytest

from polyir.cpu import jit
from polyir.cpu.llvm_worker import LLVMWorker
from polyir.llvm.diagnostics import llvm_diagnostics

BOGUS = "+polyirnosuchfeature"
IR = 'define i64 @twice(i64 %x) {\n  %y = add i64 %x, %x\n  ret i64 %y\n}\n'


def _host() -> tuple[str, str, str]:
    with jit._LOCK:
        jit._initialise()
        return jit._STATE["triple"], jit._STATE["cpu"], jit._STATE["features"]


def test_llvm_warning_in_process_is_logged_not_printed(caplog: pytest.LogCaptureFixture,
                                                       capfd: pytest.CaptureFixture[str]) -> None:
    triple, cpu, features = _host()
    with caplog.at_level(logging.WARNING, logger="polyir"), llvm_diagnostics("a bogus feature"):
        llvm.Target.from_triple(triple).create_target_machine(cpu=cpu, features=f"{features},{BOGUS}")
    assert BOGUS not in capfd.readouterr().err
    messages = [r.getMessage() for r in caplog.records if r.name == "polyir.llvm"]
    assert any(BOGUS in m and "a bogus feature" in m for m in messages), messages


def test_llvm_warning_in_the_worker_is_logged_not_printed(caplog: pytest.LogCaptureFixture,
                                                          capfd: pytest.CaptureFixture[str]) -> None:
    triple, cpu, features = _host()
    worker = LLVMWorker()
    try:
        with caplog.at_level(logging.WARNING, logger="polyir"):
            code, externals = worker.compile(IR, (triple, cpu, f"{features},{BOGUS}"), 2, vectorize=True)
            assert code and externals == []
            first = [r.getMessage() for r in caplog.records if BOGUS in r.getMessage()]
            caplog.clear()
            worker.compile(IR, (triple, cpu, f"{features},{BOGUS}"), 2, vectorize=True)
            again = [r.getMessage() for r in caplog.records if BOGUS in r.getMessage()]
    finally:
        worker.close()
    assert first and all(r.startswith("LLVM (LLVM worker)") for r in first), first
    assert again == []          # the machine is cached in the worker: nothing new, nothing logged twice
    assert BOGUS not in capfd.readouterr().err


def test_stderr_is_restored_after_an_llvm_error(capfd: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(RuntimeError), llvm_diagnostics("invalid IR"):
        llvm.parse_assembly("define oops")
    import os
    os.write(2, b"after\n")
    assert "after" in capfd.readouterr().err
