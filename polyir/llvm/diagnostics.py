"""LLVM's diagnostics on the ``polyir`` logger instead of the process's stderr.

LLVM writes its warnings (an unknown subtarget feature, a target option it
ignores, a remark) straight to file descriptor 2, around Python's
``sys.stderr`` and any logging set-up, so a user of polyir saw lines such as
``'+foo' is not a recognized feature for this target (ignoring feature)``
that nothing could filter. :func:`llvm_diagnostics` runs the LLVM calls made
in this process with descriptor 2 pointed at a temporary file and logs what
LLVM wrote there, one warning per line, on ``polyir.llvm``;
:func:`log_lines` does the same for text the LLVM worker processes
(``polyir.cpu.llvm_worker``) wrote on their stderr.

Descriptor 2 belongs to the whole process: while an LLVM call runs, whatever
another thread writes to it is logged too (as a line of LLVM's diagnostics),
not lost. The redirections are serialised by one lock and nest.
"""
from __future__ import annotations

import contextlib
import logging
import os
import sys
import tempfile
import threading
from collections.abc import Iterator

LOGGER = logging.getLogger("polyir.llvm")
_LOCK = threading.RLock()
_DEPTH = [0]

__all__ = ["llvm_diagnostics", "log_lines"]


def log_lines(text: str, where: str) -> None:
    """Log each non-blank line of ``text`` (LLVM's output while working on
    ``where``) as a warning on ``polyir.llvm``."""
    for line in text.splitlines():
        if line.strip():
            LOGGER.warning("LLVM (%s): %s", where, line.rstrip())


@contextlib.contextmanager
def llvm_diagnostics(where: str) -> Iterator[None]:
    """Run the body with file descriptor 2 captured; what was written there is
    logged by :func:`log_lines` afterwards (also when the body raises). A
    process whose descriptor 2 cannot be duplicated runs the body as is."""
    with _LOCK:
        if _DEPTH[0]:
            _DEPTH[0] += 1
            try:
                yield
            finally:
                _DEPTH[0] -= 1
            return
        try:
            sys.stderr.flush()           # Python's own buffered text goes out first
        except (AttributeError, OSError, ValueError):
            pass
        try:
            saved = os.dup(2)
        except OSError:
            yield
            return
        with tempfile.TemporaryFile() as capture:
            os.dup2(capture.fileno(), 2)
            _DEPTH[0] = 1
            try:
                yield
            finally:
                _DEPTH[0] = 0
                os.dup2(saved, 2)
                os.close(saved)
                capture.seek(0)
                log_lines(capture.read(1 << 20).decode(errors="replace"), where)
