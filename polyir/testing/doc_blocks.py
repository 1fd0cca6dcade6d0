"""Every fenced block of a Markdown page, classified, and run as the page shows it.

The conventions (``tests/test_docs.py`` holds README.md and docs/*.md to them):

* ``python`` blocks run in page order in one namespace, each from a file of
  its own (``@polyir.kernel`` reads a function's source from its file); a block
  followed by a line ``prints`` and a plain block prints exactly that text.
* ``pycon`` blocks are ``>>>`` sessions run as doctests in the same namespace;
  the lines after each ``>>>`` are what it prints.
* ``sh`` blocks run in ``bash`` from the repository root (``$ `` prompts are
  dropped), with the interpreter's ``bin`` first on ``PATH`` (``python``,
  ``polyir-opt``); a plain block right after one (or after a line ``prints``)
  is what its commands print to standard output, exactly.
* Any other block is an output shown for the block before it (see above), or
  carries a marker right before it: ``<!-- not-run: REASON -->`` (a grammar,
  pseudo-code, a command that needs a GPU or minutes) or
  ``<!-- same-as: PATH -->`` (its text is the file at ``PATH``, relative to the
  repository root). A marker also stops a ``python`` or ``sh`` block from running.
"""
from __future__ import annotations

import contextlib
import doctest
import io
import os
import re
import subprocess
import sys
import types
from dataclasses import dataclass
from pathlib import Path

_FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)
_MARKER = re.compile(r"<!--\s*(not-run|same-as):\s*(.*?)\s*-->\s*\Z", re.S)
RUNNABLE = ("python", "pycon", "sh")


@dataclass(frozen=True)
class DocBlock:
    """A fenced block: its ``lang`` (``""`` for a plain one), ``source``, the
    1-based ``line`` of its fence, its ``marker`` (``("not-run", reason)``,
    ``("same-as", path)`` or ``None``), the output the page shows for it
    (``shown``), and whether it is itself such an output (``is_output``)."""

    lang: str
    source: str
    line: int
    marker: tuple[str, str] | None = None
    shown: str | None = None
    is_output: bool = False

    @property
    def runs(self) -> bool:
        """Whether the page's runner executes it."""
        return self.lang in RUNNABLE and self.marker is None

    @property
    def problem(self) -> str | None:
        """Why the block breaks the conventions, or ``None``."""
        if self.marker is not None:
            kind, argument = self.marker
            return None if argument else f"a '{kind}:' marker without a reason or path"
        if self.lang in RUNNABLE or self.is_output:
            return None
        return (f"a ```{self.lang} block that is neither run, nor an output shown for the block before "
                f"it, nor marked <!-- not-run: REASON --> or <!-- same-as: PATH -->")


def doc_blocks(page: str) -> list[DocBlock]:
    """Every fenced block of ``page``, in order, classified."""
    matches = list(_FENCE.finditer(page))
    found: list[DocBlock] = []
    output_of: dict[int, str] = {}  # index of an output block -> its text
    for k, match in enumerate(matches):
        lang = match.group(1)
        if lang not in ("python", "sh") or k + 1 >= len(matches):
            continue
        following = matches[k + 1]
        between = page[match.end():following.start()].strip()
        if following.group(1) in ("", "text") and (between == "prints" or (lang == "sh" and not between)):
            output_of[k + 1] = following.group(2)
    for k, match in enumerate(matches):
        previous_end = matches[k - 1].end() if k else 0
        marked = _MARKER.search(page[previous_end:match.start()])
        marker = (marked.group(1), marked.group(2)) if marked else None
        found.append(DocBlock(match.group(1), match.group(2), page.count("\n", 0, match.start()) + 1,
                              marker, output_of.get(k + 1), k in output_of and marker is None))
    return found


@dataclass(frozen=True)
class Outcome:
    """A run block and what it printed (for ``pycon``: the doctest's report of
    its mismatches, empty when every line matched)."""

    block: DocBlock
    printed: str


def run_blocks(page: str, name: str, root: str | os.PathLike[str],
               directory: str | os.PathLike[str], env: dict[str, str] | None = None) -> list[Outcome]:
    """Run the blocks of ``page`` that run (see the module's docstring): the
    Python ones with ``directory`` as the working directory (their files are
    written there), the shell ones from ``root`` with ``env``. An exception
    in a block, or a shell command that fails, raises ``AssertionError``
    naming ``name`` and the block's line."""
    module = types.ModuleType(f"{re.sub(r'[^0-9A-Za-z]', '_', name)}_blocks")
    sys.modules[module.__name__] = module  # dataclasses and pickling look a class's module up
    namespace: dict[str, object] = module.__dict__
    outcomes = []
    previous = os.getcwd()
    try:
        for block in doc_blocks(page):
            if not block.runs:
                continue
            where = f"{name}:{block.line}"
            if block.lang == "sh":
                outcomes.append(Outcome(block, _run_shell(block.source, where, root, env)))
                continue
            os.chdir(directory)
            if block.lang == "pycon":
                outcomes.append(Outcome(block, _run_session(block.source, where, namespace)))
                continue
            stem = re.sub(r"\W", "_", name)
            path = Path(directory) / f"{stem}_line_{block.line}.py"
            path.write_text(block.source)
            out = io.StringIO()
            try:
                with contextlib.redirect_stdout(out):
                    exec(compile(block.source, str(path), "exec"), namespace)  # noqa: S102
            except Exception as error:
                raise AssertionError(f"the python block at {where} raised "
                                     f"{type(error).__name__}: {error}") from error
            outcomes.append(Outcome(block, out.getvalue()))
    finally:
        os.chdir(previous)
        del sys.modules[module.__name__]
    return outcomes


def shell_commands(source: str) -> str:
    """The commands of an ``sh`` block: ``$ `` prompts dropped."""
    return "".join(line[2:] if line.startswith("$ ") else line for line in source.splitlines(True))


def _run_shell(source: str, where: str, root: str | os.PathLike[str], env: dict[str, str] | None) -> str:
    environment = dict(os.environ if env is None else env)
    environment["PATH"] = os.path.dirname(sys.executable) + os.pathsep + environment.get("PATH", "")
    done = subprocess.run(["bash", "-euo", "pipefail", "-c", shell_commands(source)], cwd=root,
                          env=environment, capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        raise AssertionError(f"the sh block at {where} exited with {done.returncode}:\n{done.stderr}")
    return done.stdout


def _run_session(source: str, where: str, namespace: dict[str, object]) -> str:
    test = doctest.DocTestParser().get_doctest(source, namespace, where, where, 0)
    runner = doctest.DocTestRunner(optionflags=doctest.NORMALIZE_WHITESPACE | doctest.ELLIPSIS)
    report = io.StringIO()
    runner.run(test, out=report.write, clear_globs=False)
    namespace.update(test.globs)  # names the session defines are seen by the blocks after it
    return report.getvalue()


__all__ = ["DocBlock", "Outcome", "doc_blocks", "run_blocks", "shell_commands", "RUNNABLE"]
