"""Convolutions as implicit GEMM on tensor cores (``polyir.gpu.implicit_gemm``).

Oracles: the mapped IR against the unmapped IR (the ATen lowering's nest) in
the interpreter, forward, reverse and shuffled, race detection on, at odd
sizes with partial tiles, with stride, zero padding and dilation; ``ptxas``
for sm_80 and sm_90 on ResNet-50 shapes, ``ptxas -v`` within the target's
limits, the epilogue in registers; refusals say why.
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from polyir.context import PassContext
from polyir.driver import compile_ir
from polyir.gpu.contraction import NotAContraction
from polyir.gpu.implicit_gemm import find_convolution
from polyir.ir.nodes import For, Launch
from polyir.ir.parser import parse
from polyir.ir.types import round_to_bf16
from polyir.ir.walk import walk_nodes
from polyir.passes import transform
from polyir.ptx.staging import register_staged
from polyir.target import cuda
from tests.conftest import examples
from tests.gpu.ptxas import resource_usage
from tests.gpu.test_tensorcore import _check_equivalent


def conv_ir(n: int, c: int, h: int, w: int, oc: int, k: int, stride: int = 1, pad: int = 0,
            dilation: int = 1, dtype: str = "f16", relu: bool = False) -> str:
    """``conv2d(x, wt, bias, stride, pad, dilation)`` (optionally then relu) as
    the ATen lowering writes it (guard only where the window leaves the input)."""
    oh = (h + 2 * pad - dilation * (k - 1) - 1) // stride + 1
    ow = (w + 2 * pad - dilation * (k - 1) - 1) // stride + 1
    ih = f"{stride}*i_2 + {dilation}*r_1 - {pad}"
    iw = f"{stride}*i_3 + {dilation}*r_2 - {pad}"
    update = (f"S1: acc[i, 0, i_1, i_2, i_3] = acc[i, 0, i_1, i_2, i_3] + cast<f32>(x[i, r, {ih}, "
              f"{iw}]) * cast<f32>(wt[i_1, r, r_1, r_2])")
    if pad:
        update = f"if ({ih} >= 0, {ih} < {h}, {iw} >= 0, {iw} < {w}) {{ {update} }}"
    value = "cast<f32>(acc[i, 0, i_1, i_2, i_3])"
    if relu:
        value = f"select({value} < 0.0, 0.0, {value})"
    return f"""
func conv(x: {dtype}[{n}, {c}, {h}, {w}], wt: {dtype}[{oc}, {c}, {k}, {k}], bias: {dtype}[{oc}],
          out0: {dtype}[{n}, {oc}, {oh}, {ow}]) {{
  local acc: f32[{n}, 1, {oc}, {oh}, {ow}]
  for i = 0 to {n} {{ for i_1 = 0 to {oc} {{ for i_2 = 0 to {oh} {{ for i_3 = 0 to {ow} {{
    S0: acc[i, 0, i_1, i_2, i_3] = cast<f32>(bias[i_1])
    for r = 0 to {c} {{ for r_1 = 0 to {k} {{ for r_2 = 0 to {k} {{
      {update}
    }} }} }}
    S2: out0[i, i_1, i_2, i_3] = cast<{dtype}>({value})
  }} }} }} }}
}}
"""


def _prepared(text: str):
    return transform(parse(text), "fuse,shrink-buffers,mark-parallel", ctx=PassContext(cuda(80)))


def _data(module, rng, dtype):
    arrays = []
    for param in module.entry.params:
        shape = tuple(d.constant for d in param.shape)
        values = rng.integers(-3, 4, shape).astype(np.float32)
        if param.name == "out0":
            values[:] = 0
        arrays.append(values.astype(np.float16) if dtype == "f16" else
                      values if dtype == "f32" else round_to_bf16(values))
    return arrays


@pytest.mark.parametrize("shape,tile,dtype", [
    (dict(n=2, c=8, h=9, w=11, oc=16, k=3, stride=2, pad=1), "32,16,16 warps=2,1", "f16"),
    (dict(n=1, c=5, h=10, w=7, oc=12, k=3, dilation=2, relu=True), "16,16,16 warps=1,1", "bf16"),
    (dict(n=3, c=24, h=5, w=5, oc=20, k=1), "32,32,32 warps=1,2", "f16"),        # 1x1
    (dict(n=1, c=3, h=13, w=13, oc=8, k=7, stride=2, pad=3), "16,16,32 warps=1,1", "f16"),  # stem
])
def test_convolution_as_implicit_gemm_equals_the_loops(shape, tile, dtype) -> None:
    module = _prepared(conv_ir(dtype=dtype, **shape))
    ctx = PassContext(cuda(80))
    mapped = transform(module, f"gpu-tensorcore{{tile={tile}}},gpu-map", ctx=ctx)
    applied = [str(r) for r in ctx.remarks_of("gpu-tensorcore") if r.kind == "applied"]
    assert len(applied) == 1 and "convolution (implicit GEMM)" in applied[0], applied
    (kernel,) = [f for f in mapped.functions if f.kind == "kernel"]
    # no im2col: the only buffers the kernel has besides its params are on chip
    assert all(b.space.value in ("shared", "fragment", "local") for b in kernel.locals)
    assert set(register_staged(kernel, 80)) == {"tc_Cs"}
    _check_equivalent(module, mapped, _data(module, np.random.default_rng(5), dtype))


RESNET = [  # (c, h, oc, k, stride, pad) at batch 1: ResNet-50 layers
    (64, 56, 64, 3, 1, 1), (256, 56, 64, 1, 1, 0), (128, 28, 128, 3, 1, 1),
    (512, 14, 512, 3, 2, 1)]


@pytest.mark.parametrize("sm", [80, 90])
@pytest.mark.parametrize("layer", RESNET, ids=str)
def test_resnet_convolutions_assemble_within_limits(layer, sm) -> None:
    from polyir.ptx.cpasync import _pattern, async_plan

    c, h, oc, k, stride, pad = layer
    module = _prepared(conv_ir(1, c, h, h, oc, k, stride, pad))
    target = cuda(sm)
    exe = compile_ir(module, target)
    assert ".extern .func llvm." not in exe.ptx
    assert "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32" in exe.ptx
    # the weights (B) go by 16-byte chunks along k, asynchronously; with
    # stride 1, A too (chunks of one output row)
    assert "cp.async.cg.shared.global" in exe.ptx
    kernel = next(f for f in exe.ir.functions if f.kind == "kernel")
    plan = async_plan(kernel)
    tiles = {_pattern(kernel, n).buffer for n in walk_nodes(kernel.body)
             if isinstance(n, For) and id(n) in plan.loops}
    assert {t.rstrip("0123456789")[-3:] for t in tiles} == ({"_As", "_Bs"} if stride == 1 else {"_Bs"})
    (usage,) = resource_usage(exe.ptx, f"sm_{sm}").values()
    assert usage["spill_stores"] == 0 and usage["spill_loads"] == 0, usage
    assert usage["registers"] <= min(255, target.max_registers_per_thread)
    (launch,) = [n for n in walk_nodes(exe.ir.entry.body) if isinstance(n, Launch)]
    assert max(usage["shared"], launch.shared_bytes) <= target.shared_memory_bytes
    assert usage["registers"] * launch.block[0] <= target.registers_per_sm


def test_not_a_convolution_says_why() -> None:
    module = _prepared(conv_ir(1, 4, 6, 6, 8, 3, pad=1))
    nest = next(n for n in module.entry.body if isinstance(n, For))
    conv = find_convolution(module.entry, nest)
    assert conv.sizes["ic"] == 4 and conv.spatial == ((1, 1, -1), (1, 1, -1))
    cases = {
        "guard is not the input bounds": ("< 6, ", "< 5, "),
        "not stride": ("x[i, r, 1*i_2 + 1*r_1 - 1", "x[i, r, 1*i_2 * 1 + 0*r_1 + r - 1"),
    }
    for why, (old, new) in cases.items():
        text = conv_ir(1, 4, 6, 6, 8, 3, pad=1)
        assert old in text, old
        broken = _prepared(text.replace(old, new, 1))
        nest = next(n for n in broken.entry.body if isinstance(n, For))
        with pytest.raises(NotAContraction, match=why.split()[0]):
            find_convolution(broken.entry, nest)


@pytest.mark.parametrize("shape", [dict(n=2, c=5, h=9, w=8, oc=7, k=3, stride=2, pad=1),
                                   dict(n=1, c=6, h=7, w=7, oc=70, k=1)], ids=str)
def test_f32_convolutions_on_cuda_core_register_tiles(shape) -> None:
    module = _prepared(conv_ir(dtype="f32", **shape))
    ctx = PassContext(cuda(80))
    mapped = transform(module, "gpu-tensorcore,gpu-map", ctx=ctx)
    applied = [str(r) for r in ctx.remarks_of("gpu-tensorcore") if r.kind == "applied"]
    assert len(applied) == 1 and "CUDA cores" in applied[0] and "implicit GEMM" in applied[0]
    _check_equivalent(module, mapped, _data(module, np.random.default_rng(6), "f32"))
    exe = compile_ir(module, cuda(90))
    (usage,) = resource_usage(exe.ptx, "sm_90").values()
    assert usage["spill_stores"] == 0 and usage["stack"] == 0, usage


@pytest.mark.gpu
@pytest.mark.parametrize("shape", [dict(n=2, c=16, h=17, w=19, oc=24, k=3, stride=2, pad=1),
                                   dict(n=1, c=40, h=9, w=9, oc=72, k=1, relu=True)], ids=str)
def test_implicit_gemm_convolution_on_the_gpu(shape) -> None:
    import cupy
    sm = 90 if int(cupy.cuda.Device().compute_capability) >= 90 else 80
    text = conv_ir(**shape)
    exe = compile_ir(parse(text), cuda(sm))
    assert "mma.sync.aligned.m16n8k16" in exe.ptx
    module = parse(text)
    arrays = _data(module, np.random.default_rng(8), "f16")
    expected = [a.copy() for a in arrays]
    from polyir.ir.interpreter import interpret
    interpret(module, *expected)
    exe(*arrays)
    np.testing.assert_array_equal(arrays[3], expected[3])   # small integers: exact


@settings(max_examples=examples(6), deadline=None)
@given(n=st.integers(1, 2), c=st.integers(1, 6), h=st.integers(3, 9), w=st.integers(3, 9),
       oc=st.integers(1, 20), k=st.sampled_from([1, 2, 3]), stride=st.integers(1, 3),
       pad=st.integers(0, 2), dilation=st.integers(1, 2))
def test_random_convolutions_equal_the_loops(n, c, h, w, oc, k, stride, pad, dilation) -> None:
    assume(h + 2 * pad >= dilation * (k - 1) + 1 and w + 2 * pad >= dilation * (k - 1) + 1)
    assume(pad < dilation * (k - 1) + 1)   # torch's limit: padding under the window
    module = _prepared(conv_ir(n, c, h, w, oc, k, stride, pad, dilation))
    mapped = transform(module, "gpu-tensorcore{tile=16,16,16 warps=1,1},gpu-map",
                       target="cuda:sm_80")
    assert any(isinstance(node, For) and node.mapping == "thread.x"
               for f in mapped.functions for node in walk_nodes(f.body))
    (kernel,) = [f for f in mapped.functions if f.kind == "kernel"]
    assert set(register_staged(kernel, 80)) == {"tc_Cs"}   # it went through the tensor cores
    _check_equivalent(module, mapped, _data(module, np.random.default_rng(k), "f16"),
                      orders=("shuffle",))
