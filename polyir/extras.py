"""Optional dependencies: which pyproject extra provides which module.

Features that need an optional package (``polyir.compile``: torch,
``polyir.jax``: jax, ``polyir.testing``: hypothesis, ``polyir.draw``:
matplotlib) import it inside :func:`requiring`, which turns the bare
``ModuleNotFoundError`` of a missing one into a
:class:`polyir.errors.MissingDependency` that says what to install.
"""
from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from polyir.errors import MissingDependency

EXTRA_OF = {
    "torch": "torch",
    "jax": "jax",
    "jaxlib": "jax",
    "hypothesis": "test",
    "matplotlib": "plots",
    "cupy": "gpu",
    "xdsl": "mlir",
}
"""Top-level module -> the extra (``pip install 'polyir[EXTRA]'``) that installs it."""


def install_hint(module: str) -> str | None:
    """``pip install 'polyir[EXTRA]'`` for a module an extra provides, else ``None``."""
    extra = EXTRA_OF.get(module.split(".")[0])
    return None if extra is None else f"pip install 'polyir[{extra}]'"


@contextmanager
def requiring(feature: str) -> Iterator[None]:
    """Run the imports of ``feature`` (e.g. ``"polyir.compile"``); a missing
    module that an extra provides raises :class:`MissingDependency` naming
    the feature, the module and the install command. Other import errors
    pass through unchanged."""
    try:
        yield
    except MissingDependency:
        raise
    except ModuleNotFoundError as error:
        missing = (error.name or "").split(".")[0]
        hint = install_hint(missing)
        if hint is None:
            raise
        raise MissingDependency(f"{feature} needs {missing}, which is not installed: {hint}",
                                name=missing) from error
