"""Reduction, softmax and normalisation lowering rules against torch eager."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from fx_support import check

torch.manual_seed(1)


@pytest.mark.parametrize("shape", [(7,), (3, 5), (2, 3, 5)])
def test_sum_mean_extremes(shape: tuple[int, ...]) -> None:
    x = torch.randn(shape)
    check(lambda t: (t.sum(), t.sum(-1), t.sum(0, keepdim=True), t.mean(), t.mean(-1, keepdim=True),
                     t.amax(-1), t.amin(0), t.amax(dim=tuple(range(t.dim()))), t.prod(-1)), x,
          ops=["aten.sum.dim_IntList", "aten.mean.dim", "aten.mean.default",
               "aten.amax.default", "aten.amin.default", "aten.prod.dim_int"], rtol=1e-5, atol=1e-5)


def test_reduction_over_several_dims() -> None:
    x = torch.randn(3, 4, 5, 2)
    check(lambda t: (t.sum((0, 2)), t.mean((1, 3), keepdim=True), t.amax((-1, -2)),
                     t.var((0, 2)), t.var(-1, correction=0, keepdim=True)), x,
          ops=["aten.var.correction"], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("correction", [0, 1, 2])
def test_var(correction: int) -> None:
    x = torch.randn(4, 9) * 3 + 1
    check(lambda t: (torch.var(t, -1, correction=correction), torch.var(t, 0, correction=correction)),
          x, ops=["aten.var.correction"], rtol=1e-5, atol=1e-5)


def test_integer_and_bool_reductions() -> None:
    i = torch.randint(-5, 5, (4, 6))
    b = torch.rand(4, 6) > 0.7
    check(lambda p, q: (p.sum(-1), p.amax(0), q.sum(), q.any(-1), q.all(0), (p > 0).any()), i, b,
          ops=["aten.any.dim", "aten.sum.dim_IntList"])


def test_arg_reductions() -> None:
    x = torch.randn(4, 7)
    x[1, 3] = x[1, 5] = 10.0  # ties: eager returns the first index
    check(lambda t: (t.argmax(-1), t.argmin(0), t.argmax(), t.argmax(None, keepdim=True), t.max(-1),
                     t.min(0, keepdim=True),
                     t.max()),
          x, ops=["aten.argmax.default", "aten.max.dim", "aten.max.default"])


def test_low_precision_sums() -> None:
    x16 = torch.randn(8, 33).half()
    xb = torch.randn(8, 33).bfloat16()
    check(lambda a, b: (a.sum(-1), a.mean(0), b.sum(-1), b.mean(), a.amax(-1)), x16, xb,
          ops=["aten.sum.dim_IntList"], rtol=1e-2, atol=1e-2)


@pytest.mark.parametrize("dim", [-1, 0, 1])
def test_softmax(dim: int) -> None:
    x = torch.randn(3, 5, 4) * 4
    check(lambda t: (torch.softmax(t, dim), torch.log_softmax(t, dim)), x,
          ops=["aten._softmax.default", "aten._log_softmax.default"], rtol=1e-5, atol=1e-5)


def test_softmax_low_precision() -> None:
    x16, xb = torch.randn(3, 10).half(), torch.randn(3, 10).bfloat16()
    check(lambda a, b: (torch.softmax(a, -1), torch.log_softmax(b, -1),
                        torch.softmax(a, -1, dtype=torch.float32)),
          x16, xb, ops=["aten._softmax.default"], rtol=2e-2, atol=2e-2)


@pytest.mark.parametrize("shape, normalized", [((3, 8), (8,)), ((2, 3, 5), (5,)),
                                               ((2, 3, 4), (3, 4))])
def test_layer_norm(shape: tuple[int, ...], normalized: tuple[int, ...]) -> None:
    x = torch.randn(shape) * 2 + 1
    weight, bias = torch.randn(normalized), torch.randn(normalized)
    check(lambda t, w, b: (F.layer_norm(t, normalized, w, b, 1e-5), F.layer_norm(t, normalized)),
          x, weight, bias, ops=["aten.native_layer_norm.default"], rtol=1e-5, atol=1e-5)


def test_layer_norm_statistics_outputs() -> None:
    x = torch.randn(3, 6)
    check(lambda t: torch.ops.aten.native_layer_norm(t, [6], None, None, 1e-5), x,
          ops=["aten.native_layer_norm.default"], rtol=1e-5, atol=1e-5)


def test_layer_norm_half() -> None:
    x = torch.randn(4, 16).half()
    w, b = torch.randn(16).half(), torch.randn(16).half()
    check(lambda t, w_, b_: F.layer_norm(t, (16,), w_, b_), x, w, b,
          ops=["aten.native_layer_norm.default"], rtol=1e-2, atol=1e-2)


@pytest.mark.parametrize("shape", [(2, 3, 4, 5), (3, 4), (2, 4, 7)])
def test_batch_norm_inference(shape: tuple[int, ...]) -> None:
    channels = shape[1]
    bn = torch.nn.BatchNorm1d(channels) if len(shape) < 4 else torch.nn.BatchNorm2d(channels)
    with torch.no_grad():
        bn.running_mean.copy_(torch.randn(channels))
        bn.running_var.copy_(torch.rand(channels) + 0.5)
        bn.weight.copy_(torch.randn(channels))
        bn.bias.copy_(torch.randn(channels))
    bn.eval()
    check(bn, torch.randn(shape), rtol=1e-5, atol=1e-5)


def test_scans_and_norms() -> None:
    x = torch.randn(3, 5, 4)
    h = torch.randn(4, 9).half()
    check(lambda t, u: (t.cumsum(1), t.cumprod(-1), t.cumsum(0, dtype=torch.float64), u.cumsum(-1),
                        torch.linalg.vector_norm(t, dim=-1), torch.linalg.vector_norm(t, 1, (0, 2)),
                        torch.linalg.vector_norm(t, float("inf")), torch.linalg.vector_norm(t, 3, 1),
                        torch.linalg.vector_norm(t, 0, -1), F.normalize(t, dim=1)),
          x, h, ops=["aten.cumsum.default", "aten.cumprod.default", "aten.linalg_vector_norm.default"],
          rtol=1e-3, atol=1e-3)


def test_group_instance_and_rms_norm() -> None:
    x = torch.randn(2, 6, 3, 5) * 2 + 1
    w, b = torch.randn(6), torch.randn(6)
    check(lambda t, w_, b_: (F.group_norm(t, 3, w_, b_), F.group_norm(t, 2), F.instance_norm(t),
                             F.rms_norm(t, (3, 5)), torch.ops.aten.native_group_norm(t, w_, b_, 2, 6, 15, 3, 1e-5)),
          x, w, b, ops=["aten.native_group_norm.default", "aten.native_batch_norm.default"],
          rtol=1e-4, atol=1e-4)
