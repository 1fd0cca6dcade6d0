"""Calling convention of native executables: binding, checks, errors."""
from __future__ import annotations

import numpy as np
import pytest

import polyir
from polyir import ArgumentError, CompileError

SCALE = """
func scale(y: f32[N, M], x: f32[N, M], alpha: f32[], shift: index) {
  for i = 0 to N {
    for j = 0 to M {
      S0: y[i, j] = x[i, j] * alpha[] + cast<f32>(shift)
    }
  }
}"""


@pytest.fixture(scope="module")
def scale():
    from polyir.cpu.jit import build_cpu
    from polyir.target import cpu
    return build_cpu(polyir.parse(SCALE), cpu(1), cache_dir=None)


def _inputs():
    return np.full((3, 4), 7.0, np.float32), np.arange(12, dtype=np.float32).reshape(3, 4)


def test_good_call_and_executable_attributes(scale):
    y, x = _inputs()
    scale(y, x, 2.0, 1)
    np.testing.assert_array_equal(y, x * 2 + 1)
    assert scale.ptx is None
    assert "define i32 @\"polyir.scale\"" in scale.llvm_ir
    assert scale.ir.entry.name == "scale"


@pytest.mark.parametrize("bad, message", [
    (lambda y, x: (y, x.astype(np.float64), 2.0, 1), "dtype float64"),
    (lambda y, x: (y, x[:, :3].copy(), 2.0, 1), "shape (3, 3)"),
    (lambda y, x: (y, x.reshape(12), 2.0, 1), "rank 1"),
    (lambda y, x: (y, x, 2.0), "takes 4 arguments"),
    (lambda y, x: (y, x, "2", 1), "str"),
    (lambda y, x: (y, x, np.float64(2.0), 1), "float64 scalar"),
    (lambda y, x: (y, x, 2.0, 1.5), "(symbol 'shift') must be an int"),
    (lambda y, x: (y, x, 2.0, True), "(symbol 'shift') must be an int"),
    (lambda y, x: (y, [[1.0]], 2.0, 1), "list"),
    (lambda y, x: (y, y, 2.0, 1), "overlap"),
    (lambda y, x: (np.broadcast_to(y[0], y.shape), x, 2.0, 1), "read-only"),
])
def test_bad_arguments_raise_and_write_nothing(scale, bad, message):
    y, x = _inputs()
    args = bad(y, x)
    before = y.copy()
    with pytest.raises(ArgumentError) as info:
        scale(*args)
    assert message in str(info.value)
    assert "scale()" in str(info.value)
    np.testing.assert_array_equal(y, before)


def test_symbol_consistency_is_checked(native):
    ex = native("""
func f(y: f32[N], x: f32[N + 2], z: i32[2 * N]) {
  for i = 0 to N {
    S0: y[i] = x[i + 2] + cast<f32>(z[2 * i])
  }
}""")
    y = np.zeros(3, np.float32)
    with pytest.raises(ArgumentError, match=r"'x'.*shape \(4,\).*\[N \+ 2\] = \(5,\)"):
        ex(y, np.zeros(4, np.float32), np.zeros(6, np.int32))
    with pytest.raises(ArgumentError, match="'z'"):
        ex(y, np.zeros(5, np.float32), np.zeros(5, np.int32))
    assert not y.any()
    ex(y, np.arange(5, dtype=np.float32), np.arange(6, dtype=np.int32))
    np.testing.assert_array_equal(y, [2, 5, 8])


def test_torch_tensors_are_used_in_place():
    torch = pytest.importorskip("torch")
    from polyir.cpu.jit import build_cpu
    from polyir.target import cpu
    ex = build_cpu(polyir.parse(SCALE), cpu(1), cache_dir=None)
    y = torch.zeros(3, 4)
    x = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    pointer = y.data_ptr()
    ex(y, x, torch.tensor(3.0), 2)
    assert y.data_ptr() == pointer
    assert torch.equal(y, x * 3 + 2)
    with pytest.raises(ArgumentError, match="dtype int64"):
        ex(y, x.long(), 3.0, 2)


def test_non_contiguous_arrays_are_copied_back(scale):
    y = np.zeros((4, 3), np.float32).T       # a transposed (3, 4) view
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    scale(y, x[:, ::1], 1.0, 0)
    np.testing.assert_array_equal(y, x)


def test_read_only_overlap_is_allowed(native):
    ex = native("""
func f(C: f64[N, N], A: f64[N, N], B: f64[N, N]) {
  for i = 0 to N {
    for j = 0 to N {
      for k = 0 to N {
        S0: C[i, j] = C[i, j] + A[i, k] * B[k, j]
      }
    }
  }
}""")
    A = np.arange(9, dtype=np.float64).reshape(3, 3)
    C = np.zeros((3, 3))
    ex(C, A, A)
    np.testing.assert_array_equal(C, A @ A)


def test_interleaved_strided_views_of_one_array_are_not_an_overlap(scale):
    # issue 16: byte ranges of C[:, ::2] and C[:, 1::2] meet, but no byte is
    # shared; the exact check accepts them and the result is right.
    C = np.arange(24, dtype=np.float32).reshape(3, 8)
    even, odd = C[:, ::2], C[:, 1::2]
    expected_even = odd * 2 + 1
    scale(even, odd, 2.0, 1)
    np.testing.assert_array_equal(C[:, ::2], expected_even)
    np.testing.assert_array_equal(C[:, 1::2], np.arange(24, dtype=np.float32).reshape(3, 8)[:, 1::2])


@pytest.mark.parametrize("views", [
    lambda C: (C[:, 0:8:2], C[:, 2:10:2]),      # same parity, shifted: shares bytes
    lambda C: (C[:, 1:9:2], C[:, ::-2][:, ::-1][:, :4]),  # the same bytes through a reversed view
    lambda C: (C[0:3, 0:4], C.T[0:4, 0:3].T),   # a transposed view onto the same block
])
def test_strided_views_sharing_a_byte_are_refused_and_nothing_written(scale, views):
    C = np.arange(30, dtype=np.float32).reshape(3, 10)
    before = C.copy()
    y, x = views(C)
    assert np.shares_memory(y, x)
    with pytest.raises(ArgumentError, match="overlap in memory"):
        scale(y, x, 2.0, 1)
    np.testing.assert_array_equal(C, before)


@pytest.mark.parametrize("text, construct", [
    ("""
kernel k(A: f32[N]) {
  for t = 0 to 32 gpu=thread.x {
    S0: A[t] = 1.0
    barrier
  }
}

func f(A: f32[N]) {
  launch k grid(1, 1, 1) block(32, 1, 1) (A)
}""", "launch of kernel 'k'"),
    ("""
func f(A: f32[N]) {
  for t = 0 to 32 gpu=block.x {
    S0: A[t] = 1.0
  }
}""", "gpu=block.x"),
    ("""
func f(A: f32[N]) {
  for t = 0 to 32 {
    S0: A[t] = 1.0
    barrier
  }
}""", "barrier"),
])
def test_gpu_constructs_are_refused_by_name(native, text, construct):
    with pytest.raises(CompileError, match=construct.replace(".", r"\.")):
        native(text)


def test_unresolvable_external_function_is_a_compile_error():
    import llvmlite.binding as llvm

    from polyir.cpu.jit import _check_external_symbols, _initialise
    _initialise()
    ref = llvm.parse_assembly("""
declare float @polyir_no_such_function(float)
declare float @erff(float)
define float @f(float %x) {
  %y = call float @polyir_no_such_function(float %x)
  %z = call float @erff(float %y)
  ret float %z
}""")
    with pytest.raises(CompileError, match="polyir_no_such_function"):
        _check_external_symbols(ref, "f")


@pytest.mark.parametrize("name", ["calloc", "free", "exp", "main"])
def test_function_names_do_not_clash_with_c_symbols(native, name):
    ex = native(f"""
func {name}(y: f32[N]) {{
  local big: f32[N] @global
  for i = 0 to N {{
    S0: big[i] = exp(y[i])
    S1: y[i] = big[i] + 1.0
  }}
}}""")
    y = np.zeros(5, np.float32)
    ex(y)
    np.testing.assert_array_equal(y, np.full(5, 2.0, np.float32))
