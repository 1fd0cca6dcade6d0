"""``polyir-opt``: parse IR text, run a pass pipeline, print the result.

    polyir-opt FILE --pipeline "simplify-bounds,canonicalize-names" [-o OUT]
                    [--target cpu|cuda:sm_80|...] [--remarks] [--emit polyir|mlir]
                    [--verify-each] [--dump-after-each] [--list-passes]
                    [--draw domain|deps|nests|schedule|tiles|fusion --params N=6,M=4 -o x.png]

``FILE`` may be ``-`` for standard input. A ``.mlir`` file is read as affine
MLIR (``polyir.frontends.mlir``); the result is written as MLIR with
``--emit mlir`` or when ``-o`` names a ``.mlir`` file, else as polyir text.
The input is verified before any pass runs, and the output of every pass
after it (a pass whose output is invalid has failed). ``--target`` is what
the passes see as the target (default: the host CPU). ``--remarks`` prints
each pass's remarks (what it did not do and why) to standard error. ``--draw``
writes a picture to ``-o`` instead of the IR (``polyir.draw.command``). Errors
print ``polyir-opt: error: FILE:LINE:COL: message`` (or ``FILE: message``
when there is no position) to standard error and exit with status 1; no
traceback, and ``-o`` is not written.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
from collections.abc import Sequence
from typing import TextIO

from polyir.errors import ParseError, PassError, PolyirError, UnsupportedMLIR, VerifyError

PROGRAM = "polyir-opt"


class _Failure(Exception):
    """An error already formatted for the user."""


def _argument_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROGRAM, description="Run a pipeline of polyir passes on IR text and print the result.")
    parser.add_argument("file", nargs="?", help="IR text file, or '-' for standard input")
    parser.add_argument("--pipeline", "-p", default="",
                        help='passes to run, e.g. "reschedule,mark-parallel{loops=i,j}" (default: none)')
    parser.add_argument("--target", default=None,
                        help="target the passes compile for: cpu (default), cuda, cuda:sm_80, cuda:sm_90")
    parser.add_argument("--remarks", action="store_true",
                        help="print the passes' remarks (what they did not do, and why) to standard error")
    parser.add_argument("-o", "--output", help="write the result here instead of standard output")
    parser.add_argument("--emit", choices=("polyir", "mlir"),
                        help="output format (default: mlir when -o ends in .mlir, else polyir)")
    parser.add_argument("--verify-each", action="store_true", help="verify the IR after every pass")
    parser.add_argument("--dump-after-each", action="store_true",
                        help="print the IR after every pass to standard error")
    parser.add_argument("--list-passes", action="store_true", help="list the passes and their options")
    parser.add_argument("--draw", metavar="WHAT",
                        help="write a picture to -o instead of the IR: domain, deps, nests (of the result), "
                             "schedule, tiles, fusion (input against result)")
    parser.add_argument("--params", default="", help="symbol values for --draw, e.g. N=6,M=4")
    return parser


def _read(path: str, stdin: TextIO) -> tuple[str, str]:
    if path == "-":
        return stdin.read(), "<stdin>"
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read(), path
    except OSError as error:
        raise _Failure(f"{path}: cannot read: {error.strerror or error}") from None
    except UnicodeDecodeError as error:
        raise _Failure(f"{path}: not UTF-8 text: {error.reason}") from None


def _location_of(error: BaseException, source: str) -> str:
    """``FILE:LINE:COL`` for errors that know their position, else ``FILE``."""
    if isinstance(error, ParseError):
        return f"{error.source_name}:{error.line}:{error.column}"
    loc = getattr(error, "loc", None)
    if loc is not None and hasattr(loc, "line"):
        return f"{source}:{loc.line}:{loc.column}"
    return source


def _message(error: PolyirError, source: str) -> str:
    from polyir.passes import PipelineError
    if isinstance(error, PipelineError):
        return f"<pipeline>:1:{error.column}: {error.message}\n  {error.pipeline}\n  {' ' * error.position}^"
    if isinstance(error, ParseError):
        return f"{_location_of(error, source)}: {error.message}"
    if isinstance(error, UnsupportedMLIR):
        return str(error)
    if isinstance(error, VerifyError):
        return f"{source}: invalid IR: {error}"
    if isinstance(error, PassError):
        return f"{_location_of(error.cause, source)}: {error}"
    return f"{source}: {error}"


def _write_atomically(path: str, text: str) -> None:
    directory = os.path.dirname(os.path.abspath(path))
    handle, temporary = tempfile.mkstemp(dir=directory, prefix=".polyir-opt-")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(text)
        os.replace(temporary, path)
    except BaseException:
        if os.path.exists(temporary):
            os.unlink(temporary)
        raise


def run(args: argparse.Namespace, stdin: TextIO, stdout: TextIO, stderr: TextIO) -> None:
    """Do what the parsed command line asks; raises ``_Failure`` or ``PolyirError``."""
    from polyir.context import PassContext
    from polyir.ir.parser import parse
    from polyir.ir.verifier import verify
    from polyir.passes import available_passes, describe_pass, parse_pipeline, transform
    from polyir.target import resolve

    if args.list_passes:
        for cls in available_passes().values():
            stdout.write(describe_pass(cls) + "\n")
        return
    if args.file is None:
        raise _Failure("no input file (give a path, or '-' for standard input)")
    passes = parse_pipeline(args.pipeline)  # before reading, so a bad pipeline fails fast
    try:
        target = resolve(args.target)
    except ValueError as error:
        raise _Failure(f"--target: {error}") from None
    text, source = _read(args.file, stdin)
    if args.file.endswith(".mlir"):
        from polyir.frontends.mlir import import_mlir
        module = import_mlir(text, source)
    else:
        module = parse(text, source)
    verify(module)
    ctx = PassContext(target)
    try:
        result = transform(module, passes, verify_each=args.verify_each,
                           dump_after_each=stderr if args.dump_after_each else None, ctx=ctx)
    finally:
        if args.remarks:
            for remark in ctx.remarks:
                stderr.write(f"remark: {remark}\n")
    verify(result)
    if args.draw:
        from polyir.draw.command import draw_command
        draw_command(args.draw, module, result, args.params, args.output)
        return
    emit = args.emit or ("mlir" if args.output and args.output.endswith(".mlir") else "polyir")
    if emit == "mlir":
        from polyir.frontends.mlir import export_mlir
        output = export_mlir(result)
    else:
        output = f"{str(result).rstrip()}\n"
    if args.output:
        try:
            _write_atomically(args.output, output)
        except OSError as error:
            raise _Failure(f"{args.output}: cannot write: {error.strerror or error}") from None
    else:
        stdout.write(output)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``polyir-opt``; returns the exit status (0 ok, 1 error, 2 usage)."""
    args = _argument_parser().parse_args(argv)
    source = "<stdin>" if args.file == "-" else (args.file or "")
    try:
        run(args, sys.stdin, sys.stdout, sys.stderr)
    except _Failure as failure:
        sys.stderr.write(f"{PROGRAM}: error: {failure}\n")
        return 1
    except PolyirError as error:
        sys.stderr.write(f"{PROGRAM}: error: {_message(error, source)}\n")
        return 1
    except BrokenPipeError:  # e.g. piped into `head`
        return 1
    except Exception as error:  # a bug in polyir: still one line, no traceback
        sys.stderr.write(f"{PROGRAM}: error: {source}: internal error: {type(error).__name__}: {error}\n")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
