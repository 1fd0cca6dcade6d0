"""``polyir.compile(..., dynamic=True)`` and ``torch.compile(..., dynamic=True)``:
one plan for every batch and sequence size, checked against eager at each size;
guards that recompile when an assumption breaks (a size of 1, a specialised
size); symbolic extents in the IR."""
from __future__ import annotations

import pytest
import torch
import torch.nn as nn
from fx_support import Fn

import polyir
from polyir.frontends.demo_models import TransformerBlock

SIZES = [(2, 7), (3, 5), (4, 9), (2, 2), (5, 3)]  # a first sequence length other than d_model:
# dynamo would otherwise give both one symbol and specialise it


def _check_sizes(compiled, model, make, sizes, compiles=1, tol=1e-5) -> None:
    with torch.no_grad():
        for size in sizes:
            x = make(*size)
            torch.testing.assert_close(compiled(x), model(x), rtol=tol, atol=tol)
    assert compiled.compiles == compiles, f"{compiled.compiles} compiles for {sizes}"


def test_one_plan_serves_every_batch_size_of_an_mlp():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(12, 24), nn.LayerNorm(24), nn.GELU(), nn.Linear(24, 5)).eval()
    compiled = polyir.compile(model, (torch.randn(3, 12),), dynamic=True)
    _check_sizes(compiled, model, lambda b, _: torch.randn(b, 12), SIZES)
    text = str(compiled.ir()[0])
    assert "f32[3, 12]" not in text and ", 12]" in text, "the batch extent is a symbol"


def test_batch_and_sequence_sizes_of_a_transformer_block():
    torch.manual_seed(0)
    model = TransformerBlock(d_model=16, heads=2).eval()
    compiled = polyir.compile(model, (torch.randn(2, 6, 16),), dynamic=True)
    _check_sizes(compiled, model, lambda b, s: torch.randn(b, s, 16), SIZES, tol=1e-4)
    segment = compiled.last_plan.segments[0]
    assert segment.lowered.symbol_params, "batch * sequence is passed as a derived symbol"
    assert compiled.last_plan.fallbacks == []


def test_torch_transformer_encoder_layers():
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(16, 2, dim_feedforward=32, dropout=0.0, batch_first=True)
    model = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False).eval()
    compiled = polyir.compile(model, (torch.randn(2, 5, 16),), dynamic=True)
    _check_sizes(compiled, model, lambda b, s: torch.randn(b, s, 16), SIZES, tol=1e-4)
    static = polyir.compile(model, (torch.randn(2, 5, 16),))
    assert compiled.summary()["loop_nests"] == static.summary()["loop_nests"], \
        "symbolic sizes cost no extra copies"


def test_a_size_of_one_breaks_a_guard_and_recompiles():
    """The plan assumed every dynamic size is at least 2 (a 1 broadcasts)."""
    torch.manual_seed(0)
    model = Fn(lambda x, y: x * y + x.sum(1, keepdim=True))
    compiled = polyir.compile(model, (torch.randn(3, 4), torch.randn(3, 4)), dynamic=True)
    with torch.no_grad():
        for a, b in [((5, 4), (5, 4)), ((1, 4), (6, 4)), ((7, 4), (7, 4)), ((1, 4), (2, 4))]:
            x, y = torch.randn(*a), torch.randn(*b)
            torch.testing.assert_close(compiled(x, y), model(x, y))
    assert compiled.compiles == 2, "one plan for sizes >= 2, one for a batch of 1 broadcast"


def test_a_size_the_lowering_specialises_is_guarded():
    """Unbinding a dynamic dimension pins it (the number of results depends on it):
    another size must not reuse that plan."""
    model = Fn(lambda x: sum(x.unbind(1)) * 2)
    compiled = polyir.compile(model, (torch.randn(3, 4),), dynamic=True)
    with torch.no_grad():
        for shape in [(5, 4), (2, 4), (3, 6), (4, 6)]:
            x = torch.randn(*shape)
            torch.testing.assert_close(compiled(x), model(x))
    assert compiled.compiles == 2, "batch stays dynamic; the unbound size 4 -> 6 recompiles"


def test_a_buffer_updated_in_forward_is_updated_at_every_size():
    class Running(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.register_buffer("total", torch.zeros(8))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            self.total.add_(x.sum(0))
            return x * 2 + self.total

    model, reference = Running(), Running()
    with pytest.warns(polyir.frontends.fx.PolyirFallbackWarning, match="copy_"):
        compiled = polyir.compile(model, (torch.ones(3, 8),), dynamic=True)
    assert not model.total.any(), "compiling does not run the model"
    with torch.no_grad():
        for batch in (3, 5, 2):
            x = torch.randn(batch, 8)
            torch.testing.assert_close(compiled(x), reference(x))
            torch.testing.assert_close(model.total, reference.total)
    assert compiled.compiles == 1


def test_static_compile_still_specialises():
    model = nn.Linear(4, 3).eval()
    compiled = polyir.compile(model, (torch.randn(2, 4),))
    with torch.no_grad():
        compiled(torch.randn(5, 4))
    assert compiled.compiles == 2
    assert "f32[2, 4]" in str(compiled.plans[next(iter(compiled.plans))].segments[0].lowered.module)


def test_torch_compile_dynamic_uses_one_polyir_plan():
    from polyir.frontends.dynamo import polyir_backend

    made = []

    def backend(gm, example_inputs):
        compiled = polyir_backend(gm, example_inputs)
        made.append(compiled)
        return compiled

    torch._dynamo.reset()
    torch.manual_seed(0)
    model = TransformerBlock(d_model=16, heads=2).eval()
    compiled = torch.compile(model, backend=backend, dynamic=True)
    with torch.no_grad():
        for b, s in SIZES:
            x = torch.randn(b, s, 16)
            torch.testing.assert_close(compiled(x), model(x), rtol=1e-4, atol=1e-4)
    assert len(made) == 1, "dynamo compiled one graph"
    variants = made[0].polyir.variants
    assert len(variants) == 1 and next(iter(variants.values())).compiles == 1


def test_the_interpreter_runs_a_dynamic_plan_too():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 6), nn.LayerNorm(6)).eval()
    compiled = polyir.compile(model, (torch.randn(2, 3, 4),), target="interpret", dynamic=True)
    _check_sizes(compiled, model, lambda b, s: torch.randn(b, s, 4), [(2, 3), (3, 2), (4, 5)])
