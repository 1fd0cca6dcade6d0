"""``python -m polyir`` (also the ``polyir`` command): version, compile cache, tools.

    python -m polyir --version
    python -m polyir cache info  [--dir DIR]     where the cache is, entries, bytes, cap
    python -m polyir cache clear [--dir DIR]     delete every entry (all versions)
    python -m polyir cache prune [--dir DIR]     stale versions out, then down to the cap
    python -m polyir opt FILE --pipeline "..."   the same as polyir-opt
    python -m polyir demo                        compile and time the two demo models
    python -m polyir bench [--quick ...]         the benchmarks (from a source checkout)

``--dir`` defaults to ``$POLYIR_CACHE_DIR``, else ``~/.cache/polyir``. Exit
status 0 on success, 1 on an error (one line on standard error), 2 on a usage
error.
"""
from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any


def version_text() -> str:
    """``polyir X (llvmlite Y, LLVM Z)``."""
    import polyir

    try:
        import llvmlite
        import llvmlite.binding as llvm
        llvm_version = ".".join(map(str, llvm.llvm_version_info))
        return f"polyir {polyir.__version__} (llvmlite {llvmlite.__version__}, LLVM {llvm_version})"
    except ImportError:
        return f"polyir {polyir.__version__}"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m polyir",
                                     description="polyir: a polyhedral compiler (tools).")
    parser.add_argument("--version", action="store_true", help="print the version and exit")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    cache = commands.add_parser("cache", help="inspect or empty the compile cache")
    cache.add_argument("action", choices=("info", "clear", "prune"))
    cache.add_argument("--dir", default=None, help="cache directory (default: $POLYIR_CACHE_DIR "
                                                   "or ~/.cache/polyir)")
    commands.add_parser("opt", help="polyir-opt (run passes on IR text)", add_help=False)
    commands.add_parser("demo", help="compile, check and time the demo models")
    commands.add_parser("bench", help="benchmarks against numpy, eager, Inductor", add_help=False)
    return parser


def _size(count: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if count < 1024 or unit == "GiB":
            return f"{count:.0f} {unit}" if unit == "B" else f"{count:.1f} {unit}"
        count /= 1024  # type: ignore[assignment]
    return str(count)


def cache_command(action: str, directory: str | None, out: Any = None) -> int:
    """``cache info|clear|prune``; returns the exit status."""
    out = out or sys.stdout
    from polyir.cpu.cache import default_cache_dir
    from polyir.cpu.jit import DEFAULT, open_cache
    from polyir.pipeline_cache import open_cache as open_passes

    cache = open_cache(DEFAULT if directory is None else directory)
    passes = open_passes(default_cache_dir() if directory is None else directory)
    if not cache.enabled:
        sys.stderr.write("polyir: error: the compile cache is not usable (see the warning above)\n")
        return 1
    if action == "info":
        info = cache.info()
        out.write(f"directory: {info['directory']}\n"
                  f"key file:  {info['key_file']}\n"
                  f"compiler:  {info['compiler']}\n"
                  f"entries:   {info['entries']} ({_size(info['bytes'])})\n"
                  f"other compiler versions: {info['other_version_entries']} entries "
                  f"({_size(info['other_version_bytes'])})\n"
                  f"size cap:  {_size(info['max_bytes'])}\n")
        if passes is not None:
            more = passes.info()
            out.write(f"pipeline results: {more['entries']} entries ({_size(more['bytes'])}; "
                      f"other versions: {more['other_version_entries']}), in {passes.root}\n")
    elif action == "clear":
        files, size = cache.clear()
        out.write(f"deleted {files} entries ({_size(size)}) from {cache.root}\n")
        if passes is not None:
            files, size = passes.clear()
            out.write(f"deleted {files} pipeline results ({_size(size)}) from {passes.root}\n")
    else:
        deleted = cache.evict()
        out.write(f"deleted {deleted} files from {cache.root}\n")
        if passes is not None:
            out.write(f"deleted {passes.evict()} pipeline-result files from {passes.root}\n")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``python -m polyir``; returns the exit status."""
    args_list = list(sys.argv[1:] if argv is None else argv)
    if args_list and args_list[0] == "opt":
        from polyir.cli import main as opt_main
        return opt_main(args_list[1:])
    if args_list and args_list[0] == "bench":
        try:
            from bench.__main__ import main as bench_main
        except ImportError:
            sys.stderr.write("polyir: error: the benchmarks live in the source tree (bench/); "
                             "run this from a checkout\n")
            return 1
        return int(bench_main(args_list[1:]) or 0)
    parser = _parser()
    args = parser.parse_args(args_list)
    if args.version:
        print(version_text())
        return 0
    try:
        if args.command == "cache":
            return cache_command(args.action, args.dir)
        if args.command == "demo":
            from polyir.demo import main as demo_main
            demo_main()
            return 0
    except Exception as error:  # one line, no traceback
        sys.stderr.write(f"polyir: error: {type(error).__name__}: {error}\n")
        return 1
    parser.print_help()
    return 2


if __name__ == "__main__":
    sys.exit(main())
