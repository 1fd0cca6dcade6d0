"""The numpy formulations of bench/numpy_kernels.py against the plain-Python
corpus kernels (the oracle), at the corpus' sizes and at larger ones."""
from __future__ import annotations

import numpy as np
import pytest

from bench.numpy_kernels import NO_FORMULATION, NUMPY_KERNELS
from polyir.testing.corpus import CORPUS, corpus_kernel

FIXED = {"tsteps", "pad", "k"}
"""Size names that are not scaled up (time steps, padding, filter size)."""


def test_every_corpus_kernel_has_a_formulation_or_a_reason() -> None:
    names = {k.name for k in CORPUS}
    assert set(NUMPY_KERNELS) | set(NO_FORMULATION) == names
    assert not set(NUMPY_KERNELS) & set(NO_FORMULATION)


@pytest.mark.parametrize("name", sorted(NUMPY_KERNELS))
@pytest.mark.parametrize("scale", [1, 3])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_numpy_formulation_matches_plain_python(name: str, scale: int, dtype: type) -> None:
    kernel = corpus_kernel(name)
    sizes = {key: value if key in FIXED else value * scale for key, value in kernel.sizes.items()}
    args = kernel.make_args(sizes, np.random.default_rng(scale), dtype=dtype)
    expected = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    got = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    kernel.func(*expected)
    NUMPY_KERNELS[name](*got)
    tolerance = 1e-10 if dtype == np.float64 else 2e-4
    for position, (want, have) in enumerate(zip(expected, got, strict=True)):
        if isinstance(want, np.ndarray):
            assert have.dtype == want.dtype
            np.testing.assert_allclose(have, want, rtol=tolerance, atol=tolerance,
                                       err_msg=f"{name}: argument {position}")
