"""Data-dependent subscripts the host cannot hoist are checked inside CUDA
kernels (issue 16, ``polyir.ptx.subscripts``): the kernel gets a status
buffer, a failing access is redirected into it, and the runtime raises
``polyir.BoundsError`` after the launches.

Device-free: the generated LLVM IR and PTX (assembled by ``ptxas`` for sm_80
and sm_90 where it is installed), the runtime against the fake CuPy of
tests/gpu/fakecupy.py (kernels run in the interpreter, whose out-of-bounds
error sets the status word as the PTX check would), and the interpreter on
the mapped IR. The test marked ``gpu`` launches an out-of-range gather on a
real device."""
from __future__ import annotations

import re
import sys

import numpy as np
import pytest

from polyir.driver import compile_ir
from polyir.errors import BoundsError
from polyir.ir.interpreter import InterpretError, interpret
from polyir.ir.parser import parse
from polyir.ptx.subscripts import SCRATCH_OFFSET, STATUS_PARAM
from polyir.target import cuda
from tests.gpu import fakecupy
from tests.gpu.ptxas import PTXAS, assemble
from tests.gpu.test_runtime import GATHER

# the index buffer is written by the function: the host cannot hoist the gather
WRITTEN_IDS = """func f(A: f64[N], idx: i64[M], out: f64[M]) {
  for i = 0 to M {
    S0: idx[i] = idx[i] * 2
  }
  for k = 0 to M {
    S1: out[k] = A[idx[k]]
  }
}
"""

# a scatter whose index mixes a loaded value and the loop variable
SCATTER = """func g(A: f32[N], idx: i64[M], v: f32[M]) {
  for i = 0 to M {
    S0: A[idx[i] + i] = v[i]
  }
}
"""

# two index buffers and a second dimension
TWO_SOURCES = """func h(out: f32[M, D], W: f32[V, D], p: i32[M], q: i32[M]) {
  for i = 0 to M {
    for j = 0 to D {
      S0: out[i, j] = W[cast<i64>(p[i]) + cast<i64>(q[i]), j]
    }
  }
}
"""


def _status_kernels(exe) -> list[str]:
    return sorted(name for name, lowered in exe.kernels.items()
                  if any(slot.kind == "extra" and slot.name == STATUS_PARAM for slot in lowered.params))


@pytest.mark.parametrize("text", [WRITTEN_IDS, SCATTER, TWO_SOURCES])
@pytest.mark.parametrize("sm", [80, 90])
def test_the_kernel_checks_its_subscripts_and_ptxas_assembles_it(text: str, sm: int) -> None:
    exe = compile_ir(parse(text), cuda(sm))
    assert exe.bounds.unchecked and _status_kernels(exe)
    # the LLVM IR: the status parameter, the unsigned test, the stored code, the redirect
    assert f"ptr addrspace(1) captures(none) %{STATUS_PARAM}" in exe.llvm_ir or \
        f"%{STATUS_PARAM})" in exe.llvm_ir
    assert re.search(r"icmp (ult|uge) i64", exe.llvm_ir)
    assert f"store i32 2, ptr addrspace(1) %{STATUS_PARAM}" in exe.llvm_ir
    assert re.search(rf"getelementptr inbounds (nuw )?i8, ptr addrspace\(1\) %{STATUS_PARAM}, "
                     rf"i64 {SCRATCH_OFFSET}", exe.llvm_ir)
    # the access goes through the checked pointer (a select, or a phi once LLVM folds it)
    assert re.search(r"%\w+\.checked(\.\w+)? = (select i1 \S+, |phi )ptr addrspace\(1\)", exe.llvm_ir)
    assert "trap" not in exe.llvm_ir and "trap" not in exe.ptx
    # the PTX: an unsigned compare and the status store
    assert re.search(r"setp\.(lt|ge)\.u64", exe.ptx)
    assert re.search(r"st\.global\.(b|u)32\s+\[%rd\d+\], 2;", exe.ptx)
    if PTXAS:
        assemble(exe.ptx, (f"sm_{sm}",))


def test_only_kernels_with_data_dependent_subscripts_get_the_status() -> None:
    exe = compile_ir(parse(WRITTEN_IDS), cuda(80))
    assert _status_kernels(exe) == ["f_k1"] and len(exe.kernels) == 2


def test_hoisted_gathers_and_check_bounds_false_add_nothing() -> None:
    hoisted = compile_ir(parse(GATHER), cuda(80))
    assert hoisted.bounds.gathers and not hoisted.bounds.unchecked
    assert not _status_kernels(hoisted) and STATUS_PARAM not in hoisted.ptx
    unchecked = compile_ir(parse(WRITTEN_IDS), cuda(80), check_bounds=False)
    assert not _status_kernels(unchecked) and STATUS_PARAM not in unchecked.ptx
    assert "selp" not in unchecked.ptx


@pytest.fixture
def fake_cupy(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setitem(sys.modules, "cupy", fakecupy)
    monkeypatch.setattr(fakecupy.RawModule, "launches", [])
    fakecupy.counts.clear()

    def build(text: str, **options):
        exe = compile_ir(parse(text), cuda(80), **options)
        fakecupy.RawModule.current_ir = exe.ir
        return exe

    return build


@pytest.mark.parametrize("on_device", [False, True])
def test_an_out_of_range_in_kernel_gather_is_a_bounds_error(fake_cupy, on_device: bool) -> None:
    exe = fake_cupy(WRITTEN_IDS)
    place = fakecupy.asarray if on_device else np.asarray
    A = np.arange(10.0)
    out = place(np.zeros(4))
    exe(place(A), place(np.array([1, 4, 0, 2])), out)
    np.testing.assert_array_equal(np.asarray(out), [2.0, 8.0, 0.0, 4.0])
    for bad in ([1, 5, 0, 2], [0, -1, 0, 0]):          # 5 * 2 and -1 * 2 are outside A
        with pytest.raises(BoundsError, match=r"checked in the kernel: outputs may be partly "
                                              r"written.*A\[\.\.\. idx\[k\w*\] \.\.\.\] in statement S1 \(line 6\)"):
            exe(place(A), place(np.array(bad)), place(np.zeros(4)))
    out = place(np.zeros(4))                             # the status word was zeroed again
    exe(place(A), place(np.array([3, 3, 0, 1])), out)
    np.testing.assert_array_equal(np.asarray(out), [6.0, 6.0, 0.0, 2.0])


def test_the_status_word_is_read_only_where_kernels_check(fake_cupy) -> None:
    exe = fake_cupy(WRITTEN_IDS)
    args = [fakecupy.asarray(np.arange(10.0)), fakecupy.asarray(np.array([1, 2])),
            fakecupy.zeros(2, np.float64)]
    fakecupy.counts.clear()
    exe(*args)
    assert fakecupy.counts["to_host"] == 1          # the status word, nothing else
    program = exe._runtime
    program._status[0] = 2                          # as a kernel would leave it
    with pytest.raises(BoundsError):
        exe(*args)
    assert int(program._status[0]) == 0
    hoisted = fake_cupy(GATHER)
    ids = fakecupy.asarray(np.array([0, 1], np.int64))
    W = fakecupy.asarray(np.ones((2, 3), np.float32))
    hoisted(fakecupy.zeros((2, 3), np.float32), W, ids)
    assert hoisted._runtime._status is None


def test_a_scatter_outside_its_buffer_is_refused(fake_cupy) -> None:
    exe = fake_cupy(SCATTER)
    A = fakecupy.zeros(6, np.float32)
    v = fakecupy.asarray(np.array([1.0, 2.0, 3.0], np.float32))
    exe(A, fakecupy.asarray(np.array([0, 0, 0])), v)
    np.testing.assert_array_equal(np.asarray(A), [1, 2, 3, 0, 0, 0])
    with pytest.raises(BoundsError, match=r"A\[\.\.\. idx\[i\w*\] \+ i\w* \.\.\.\]"):
        exe(A, fakecupy.asarray(np.array([0, 0, 4])), v)    # 4 + 2 = 6 is past A


@pytest.mark.parametrize("text,args", [
    (WRITTEN_IDS, lambda ids: (np.arange(10.0), np.array(ids), np.zeros(len(ids)))),
    (TWO_SOURCES, lambda ids: (np.zeros((len(ids), 3), np.float32),
                               np.arange(15, dtype=np.float32).reshape(5, 3),
                               np.array(ids, np.int32), np.ones(len(ids), np.int32))),
])
def test_the_interpreter_on_the_mapped_ir_agrees(fake_cupy, text: str, args) -> None:
    exe = fake_cupy(text)
    for ids, outside in (([1, 0, 3], False), ([2, 6, 1], True)):
        ours, reference = args(ids), args(ids)
        failed_here = failed_there = False
        try:
            exe(*ours)
        except BoundsError:
            failed_here = True
        try:
            interpret(exe.ir, *reference)
        except InterpretError as error:
            failed_there = "out of bounds" in str(error)
        assert failed_here == failed_there == outside
        if not failed_here:
            for mine, theirs in zip(ours, reference, strict=True):
                np.testing.assert_array_equal(mine, theirs)


# ------------------------------------------------------------------ real GPU
@pytest.mark.gpu
def test_an_out_of_range_in_kernel_gather_on_the_gpu() -> None:
    import cupy
    sm = 90 if int(cupy.cuda.Device().compute_capability) >= 90 else 80
    exe = compile_ir(parse(WRITTEN_IDS), cuda(sm))
    assert _status_kernels(exe)
    A = cupy.arange(10.0)
    guard = cupy.full(64, 7.0)
    out = guard[8:12]                       # a view: its neighbours must stay untouched
    exe(A, cupy.asarray(np.array([1, 4, 0, 2])), out)
    np.testing.assert_array_equal(cupy.asnumpy(out), [2.0, 8.0, 0.0, 4.0])
    for bad in ([1, 5000, 0, 2], [0, -3, 0, 0], [2**40, 0, 0, 0]):
        with pytest.raises(BoundsError, match="checked in the kernel"):
            exe(A, cupy.asarray(np.array(bad)), out)
    host = cupy.asnumpy(guard)
    assert (host[:8] == 7.0).all() and (host[12:] == 7.0).all()
    exe(A, cupy.asarray(np.array([3, 3, 0, 1])), out)   # the status was zeroed again
    np.testing.assert_array_equal(cupy.asnumpy(out), [6.0, 6.0, 0.0, 2.0])
