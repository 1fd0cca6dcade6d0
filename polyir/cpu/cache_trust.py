"""What the compile cache trusts: private directories, a per-user secret, bounded reads.

Threat model (docs/cpu.md, "Compile cache"): someone who can create, replace
or edit files in the cache directory, but cannot read the user's secret key,
must not be able to make polyir load code it did not compile, nor crash or
hang it. So:

* :func:`private_directory` accepts a directory only when it is owned by the
  current user and not writable by group or others (creating it ``0700``);
* entries are authenticated with HMAC-SHA256 under :func:`secret_key`, 32
  random bytes kept outside the cache directory (``$POLYIR_CONFIG_DIR``, else
  ``$XDG_CONFIG_HOME/polyir``, else ``~/.config/polyir``; file ``cache.key``,
  mode ``0600``);
* :func:`read_private_file` opens without following symbolic links and
  without blocking (a FIFO, a device or ``/dev/urandom`` behind a link is
  refused), accepts only a regular file owned by the user, and reads at most
  a given number of bytes.

Refusals raise :class:`UntrustedCache` (an ``OSError``), which the cache turns
into a warning and a miss.
"""
from __future__ import annotations

import os
import secrets
import stat
from pathlib import Path

KEY_BYTES = 32
KEY_FILE = "cache.key"


class UntrustedCache(OSError):
    """A cache directory, key file or entry that polyir will not use."""


def _uid() -> int:
    return os.geteuid()


def check_private(st: os.stat_result, what: str, path: Path, *, directory: bool) -> None:
    """Raise :class:`UntrustedCache` unless ``st`` (of ``path``) is a directory
    (or regular file) owned by this user and not writable by group or others."""
    kind_ok = stat.S_ISDIR(st.st_mode) if directory else stat.S_ISREG(st.st_mode)
    if not kind_ok:
        raise UntrustedCache(f"{what} {path} is not a {'directory' if directory else 'regular file'}")
    if st.st_uid != _uid():
        raise UntrustedCache(f"{what} {path} is owned by uid {st.st_uid}, not by you "
                             f"(uid {_uid()})")
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise UntrustedCache(f"{what} {path} is writable by group or others "
                             f"(mode {stat.S_IMODE(st.st_mode):o})")


def private_directory(path: Path, what: str = "compile cache directory") -> Path:
    """``path``, created ``0700`` if missing; raises :class:`UntrustedCache` if it
    is not a directory owned by this user and closed to group/other writes."""
    try:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
        st = os.stat(path)
    except OSError as error:
        raise UntrustedCache(f"cannot use {what} {path}: {error}") from None
    check_private(st, what, path, directory=True)
    return path


def private_subdirectory(parent: Path, name: str) -> Path:
    """``parent / name`` as a private directory that is not a symbolic link."""
    path = parent / name
    try:
        path.mkdir(mode=0o700, exist_ok=True)
        st = os.lstat(path)
    except OSError as error:
        raise UntrustedCache(f"cannot use compile cache directory {path}: {error}") from None
    if stat.S_ISLNK(st.st_mode):
        raise UntrustedCache(f"compile cache directory {path} is a symbolic link")
    check_private(st, "compile cache directory", path, directory=True)
    return path


def read_private_file(path: Path, limit: int) -> tuple[bytes, int]:
    """The bytes of ``path`` and its descriptor-independent mtime (ns); refuses
    links, non-regular files, files of other users or writable by others, and
    files over ``limit`` bytes. ``FileNotFoundError`` when it does not exist."""
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) \
        | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise
    except OSError as error:  # ELOOP: a symbolic link
        raise UntrustedCache(f"cannot open {path}: {error}") from None
    try:
        st = os.fstat(fd)
        check_private(st, "compile cache entry", path, directory=False)
        if st.st_size > limit:
            raise UntrustedCache(f"compile cache entry {path} has {st.st_size} bytes "
                                 f"(limit {limit})")
        chunks = []
        remaining = st.st_size
        while remaining > 0:
            chunk = os.read(fd, remaining)
            if not chunk:
                break
            chunks.append(chunk)
            remaining -= len(chunk)
        data = b"".join(chunks)
        if len(data) != st.st_size or os.read(fd, 1):
            raise UntrustedCache(f"compile cache entry {path} changed while it was read")
        return data, st.st_mtime_ns
    finally:
        os.close(fd)


def touch(path: Path) -> None:
    """Mark ``path`` as just used (its mtime orders the LRU eviction); best effort."""
    try:
        os.utime(path, follow_symlinks=False)
    except (OSError, NotImplementedError):
        pass


def default_key_path() -> Path:
    """Where the per-user cache key lives (outside every cache directory)."""
    configured = os.environ.get("POLYIR_CONFIG_DIR")
    if configured:
        return Path(configured) / KEY_FILE
    xdg = os.environ.get("XDG_CONFIG_HOME")
    base = Path(xdg) if xdg else Path.home() / ".config"
    return base / "polyir" / KEY_FILE


def secret_key(path: Path | None = None) -> bytes:
    """The user's cache key at ``path`` (default :func:`default_key_path`),
    created (32 random bytes, ``0600``, in a ``0700`` directory) when missing.
    Raises :class:`UntrustedCache` for a key another user could read or write."""
    path = default_key_path() if path is None else path
    try:
        data, _ = _read_key(path)
        return data
    except FileNotFoundError:
        pass
    private_directory(path.parent, "polyir configuration directory")
    tmp = path.parent / f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(secrets.token_bytes(KEY_BYTES))
        try:
            os.link(tmp, path)  # never replaces a key another process made meanwhile
        except FileExistsError:
            pass
    finally:
        try:
            os.unlink(tmp)
        except OSError:
            pass
    data, _ = _read_key(path)
    return data


def _read_key(path: Path) -> tuple[bytes, int]:
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise
    except OSError as error:
        raise UntrustedCache(f"cannot open cache key {path}: {error}") from None
    try:
        st = os.fstat(fd)
        check_private(st, "cache key", path, directory=False)
        if st.st_mode & 0o077:
            raise UntrustedCache(f"cache key {path} is readable by group or others "
                                 f"(mode {stat.S_IMODE(st.st_mode):o}); it must be 0600")
        data = os.read(fd, KEY_BYTES + 1)
    finally:
        os.close(fd)
    if len(data) != KEY_BYTES:
        raise UntrustedCache(f"cache key {path} has {len(data)} bytes, expected {KEY_BYTES}")
    return data, st.st_mtime_ns
