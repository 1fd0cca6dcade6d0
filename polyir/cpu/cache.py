"""On-disk cache of compiled CPU object code.

Layout: ``<cache_dir>/cpu/<version>/<KEY>.entry``, one file per entry, where
``<version>`` hashes the compiler fingerprint (polyir, llvmlite and LLVM
versions and the backend's own sources) and ``KEY`` hashes what was compiled
(a kernel's canonical IR text, the target, the host CPU, the fingerprint).

An entry file is a header (magic, the three section lengths), an HMAC-SHA256
tag, and the sections: JSON metadata (at most 64 KiB), the LLVM IR text the
executable shows as ``llvm_ir``, and the object code. The tag covers the
header, the key and every section, under the per-user secret of
:mod:`polyir.cpu.cache_trust`; nothing is parsed before the tag checks, and
nothing is ever unpickled or executed from metadata. Entries are written to
a temporary file and renamed into place, so a concurrent reader sees either
the whole old entry or the whole new one.

A missing entry is a silent miss; an unusable one (damaged, forged, too big,
a link, of another user, of another compiler version) is a miss with a
``RuntimeWarning``. The cache never exceeds its size cap for long: after a
build stored something, :meth:`CompileCache.evict` deletes least recently
used entries (a hit refreshes an entry's mtime) down to 80% of the cap, the
entries of other compiler versions unused for an hour, and stray temporary
files. ``python -m polyir cache info|clear|prune`` inspects and empties it.
"""
from __future__ import annotations

import hashlib
import hmac
import json
import os
import shutil
import struct
import tempfile
import time
import warnings
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from polyir.cpu.cache_trust import (
    UntrustedCache,
    default_key_path,
    private_directory,
    private_subdirectory,
    read_private_file,
    secret_key,
    touch,
)

FORMAT = 2
MAGIC = b"polyirC\x02"
HEADER = struct.Struct("<8sIQQ")
"""magic, metadata length, LLVM IR length, object length (little-endian)."""
TAG_BYTES = 32
SUFFIX = ".entry"
MAX_METADATA_BYTES = 64 * 1024
MAX_ENTRY_BYTES = 256 * 1024 * 1024
DEFAULT_MAX_BYTES = 1024 * 1024 * 1024
LOW_WATER = 0.8
STALE_AFTER_SECONDS = 3600.0
_LEGACY_SUFFIXES = (".o", ".ll", ".json")  # format 1: three files per entry under cpu/

_warned: set[str] = set()
_fallback: dict[str, Path] = {}


def _warn_once(message: str) -> None:
    if message not in _warned:
        _warned.add(message)
        warnings.warn(message, RuntimeWarning, stacklevel=4)


def default_cache_dir() -> Path:
    """``$POLYIR_CACHE_DIR`` if set, else ``~/.cache/polyir``."""
    configured = os.environ.get("POLYIR_CACHE_DIR")
    if configured:
        return Path(configured)
    return Path.home() / ".cache" / "polyir"


def default_max_bytes() -> int:
    """The size cap: ``$POLYIR_CACHE_MAX_BYTES`` (an integer, optionally with a
    ``K``, ``M`` or ``G`` suffix) if set and valid, else 1 GiB."""
    text = os.environ.get("POLYIR_CACHE_MAX_BYTES", "").strip().upper()
    if not text:
        return DEFAULT_MAX_BYTES
    scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1], 1)
    digits = text[:-1] if text[-1] in "KMG" else text
    try:
        value = int(digits) * scale
    except ValueError:
        _warn_once(f"polyir: ignoring POLYIR_CACHE_MAX_BYTES={text!r} (not a size); "
                   f"using {DEFAULT_MAX_BYTES} bytes")
        return DEFAULT_MAX_BYTES
    return max(value, 0)


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


def version_id(fingerprint: str) -> str:
    """The folder name of a compiler version's entries."""
    return "v" + hashlib.sha256(fingerprint.encode()).hexdigest()[:16]


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
    metadata: dict[str, Any]


@dataclass(frozen=True)
class EntryFile:
    """One entry on disk, as :meth:`CompileCache.entries` lists it."""

    path: Path
    bytes: int
    mtime: float
    current: bool


class CompileCache:
    """The entries of one compiler version (``fingerprint``) under ``directory``.

    ``directory=None`` disables caching. A directory that is not the user's
    own, or is writable by group or others, is refused with a warning and a
    private temporary one is used for this process instead; without a usable
    secret key (see :mod:`polyir.cpu.cache_trust`) caching is off, with a
    warning. ``max_bytes`` (default :func:`default_max_bytes`) caps the
    whole ``section`` folder (``cpu``: object code; ``passes``: pipeline results,
    see :mod:`polyir.pipeline_cache`), all versions together.
    """

    def __init__(self, directory: Path | str | None, fingerprint: str, *,
                 max_bytes: int | None = None, key_path: Path | None = None, section: str = "cpu"):
        self.fingerprint = fingerprint
        self.section = section
        self.max_bytes = default_max_bytes() if max_bytes is None else max_bytes
        self.key_path = default_key_path() if key_path is None else key_path
        self.root: Path | None = None
        self.directory: Path | None = None
        self._key = b""
        self.stored = 0
        if directory is None:
            return
        try:
            self._key = secret_key(self.key_path)
        except (UntrustedCache, OSError) as error:
            _warn_once(f"polyir: compile cache disabled: {error}")
            return
        try:
            self._open(Path(directory))
        except UntrustedCache as error:
            fallback = _private_fallback()
            _warn_once(f"polyir: refusing compile cache: {error}; using the private "
                       f"directory {fallback} for this process instead")
            try:
                self._open(fallback)
            except UntrustedCache as again:
                _warn_once(f"polyir: compile cache disabled: {again}")
                self.root = self.directory = None

    def _open(self, directory: Path) -> None:
        private_directory(directory)
        self.root = private_subdirectory(directory, self.section)
        self.directory = private_subdirectory(self.root, version_id(self.fingerprint))

    @property
    def enabled(self) -> bool:
        return self.directory is not None

    def path(self, key: str) -> Path:
        assert self.directory is not None
        return self.directory / f"{key}{SUFFIX}"

    # ------------------------------------------------------------ entries
    def load(self, key: str) -> CacheEntry | None:
        """The entry for ``key``, or ``None`` (warning when one exists but is unusable)."""
        if self.directory is None:
            return None
        path = self.path(key)
        try:
            data, _ = read_private_file(path, MAX_ENTRY_BYTES)
            entry = self._decode(key, data)
        except FileNotFoundError:
            return None
        except (OSError, ValueError, RecursionError, UnicodeDecodeError) as error:
            warnings.warn(f"polyir: ignoring unusable compile-cache entry {path} ({error}); "
                          f"recompiling", RuntimeWarning, stacklevel=3)
            return None
        touch(path)
        return entry

    def _tag(self, key: str, header: bytes, *sections: bytes) -> bytes:
        mac = hmac.new(self._key, header, hashlib.sha256)
        mac.update(key.encode())
        for section in sections:
            mac.update(section)
        return mac.digest()

    def _decode(self, key: str, data: bytes) -> CacheEntry:
        if len(data) < HEADER.size + TAG_BYTES:
            raise ValueError("truncated header")
        header = data[:HEADER.size]
        magic, meta_len, ll_len, obj_len = HEADER.unpack(header)
        if magic != MAGIC:
            raise ValueError("not a polyir cache entry of this format")
        start = HEADER.size + TAG_BYTES
        if meta_len > MAX_METADATA_BYTES or start + meta_len + ll_len + obj_len != len(data):
            raise ValueError("section lengths do not match the file")
        tag = data[HEADER.size:start]
        meta = data[start:start + meta_len]
        llvm_ir = data[start + meta_len:start + meta_len + ll_len]
        object_code = data[start + meta_len + ll_len:]
        if not object_code:
            raise ValueError("no object code")
        if not hmac.compare_digest(tag, self._tag(key, header, meta, llvm_ir, object_code)):
            raise ValueError("authentication tag mismatch (damaged, or not written by you)")
        metadata = json.loads(meta.decode())
        if not isinstance(metadata, dict):
            raise ValueError("metadata is not an object")
        if metadata.get("format") != FORMAT or metadata.get("key") != key:
            raise ValueError("format or key mismatch")
        if metadata.get("compiler") != self.fingerprint:
            raise ValueError("compiled by another compiler version")
        return CacheEntry(object_code, llvm_ir.decode(), metadata)

    def store(self, key: str, object_code: bytes, llvm_ir: str, extra: dict[str, Any]) -> None:
        """Write an entry atomically (a temporary file, then ``os.replace``)."""
        if self.directory is None:
            return
        metadata = dict(extra)
        metadata.update(format=FORMAT, key=key, compiler=self.fingerprint, created=time.time())
        meta = json.dumps(metadata, sort_keys=True).encode()
        ll = llvm_ir.encode()
        if len(meta) > MAX_METADATA_BYTES or \
                HEADER.size + TAG_BYTES + len(meta) + len(ll) + len(object_code) > MAX_ENTRY_BYTES:
            return  # too big to be read back: not worth writing
        header = HEADER.pack(MAGIC, len(meta), len(ll), len(object_code))
        blob = b"".join((header, self._tag(key, header, meta, ll, object_code), meta, ll,
                         object_code))
        try:
            _write_atomic(self.path(key), blob)
            self.stored += len(blob)
        except OSError as error:
            _warn_once(f"polyir: cannot write compile cache {self.directory}: {error}")

    def invalidate(self, key: str) -> None:
        """Remove an entry (after it failed to load)."""
        if self.directory is None:
            return
        try:
            self.path(key).unlink()
        except OSError:
            pass

    # ------------------------------------------------------- housekeeping
    def entries(self) -> list[EntryFile]:
        """Every entry file under ``cpu/``, of this version and others."""
        found: list[EntryFile] = []
        if self.root is None or self.directory is None:
            return found
        for folder in _subdirectories(self.root):
            current = folder.name == self.directory.name
            for item in _files(folder):
                if item.name.endswith(SUFFIX):
                    try:
                        st = item.stat(follow_symlinks=False)
                    except OSError:  # deleted meanwhile (another process evicting)
                        continue
                    found.append(EntryFile(Path(item.path), st.st_size, st.st_mtime, current))
        return found

    def evict(self, now: float | None = None) -> int:
        """Delete other versions' entries unused for an hour, stray temporary
        and format-1 files, and the least recently used entries while the
        total exceeds the cap (down to 80% of it). Returns the files deleted."""
        if self.root is None or self.directory is None:
            return 0
        now = time.time() if now is None else now
        deleted = 0
        for item in _files(self.root):  # format 1 left its files directly under cpu/
            if item.name.endswith(_LEGACY_SUFFIXES) or _stale_temporary(item, now):
                deleted += _unlink(Path(item.path))
        for folder in _subdirectories(self.root):
            if folder.name == self.directory.name:
                continue
            files = list(_files(folder))
            newest = max((_mtime(f) for f in files), default=0.0)
            if now - newest > STALE_AFTER_SECONDS:
                deleted += sum(_unlink(Path(f.path)) for f in files)
                try:
                    os.rmdir(folder.path)
                except OSError:
                    pass
        for item in _files(self.directory):
            if _stale_temporary(item, now):
                deleted += _unlink(Path(item.path))
        entries = sorted(self.entries(), key=lambda e: e.mtime)
        total = sum(e.bytes for e in entries)
        if total > self.max_bytes:
            for entry in entries:
                if total <= LOW_WATER * self.max_bytes:
                    break
                if _unlink(entry.path):
                    deleted += 1
                    total -= entry.bytes
        return deleted

    def clear(self) -> tuple[int, int]:
        """Delete every entry of every version; ``(files, bytes)`` deleted."""
        files = size = 0
        if self.root is None:
            return files, size
        for entry in self.entries():
            if _unlink(entry.path):
                files += 1
                size += entry.bytes
        for item in _files(self.root):
            if item.name.endswith(_LEGACY_SUFFIXES):
                files += _unlink(Path(item.path))
        return files, size

    def info(self) -> dict[str, Any]:
        """What :command:`python -m polyir cache info` prints."""
        entries = self.entries()
        current = [e for e in entries if e.current]
        others = [e for e in entries if not e.current]
        return {"directory": str(self.directory) if self.directory else None,
                "key_file": str(self.key_path), "compiler": self.fingerprint,
                "entries": len(current), "bytes": sum(e.bytes for e in current),
                "other_version_entries": len(others),
                "other_version_bytes": sum(e.bytes for e in others),
                "max_bytes": self.max_bytes}


def _private_fallback() -> Path:
    """A private temporary cache directory for this process (removed at exit)."""
    path = _fallback.get("dir")
    if path is None:
        import atexit

        path = Path(tempfile.mkdtemp(prefix="polyir-cache-"))
        _fallback["dir"] = path
        atexit.register(shutil.rmtree, path, ignore_errors=True)
    return path


def _subdirectories(root: Path) -> list[os.DirEntry[str]]:
    try:
        with os.scandir(root) as items:
            return [item for item in items if item.is_dir(follow_symlinks=False)]
    except OSError:
        return []


def _files(folder: Path | os.DirEntry[str]) -> list[os.DirEntry[str]]:
    try:
        with os.scandir(folder) as items:
            return [item for item in items if item.is_file(follow_symlinks=False)
                    or item.is_symlink()]
    except OSError:
        return []


def _mtime(item: os.DirEntry[str]) -> float:
    try:
        return item.stat(follow_symlinks=False).st_mtime
    except OSError:
        return 0.0


def _stale_temporary(item: os.DirEntry[str], now: float) -> bool:
    if not item.name.endswith(".tmp"):
        return False
    try:
        return now - item.stat(follow_symlinks=False).st_mtime > STALE_AFTER_SECONDS
    except OSError:
        return False


def _unlink(path: Path) -> int:
    try:
        path.unlink()
        return 1
    except OSError:
        return 0


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
