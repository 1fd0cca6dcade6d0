"""The calling convention: argument errors name the parameter and write nothing."""
from __future__ import annotations

import numpy as np
import pytest

from polyir import ArgumentError
from tests.interpreter.helpers import ir, run

SRC = """
func f(A: f32[N, M], B: f32[M], s: f32[], n: index) {
  for i = 0 to N {
    for j = 0 to M {
      S0: A[i, j] = A[i, j] + B[j] * s[]
    }
  }
  S1: B[0] = cast<f32>(n)
}
"""


def fresh():
    return np.ones((3, 4), np.float32), np.arange(4, dtype=np.float32)


def test_correct_call():
    A, B = fresh()
    run(SRC, A, B, 2.0, 7)
    np.testing.assert_array_equal(A, np.broadcast_to(1 + np.arange(4, dtype=np.float32) * 2, (3, 4)))
    assert B[0] == 7 and B[1] == 1


@pytest.mark.parametrize("mutate, fragment", [
    (lambda A, B: (A, B, 2.0), "takes 4 arguments"),
    (lambda A, B: (A, B, 2.0, 7, 1), "takes 4 arguments"),
    (lambda A, B: (A[0], B, 2.0, 7), "'A'"),
    (lambda A, B: (A.astype(np.float64), B, 2.0, 7), "'A'"),
    (lambda A, B: (A, B[:3], 2.0, 7), "'B'"),
    (lambda A, B: (A, B.astype(np.int32), 2.0, 7), "'B'"),
    (lambda A, B: (A, B, "x", 7), "'s'"),
    (lambda A, B: (A, B, 2.0, 7.5), "'n'"),
    (lambda A, B: (A, B, 2.0, True), "'n'"),
    (lambda A, B: (A.tolist(), B, 2.0, 7), "'A'"),
])
def test_argument_errors_name_the_parameter_and_write_nothing(mutate, fragment):
    A, B = fresh()
    A0, B0 = A.copy(), B.copy()
    args = mutate(A, B)
    with pytest.raises(ArgumentError, match=fragment):
        run(SRC, *args)
    np.testing.assert_array_equal(A, A0)
    np.testing.assert_array_equal(B, B0)


def test_shape_inconsistent_with_symbols():
    src = """
func f(A: f64[N], B: f64[N + 1], C: f64[2*N]) {
  for i = 0 to N {
    S0: A[i] = B[i + 1] + C[2*i]
  }
}
"""
    A, B, C = np.zeros(3), np.ones(4), np.ones(6)
    run(src, A, B, C)
    assert list(A) == [2.0, 2.0, 2.0]
    A[:] = 0
    with pytest.raises(ArgumentError, match=r"'B'.*dimension 0 is 5, expected N \+ 1 = 4"):
        run(src, A, np.ones(5), C)
    with pytest.raises(ArgumentError, match="'C'"):
        run(src, A, B, np.ones(7))
    assert not A.any()


def test_symbol_that_cannot_be_inferred():
    src = """
func f(A: f64[2*N]) {
  for i = 0 to N {
    S0: A[i] = 1.0:f64
  }
}
"""
    A = np.zeros(4)
    with pytest.raises(ArgumentError, match="cannot infer symbol"):
        run(src, A)
    assert not A.any()


def test_explicit_symbol_must_agree_with_shapes():
    src = """
func f(A: f64[N], N: index) {
  for i = 0 to N {
    S0: A[i] = 1.0:f64
  }
}
"""
    A = np.zeros(4)
    with pytest.raises(ArgumentError, match="'A'"):
        run(src, A, 3)
    run(src, A, 4)
    assert A.all()


def test_read_only_output_is_refused_but_read_only_input_accepted():
    src = """
func f(A: f64[N], B: f64[N]) {
  for i = 0 to N {
    S0: A[i] = B[i]
  }
}
"""
    A, B = np.zeros(3), np.ones(3)
    B.flags.writeable = False
    run(src, A, B)
    assert A.all()
    A.flags.writeable = False
    with pytest.raises(ArgumentError, match="read-only"):
        run(src, A, B.copy())


def test_scalar_params_by_value_and_range_checked():
    src = """
func f(A: i8[N], k: i8[]) {
  for i = 0 to N {
    S0: A[i] = k[]
  }
  S1: k[] = 0:i8
}
"""
    A = np.zeros(2, np.int8)
    run(src, A, 5)
    assert list(A) == [5, 5]
    with pytest.raises(ArgumentError, match="does not fit"):
        run(src, A, 300)
    k = np.array(9, np.int8)
    run(src, A, k)
    assert k[()] == 0 and list(A) == [9, 9]


def test_function_option_and_kernel_called_directly():
    from polyir.ir.interpreter import InterpretError
    module = ir("""
func first(A: f64[N]) {
  for i = 0 to N {
    S0: A[i] = 1.0:f64
  }
}

func second(A: f64[N]) {
  for i = 0 to N {
    S1: A[i] = 2.0:f64
  }
}

kernel k(A: f64[N]) {
  for i = 0 to N gpu=thread.x {
    S2: A[i] = 3.0:f64
  }
}
""")
    A = np.zeros(2)
    run(module, A, function="second")
    assert list(A) == [2.0, 2.0]
    run(module, A)
    assert list(A) == [1.0, 1.0]
    with pytest.raises(InterpretError, match="kernel"):
        run(module, A, function="k")
    with pytest.raises(ArgumentError, match="nope"):
        run(module, A, function="nope")


def test_torch_tensor_errors_and_bf16_tensors():
    torch = pytest.importorskip("torch")
    src = """
func f(A: bf16[N]) {
  for i = 0 to N {
    S0: A[i] = A[i] * 3.0:bf16 + 0.01:bf16
  }
}
"""
    t = torch.tensor([1.0, 2.5, -3.0], dtype=torch.bfloat16)
    expected = (t.float() * 3.0 + torch.tensor(0.01, dtype=torch.bfloat16).float()).to(torch.bfloat16)
    run(src, t)
    assert torch.equal(t, expected)
    with pytest.raises(ArgumentError, match="'A'"):
        run(src, torch.zeros(3, dtype=torch.float16))
