"""Pass plugins: a package's ``polyir.passes`` entry points reach the registry
and ``polyir-opt``; a broken one is a warning naming it, not a crash.

Each test installs a small plugin distribution (a module and its
``.dist-info`` with ``entry_points.txt``) into a temporary directory on
``sys.path``, as pip would, and gives the registry a fresh start."""
from __future__ import annotations

import sys
import warnings
from pathlib import Path

import pytest

import polyir
from polyir import passes
from polyir.cli import main
from polyir.plugins import PluginWarning

PLUGIN = '''
from dataclasses import dataclass, replace

from polyir.ir.nodes import For, Module
from polyir.ir.walk import map_loops
from polyir.passes import register_pass


@register_pass("test-plugin-unroll")
@dataclass(frozen=True)
class UnrollInnermost:
    """Mark every innermost loop for unrolling by ``factor``."""

    factor: int = 4

    def run(self, module, ctx):
        def mark(loop):
            if any(isinstance(node, For) for node in loop.body):
                return loop
            return replace(loop, unroll=self.factor)

        return Module(tuple(replace(f, body=map_loops(f.body, mark)) for f in module.functions))


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
    for name in [m for m in sys.modules if m.startswith("polyir_test_plugin")]:
        del sys.modules[name]


def test_a_plugin_module_and_a_plugin_class_are_registered_once(fresh_registry) -> None:
    install(fresh_registry, "polyir_test_plugin", {"polyir_test_plugin": PLUGIN},
            {"unrolling": "polyir_test_plugin", "test-plugin-identity": "polyir_test_plugin:Identity"})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        available = passes.available_passes()
    assert "test-plugin-unroll" in available and "test-plugin-identity" in available
    assert "fuse" in available  # polyir's own passes are still there
    module = polyir.parse(PROGRAM)
    unrolled = polyir.transform(module, "test-plugin-unroll{factor=2},test-plugin-identity")
    inner = unrolled.functions[0].body[0].body[0]
    assert inner.var == "j" and inner.unroll == 2 and unrolled.functions[0].body[0].unroll != 2
    passes.available_passes()  # a second look loads nothing again (a re-import would re-register)
    assert list(sys.modules).count("polyir_test_plugin") == 1


def test_polyir_opt_lists_and_runs_a_plugin_pass(fresh_registry, tmp_path, capsys) -> None:
    install(fresh_registry, "polyir_test_plugin", {"polyir_test_plugin": PLUGIN},
            {"unrolling": "polyir_test_plugin"})
    source = tmp_path / "kernel.pir"
    source.write_text(PROGRAM)
    assert main(["--list-passes"]) == 0
    assert "test-plugin-unroll" in capsys.readouterr().out
    assert main([str(source), "--pipeline", "test-plugin-unroll{factor=3}"]) == 0
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
