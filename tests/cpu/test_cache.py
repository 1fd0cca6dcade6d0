"""The on-disk compile cache: hits, misses, damaged, forged and stale entries, eviction."""
from __future__ import annotations

import json
import os
import stat
import time
from pathlib import Path

import numpy as np
import pytest

import polyir
from polyir.cpu import cache_trust
from polyir.cpu.cache import HEADER, MAGIC, TAG_BYTES, CompileCache, default_cache_dir
from polyir.cpu.jit import build_cpu, open_cache
from polyir.target import cpu

TEXT = """
func f(y: f32[N], x: f32[N]) {
  for i = 0 to N {
    S0: y[i] = exp(x[i]) + 1.0
  }
}"""


@pytest.fixture(autouse=True)
def split_every_function(monkeypatch):
    """Split even the small functions here into kernels (an entry and kernel objects)."""
    from polyir.cpu import jit
    monkeypatch.setattr(jit, "WHOLE_FUNCTION_NESTS", 0)


def _run(ex) -> np.ndarray:
    x = np.linspace(-2, 2, 33, dtype=np.float32)
    y = np.zeros_like(x)
    ex(y, x)
    return y


EXPECTED = np.exp(np.linspace(-2, 2, 33)) + 1


def _entries(cache_dir: Path) -> list[Path]:
    return sorted(e.path for e in open_cache(cache_dir).entries() if e.current)


def _kernel_entry(cache_dir: Path) -> Path:
    """The entry file of TEXT's one kernel (not of the entry function)."""
    found = [p for p in _entries(cache_dir) if "kernel" in _sections(p)[0]["unit"]]
    assert len(found) == 1, found
    return found[0]


def _sections(path: Path) -> tuple[dict, bytes, bytes]:
    data = path.read_bytes()
    _, meta_len, ll_len, _ = HEADER.unpack(data[:HEADER.size])
    start = HEADER.size + TAG_BYTES
    meta = data[start:start + meta_len]
    return json.loads(meta), data[start + meta_len:start + meta_len + ll_len], \
        data[start + meta_len + ll_len:]


def _rewrite(cache: CompileCache, path: Path, meta: bytes, ll: bytes, obj: bytes) -> None:
    """Write an entry as its owner would (a valid tag over whatever is given)."""
    key = path.name[:-len(".entry")]
    header = HEADER.pack(MAGIC, len(meta), len(ll), len(obj))
    path.write_bytes(header + cache._tag(key, header, meta, ll, obj) + meta + ll + obj)


def test_second_build_is_a_hit(tmp_path):
    module = polyir.parse(TEXT)
    first = build_cpu(module, cpu(1), cache_dir=tmp_path)
    second = build_cpu(module, cpu(1), cache_dir=tmp_path)
    assert (first.cache_hit, second.cache_hit) == (False, True)
    assert second.llvm_ir == first.llvm_ir
    np.testing.assert_array_equal(_run(second), _run(first))
    np.testing.assert_allclose(_run(second), EXPECTED, rtol=1e-6)
    metadata, _, _ = _sections(_kernel_entry(tmp_path))
    assert metadata["function"] == "f" and polyir.__version__ in metadata["compiler"]
    assert stat.S_IMODE(os.stat(_kernel_entry(tmp_path)).st_mode) == 0o600


def test_key_depends_on_ir_and_target(tmp_path):
    build_cpu(polyir.parse(TEXT), cpu(1), cache_dir=tmp_path)
    assert len(_entries(tmp_path)) == 2  # the kernel and the entry function
    build_cpu(polyir.parse(TEXT.replace("1.0", "2.0")), cpu(1), cache_dir=tmp_path)
    build_cpu(polyir.parse(TEXT), cpu(2), cache_dir=tmp_path)
    assert len(_entries(tmp_path)) == 6
    renamed = TEXT.replace("f(y", "g(out").replace("y[i]", "out[i]").replace("x", "a") \
        .replace("eap", "exp").replace("for i", "for k").replace("[i]", "[k]")
    build_cpu(polyir.parse(renamed), cpu(1), cache_dir=tmp_path)
    assert len(_entries(tmp_path)) == 7, "renamed buffers reuse the kernel; only the entry is new"


@pytest.mark.parametrize("damage", ["garbage_object", "truncated_object", "bad_json",
                                    "stale_version", "bad_llvm_ir", "missing_object"])
def test_damaged_entry_is_recompiled_with_a_warning(tmp_path, damage):
    module = polyir.parse(TEXT)
    reference = _run(build_cpu(module, cpu(1), cache_dir=tmp_path))
    path = _kernel_entry(tmp_path)
    cache = open_cache(tmp_path)
    meta, ll, obj = _sections(path)
    meta_bytes = json.dumps(meta).encode()
    if damage == "garbage_object":      # not re-tagged: the tag no longer matches
        data = path.read_bytes()
        path.write_bytes(data[:-len(obj)] + b"\x7fELF" + b"\x00\xff" * ((len(obj) - 4) // 2))
    elif damage == "truncated_object":
        path.write_bytes(path.read_bytes()[:-100])
    elif damage == "bad_json":          # validly tagged, unparsable metadata
        _rewrite(cache, path, b"{not json", ll, obj)
    elif damage == "stale_version":
        meta["compiler"] = "polyir 0.0.0; llvmlite 0.1"
        _rewrite(cache, path, json.dumps(meta).encode(), ll, obj)
    elif damage == "bad_llvm_ir":
        _rewrite(cache, path, meta_bytes, b"\xff\xfe garbage", obj)
    else:
        _rewrite(cache, path, meta_bytes, ll, b"")
    with pytest.warns(RuntimeWarning, match="compile-cache entry"):
        rebuilt = build_cpu(module, cpu(1), cache_dir=tmp_path)
    assert not rebuilt.cache_hit
    np.testing.assert_array_equal(_run(rebuilt), reference)
    again = build_cpu(module, cpu(1), cache_dir=tmp_path)
    assert again.cache_hit


def test_a_forged_entry_with_a_recomputed_checksum_is_not_loaded(tmp_path):
    """The attack of issue 16: another writer replaces the kernel's object with the
    object of a different kernel and recomputes every hash it can see."""
    victim = polyir.parse(TEXT)
    build_cpu(victim, cpu(1), cache_dir=tmp_path)
    target_path = _kernel_entry(tmp_path)
    attacker_dir = tmp_path / "attacker"
    evil = polyir.parse(TEXT.replace("exp(x[i]) + 1.0", "31337.0 + x[i] * 0.0"))
    build_cpu(evil, cpu(1), cache_dir=attacker_dir)
    _, evil_ll, evil_obj = _sections(_kernel_entry(attacker_dir))
    meta, _, _ = _sections(target_path)
    # the attacker's own key (not the victim's) signs the forged entry
    forger = CompileCache(attacker_dir, open_cache(tmp_path).fingerprint,
                          key_path=tmp_path / "attacker-key" / "cache.key")
    _rewrite(forger, target_path, json.dumps(meta).encode(), evil_ll, evil_obj)
    with pytest.warns(RuntimeWarning, match="authentication tag mismatch"):
        rebuilt = build_cpu(victim, cpu(1), cache_dir=tmp_path)
    assert not rebuilt.cache_hit
    np.testing.assert_allclose(_run(rebuilt), EXPECTED, rtol=1e-6)


def test_deeply_nested_metadata_is_a_miss(tmp_path):
    module = polyir.parse(TEXT)
    build_cpu(module, cpu(1), cache_dir=tmp_path)
    path = _kernel_entry(tmp_path)
    _, ll, obj = _sections(path)
    _rewrite(open_cache(tmp_path), path, b"[" * 30000 + b"]" * 30000, ll, obj)
    with pytest.warns(RuntimeWarning, match="compile-cache entry"):
        rebuilt = build_cpu(module, cpu(1), cache_dir=tmp_path)
    np.testing.assert_allclose(_run(rebuilt), EXPECTED, rtol=1e-6)


@pytest.mark.parametrize("kind", ["symlink_to_urandom", "fifo", "huge", "other_owner"])
def test_entries_that_are_not_plain_private_files_are_refused(tmp_path, kind, monkeypatch):
    module = polyir.parse(TEXT)
    build_cpu(module, cpu(1), cache_dir=tmp_path)
    path = _kernel_entry(tmp_path)
    path.unlink()
    if kind == "symlink_to_urandom":
        path.symlink_to("/dev/urandom")
    elif kind == "fifo":
        os.mkfifo(path, 0o600)
    elif kind == "huge":
        with open(path, "wb") as handle:  # sparse: no disk space used
            handle.truncate(300 * 1024 * 1024)
    else:
        path.write_bytes(b"x" * 64)
        path.chmod(0o600)
        real_uid = os.geteuid()
        monkeypatch.setattr(cache_trust, "check_private", _owner_check(path, real_uid + 1))
    reason = {"symlink_to_urandom": "cannot open", "fifo": "not a regular file",
              "huge": "limit", "other_owner": "not by you"}[kind]
    start = time.monotonic()
    with pytest.warns(RuntimeWarning, match=reason):
        rebuilt = build_cpu(module, cpu(1), cache_dir=tmp_path)
    assert time.monotonic() - start < 60, "a refused entry must not block"
    assert not rebuilt.cache_hit
    np.testing.assert_allclose(_run(rebuilt), EXPECTED, rtol=1e-6)


def _owner_check(entry: Path, uid: int):
    """``check_private`` as if ``entry`` belonged to ``uid``."""
    original = cache_trust.check_private

    def check(st, what, path, *, directory):
        if Path(path) == entry:
            raise cache_trust.UntrustedCache(f"{what} {path} is owned by uid {uid}, not by you")
        return original(st, what, path, directory=directory)
    return check


def test_a_directory_writable_by_others_is_refused_for_a_private_one(tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    with pytest.warns(RuntimeWarning, match="writable by group or others"):
        ex = build_cpu(polyir.parse(TEXT), cpu(1), cache_dir=shared)
    np.testing.assert_allclose(_run(ex), EXPECTED, rtol=1e-6)
    assert list(shared.iterdir()) == [], "nothing is written to the refused directory"


def test_a_directory_of_another_user_is_refused(tmp_path, monkeypatch):
    theirs = tmp_path / "theirs"
    theirs.mkdir(mode=0o700)
    monkeypatch.setattr(cache_trust, "_uid", lambda: os.geteuid() + 1)
    with pytest.warns(RuntimeWarning, match="not by you"):
        cache = CompileCache(theirs, "fp", key_path=tmp_path / "k" / "cache.key")
    assert cache.directory is None or theirs not in cache.directory.parents


def test_a_key_others_can_read_disables_the_cache(tmp_path):
    key = tmp_path / "config" / "cache.key"
    cache_trust.secret_key(key)
    key.chmod(0o644)
    with pytest.warns(RuntimeWarning, match="readable by group or others"):
        cache = CompileCache(tmp_path / "cache", "fp", key_path=key)
    assert not cache.enabled


def test_the_key_is_private_and_stable(tmp_path):
    key = tmp_path / "config" / "cache.key"
    first = cache_trust.secret_key(key)
    assert cache_trust.secret_key(key) == first and len(first) == 32
    assert stat.S_IMODE(key.stat().st_mode) == 0o600
    assert stat.S_IMODE(key.parent.stat().st_mode) == 0o700


def test_least_recently_used_entries_are_evicted_at_the_cap(tmp_path):
    fp = open_cache(tmp_path).fingerprint
    cache = CompileCache(tmp_path, fp, max_bytes=10_000)
    for k in range(8):
        cache.store(f"k{k}", b"\x7fELF" + bytes(2000), "ll", {})
        os.utime(cache.path(f"k{k}"), (1000 + k, 1000 + k))
    assert cache.load("k0") is not None          # a hit makes k0 the most recent
    assert cache.evict() > 0
    left = {e.path.name[:-len(".entry")] for e in cache.entries()}
    assert "k0" in left and "k1" not in left
    assert sum(e.bytes for e in cache.entries()) <= 10_000


def test_stale_versions_and_old_format_files_are_pruned(tmp_path):
    fp = open_cache(tmp_path).fingerprint
    cache = CompileCache(tmp_path, fp)
    assert cache.root is not None
    old = cache.root / "v0000000000000000"
    old.mkdir(mode=0o700)
    (old / "a.entry").write_bytes(b"old")
    os.utime(old / "a.entry", (1000, 1000))
    recent = cache.root / "v1111111111111111"
    recent.mkdir(mode=0o700)
    (recent / "b.entry").write_bytes(b"in use by another version right now")
    (cache.root / "0123.o").write_bytes(b"format 1")
    cache.evict()
    assert not old.exists() and not (cache.root / "0123.o").exists()
    assert (recent / "b.entry").exists()


def test_no_cache_dir_writes_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("POLYIR_CACHE_DIR", str(tmp_path / "env"))
    ex = build_cpu(polyir.parse(TEXT), cpu(1), cache_dir=None)
    assert not ex.cache_hit
    assert not (tmp_path / "env").exists()


def test_default_dir_and_driver_use_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("POLYIR_CACHE_DIR", str(tmp_path / "env"))
    assert default_cache_dir() == tmp_path / "env"
    from polyir.driver import build
    ex = build(polyir.parse(TEXT), "cpu")
    assert ex.ptx is None and "addps" in ex.asm
    assert len(_entries(tmp_path / "env")) == 2
    monkeypatch.delenv("POLYIR_CACHE_DIR")
    assert default_cache_dir() == Path.home() / ".cache" / "polyir"


def test_the_test_session_never_uses_the_real_cache():
    real = Path.home() / ".cache" / "polyir"
    assert default_cache_dir() != real
    assert cache_trust.default_key_path().parent != Path.home() / ".config" / "polyir"


_RACER = """
import sys, warnings
import numpy as np
import polyir
from polyir.cpu.jit import build_cpu
from polyir.target import cpu
warnings.simplefilter("error", RuntimeWarning)
text = sys.argv[2]
for round in range(int(sys.argv[3])):
    # a new constant each round: a new kernel, stored while the other process stores it too
    ex = build_cpu(polyir.parse(text.replace("1.0", f"{round % 4}.5")), cpu(1), cache_dir=sys.argv[1])
    x = np.linspace(-2, 2, 33, dtype=np.float32)
    y = np.zeros_like(x)
    ex(y, x)
    np.testing.assert_allclose(y, np.exp(x) + (round % 4) + 0.5, rtol=1e-5)
print("ok")
"""


def test_concurrent_processes_never_see_a_torn_entry(tmp_path):
    """Two processes compile, store, load and evict the same kernels at once (a cap
    small enough that entries are deleted under the other's feet): never a warning,
    always the right answer."""
    import subprocess
    import sys

    env = dict(os.environ, POLYIR_CACHE_MAX_BYTES="12K", PYTHONPATH=str(Path.cwd()))
    racers = [subprocess.Popen([sys.executable, "-c", _RACER, str(tmp_path), TEXT, "12"],
                               env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
              for _ in range(2)]
    for racer in racers:
        out, err = racer.communicate(timeout=300)
        assert racer.returncode == 0 and out.strip() == "ok", err[-3000:]


_HAMMER = """
import os, sys, time, warnings
from polyir.cpu.cache import CompileCache
warnings.simplefilter("error", RuntimeWarning)
cache = CompileCache(sys.argv[1], "fingerprint")
role, rounds = sys.argv[2], int(sys.argv[3])
if role == "write":
    for k in range(rounds):
        body = bytes([k % 251]) * (512 * 1024)
        cache.store("same-key", b"\\x7fELF" + body, f"ll {k}", {"round": k})
else:
    seen = 0
    deadline = time.time() + 120
    while seen < rounds and time.time() < deadline:
        entry = cache.load("same-key")
        if entry is not None:
            body = entry.object_code[4:]
            assert body == bytes([body[0]]) * len(body), "a torn object"
            assert entry.llvm_ir == f"ll {entry.metadata['round']}"
            seen += 1
print("ok")
"""


def test_a_reader_never_sees_a_half_written_entry(tmp_path):
    """One process rewrites a 512 KiB entry over and over while another reads it."""
    import subprocess
    import sys

    env = dict(os.environ, PYTHONPATH=str(Path.cwd()))
    procs = [subprocess.Popen([sys.executable, "-c", _HAMMER, str(tmp_path), role, "150"],
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for role in ("write", "read")]
    for proc in procs:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0 and out.strip() == "ok", err[-3000:]
