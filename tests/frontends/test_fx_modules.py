"""Whole torch.nn models through polyir.compile and torch.compile: results
against eager, recompilation on new shapes, call-time parameters, fallback to
eager for unsupported operators, and UnsupportedOp with fallback=False."""
from __future__ import annotations

import warnings

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from fx_support import Fn, check

import polyir
from polyir.frontends.demo_models import SmallCNN, TransformerBlock
from polyir.frontends.fx import PolyirFallbackWarning

torch.manual_seed(4)


def _randomise_batch_norm(model: nn.Module) -> None:
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, nn.modules.batchnorm._BatchNorm):
                module.running_mean.copy_(torch.randn_like(module.running_mean) * 0.1)
                module.running_var.copy_(torch.rand_like(module.running_var) + 0.5)


class MLP(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1, self.norm, self.fc2 = nn.Linear(12, 24), nn.LayerNorm(24), nn.Linear(24, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(F.gelu(self.norm(self.fc1(x))))


class ResidualBlock(nn.Module):
    def __init__(self, channels: int = 4) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(channels)
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.relu(self.bn1(self.conv1(x)))
        return F.relu(x + self.bn2(self.conv2(y)))


class CausalSelfAttention(nn.Module):
    def __init__(self, d_model: int = 16, heads: int = 2) -> None:
        super().__init__()
        self.heads = heads
        self.qkv, self.proj = nn.Linear(d_model, 3 * d_model), nn.Linear(d_model, d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, d = x.shape
        q, k, v = self.qkv(x).split(d, dim=-1)
        q, k, v = (t.view(b, s, self.heads, d // self.heads).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.proj(y.transpose(1, 2).reshape(b, s, d))


def test_mlp_with_layer_norm() -> None:
    check(MLP().eval(), torch.randn(3, 12), ops=["aten.addmm.default", "aten.native_layer_norm.default"],
          rtol=1e-4, atol=1e-4)


def test_small_cnn_with_batch_norm_and_pooling() -> None:
    model = SmallCNN(channels=4, classes=5).eval()
    _randomise_batch_norm(model)
    check(model, torch.randn(2, 3, 16, 16),
          ops=["aten.convolution.default", "aten.max_pool2d_with_indices.default"],
          rtol=1e-4, atol=1e-4)


def test_residual_block() -> None:
    model = ResidualBlock().eval()
    _randomise_batch_norm(model)
    check(model, torch.randn(1, 4, 6, 6), rtol=1e-4, atol=1e-4)


def test_transformer_encoder_layer() -> None:
    layer = nn.TransformerEncoderLayer(16, 2, dim_feedforward=32, dropout=0.0, batch_first=True).eval()
    check(layer, torch.randn(2, 5, 16), ops=["aten.native_layer_norm.default"], rtol=1e-4, atol=1e-4)


def test_causal_self_attention_and_demo_transformer_block() -> None:
    check(CausalSelfAttention().eval(), torch.randn(2, 6, 16), ops=["polyir.attention.default"],
          rtol=1e-4, atol=1e-4)
    check(TransformerBlock(d_model=16, heads=2).eval(), torch.randn(1, 5, 16), rtol=1e-4, atol=1e-4)


def test_bf16_model_round_trips_through_float32() -> None:
    model = MLP().eval().to(torch.bfloat16)
    x = torch.randn(3, 12).to(torch.bfloat16)
    compiled = polyir.compile(model, (x,), target="cpu")
    got = compiled(x)
    assert got.dtype == torch.bfloat16
    torch.testing.assert_close(got, model(x), rtol=3e-2, atol=3e-2)


def test_recompiles_for_new_shapes_and_dtypes() -> None:
    model = MLP().eval()
    compiled = polyir.compile(model, (torch.randn(3, 12),), target="cpu")
    for x in (torch.randn(5, 12), torch.randn(3, 12), torch.randn(1, 12)):
        torch.testing.assert_close(compiled(x), model(x), rtol=1e-4, atol=1e-4)
    assert len(compiled.plans) == 3
    x64 = torch.randn(2, 12, dtype=torch.float64)
    torch.testing.assert_close(compiled(x64.float()), model(x64.float()), rtol=1e-4, atol=1e-4)
    fn = Fn(lambda t: t * 2 + 1)
    compiled_fn = polyir.compile(fn, (torch.randn(4),), target="cpu")
    for x in (torch.randn(4), torch.randn(4, dtype=torch.float64), torch.arange(4)):
        out = compiled_fn(x)
        assert out.dtype == (x * 2 + 1).dtype
        torch.testing.assert_close(out, x * 2 + 1)


def test_parameters_are_bound_at_call_time() -> None:
    model = nn.Linear(4, 3).eval()
    x = torch.randn(2, 4)
    compiled = polyir.compile(model, (x,), target="cpu")
    with torch.no_grad():
        model.weight.mul_(-2.0)
        model.bias.add_(1.0)
    torch.testing.assert_close(compiled(x), model(x), rtol=1e-5, atol=1e-5)


class WithSort(nn.Module):
    """A model with an operator polyir has no lowering for (``aten.sort``)."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(6, 6)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.fc(x))
        return torch.softmax(torch.sort(y, dim=-1).values * 0.5, dim=-1) + y


def test_unsupported_operator_runs_in_eager_with_one_warning() -> None:
    model = WithSort().eval()
    x = torch.randn(3, 6)
    with pytest.warns(PolyirFallbackWarning, match="aten.sort") as record:
        compiled = polyir.compile(model, (x,), target="cpu")
    assert len([w for w in record if issubclass(w.category, PolyirFallbackWarning)]) == 1
    torch.testing.assert_close(compiled(x), model(x), rtol=1e-5, atol=1e-5)
    summary = compiled.summary()
    assert summary["fallbacks"] == ["aten.sort.default"]
    assert summary["functions"] == 2 and "aten._softmax.default" in summary["ops"]


def test_fallback_false_raises_unsupported_op_naming_the_node() -> None:
    with pytest.raises(polyir.UnsupportedOp, match="aten.sort.default") as info:
        polyir.compile(WithSort().eval(), (torch.randn(3, 6),), target="cpu", fallback=False)
    assert info.value.op == "aten.sort.default"
    assert info.value.node == "sort"


def test_torch_compile_backend_partitions_unsupported_operators() -> None:
    torch._dynamo.reset()
    model = WithSort().eval()
    x = torch.randn(3, 6)
    compiled = torch.compile(model, backend="polyir")
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        with torch.no_grad():
            got = compiled(x)
    torch.testing.assert_close(got, model(x), rtol=1e-5, atol=1e-5)
    messages = [str(w.message) for w in record if issubclass(w.category, PolyirFallbackWarning)]
    assert len(messages) == 1 and "aten.sort.default" in messages[0]


def test_torch_compile_backend_matches_eager_on_a_cnn_and_new_shapes() -> None:
    torch._dynamo.reset()
    model = SmallCNN(channels=4, classes=3).eval()
    _randomise_batch_norm(model)
    compiled = torch.compile(model, backend="polyir", options={"target": "cpu"})
    with torch.no_grad():
        # the third batch size makes dynamo pass symbolic shapes: compiled per call shape
        for x in (torch.randn(1, 3, 16, 16), torch.randn(2, 3, 16, 16), torch.randn(3, 3, 16, 16)):
            torch.testing.assert_close(compiled(x), model(x), rtol=1e-4, atol=1e-4)


def test_compiles_an_fx_graph_module() -> None:
    traced = torch.fx.symbolic_trace(MLP().eval())
    check(traced, torch.randn(2, 12), ops=["aten.addmm.default"], rtol=1e-4, atol=1e-4)


def test_non_module_is_refused() -> None:
    with pytest.raises(TypeError, match="nn.Module"):
        polyir.compile(lambda t: t, (torch.randn(2),))


def test_unsupported_side_branch_does_not_split_the_main_chain() -> None:
    """Supported nodes that do not depend on an eager operator share a segment
    even when the eager operators come between them in graph order."""
    def fn(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        y = x @ x.t()
        first = torch.sort(x, 0).values
        y = torch.relu(y)
        second = torch.sort(x, 1).values
        return torch.softmax(y, -1), first + second
    x = torch.randn(4, 4)
    with pytest.warns(PolyirFallbackWarning):
        compiled = polyir.compile(Fn(fn), (x,), target="cpu")
    torch.testing.assert_close(compiled(x), fn(x), rtol=1e-5, atol=1e-5)
    # graph order alone would give three: {mm}, {relu}, {softmax, add}
    assert compiled.summary()["functions"] == 2


def test_dynamo_backend_is_registered_by_name() -> None:
    from polyir.frontends.dynamo import polyir_backend, register

    register()
    register()  # idempotent
    assert torch._dynamo.lookup_backend("polyir") is polyir_backend


def test_edge_cases() -> None:
    """Zero-size and 0-d tensors, non-contiguous inputs, inputs that require grad."""
    check(lambda t: (t * 2, t.sum(0), t.sum(1)), torch.randn(0, 4))
    check(lambda s, t: (s * t, s + 1, t.sum() * s), torch.tensor(2.5), torch.randn(3))
    check(lambda t: t.exp() + 1, torch.randn(4, 6).t())
    check(lambda t: (t @ t).relu(), torch.randn(3, 3, requires_grad=True))
    nan = float("nan")
    check(lambda t: (t.argmax(), F.max_pool2d(t, 2)), torch.tensor([[[[1.0, nan], [3.0, 0.0]]]]))


def test_cuda_target_builds_ptx() -> None:
    """Compiling for CUDA needs no GPU: the model lowers and becomes PTX."""
    model = SmallCNN(channels=2, classes=3).eval()
    compiled = polyir.compile(model, (torch.randn(1, 3, 8, 8),), target="cuda")
    (segment,) = compiled.last_plan.segments
    assert ".entry" in segment.executable.ptx


@pytest.mark.gpu
def test_cuda_target_matches_eager() -> None:
    model = MLP().eval()
    x = torch.randn(3, 12)
    compiled = polyir.compile(model, (x,), target="cuda")
    torch.testing.assert_close(compiled(x), model(x), rtol=1e-4, atol=1e-4)
