"""Matmul, convolution, pooling, embedding and attention lowering rules
against torch eager."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from fx_support import check

torch.manual_seed(2)


@pytest.mark.parametrize("m, k, n", [(3, 5, 7), (1, 9, 4), (8, 16, 1)])
def test_mm_and_addmm(m: int, k: int, n: int) -> None:
    a, b, bias = torch.randn(m, k), torch.randn(k, n), torch.randn(n)
    check(lambda x, y, c: (x @ y, torch.addmm(c, x, y), torch.addmm(c, x, y, beta=0.5, alpha=2.0),
                           F.linear(x, y.t(), c)),
          a, b, bias, ops=["aten.mm.default", "aten.addmm.default"], rtol=1e-5, atol=1e-5)


def test_bmm_matmul_broadcast_and_dot() -> None:
    a, b = torch.randn(3, 4, 5), torch.randn(3, 5, 2)
    c = torch.randn(5, 6)
    v, w = torch.randn(7), torch.randn(7)
    check(lambda x, y, z, p, q: (torch.bmm(x, y), x @ z, torch.baddbmm(torch.ones(1, 1, 2), x, y),
                                 torch.dot(p, q), x @ p[:5]),
          a, b, c, v, w, ops=["aten.bmm.default"], rtol=1e-5, atol=1e-5)


def test_linear_on_3d_input() -> None:
    layer = torch.nn.Linear(6, 5)
    check(layer, torch.randn(2, 3, 6), ops=["aten.addmm.default"], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_matmul_low_precision(dtype: torch.dtype) -> None:
    a, b, c = torch.randn(5, 16).to(dtype), torch.randn(16, 3).to(dtype), torch.randn(3).to(dtype)
    check(lambda x, y, z: (x @ y, torch.addmm(z, x, y)), a, b, c,
          ops=["aten.mm.default"], rtol=2e-2, atol=2e-2)


@pytest.mark.parametrize("stride, padding, dilation, groups", [
    (1, 0, 1, 1), (2, 1, 1, 1), (1, 2, 2, 1), (2, 1, 1, 2), (1, 1, 1, 4)])
def test_conv2d(stride: int, padding: int, dilation: int, groups: int) -> None:
    x = torch.randn(2, 4, 7, 6)
    w = torch.randn(8, 4 // groups, 3, 3)
    bias = torch.randn(8)
    check(lambda t, k, b: (F.conv2d(t, k, b, stride, padding, dilation, groups),
                           F.conv2d(t, k, None, stride, padding, dilation, groups)),
          x, w, bias, ops=["aten.convolution.default"], rtol=1e-4, atol=1e-4)


def test_conv1d_conv3d_and_asymmetric() -> None:
    x1, w1 = torch.randn(1, 3, 10), torch.randn(2, 3, 4)
    x3, w3 = torch.randn(1, 2, 4, 5, 3), torch.randn(3, 2, 2, 3, 2)
    x2, w2 = torch.randn(1, 2, 5, 8), torch.randn(3, 2, 2, 3)
    check(lambda a, b, c, d, e, f: (F.conv1d(a, b, padding=2, stride=3), F.conv3d(c, d, padding=1),
                                    F.conv2d(e, f, stride=(1, 2), padding=(0, 1), dilation=(2, 1))),
          x1, w1, x3, w3, x2, w2, ops=["aten.convolution.default"], rtol=1e-4, atol=1e-4)


def test_conv_half() -> None:
    x, w = torch.randn(1, 3, 6, 6).half(), torch.randn(4, 3, 3, 3).half()
    check(lambda t, k: F.conv2d(t, k, padding=1), x, w, ops=["aten.convolution.default"],
          rtol=2e-2, atol=2e-2)


@pytest.mark.parametrize("kernel, stride, padding, dilation, ceil_mode", [
    (2, None, 0, 1, False), (3, 2, 1, 1, False), (3, 2, 1, 1, True), (2, 1, 0, 2, False),
    ((2, 3), (2, 1), (1, 0), 1, True)])
def test_max_pool2d(kernel, stride, padding, dilation, ceil_mode) -> None:
    x = torch.randn(2, 3, 7, 8)
    check(lambda t: F.max_pool2d(t, kernel, stride, padding, dilation, ceil_mode), x,
          ops=["aten.max_pool2d_with_indices.default"])


@pytest.mark.parametrize("kernel, stride, padding, ceil_mode, include_pad, divisor", [
    (2, None, 0, False, True, None), (3, 2, 1, False, True, None), (3, 2, 1, False, False, None),
    (3, 2, 1, True, True, None), (3, 2, 1, True, False, None), (2, 2, 1, False, True, 3)])
def test_avg_pool2d(kernel, stride, padding, ceil_mode, include_pad, divisor) -> None:
    x = torch.randn(1, 2, 7, 6)
    check(lambda t: F.avg_pool2d(t, kernel, stride, padding, ceil_mode, include_pad, divisor), x,
          ops=["aten.avg_pool2d.default"], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("size, output", [((6, 6), (3, 3)), ((7, 9), (3, 4)), ((5, 5), (1, 1)),
                                          ((4, 6), (4, 6))])
def test_adaptive_avg_pool2d(size, output) -> None:
    x = torch.randn(2, 3, *size)
    check(lambda t: F.adaptive_avg_pool2d(t, output), x, rtol=1e-5, atol=1e-5)


def test_pooling_on_3d_input_and_half() -> None:
    x = torch.randn(3, 6, 6)
    h = torch.randn(1, 2, 6, 6).half()
    check(lambda t, u: (F.max_pool2d(t, 2), F.avg_pool2d(t, 3, 1, 1), F.max_pool2d(u, 3, 2, 1),
                        F.avg_pool2d(u, 2)),
          x, h, ops=["aten.max_pool2d_with_indices.default"], rtol=1e-2, atol=1e-2)


def test_embedding_and_index_select() -> None:
    table = torch.randn(11, 6)
    ids = torch.tensor([[0, 3, 10], [7, 7, 1]])
    ids32 = ids.to(torch.int32)
    check(lambda w, i, j: (F.embedding(i, w), F.embedding(j.long(), w).sum(-1),
                           torch.index_select(w, 0, i[0]), torch.index_select(w, 1, i[1] % 6),
                           F.embedding(i, w.t().contiguous().t())),
          table, ids, ids32, ops=["aten.embedding.default", "aten.index_select.default"])


@pytest.mark.parametrize("causal", [False, True])
def test_scaled_dot_product_attention(causal: bool) -> None:
    q, k, v = torch.randn(2, 3, 5, 4), torch.randn(2, 3, 5, 4), torch.randn(2, 3, 5, 6)
    check(lambda a, b, c: F.scaled_dot_product_attention(a, b, c, is_causal=causal), q, k, v,
          ops=["polyir.attention.default"], rtol=1e-5, atol=1e-5)


def test_attention_masks_scale_and_lengths() -> None:
    q, k, v = torch.randn(1, 2, 3, 4), torch.randn(1, 2, 6, 4), torch.randn(1, 2, 6, 4)
    float_mask = torch.randn(3, 6)
    bool_mask = torch.rand(1, 1, 3, 6) > 0.3
    bool_mask[..., 0] = True  # every row keeps one key
    check(lambda a, b, c, m, n: (F.scaled_dot_product_attention(a, b, c, attn_mask=m),
                                 F.scaled_dot_product_attention(a, b, c, attn_mask=n, scale=0.3),
                                 F.scaled_dot_product_attention(a, b, c, is_causal=True)),
          q, k, v, float_mask, bool_mask, ops=["polyir.attention.default"], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("stride, padding, output_padding, dilation, groups", [
    (1, 0, 0, 1, 1), (2, 1, 1, 1, 1), (2, 0, 0, 2, 2), (3, 2, 1, 1, 1)])
def test_conv_transpose2d(stride, padding, output_padding, dilation, groups) -> None:
    x = torch.randn(2, 4, 5, 4)
    w = torch.randn(4, 6 // groups, 3, 2)
    bias = torch.randn(6)
    check(lambda t, k, b: (F.conv_transpose2d(t, k, b, stride, padding, output_padding, groups, dilation),
                           F.conv_transpose2d(t, k, None, stride, padding, output_padding, groups, dilation)),
          x, w, bias, ops=["aten.convolution.default"], rtol=1e-4, atol=1e-4)


def test_conv_transpose1d_half() -> None:
    x, w = torch.randn(1, 3, 7).half(), torch.randn(3, 2, 4).half()
    check(lambda t, k: F.conv_transpose1d(t, k, stride=2, padding=1), x, w,
          ops=["aten.convolution.default"], rtol=2e-2, atol=2e-2)


@pytest.mark.parametrize("align_corners", [False, True])
def test_bilinear_upsampling(align_corners: bool) -> None:
    x = torch.randn(1, 2, 3, 5)
    check(lambda t: (F.interpolate(t, scale_factor=2, mode="bilinear", align_corners=align_corners),
                     F.interpolate(t, size=(4, 9), mode="bilinear", align_corners=align_corners),
                     F.interpolate(t, scale_factor=1.5, mode="bilinear", align_corners=align_corners),
                     F.interpolate(t, size=(2, 3), mode="bilinear", align_corners=align_corners)),
          x, ops=["aten.upsample_bilinear2d.default"], rtol=1e-5, atol=1e-5)
