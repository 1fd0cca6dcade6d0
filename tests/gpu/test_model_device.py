"""Compiled torch models with ``target="cuda"`` on device tensors.

Without a GPU, the device is faked: tests/gpu/fakedevice.py stands in for
torch CUDA tensors and tests/gpu/fakecupy.py for CuPy (kernels run in the
interpreter), and the tests count what crosses between host and "device".
The tests marked ``gpu`` run the same models on a real GPU against eager."""
from __future__ import annotations

import copy
import sys
import types

import pytest
import torch
import torch.nn as nn

import polyir
from polyir.errors import ArgumentError
from polyir.frontends.demo_models import SmallCNN
from polyir.frontends.fx import CompiledModel, PolyirFallbackWarning
from polyir.frontends.fxdevice import CudaTensors, DeviceCopies
from tests.gpu import fakecupy
from tests.gpu.fakedevice import FakeCudaTensors

torch.manual_seed(7)


class TinyMLP(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(8, 16), nn.Linear(16, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(torch.relu(self.fc1(x)))


class WithSort(nn.Module):
    """Two segments around an eager ``aten.sort``."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(6, 6)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.fc(x))
        return torch.sort(y, dim=-1).values * 0.5 + y


class TwoInputs(nn.Module):
    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return a * 2 + b


@pytest.fixture
def on_fake_device(monkeypatch: pytest.MonkeyPatch):
    """``compile(model, *inputs)``: the model compiled for CUDA, its CUDA
    executables loading into the fake CuPy, and its device tensors faked;
    returns ``(compiled, fake)``."""
    monkeypatch.setitem(sys.modules, "cupy", fakecupy)
    monkeypatch.setattr(fakecupy.RawModule, "by_ptx", {})
    monkeypatch.setattr(fakecupy.RawModule, "launches", [])
    fakecupy.counts.clear()

    def compile(model: nn.Module, *inputs: torch.Tensor) -> tuple[CompiledModel, FakeCudaTensors]:
        model.requires_grad_(False)   # inference: no gradient warning
        compiled = polyir.compile(model, inputs, target="cuda")
        for segment in compiled.last_plan.segments:
            fakecupy.RawModule.by_ptx[segment.executable.ptx] = segment.executable.ir
        fake = FakeCudaTensors()
        compiled.device_copies = DeviceCopies(fake)
        return compiled, fake

    return compile


def _uploads_of(fake: FakeCudaTensors, tensors: list[torch.Tensor]) -> int:
    return sum(any(u is t for t in tensors) for u in fake.uploads)


def test_device_inputs_stay_on_the_device_and_weights_go_up_once(on_fake_device) -> None:
    model = TinyMLP().eval()
    x = torch.randn(3, 8)
    compiled, fake = on_fake_device(model, x)
    x_device = fake.to_device(x)
    for _ in range(2):
        out = compiled(x_device)
        assert fake.on_device(out)
        torch.testing.assert_close(out, model(x).detach(), rtol=1e-5, atol=1e-5)
    parameters = list(model.parameters())
    assert _uploads_of(fake, parameters) == len(parameters) == len(fake.uploads)
    assert fakecupy.counts["to_device"] == 0      # the runtime copied nothing up,
    assert fakecupy.counts["to_host"] == 0        # nothing back,
    assert fakecupy.counts["synchronize"] == 0    # and never waited
    assert fake.streams == 2                      # each call ran on torch's stream


def test_a_changed_weight_is_uploaded_again(on_fake_device) -> None:
    model = TinyMLP().eval()
    x = torch.randn(2, 8)
    compiled, fake = on_fake_device(model, x)
    x_device = fake.to_device(x)
    compiled(x_device)
    with torch.no_grad():
        model.fc2.weight.mul_(-1.0)
    torch.testing.assert_close(compiled(x_device), model(x).detach(), rtol=1e-5, atol=1e-5)
    assert _uploads_of(fake, [model.fc2.weight]) == 2
    assert _uploads_of(fake, [model.fc1.weight, model.fc1.bias, model.fc2.bias]) == 3
    model.fc1.bias = nn.Parameter(torch.randn(16), requires_grad=False)   # replaced
    torch.testing.assert_close(compiled(x_device), model(x), rtol=1e-5, atol=1e-5)
    assert _uploads_of(fake, [model.fc1.bias]) == 1 and len(fake.uploads) == 6


def test_no_synchronisation_between_segments_on_the_device(on_fake_device) -> None:
    model = WithSort().eval()
    x = torch.randn(3, 6)
    with pytest.warns(PolyirFallbackWarning):
        compiled, fake = on_fake_device(model, x)
    assert len(compiled.last_plan.segments) == 2
    x_device = fake.to_device(x)
    for _ in range(2):
        out = compiled(x_device)
        assert fake.on_device(out)
        torch.testing.assert_close(out, model(x).detach(), rtol=1e-5, atol=1e-5)
    assert len(fakecupy.RawModule.launches) >= 4
    assert fakecupy.counts["synchronize"] == 0 and fakecupy.counts["to_host"] == 0
    assert fakecupy.counts["to_device"] == 0
    parameters = list(model.parameters())
    assert _uploads_of(fake, parameters) == len(parameters)


def test_bf16_stays_bf16_on_the_device(on_fake_device) -> None:
    model = TinyMLP().eval().to(torch.bfloat16)
    x = torch.randn(3, 8, dtype=torch.bfloat16)
    compiled, fake = on_fake_device(model, x)
    out = compiled(fake.to_device(x))
    assert fake.on_device(out) and out.dtype == torch.bfloat16
    assert sum(fakecupy.counts.values()) == 0   # no float32 detour through the host
    torch.testing.assert_close(out, compiled(x), rtol=0, atol=0)   # as the host path computes it
    torch.testing.assert_close(out, model(x), rtol=2e-2, atol=2e-2)


def test_host_inputs_keep_the_host_path(on_fake_device) -> None:
    model = TinyMLP().eval()
    x = torch.randn(3, 8)
    compiled, fake = on_fake_device(model, x)
    out = compiled(x)
    assert not fake.on_device(out) and out.device.type == "cpu"
    torch.testing.assert_close(out, model(x).detach(), rtol=1e-5, atol=1e-5)
    assert fake.uploads == [] and fakecupy.counts["synchronize"] >= 1


def test_inputs_on_different_devices_are_an_argument_error(on_fake_device) -> None:
    a, b = torch.randn(4, 5), torch.randn(4, 5)
    compiled, fake = on_fake_device(TwoInputs(), a, b)
    with pytest.raises(ArgumentError, match="tensor input 1 is on cpu but tensor input 0 is on cuda:0"):
        compiled(fake.to_device(a), b)
    with pytest.raises(ArgumentError, match="tensor input 1 is on cuda:0"):
        compiled(a, fake.to_device(b))


def test_device_weights_with_host_inputs_name_the_weight(on_fake_device) -> None:
    model = TinyMLP().eval()
    x = torch.randn(3, 8)
    compiled, fake = on_fake_device(model, x)
    model.fc2.bias.data = fake.to_device(model.fc2.bias.data)
    with pytest.raises(ArgumentError, match="'fc2.bias' is on cuda:0"):
        compiled(x)


def test_cupy_launches_on_torchs_current_stream(monkeypatch: pytest.MonkeyPatch) -> None:
    """The legacy default stream (handle 0) is CuPy's default too: only the
    device is set; another stream is wrapped once as an ExternalStream."""
    monkeypatch.setitem(sys.modules, "cupy", fakecupy)
    monkeypatch.setattr(fakecupy._Context, "entered", [])
    handle = {"value": 0}
    monkeypatch.setattr(torch.cuda, "current_stream",
                        lambda device=None: types.SimpleNamespace(cuda_stream=handle["value"]))
    tensors = CudaTensors()
    with tensors.stream(torch.device("cuda", 1)):
        pass
    assert fakecupy._Context.entered == [("Device", 1)]
    handle["value"] = 0x5000
    for _ in range(2):
        with tensors.stream(torch.device("cuda", 0)):
            pass
    assert fakecupy._Context.entered[1:] == [("Device", 0), ("ExternalStream", 0x5000)] * 2
    assert len(tensors._streams) == 1


class Embed(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.table = nn.Embedding(10, 4)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.table(ids) * 2.0


def test_device_embedding_ids_out_of_range_are_a_bounds_error(on_fake_device) -> None:
    # issue 16: device-resident ids are checked before the launches (CuPy min/max)
    from polyir import BoundsError
    model = Embed().eval()
    ids = torch.tensor([[1, 9, 0]])
    compiled, fake = on_fake_device(model, ids)
    out = compiled(fake.to_device(ids))
    torch.testing.assert_close(out, model(ids).detach())
    launches = len(fakecupy.RawModule.launches)
    for bad in ([[1, 10, 0]], [[-1, 2, 3]]):
        with pytest.raises(BoundsError, match="from 'ids|from 'arg"):
            compiled(fake.to_device(torch.tensor(bad)))
    assert len(fakecupy.RawModule.launches) == launches     # nothing ran


# ------------------------------------------------------------------ real GPU
@pytest.mark.gpu
@pytest.mark.parametrize("weights_on_gpu", [True, False])
def test_mlp_on_cuda_tensors_matches_eager(weights_on_gpu: bool) -> None:
    model = TinyMLP().eval()
    x = torch.randn(5, 8, device="cuda")
    eager = copy.deepcopy(model).cuda()
    if weights_on_gpu:
        model.cuda()
    compiled = polyir.compile(model, (x,), target="cuda")
    with torch.no_grad():
        expected = eager(x)
    for _ in range(2):
        out = compiled(x)
        assert out.is_cuda
        torch.testing.assert_close(out, expected, rtol=1e-4, atol=1e-4)
    assert next(model.parameters()).is_cuda == weights_on_gpu  # the model itself is not moved


@pytest.mark.gpu
def test_small_cnn_on_cuda_tensors_matches_eager() -> None:
    model = SmallCNN(channels=4, classes=5).eval().cuda()
    x = torch.randn(2, 3, 16, 16, device="cuda")
    compiled = polyir.compile(model, (x,), target="cuda")
    with torch.no_grad():
        expected = model(x)
    out = compiled(x)
    assert out.is_cuda and out.device == x.device
    torch.testing.assert_close(out, expected, rtol=1e-3, atol=1e-3)


@pytest.mark.gpu
def test_launches_follow_torchs_current_stream() -> None:
    model = TinyMLP().eval().cuda()
    x = torch.randn(256, 8, device="cuda")
    compiled = polyir.compile(model, (x,), target="cuda")
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.no_grad(), torch.cuda.stream(stream):
        out = compiled(x)
        expected = model(x)
    stream.synchronize()
    torch.testing.assert_close(out, expected, rtol=1e-4, atol=1e-4)


@pytest.mark.gpu
def test_embedding_ids_on_the_gpu_are_checked() -> None:
    from polyir import BoundsError
    model = Embed().eval().cuda()
    ids = torch.tensor([[1, 9, 0]], device="cuda")
    compiled = polyir.compile(model, (ids,), target="cuda")
    with torch.no_grad():
        torch.testing.assert_close(compiled(ids), model(ids))
    with pytest.raises(BoundsError):
        compiled(torch.tensor([[1, 10, 0]], device="cuda"))
