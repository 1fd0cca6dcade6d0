"""On-disk cache of compiled CPU object code.

An entry is three files under ``<cache_dir>/cpu/``: ``KEY.o`` (object code from
``TargetMachine.emit_object``), ``KEY.ll`` (the LLVM IR text the executable
shows as ``llvm_ir``) and ``KEY.json`` (metadata: key, versions, the SHA-256 of
the other two files). ``KEY`` hashes the IR text, the target, the host CPU and
the compiler version (``polyir.__version__``, llvmlite and LLVM versions and the
backend's own source). A missing, corrupt or stale entry is a miss (with a
warning when it existed); nothing is ever unpickled or executed from metadata.
"""
from __future__ import annotations

import hashlib
import json
import os
import tempfile
import warnings
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

FORMAT = 1


def default_cache_dir() -> Path:
    """``$POLYIR_CACHE_DIR`` if set, else ``~/.cache/polyir``."""
    configured = os.environ.get("POLYIR_CACHE_DIR")
    if configured:
        return Path(configured)
    return Path.home() / ".cache" / "polyir"


def compiler_fingerprint(sources: Iterable[Path]) -> str:
    """polyir, llvmlite and LLVM versions plus a hash of the backend sources."""
    import llvmlite
    import llvmlite.binding as llvm

    import polyir

    digest = hashlib.sha256()
    for path in sorted(sources):
        digest.update(path.name.encode())
        digest.update(path.read_bytes())
    version = ".".join(map(str, llvm.llvm_version_info))
    return f"polyir {polyir.__version__}; llvmlite {llvmlite.__version__}; llvm {version}; " \
           f"backend {digest.hexdigest()[:16]}"


def cache_key(*parts: str) -> str:
    digest = hashlib.sha256()
    for part in parts:
        digest.update(part.encode())
        digest.update(b"\0")
    return digest.hexdigest()[:40]


@dataclass(frozen=True)
class CacheEntry:
    object_code: bytes
    llvm_ir: str
    metadata: dict


class CompileCache:
    """A directory of compiled entries; ``directory=None`` disables caching."""

    def __init__(self, directory: Path | str | None):
        self.directory = None if directory is None else Path(directory) / "cpu"

    def _paths(self, key: str) -> tuple[Path, Path, Path]:
        assert self.directory is not None
        return (self.directory / f"{key}.o", self.directory / f"{key}.ll",
                self.directory / f"{key}.json")

    def load(self, key: str, fingerprint: str) -> CacheEntry | None:
        """The entry for ``key``, or ``None`` (warning when it is unusable)."""
        if self.directory is None:
            return None
        obj_path, ll_path, meta_path = self._paths(key)
        if not meta_path.exists():
            return None
        try:
            metadata = json.loads(meta_path.read_text())
            if not isinstance(metadata, dict):
                raise ValueError("metadata is not an object")
            object_code = obj_path.read_bytes()
            llvm_ir_bytes = ll_path.read_bytes()
            problems = []
            if metadata.get("format") != FORMAT or metadata.get("key") != key:
                problems.append("format or key mismatch")
            if metadata.get("compiler") != fingerprint:
                problems.append("compiled by another compiler version")
            if metadata.get("object_sha256") != hashlib.sha256(object_code).hexdigest():
                problems.append("object code checksum mismatch")
            if metadata.get("llvm_ir_sha256") != hashlib.sha256(llvm_ir_bytes).hexdigest():
                problems.append("LLVM IR checksum mismatch")
            if problems:
                raise ValueError("; ".join(problems))
            return CacheEntry(object_code, llvm_ir_bytes.decode(), metadata)
        except (OSError, ValueError, UnicodeDecodeError) as error:
            warnings.warn(f"polyir: ignoring unusable compile-cache entry {meta_path} "
                          f"({error}); recompiling", RuntimeWarning, stacklevel=3)
            return None

    def store(self, key: str, fingerprint: str, object_code: bytes, llvm_ir: str,
              extra: dict) -> None:
        """Write an entry atomically (each file via a temporary and ``os.replace``)."""
        if self.directory is None:
            return
        obj_path, ll_path, meta_path = self._paths(key)
        metadata = dict(extra)
        metadata.update(format=FORMAT, key=key, compiler=fingerprint,
                        object_sha256=hashlib.sha256(object_code).hexdigest(),
                        llvm_ir_sha256=hashlib.sha256(llvm_ir.encode()).hexdigest())
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            _write_atomic(obj_path, object_code)
            _write_atomic(ll_path, llvm_ir.encode())
            _write_atomic(meta_path, json.dumps(metadata, indent=1, sort_keys=True).encode())
        except OSError as error:
            warnings.warn(f"polyir: cannot write compile cache {self.directory}: {error}",
                          RuntimeWarning, stacklevel=3)

    def invalidate(self, key: str) -> None:
        """Remove an entry (after it failed to load)."""
        if self.directory is None:
            return
        for path in self._paths(key):
            try:
                path.unlink()
            except OSError:
                pass


def _write_atomic(path: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
