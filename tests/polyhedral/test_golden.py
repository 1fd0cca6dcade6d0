"""Golden output of ``reschedule,mark-parallel`` on classic kernels.

The printed IR is compared with ``golden/<kernel>.ir``; each golden file is
also checked to parse back, to mark the expected loops parallel, and to
compute what the kernel computes (also with parallel loops reversed and
shuffled, in test_codegen)."""
from __future__ import annotations

from pathlib import Path

import pytest

from polyir.ir.nodes import Module
from polyir.ir.parser import parse
from polyir.passes import transform
from polyir.polyhedral.extract import walk_loops
from polyir.testing import assert_equivalent
from tests.polyhedral.helpers import kernel

GOLDEN = Path(__file__).parent / "golden"

# kernel -> parallel flags of its loops in pre-order after reschedule,mark-parallel
EXPECTED_PARALLEL = {
    "matmul": [True, True, False],          # i, j parallel; k is the reduction
    "jacobi1d": [False, True],              # wavefront: time-skewed outer, parallel inner
    "seidel2d": [False, True, True],        # wavefront over t, i, j
    "trisolv": [True, False, True],         # the copy loop; the solve as a wavefront
    "trsm": [True, False, False],           # the right-hand sides are independent
    "lu": [False, True, True],              # k sequential, i and j parallel
}


@pytest.mark.parametrize("name", sorted(EXPECTED_PARALLEL))
def test_reschedule_mark_parallel_golden(name):
    result = transform(Module((kernel(name),)), "reschedule,mark-parallel")
    expected = (GOLDEN / f"{name}.ir").read_text()
    assert str(result) == expected
    assert parse(expected) == result
    flags = [loop.parallel for loop, _ in walk_loops(result.entry.body)]
    assert flags == EXPECTED_PARALLEL[name]
    assert_equivalent(Module((kernel(name),)), result, trials=1, parallel_order="shuffle",
                      sizes={"N": 5, "M": 4, "K": 3, "T": 2}, rtol=1e-9, atol=1e-9)
