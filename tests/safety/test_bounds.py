"""Checked bounds by default (polyir.cpu.bounds): affine footprints against the
shapes once per size, gathers hoisted and checked per call, a typed error
before anything is written; ``check_bounds=False`` turns it off."""
from __future__ import annotations

import numpy as np
import pytest

import polyir
from polyir.cpu.jit import build_cpu
from polyir.errors import BoundsError
from polyir.target import cpu


def _stencil(A, B):
    n, m = A.shape
    for i in range(1, n - 1):
        for j in range(1, m - 1):
            B[i, j] = A[i - 1, j] + A[i + 1, j]


def test_an_output_too_small_for_the_stencil_is_refused_before_writing() -> None:
    compiled = polyir.kernel(_stencil)
    A, B = np.ones((50, 40)), np.zeros((5, 5))
    with pytest.raises(BoundsError, match=r"write of 'B' at index \[\d+, \d+\] is outside its "
                                          r"shape \(5, 5\) in statement S0 \(line \d+\): "
                                          r"S0: B\[i, j\]") as caught:
        compiled(A, B)
    assert caught.value.buffer == "B" and caught.value.line is not None
    assert isinstance(caught.value, IndexError)
    assert not B.any()
    big = np.zeros((50, 40))
    compiled(A, big)                         # in bounds: runs (and the check is memoised)
    compiled(A, big)
    expected = np.zeros((50, 40))
    _stencil(A, expected)
    np.testing.assert_array_equal(big, expected)


def _shift(A, B):
    for i in range(A.shape[0]):
        B[i] = A[i - 1]


def test_a_negative_affine_index_is_refused_not_read_before_the_array() -> None:
    with pytest.raises(BoundsError, match=r"read of 'A' at index \[-1\]"):
        polyir.kernel(_shift)(np.ones(4), np.zeros(4))


def _gather(out, W, idx):
    for i in range(idx.shape[0]):
        for j in range(W.shape[1]):
            out[i, j] = W[idx[i], j]


@pytest.mark.parametrize("bad", [[1, 2, 10], [-1, 0, 0]])
def test_gather_indices_are_checked_on_every_call(bad: list[int]) -> None:
    compiled = polyir.kernel(_gather)
    W, out = np.random.default_rng(0).random((10, 4)), np.zeros((3, 4))
    compiled(out, W, np.array([1, 2, 9]))
    np.testing.assert_array_equal(out, W[[1, 2, 9]])
    out[:] = 0.0
    with pytest.raises(BoundsError, match=rf"subscript idx\[i\] of 'W' \(dimension 0, extent 10\) "
                                          rf"takes the value {max(bad) if max(bad) >= 10 else -1}"):
        compiled(out, W, np.array(bad))
    assert not out.any()


def test_check_bounds_false_turns_it_off() -> None:
    text = """
func f(B: f64[M], A: f64[N]) {
  for i = 0 to N {
    S0: B[i] = A[i]
  }
}"""
    checked = build_cpu(polyir.parse(text), cpu(1), cache_dir=None)
    assert checked.check_bounds
    B = np.zeros(8)
    with pytest.raises(BoundsError, match="write of 'B' at index"):
        checked(B[:2], np.ones(3))
    unchecked = build_cpu(polyir.parse(text), cpu(1), cache_dir=None, check_bounds=False)
    unchecked(B[:2], np.ones(3))             # writes B[2], inside the parent array here
    assert B[:3].tolist() == [1.0, 1.0, 1.0]
    assert polyir.kernel(_shift, check_bounds=False).check_bounds is False


def test_embedding_with_an_id_out_of_range_raises_like_eager() -> None:
    torch = pytest.importorskip("torch")

    class Model(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embed = torch.nn.Embedding(10, 4)

        def forward(self, ids):
            return self.embed(ids) * 2.0

    model = Model()
    torch.set_grad_enabled(False)       # inference (see polyir.frontends.grad)
    try:
        _check_embedding(model, torch)
    finally:
        torch.set_grad_enabled(True)


def _check_embedding(model, torch) -> None:
    compiled = polyir.compile(model, [torch.tensor([1, 2, 3])])
    ids = torch.tensor([0, 9, 4])
    torch.testing.assert_close(compiled(ids), model(ids))
    for bad in ([1, 2, 10], [1, -1, 2]):
        with pytest.raises(IndexError):
            model(torch.tensor(bad))
        with pytest.raises(BoundsError, match="takes the value"):
            compiled(torch.tensor(bad))
    unchecked = polyir.compile(model, [torch.tensor([1, 2, 3])], check_bounds=False)
    torch.testing.assert_close(unchecked(ids), model(ids))



CUDA_STENCIL = polyir.parse(
    "func f(B: f32[P, Q], A: f32[N, M]) {\n"
    "  for i = 1 to -1 + N {\n    for j = 1 to -1 + M {\n"
    "      S0: B[i, j] = A[i - 1, j] + A[i + 1, j] + A[i, j]\n    }\n  }\n}\n")


def test_cuda_path_checks_footprints_on_the_host_before_any_launch() -> None:
    # the executable carries the unmapped function's check; the CUDA runtime runs
    # it on the bound size symbols before allocating locals or launching
    from polyir.driver import compile_ir
    executable = compile_ir(CUDA_STENCIL, "cuda")
    assert executable.bounds is not None and executable.bounds.needed
    executable.bounds.check_symbols({"N": 50, "M": 40, "P": 50, "Q": 40})
    with pytest.raises(polyir.BoundsError, match="B"):
        executable.bounds.check_symbols({"N": 50, "M": 40, "P": 5, "Q": 5})
    assert compile_ir(CUDA_STENCIL, "cuda", check_bounds=False).bounds is None
