"""Passes from other packages: the ``polyir.passes`` entry-point group.

A package makes its passes available to ``polyir.transform`` and
``polyir-opt`` by declaring, in its ``pyproject.toml``::

    [project.entry-points."polyir.passes"]
    my-passes = "my_package.passes"

The value is a module whose import registers its passes (``@register_pass``),
or ``module:Class`` naming one pass class, registered under the entry point's
name unless it registered itself. The registry loads the group once, after
polyir's own passes, the first time it is asked for a pass
(:func:`polyir.passes.available_passes`). A plugin that fails to load
(an import error, a name another pass already has, a class that is not a
valid pass) is left out with a :class:`PluginWarning` naming it and its
distribution; the other passes still work.
"""
from __future__ import annotations

import warnings
from collections.abc import Callable
from importlib import metadata
from typing import Any

GROUP = "polyir.passes"
"""The entry-point group polyir reads pass plugins from."""


class PluginWarning(UserWarning):
    """A pass plugin could not be loaded; its passes are not available."""


def _entry_points(group: str) -> list[metadata.EntryPoint]:
    return sorted(metadata.entry_points(group=group), key=lambda ep: (ep.name, ep.value))


def _distribution(entry_point: metadata.EntryPoint) -> str:
    dist = getattr(entry_point, "dist", None)
    return f"{dist.name} {dist.version}" if dist is not None else "an unknown distribution"


def load_plugins(register: Callable[[str], Callable[[type], type]],
                 registered: Callable[[], dict[str, type]], group: str = GROUP) -> list[str]:
    """Load every entry point of ``group``; returns the names of those that
    loaded. ``register(name)`` is the registry's class decorator (used for a
    ``module:Class`` entry point whose class did not register itself) and
    ``registered()`` its current contents. A failing plugin gives a
    :class:`PluginWarning` instead of an exception."""
    loaded = []
    for entry_point in _entry_points(group):
        try:
            _load_one(entry_point, register, registered)
        except Exception as error:  # a plugin's bug must not break polyir's own passes
            warnings.warn(f"polyir: pass plugin {entry_point.name!r} ({entry_point.value}, from "
                          f"{_distribution(entry_point)}) was not loaded: {type(error).__name__}: {error}",
                          PluginWarning, stacklevel=4)
            continue
        loaded.append(entry_point.name)
    return loaded


def _load_one(entry_point: metadata.EntryPoint, register: Callable[[str], Callable[[type], type]],
              registered: Callable[[], dict[str, type]]) -> None:
    target: Any = entry_point.load()
    if isinstance(target, type):
        if target not in registered().values():
            register(entry_point.name)(target)
    elif not hasattr(target, "__path__") and not hasattr(target, "__file__"):
        raise TypeError(f"{entry_point.value} is a {type(target).__name__}, not a module or a pass class")


__all__ = ["GROUP", "PluginWarning", "load_plugins"]
