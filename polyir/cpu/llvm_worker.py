"""LLVM optimisation and code generation in a child process.

The LLVM that llvmlite ships is built with assertions, and some of them fire
on valid IR (on AMD Zen hosts the loop vectoriser's "VPlan cost model and
legacy cost model disagreed" aborts on some attention kernels): an abort in
the compiling process would kill the user's Python. So the CPU backend hands
each object's LLVM IR to a worker process (this file run as a script: it
imports only llvmlite) that optimises it and emits the object code. When the
worker dies, :class:`LLVMWorker` says so with :class:`LLVMCrash` (LLVM's last
message included) and starts a new one; the backend then splits a whole function into one kernel
per nest, compiles the object that aborted again preferring 256-bit vectors
(where the host preferred 512), then without the loop vectoriser, and only
if that dies too is it a ``CompileError``. Without a usable worker (no interpreter to start) the
backend compiles in process as before.

Protocol (little-endian, over the worker's stdin/stdout): a request is
``<IIII`` (speed level, vectorise flag, machine-spec length, IR length), the
machine spec (``triple\\0cpu\\0features``) and the IR; a reply is ``<IQQ``
(status: 0 object, 1 LLVM error; payload lengths) then the object code (or
the error text) and the external functions the optimised module declares,
newline-separated. What the worker writes on its stderr (LLVM's warnings) is
logged on ``polyir.llvm`` after each reply, never shown on this process's
stderr.
"""
from __future__ import annotations

import os
import struct
import subprocess
import sys
import tempfile
import threading
from typing import IO, Any

REQUEST = struct.Struct("<IIII")
REPLY = struct.Struct("<IQQ")
OBJECTS_PER_WORKER = 1000
"""A worker is replaced after this many objects: llvmlite keeps about 75 KiB
per optimisation that it never returns (see ``polyir.cpu.machine.optimise``), so
a long-lived worker would grow without bound (1,000 objects: about 75 MiB)."""


class LLVMCrash(RuntimeError):
    """The worker died while compiling (an LLVM assertion or a fatal error)."""


def _read_exactly(stream: IO[bytes], size: int) -> bytes:
    chunks = []
    while size:
        chunk = stream.read(size)
        if not chunk:
            raise EOFError("the other side closed the pipe")
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)


class LLVMWorker:
    """One worker process, started on first use and again after it dies; calls
    from several threads take turns. ``command`` starts it (default: this file
    run by the current interpreter)."""

    def __init__(self, command: list[str] | None = None) -> None:
        self.command = command or [sys.executable, "-u", os.path.abspath(__file__)]
        self._process: subprocess.Popen[bytes] | None = None
        self._stderr: Any = None
        self._lock = threading.Lock()
        self.served = 0            # objects compiled by the current worker
        self._logged = 0           # bytes of the worker's stderr already logged

    def _start(self) -> subprocess.Popen[bytes]:
        self._stderr = tempfile.TemporaryFile()
        self._logged = 0
        self._process = subprocess.Popen(self.command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         stderr=self._stderr)
        return self._process

    def compile(self, llvm_ir: str, machine: tuple[str, str, str], speed_level: int,
                vectorize: bool) -> tuple[bytes, list[str]]:
        """``(object code, declared external functions)`` for ``llvm_ir`` optimised at
        ``speed_level`` for ``machine`` (``triple, cpu, features``). Raises
        :class:`LLVMCrash` when the worker dies, ``RuntimeError`` for an LLVM error
        it reports, ``OSError`` when no worker can be started."""
        spec = "\0".join(machine).encode()
        text = llvm_ir.encode()
        if self.served >= OBJECTS_PER_WORKER:
            self.close()                  # a fresh worker returns what llvmlite kept
        with self._lock:
            if self._process is None or self._process.poll() is not None:
                self.served = 0
            process = self._process if self._process and self._process.poll() is None else self._start()
            self.served += 1
            assert process.stdin is not None and process.stdout is not None
            try:
                process.stdin.write(REQUEST.pack(speed_level, int(vectorize), len(spec), len(text)))
                process.stdin.write(spec)
                process.stdin.write(text)
                process.stdin.flush()
                status, first, second = REPLY.unpack(_read_exactly(process.stdout, REPLY.size))
                payload = _read_exactly(process.stdout, first)
                names = _read_exactly(process.stdout, second).decode()
            except (BrokenPipeError, EOFError):
                process.wait()
                process.stdin.close()
                process.stdout.close()
                raise LLVMCrash(self._last_words(process.returncode)) from None
            self._log_diagnostics()
        if status:
            raise RuntimeError(payload.decode(errors="replace"))
        return payload, [n for n in names.split("\n") if n]

    def _log_diagnostics(self) -> None:
        """Log what the worker wrote on its stderr since the last reply (LLVM's
        warnings) on ``polyir.llvm`` (``polyir.llvm.diagnostics``)."""
        if self._stderr is None:
            return
        self._stderr.seek(self._logged)
        text = self._stderr.read(1 << 20)
        self._logged += len(text)
        if text:
            from polyir.llvm.diagnostics import log_lines  # not at the top: the worker imports this file
            log_lines(text.decode(errors="replace"), "LLVM worker")

    def _last_words(self, returncode: int | None) -> str:
        """What the dead worker printed last (LLVM's assertion), and how it ended."""
        text = ""
        if self._stderr is not None:
            self._stderr.seek(0)
            text = self._stderr.read()[-2000:].decode(errors="replace").strip()
            self._stderr.close()
            self._stderr = None
        self._process = None
        how = f"signal {-returncode}" if returncode is not None and returncode < 0 else f"status {returncode}"
        lines = [line for line in text.splitlines() if line.strip()]
        return f"the LLVM worker died ({how}): {lines[-1] if lines else 'no message'}"

    def close(self) -> None:
        """Stop the worker (it also stops by itself when this process exits)."""
        with self._lock:
            process, self._process = self._process, None
            if process is not None:
                for stream in (process.stdin, process.stdout):
                    if stream is not None:
                        stream.close()        # the worker reads EOF and returns
                try:
                    process.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()
            if self._stderr is not None:
                self._stderr.close()
                self._stderr = None


def _serve() -> None:  # the worker's side: only llvmlite and the standard library
    import llvmlite.binding as llvm

    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    machines: dict[bytes, Any] = {}
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    while True:
        try:
            speed, vectorize, spec_len, ir_len = REQUEST.unpack(_read_exactly(stdin, REQUEST.size))
        except EOFError:
            return
        spec = _read_exactly(stdin, spec_len)
        text = _read_exactly(stdin, ir_len).decode()
        try:
            machine = machines.get(spec)
            if machine is None:
                triple, cpu, features = spec.decode().split("\0")
                machine = llvm.Target.from_triple(triple).create_target_machine(
                    cpu=cpu, features=features, opt=3, reloc="static", codemodel="large")
                machines[spec] = machine
            ref = llvm.parse_assembly(text)
            tuning = llvm.create_pipeline_tuning_options(speed_level=speed)
            tuning.loop_vectorization = bool(vectorize)
            tuning.slp_vectorization = True
            tuning.loop_unrolling = True
            builder = llvm.create_pass_builder(machine, tuning)
            builder.getModulePassManager().run(ref, builder)
            names = "\n".join(f.name for f in ref.functions
                              if f.is_declaration and not f.name.startswith("llvm.")).encode()
            code = machine.emit_object(ref)
            stdout.write(REPLY.pack(0, len(code), len(names)) + code + names)
        except RuntimeError as error:
            message = str(error).encode()
            stdout.write(REPLY.pack(1, len(message), 0) + message)
        stdout.flush()


if __name__ == "__main__":
    _serve()
