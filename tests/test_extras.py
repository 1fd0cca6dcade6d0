"""A feature whose optional dependency is missing says which extra to install."""
from __future__ import annotations

import subprocess
import sys

import pytest

import polyir
from polyir.errors import MissingDependency
from polyir.extras import install_hint, requiring

# Each case hides one package (None in sys.modules makes its import fail, as a
# missing package does) in a fresh interpreter, then uses the feature.
_HIDDEN = """
import sys
sys.modules[{module!r}] = None
import polyir
try:
    {use}
except polyir.MissingDependency as error:
    assert isinstance(error, ModuleNotFoundError) and error.name == {module!r}, error
    print(error)
else:
    raise SystemExit("no error")
"""

CASES = [
    ("torch", "polyir.compile(None, ())", "polyir.compile needs torch", "polyir[torch]"),
    ("hypothesis", "import polyir.testing", "polyir.testing needs hypothesis", "polyir[test]"),
    ("jax", "polyir.jax.jit", "polyir.jax needs jax", "polyir[jax]"),
]


@pytest.mark.parametrize(("module", "use", "says", "extra"), CASES, ids=[c[0] for c in CASES])
def test_missing_extra_names_the_install_command(module, use, says, extra) -> None:
    result = subprocess.run([sys.executable, "-c", _HIDDEN.format(module=module, use=use)],
                            capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    assert says in result.stdout and f"pip install '{extra}'" in result.stdout


def test_other_import_errors_pass_through() -> None:
    with pytest.raises(ModuleNotFoundError) as caught, requiring("a feature"):
        import polyir_no_such_module  # noqa: F401
    assert not isinstance(caught.value, MissingDependency)
    assert install_hint("polyir_no_such_module") is None
    assert install_hint("matplotlib.pyplot") == "pip install 'polyir[plots]'"
    assert polyir.MissingDependency is MissingDependency
