"""Every code block of README.md and docs/*.md runs and shows what it prints.

The conventions are those of :mod:`polyir.testing.doc_blocks`: ``python`` and
``pycon`` blocks run in order in one namespace per page, ``sh`` blocks run in
bash from the repository root, shown outputs are compared exactly, and any
other block is an output or carries a ``not-run`` (with a reason) or
``same-as`` marker. Pages with a test of their own (pictures, tables measured
by a harness) are run there; this file checks that their blocks follow the
conventions and that the test exists."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from polyir import passes
from polyir.testing.doc_blocks import doc_blocks, run_blocks

ROOT = Path(__file__).resolve().parent.parent
PAGES = ["README.md"] + sorted(f"docs/{p.name}" for p in (ROOT / "docs").glob("*.md"))
RUN_ELSEWHERE = {  # page -> the test that runs its blocks
    "docs/tutorial.md": "tests/test_tutorial.py",
    "docs/analysis.md": "tests/test_tutorial.py",
    "docs/jax.md": "tests/frontends/test_jax_docs.py",
    "docs/mlir.md": "tests/frontends/test_mlir_docs.py",
    "docs/fusion.md": "tests/fusion/test_fusion_docs.py",
}
NEEDS = {"docs/torch.md": "torch", "docs/testing.md": "hypothesis"}  # page -> module its blocks import


def test_every_block_runs_or_is_an_output_or_is_marked() -> None:
    problems = []
    for page in PAGES:
        for block in doc_blocks((ROOT / page).read_text()):
            if block.problem:
                problems.append(f"{page}:{block.line}: {block.problem}")
            elif block.marker and block.marker[0] == "same-as":
                shown = (ROOT / block.marker[1]).read_text()
                if shown.strip("\n") != block.source.strip("\n"):
                    problems.append(f"{page}:{block.line}: differs from {block.marker[1]}")
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("page", sorted(RUN_ELSEWHERE))
def test_pages_run_elsewhere_are_run_by_their_test(page: str) -> None:
    test = (ROOT / RUN_ELSEWHERE[page]).read_text()
    assert Path(page).name in test, f"{RUN_ELSEWHERE[page]} does not run {page}"


@pytest.mark.parametrize("page", [p for p in PAGES if p not in RUN_ELSEWHERE])
def test_the_page_runs_and_prints_what_it_shows(page: str, tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    if page in NEEDS:
        pytest.importorskip(NEEDS[page], reason=f"{page} needs {NEEDS[page]}")
    passes.available_passes()
    monkeypatch.setattr(passes, "_REGISTRY", dict(passes._REGISTRY))  # a page's own passes stay its own
    env = dict(os.environ, POLYIR_CACHE_DIR=str(tmp_path / "cache"))
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    (tmp_path / "examples").symlink_to(ROOT / "examples")  # python blocks run in tmp_path
    text = (ROOT / page).read_text()
    if not any(block.runs for block in doc_blocks(text)):
        pytest.skip(f"{page} has no block that runs")  # its blocks are outputs or marked (checked above)
    for outcome in run_blocks(text, page, ROOT, tmp_path, env):
        block = outcome.block
        if block.lang == "pycon":
            assert outcome.printed == "", f"{page}:{block.line}: the session differs:\n{outcome.printed}"
        elif block.shown is not None:
            assert outcome.printed.strip("\n") == block.shown.strip("\n"), f"{page}:{block.line}"


SAMPLE = '''# A page

```python
x = 2
print(x * 3)
```

prints

```
6
```

```pycon
>>> print(x + 2)
3
```

```sh
$ echo hello
```

```
hello
```

<!-- not-run: pseudo-code -->
```python
for every tile: ...
```

```
a block nobody runs or explains
```

<!-- not-run: -->
```sh
rm -rf /
```
'''


def test_the_conventions_on_a_sample_page(tmp_path: Path) -> None:
    blocks = doc_blocks(SAMPLE)
    assert [(b.lang, b.runs, b.is_output) for b in blocks] == [
        ("python", True, False), ("", False, True), ("pycon", True, False), ("sh", True, False),
        ("", False, True), ("python", False, False), ("", False, False), ("sh", False, False)]
    assert [b.line for b in blocks if b.problem] == [32, 37]
    assert "marker without a reason" in str(blocks[-1].problem)
    outcomes = run_blocks(SAMPLE, "sample.md", tmp_path, tmp_path)
    assert [o.printed for o in outcomes[::2]] == ["6\n", "hello\n"]
    assert "Expected:\n    3\nGot:\n    4" in outcomes[1].printed  # a session that differs is reported
    with pytest.raises(AssertionError, match="python block at sample.md:3 raised NameError"):
        run_blocks(SAMPLE.replace("x = 2", "del x"), "sample.md", tmp_path, tmp_path)
    with pytest.raises(AssertionError, match="sh block at sample.md:19 exited with 1"):
        run_blocks(SAMPLE.replace("echo hello", "false"), "sample.md", tmp_path, tmp_path)
