"""Pass plugins: a package's ``polyir.passes`` entry points reach the registry
and ``polyir-opt``; a broken one is a warning naming it, not a crash.

Each test installs a small plugin distribution (a module and its
``.dist-info`` with ``entry_points.txt``) into a temporary directory on
``sys.path``, as pip would, and gives the registry a fresh start."""
from __future__ import annotations

import re
import sys
import warnings
from pathlib import Path

import pytest

import polyir
from polyir import passes
from polyir.cli import main
from polyir.plugins import PluginWarning
from polyir.testing.doc_blocks import doc_blocks

DOC = (Path(__file__).resolve().parents[2] / "docs" / "passes.md").read_text()
# The plugin of docs/passes.md: its "Writing a pass" module, and its entry point.
DOC_PASS = next(b.source for b in doc_blocks(DOC) if b.lang == "python" and "@register_pass" in b.source)
DOC_ENTRY_POINTS = dict(re.findall(r'^([\w-]+) = "([\w.:]+)"', next(
    b.source for b in doc_blocks(DOC) if b.lang == "toml"), re.M))

IDENTITY = '''
from dataclasses import dataclass


@dataclass(frozen=True)
class Identity:
    """Leave the module as it is (registered by its entry point's name)."""

    def run(self, module, ctx):
        return module
'''

PROGRAM = "func f(A: f32[N, M]) {\n  for i = 0 to N {\n    for j = 0 to M {\n      S0: A[i, j] = 1.0\n    }\n  }\n}\n"


def install(site: Path, distribution: str, modules: dict[str, str], entry_points: dict[str, str]) -> None:
    """What pip leaves for a distribution: its modules and a .dist-info."""
    for name, source in modules.items():
        (site / f"{name}.py").write_text(source)
    info = site / f"{distribution}-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {distribution}\nVersion: 1.0\n")
    lines = "".join(f"{name} = {value}\n" for name, value in entry_points.items())
    (info / "entry_points.txt").write_text(f"[polyir.passes]\n{lines}")


@pytest.fixture
def fresh_registry(tmp_path, monkeypatch):
    """A registry that loads again (built-in passes are kept), with ``tmp_path`` on sys.path."""
    passes.available_passes()
    monkeypatch.setattr(passes, "_REGISTRY", dict(passes._REGISTRY))
    monkeypatch.setattr(passes, "_loaded", False)
    monkeypatch.syspath_prepend(str(tmp_path))
    yield tmp_path
    for name in [m for m in sys.modules if m.startswith("polyir_test_plugin") or m == "my_passes"]:
        del sys.modules[name]


def test_the_documented_plugin_and_a_plugin_class_are_registered_once(fresh_registry) -> None:
    assert DOC_ENTRY_POINTS == {"my-passes": "my_passes"}
    install(fresh_registry, "my_package", {"my_passes": DOC_PASS}, DOC_ENTRY_POINTS)
    install(fresh_registry, "polyir_test_plugin", {"polyir_test_plugin": IDENTITY},
            {"test-plugin-identity": "polyir_test_plugin:Identity"})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        available = passes.available_passes()
    assert available["unroll-inner"].__module__ == "my_passes"
    assert "test-plugin-identity" in available and "fuse" in available  # polyir's own are there too
    module = polyir.parse(PROGRAM)
    unrolled = polyir.transform(module, "unroll-inner{factor=2},test-plugin-identity")
    inner = unrolled.functions[0].body[0].body[0]
    assert inner.var == "j" and inner.unroll == 2 and unrolled.functions[0].body[0].unroll != 2
    loaded = sys.modules["my_passes"]
    passes.available_passes()  # a second look loads nothing again
    assert sys.modules["my_passes"] is loaded


def test_polyir_opt_lists_and_runs_the_documented_plugin(fresh_registry, tmp_path, capsys) -> None:
    install(fresh_registry, "my_package", {"my_passes": DOC_PASS}, DOC_ENTRY_POINTS)
    source = tmp_path / "kernel.pir"
    source.write_text(PROGRAM)
    assert main(["--list-passes"]) == 0
    assert "unroll-inner" in capsys.readouterr().out
    assert main([str(source), "-p", "unroll-inner{factor=3}"]) == 0
    assert "for j = 0 to M unroll=3 {" in capsys.readouterr().out


def test_a_broken_plugin_is_a_warning_naming_it(fresh_registry) -> None:
    install(fresh_registry, "polyir_test_plugin_broken",
            {"polyir_test_plugin_broken": "import polyir_module_that_does_not_exist\n",
             "polyir_test_plugin_clash": "from polyir.transforms.simplify_bounds import SimplifyBounds\n"
                                         "class Other(SimplifyBounds):\n    '''Not simplify-bounds.'''\n"},
            {"broken": "polyir_test_plugin_broken", "simplify-bounds": "polyir_test_plugin_clash:Other"})
    with pytest.warns(PluginWarning) as caught:
        available = passes.available_passes()
    messages = sorted(str(w.message) for w in caught)
    assert len(messages) == 2
    assert "pass plugin 'broken' (polyir_test_plugin_broken, from polyir_test_plugin_broken 1.0)" in messages[0]
    assert "polyir_module_that_does_not_exist" in messages[0]
    assert "pass plugin 'simplify-bounds'" in messages[1] and "already registered" in messages[1]
    assert available["simplify-bounds"].__module__ == "polyir.transforms.simplify_bounds"
    assert polyir.transform(polyir.parse(PROGRAM), "simplify-bounds") == polyir.parse(PROGRAM)
