"""Elementwise lowering rules against torch eager: unary math, binary ops with
broadcasting and promotion, where/clamp/activations, casts, factories."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from fx_support import check

torch.manual_seed(0)


def unary_all(x: torch.Tensor) -> tuple[torch.Tensor, ...]:
    positive = x.abs() + 0.1
    return (torch.exp(x), torch.log(positive), torch.sqrt(positive), torch.rsqrt(positive),
            torch.tanh(x), torch.erf(x), torch.sigmoid(x), torch.sin(x), torch.cos(x),
            torch.abs(x), -x, torch.floor(x), torch.ceil(x), torch.reciprocal(positive),
            torch.log1p(positive), torch.expm1(x), torch.relu(x), torch.sign(x),
            torch.exp2(x), torch.log2(positive))


UNARY_OPS = ["aten.exp.default", "aten.log.default", "aten.sqrt.default", "aten.rsqrt.default",
             "aten.tanh.default", "aten.erf.default", "aten.sigmoid.default", "aten.sin.default",
             "aten.cos.default", "aten.abs.default", "aten.neg.default", "aten.floor.default",
             "aten.ceil.default", "aten.reciprocal.default", "aten.log1p.default",
             "aten.expm1.default", "aten.relu.default", "aten.sign.default"]


@pytest.mark.parametrize("shape", [(7,), (3, 5), (2, 1, 9)])
def test_unary_math_f32(shape: tuple[int, ...]) -> None:
    x = torch.randn(shape) * 2
    check(unary_all, x, ops=UNARY_OPS, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_unary_math_low_precision(dtype: torch.dtype) -> None:
    x = (torch.randn(4, 6) * 2).to(dtype)
    tolerance = 1e-2 if dtype == torch.float16 else 2e-2
    check(unary_all, x, ops=UNARY_OPS, rtol=tolerance, atol=tolerance)


def binary_all(a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, ...]:
    return (a + b, torch.add(a, b, alpha=2.5), a - b, torch.sub(a, b, alpha=0.5), a * b, a / b,
            torch.maximum(a, b), torch.minimum(a, b), a == b, a != b, a < b, a <= b, a > b,
            a >= b, torch.div(a, b, rounding_mode="floor"), torch.div(a, b, rounding_mode="trunc"),
            torch.pow(a.abs() + 0.5, b), torch.where(a > b, a, b), 2.0 - a)


BINARY_OPS = ["aten.add.Tensor", "aten.sub.Tensor", "aten.mul.Tensor", "aten.div.Tensor",
              "aten.maximum.default", "aten.minimum.default", "aten.eq.Tensor", "aten.ne.Tensor",
              "aten.lt.Tensor", "aten.le.Tensor", "aten.gt.Tensor", "aten.ge.Tensor",
              "aten.div.Tensor_mode", "aten.pow.Tensor_Tensor", "aten.where.self"]


@pytest.mark.parametrize("shapes", [((4, 5), (4, 5)), ((4, 5), (5,)), ((3, 1, 5), (1, 4, 1)),
                                    ((6,), ())])
def test_binary_broadcasting(shapes: tuple[tuple[int, ...], tuple[int, ...]]) -> None:
    a, b = torch.randn(shapes[0]), torch.randn(shapes[1])
    b = torch.where(b.abs() < 0.1, torch.full_like(b, 0.5), b)  # keep divisions away from 0
    check(binary_all, a, b, ops=BINARY_OPS, rtol=1e-5, atol=1e-5)


def test_binary_with_python_scalars() -> None:
    x = torch.randn(3, 4)
    check(lambda t: (t + 1, t * 2.5, t - 3, t / 4, 1 / (t.abs() + 1), t ** 2, t.abs() ** 0.5,
                     t ** 3, (t.abs() + 0.1) ** 1.7, t > 0.3, torch.rsub(t, 2.0)), x,
          ops=["aten.add.Tensor", "aten.mul.Tensor", "aten.pow.Tensor_Scalar", "aten.gt.Scalar"],
          rtol=1e-5, atol=1e-5)


def test_type_promotion_and_integers() -> None:
    a = torch.randint(-9, 9, (4, 5))
    b = torch.randint(1, 5, (5,)) * torch.tensor([1, -1, 1, -1, 1])
    f = torch.randn(4, 5)
    check(lambda i, j, x: (i + j, i * j, i / j, torch.div(i, j, rounding_mode="floor"),
                           torch.div(i, j, rounding_mode="trunc"), i + x, i.to(torch.int32) * 3,
                           torch.maximum(i, j), i ** 2, torch.abs(i), -i, i > j),
          a, b, f, ops=["aten.div.Tensor_mode", "aten.add.Tensor"])


def test_mixed_float_widths() -> None:
    x16 = torch.randn(3, 4).half()
    x32 = torch.randn(3, 4)
    x64 = torch.randn(4, dtype=torch.float64)
    check(lambda a, b, c: (a + b, b * c, a * 2, a.float() + 1), x16, x32, x64,
          ops=["aten.add.Tensor"], rtol=1e-3, atol=1e-3)


def test_bool_logic() -> None:
    a, b = torch.rand(3, 5) > 0.5, torch.rand(5) > 0.5
    check(lambda p, q: (p & q, p | q, p ^ q, ~p, torch.logical_not(q), torch.logical_and(p, q),
                        torch.logical_or(p, q), p.float() + q.float(), torch.where(p, 1.0, -1.0)),
          a, b, ops=["aten.logical_not.default", "aten.bitwise_and.Tensor"])


@pytest.mark.parametrize("shape", [(9,), (2, 3, 5)])
def test_activations(shape: tuple[int, ...]) -> None:
    x = torch.randn(shape) * 3
    x[..., 0] = float("nan")  # clamp, relu and friends keep NaN, as eager does
    check(lambda t: (F.gelu(t), F.gelu(t, approximate="tanh"), F.silu(t), F.leaky_relu(t, 0.2),
                     F.elu(t), F.hardtanh(t, -0.5, 1.5), torch.clamp(t, -1.0, 0.5),
                     torch.clamp(t, min=0.25), torch.clamp(t, max=-0.25), torch.relu(t)),
          x, ops=["aten.gelu.default", "aten.clamp.default", "aten.leaky_relu.default",
                  "aten.hardtanh.default", "aten.elu.default"], rtol=1e-5, atol=1e-5)


def test_clamp_with_tensor_bounds() -> None:
    x, low, high = torch.randn(4, 6), torch.randn(6) - 1, torch.randn(4, 1) + 1
    check(lambda t, lo, hi: torch.clamp(t, lo, hi), x, low, high, ops=["aten.clamp.Tensor"])


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_activations_low_precision(dtype: torch.dtype) -> None:
    x = (torch.randn(5, 7) * 3).to(dtype)
    check(lambda t: (F.gelu(t), F.gelu(t, approximate="tanh"), F.silu(t), torch.tanh(t),
                     torch.sigmoid(t), t * 1.5 + 2), x, ops=["aten.gelu.default"],
          rtol=2e-2, atol=2e-2)


def test_casts() -> None:
    x = torch.randn(4, 5) * 10
    x[0, 0] = 0.0
    check(lambda t: (t.to(torch.int64), t.to(torch.int32), t.to(torch.int8), t.to(torch.bool),
                     t.half(), t.bfloat16(), t.double(), (t > 0).float(), t.long().float(),
                     t.to(torch.bool).to(torch.int64)),
          x, ops=["aten._to_copy.default"])


def test_factories() -> None:
    x = torch.randn(3, 4)
    check(lambda t: (torch.arange(7), torch.arange(2, 11, 3), torch.arange(0.5, 3.0, 0.25),
                     torch.full((2, 3), 1.5), torch.zeros_like(t) + t, torch.ones(3, 4) * t,
                     torch.full_like(t, 7, dtype=torch.int32),
                     t + torch.arange(4, dtype=torch.float32)),
          x, ops=["aten.arange.start_step", "aten.full.default"])


def test_trunc_round_fmod_remainder() -> None:
    a, b = torch.randn(4, 5) * 7, torch.randn(5) * 3 + 0.5
    i, j = torch.randint(-20, 20, (4, 5)), torch.tensor([3, -4, 5, -6, 7])
    x_ties = torch.tensor([0.5, 1.5, 2.5, -0.5, -1.5, 0.49999997, 2.4, -2.6])
    check(lambda x, y, p, q, h: (torch.trunc(x), torch.round(x), torch.round(h), torch.fmod(x, y),
                                 torch.remainder(x, y), torch.fmod(p, q),
                                 torch.remainder(p, q), p % 4, x % 2.5),
          a, b, i, j, x_ties,
          ops=["aten.trunc.default", "aten.round.default", "aten.fmod.Tensor", "aten.remainder.Tensor"],
          rtol=1e-5, atol=1e-5)
