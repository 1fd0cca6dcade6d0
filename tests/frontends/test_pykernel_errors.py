"""Refusals (``UnsupportedSyntax`` naming the construct, with the real file and
line) and call-time ``ArgumentError``s (raised before any array is written)."""
from __future__ import annotations

import inspect
import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import polyir

SCALE = 2.0


def _marked_line(func: Callable[..., Any]) -> int:
    """The line of ``func`` carrying the ``# REFUSED`` marker."""
    lines, first = inspect.getsourcelines(func)
    marked = [first + n for n, line in enumerate(lines) if "# REFUSED" in line]
    assert len(marked) == 1, "exactly one marker per refused kernel"
    return marked[0]


# ---------------------------------------------------- refused at decoration
def k_while(A):
    i = 0
    while i < 3:  # REFUSED
        A[0] = 1.0
        i += 1


def k_break(A):
    for i in range(A.shape[0]):
        if i > 2:
            break  # REFUSED
        A[i] = 1.0


def k_continue(A):
    for i in range(A.shape[0]):
        if i > 2:
            continue  # REFUSED
        A[i] = 1.0


def k_return_value(A):
    A[0] = 1.0
    return A  # REFUSED


def k_early_return(A):
    A[0] = 1.0
    return  # REFUSED
    A[1] = 2.0


def k_return_in_if(A):
    for i in range(A.shape[0]):
        if i == 3:
            return  # REFUSED
        A[i] = 1.0


def k_return_in_loop(A):
    for i in range(A.shape[0]):
        A[i] = 1.0
        return  # REFUSED


def helper(x):
    return x + 1.0


def k_call(A):
    for i in range(A.shape[0]):
        A[i] = helper(A[i])  # REFUSED


def k_print(A):
    for i in range(A.shape[0]):
        print(A[i])  # REFUSED


def k_slice(A):
    for i in range(A.shape[0]):
        A[i, 1:3] = 0.0  # REFUSED


def k_numpy(A, out):
    out[0] = np.sum(A)  # REFUSED


def k_nested_def(A):
    def inner(x):  # REFUSED
        return x
    A[0] = 1.0


def k_lambda(A):
    f = lambda x: x  # REFUSED  # noqa: E731, F841
    A[0] = 1.0


def k_global(A):
    for i in range(A.shape[0]):
        A[i] = A[i] * SCALE  # REFUSED


def _make_closure() -> Callable[..., Any]:
    factor = 3.0

    def k_closure(A):
        for i in range(A.shape[0]):
            A[i] = A[i] * factor  # REFUSED
    return k_closure


k_closure = _make_closure()


def k_for_over_array(A, B):
    for x in A:  # REFUSED
        B[0] = x


def k_for_else(A):
    for i in range(3):  # REFUSED
        A[i] = 1.0
    else:
        A[0] = 2.0


def k_bitwise(A, B):
    for i in range(A.shape[0]):
        B[i] = A[i] & 1  # REFUSED


def k_is(A):
    for i in range(A.shape[0]):
        if A[i] is None:  # REFUSED
            A[i] = 0.0


def k_list(A):
    xs = [1.0, 2.0]  # REFUSED  # noqa: F841
    A[0] = 1.0


def k_comprehension(A):
    for i in range(A.shape[0]):
        A[i] = sum([A[j] for j in range(3)])  # REFUSED


def k_attribute(A, B):
    for i in range(A.shape[0]):
        B[i, 0] = A.T[0, i]  # REFUSED


def k_method(A, out):
    out[0] = A.sum()  # REFUSED


def k_param_assign(A, n):
    n = 3  # REFUSED
    A[0] = n


def k_loop_var_assign(A):
    for i in range(A.shape[0]):
        i = 2  # REFUSED
        A[i] = 1.0


def k_math_module_value(A):
    m = math  # REFUSED  # noqa: F841
    A[0] = 1.0


def k_import(A):
    import os  # REFUSED  # noqa: F401
    A[0] = 1.0


def k_with(A):
    with open("x"):  # REFUSED
        A[0] = 1.0


def k_string(A):
    for i in range(A.shape[0]):
        A[i] = "x"  # REFUSED


DECORATION_REFUSALS = [
    (k_while, "while loop"), (k_break, "break"), (k_continue, "continue"),
    (k_return_value, "return with a value"), (k_early_return, "'return' before the end"),
    (k_return_in_if, "'return' inside a loop or an 'if'"),
    (k_return_in_loop, "'return' inside a loop or an 'if'"),
    (k_call, "call to function 'helper'"), (k_print, "call to function 'print'"),
    (k_slice, "slicing 'A[i, 1:3]'"), (k_numpy, "numpy/torch call 'np.sum(...)'"),
    (k_nested_def, "nested function definition"), (k_lambda, "lambda"),
    (k_global, "global variable 'SCALE'"), (k_closure, "free variable 'factor'"),
    (k_for_over_array, "for loop over 'A'"), (k_for_else, "for-else"),
    (k_bitwise, "bitwise operator '&'"), (k_is, "'is' comparison"), (k_list, "list display"),
    (k_comprehension, "call to function 'sum'"), (k_attribute, "attribute 'A.T'"),
    (k_method, "method call 'A.sum(...)'"), (k_param_assign, "assignment to parameter 'n'"),
    (k_loop_var_assign, "assignment to loop variable 'i'"), (k_math_module_value, "'math' used as a value"),
    (k_import, "import"), (k_with, "with statement"), (k_string, "constant 'x'"),
]


@pytest.mark.parametrize("func,construct", DECORATION_REFUSALS,
                         ids=[f.__name__ for f, _ in DECORATION_REFUSALS])
def test_refused_at_decoration(func: Callable[..., Any], construct: str) -> None:
    with pytest.raises(polyir.UnsupportedSyntax) as info:
        polyir.kernel(func)
    error = info.value
    assert construct in error.message
    assert error.filename == __file__
    assert error.line == _marked_line(func), str(error)
    assert f"{__file__}:{error.line}:" in str(error)


def test_refused_with_decorator_syntax() -> None:
    with pytest.raises(polyir.UnsupportedSyntax, match="while loop"):
        @polyir.kernel(target="interpret")
        def bad(A):
            while A[0] > 0:
                A[0] -= 1.0


# ------------------------------------------------ refused when lowering
def k_data_dependent_bound(A, idx):
    for i in range(idx.shape[0]):
        for j in range(idx[i]):  # REFUSED
            A[j] = 1.0


def k_temp_bound(A):
    n = A.shape[0]
    m = 0
    for _ in range(n):
        m += 1
    for i in range(m):  # REFUSED
        A[i] = 1.0


def k_nonaffine_bound(A):
    for i in range(A.shape[0]):
        for j in range(i * i):  # REFUSED
            A[j] = 1.0


def k_shape_in_bound(A):
    for i in range(2):
        for j in range(A.shape[i]):  # REFUSED
            A[0, j] = 1.0


def k_variable_step(A, s):
    for i in range(0, A.shape[0], s):  # REFUSED
        A[i] = 1.0


def k_float_bound(A):
    for _ in range(2.5):  # REFUSED
        A[0] = 1.0


def k_max_in_stop(A, n, m):
    for i in range(max(n, m)):  # REFUSED
        A[i] = 1.0


def k_data_if_with_loop(A, B):
    for i in range(A.shape[0]):
        if A[i] > 0.0:
            for j in range(3):  # REFUSED
                B[j] += 1.0


def k_loop_var_after_loop(A):
    for i in range(A.shape[0]):
        A[i] = 1.0
    A[0] = i  # REFUSED


def k_nested_same_var(A):
    for i in range(A.shape[0]):
        for i in range(3):  # REFUSED
            A[i] = 1.0


def k_float_subscript(A):
    for i in range(A.shape[0]):
        A[i * 0.5] = 1.0  # REFUSED


LOWERING_REFUSALS = [
    (k_data_dependent_bound, "data-dependent loop bound 'idx[i]'", [np.zeros(4), np.ones(3, np.int64)]),
    (k_temp_bound, "data-dependent loop bound 'm'", [np.zeros(4)]),
    (k_nonaffine_bound, "non-affine loop bound 'i * i'", [np.zeros(4)]),
    (k_shape_in_bound, "'A.shape[i]' needs a constant dimension", [np.zeros((2, 2))]),
    (k_variable_step, "range() step 's'", [np.zeros(4), 2]),
    (k_float_bound, "non-affine loop bound '2.5'", [np.zeros(4)]),
    (k_max_in_stop, "max(...) in a range() stop", [np.zeros(4), 2, 3]),
    (k_data_if_with_loop, "only assignments can be lowered to selects", [np.zeros(4), np.zeros(3)]),
    (k_loop_var_after_loop, "loop variable 'i' used after its loop", [np.zeros(4)]),
    (k_nested_same_var, "loop variable 'i' reused by a nested loop", [np.zeros(4)]),
    (k_float_subscript, "float subscript 'i * 0.5'", [np.zeros(4)]),
]


@pytest.mark.parametrize("func,construct,args", LOWERING_REFUSALS,
                         ids=[f.__name__ for f, _, _ in LOWERING_REFUSALS])
def test_refused_when_lowering(func: Callable[..., Any], construct: str, args: list[Any]) -> None:
    compiled = polyir.kernel(func, target="interpret")
    before = [np.copy(a) if isinstance(a, np.ndarray) else a for a in args]
    with pytest.raises(polyir.UnsupportedSyntax) as info:
        compiled(*args)
    error = info.value
    assert construct in error.message, error.message
    assert (error.filename, error.line) == (__file__, _marked_line(func)), str(error)
    for a, b in zip(args, before, strict=True):
        if isinstance(a, np.ndarray):
            np.testing.assert_array_equal(a, b)


# ------------------------------------------------------- argument errors
def scale_rows(A, v, alpha):
    n, m = A.shape
    for i in range(n):
        for j in range(m):
            A[i, j] = alpha * A[i, j] + v[j]


def fill(A, n):
    for i in range(n):
        A[i] = 1.0


def _fresh() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    return rng.uniform(size=(3, 4)), rng.uniform(size=4)


@pytest.mark.parametrize("make_args,message", [
    (lambda A, v: (A, v), "missing a required argument: 'alpha'"),
    (lambda A, v: (A, v, 2.0, 1), "too many positional arguments"),
    (lambda A, v: (A, v[None, :], 2.0), "array 'v' has rank 2 but 'v[j]' uses 1 subscript"),
    (lambda A, v: (A[0], v, 2.0), "unpacks 2 sizes from an array of rank 1"),
    (lambda A, v: (A, v.astype(np.complex128), 2.0), "unsupported array dtype complex128"),
    (lambda A, v: (A, v.astype(np.uint16), 2.0), "unsupported array dtype uint16"),
    (lambda A, v: (A, v, "2.0"), "got str"),
    (lambda A, v: (A, v, True), "bool scalars are not supported"),
    (lambda A, v: (A, v, A), "'alpha' is an array of rank 2 but is used as a scalar"),
    (lambda A, v: (A, 2.0, 2.0), "'v' is subscripted but is not an array argument"),
    (lambda A, v: (A, v, [1.0]), "got list"),
], ids=["too-few", "too-many", "rank", "rank-unpack", "complex", "uint16", "str", "bool", "array-scalar",
        "scalar-array", "list"])
def test_argument_errors_write_nothing(make_args: Callable[..., tuple[Any, ...]], message: str) -> None:
    compiled = polyir.kernel(scale_rows, target="interpret")
    A, v = _fresh()
    args = make_args(A, v)
    A0, v0 = A.copy(), v.copy()
    with pytest.raises(polyir.ArgumentError) as info:
        compiled(*args)
    assert message in str(info.value)
    np.testing.assert_array_equal(A, A0)
    np.testing.assert_array_equal(v, v0)
    assert isinstance(info.value, TypeError)     # ArgumentError is also a TypeError


def test_float_where_a_loop_bound_needs_an_int() -> None:
    compiled = polyir.kernel(fill, target="interpret")
    A = np.zeros(4)
    with pytest.raises(polyir.ArgumentError, match=r"range\(\) stop 'n' needs an int argument"):
        compiled(A, 3.0)
    np.testing.assert_array_equal(A, 0.0)
    compiled(A, 3)
    np.testing.assert_array_equal(A, [1.0, 1.0, 1.0, 0.0])


def gather(E, idx, out):
    for i in range(out.shape[0]):
        out[i] = E[idx[i]]


def test_float_index_array() -> None:
    compiled = polyir.kernel(gather, target="interpret")
    E, out = np.arange(5.0), np.zeros(3)
    with pytest.raises(polyir.ArgumentError, match="subscript 'idx\\[i\\]' reads float data"):
        compiled(E, np.array([1.0, 2.0, 0.0]), out)
    np.testing.assert_array_equal(out, 0.0)
    compiled(E, np.array([4, 2, 0], np.int8), out)
    np.testing.assert_array_equal(out, [4.0, 2.0, 0.0])


def test_read_only_array_that_the_kernel_writes() -> None:
    compiled = polyir.kernel(scale_rows, target="interpret")
    A, v = _fresh()
    A.flags.writeable = False
    with pytest.raises(polyir.ArgumentError, match="'A' .* is read-only"):
        compiled(A, v, 2.0)
    B, w = _fresh()
    w.flags.writeable = False                      # only read: fine
    expected = B.copy()
    scale_rows(expected, w, 2.0)
    compiled(B, w, 2.0)
    np.testing.assert_allclose(B, expected)


def test_source_not_available() -> None:
    namespace: dict[str, Any] = {}
    exec("def k(A):\n    A[0] = 1.0\n", namespace)
    with pytest.raises(polyir.UnsupportedSyntax, match="source of kernel 'k' is not available"):
        polyir.kernel(namespace["k"])
    with pytest.raises(polyir.UnsupportedSyntax, match="lambdas are not supported"):
        polyir.kernel(lambda A: None)
