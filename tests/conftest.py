"""Test configuration: a private compile cache, Hypothesis profiles and the GPU marker.

Profiles: ``ci`` (default; fast, for 2-core CI machines) and ``deep``
(``HYPOTHESIS_PROFILE=deep pytest``; many more examples).
"""
from __future__ import annotations

import atexit
import copy
import os
import shutil
import tempfile
from collections.abc import Callable

import pytest
from hypothesis import HealthCheck, settings

# Nothing the tests compile may touch the user's own compile cache or cache key:
# every test process (each xdist worker too) gets its own, removed at exit. Set
# before anything imports polyir; subprocesses inherit it.
_PRIVATE = tempfile.mkdtemp(prefix="polyir-tests-")
os.environ["POLYIR_CACHE_DIR"] = os.path.join(_PRIVATE, "cache")
os.environ["POLYIR_CONFIG_DIR"] = os.path.join(_PRIVATE, "config")
atexit.register(shutil.rmtree, _PRIVATE, ignore_errors=True)

settings.register_profile(
    "ci", max_examples=30, deadline=None, derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.register_profile(
    "deep", max_examples=1000, deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

DEEP = os.environ.get("HYPOTHESIS_PROFILE") == "deep"


def assert_runs_alike(args: list, *runs: Callable[..., object], what: str = "") -> None:
    """Each of ``runs`` called on its own copy of ``args``: every array argument
    ends bit for bit as after the first run (NaNs equal); ``what`` names the case."""
    import numpy as np

    results = []
    for run in runs:
        mine = copy.deepcopy(args)
        run(*mine)
        results.append(mine)
    for other in results[1:]:
        for got, want in zip(other, results[0], strict=True):
            if isinstance(want, np.ndarray):
                assert np.array_equal(got, want, equal_nan=True), what


def examples(ci: int, deep: int | None = None) -> int:
    """Number of Hypothesis examples for a test: ``ci`` normally, ``deep`` on demand."""
    return (deep if deep is not None else ci * 20) if DEEP else ci


def _gpu_available() -> bool:
    try:
        import cupy  # noqa: F401

        return cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:
        return False


HAS_GPU = _gpu_available()
HAS_PTXAS = shutil.which("ptxas") is not None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    skip_gpu = pytest.mark.skip(reason="needs a CUDA GPU and CuPy")
    for item in items:
        if item.get_closest_marker("gpu") is not None and not HAS_GPU:  # not keywords: tests/gpu is a directory name
            item.add_marker(skip_gpu)
