"""``forward-inits`` (``polyir.transforms.forward_inits``): an initialisation
whose values only the copies of the next nest read is forwarded into those
copies and removed; kept, with the reason, when a reader sees it at some
instances only or when the next nest leaves elements of it; meaning kept on
tiled products of random sizes and on random programs."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import polyir
from polyir.context import PassContext
from polyir.ir.nodes import Module
from polyir.passes import transform
from polyir.target import cpu
from polyir.testing import assert_equivalent, assert_preserves_or_refuses, programs
from polyir.transforms.forward_inits import initializer
from tests.conftest import examples

TILED = """func f(A: f32[M, K], B: f32[K, N], bias: f32[N], C: f32[M, N]) {
  for i = 0 to M {
    for j = 0 to N {
      S0: C[i, j] = bias[j] * 2.0
    }
  }
  for ir = 0 to M step 4 {
    local T: f32[4, N]
    for a = ir to min(M, ir + 4) {
      for b = 0 to N {
        T_in: T[a - ir, b] = C[a, b]
      }
    }
    for k = 0 to K {
      for a_1 = ir to min(M, ir + 4) {
        for b_1 = 0 to N {
          S1: T[a_1 - ir, b_1] = T[a_1 - ir, b_1] + A[a_1, k] * B[k, b_1]
        }
      }
    }
    for a_2 = ir to min(M, ir + 4) {
      for b_2 = 0 to N {
        T_out: C[a_2, b_2] = T[a_2 - ir, b_2]
      }
    }
  }
}"""


def _run(text: str) -> tuple[Module, Module, PassContext]:
    module = polyir.parse(text)
    ctx = PassContext()
    result = transform(module, "forward-inits", verify_each=True, ctx=ctx)
    return module, result, ctx


def test_the_copy_in_reads_the_initial_value_and_the_init_goes() -> None:
    module, result, ctx = _run(TILED)
    text = str(result)
    assert "S0:" not in text
    assert "T_in: T[a - ir, b] = bias[b] * 2.0" in text
    applied = ctx.remarks_of("forward-inits", "applied")
    assert len(applied) == 1 and "T_in read its value directly" in applied[0].why
    assert_equivalent(module, result, sizes={"M": 7, "N": 5, "K": 3})
    assert_equivalent(module, result, sizes={"M": 1, "N": 1, "K": 1})


def test_a_copy_of_part_of_the_buffer_keeps_the_init() -> None:
    # the tiles start at row 1: row 0 keeps S0's values, S0 stays
    module, result, ctx = _run(TILED.replace("for ir = 0 to M step 4", "for ir = 1 to M step 4"))
    assert result is module or str(result) == str(module)
    missed = ctx.remarks_of("forward-inits", "missed")
    assert len(missed) == 1 and "does not overwrite every element S0 writes" in missed[0].why


def test_a_reduction_that_reads_the_init_at_its_first_step_keeps_it() -> None:
    text = """func f(A: f32[M, K], B: f32[K, N], C: f32[M, N]) {
      for i = 0 to M { for j = 0 to N { S0: C[i, j] = 0.0 } }
      for i_1 = 0 to M { for j_1 = 0 to N { for k = 0 to K {
        S1: C[i_1, j_1] = C[i_1, j_1] + A[i_1, k] * B[k, j_1]
      } } }
    }"""
    module, result, ctx = _run(text)
    assert str(result) == str(module)
    missed = ctx.remarks_of("forward-inits", "missed")
    assert len(missed) == 1 and "reads 'C' from S0 at some instances only" in missed[0].why


@pytest.mark.parametrize("init, why", [
    ("for i = 0 to M { for j = 0 to N { S0: C[i, j] = A[i, 0] } }", "A is written later"),
    ("for i = 0 to M { for j = 0 to N { S0: C[i, j] = C[i, j] + 1.0 } }", "reads its own buffer"),
    ("for i = 0 to M { for j = 0 to N { S0: C[i, 0] = bias[j] } }", "j writes no element of its own"),
    ("for i = 0 to M { for j = 0 to N { S0: C[i, j] = bias[j] \n S9: bias[j] = 1.0 } }", "two statements"),
])
def test_what_is_not_an_initializer(init: str, why: str) -> None:
    module = polyir.parse(f"""func f(A: f32[M, K], bias: f32[N], C: f32[M, N]) {{
      {init}
      for i_1 = 0 to M {{ for k = 0 to K {{ S1: A[i_1, k] = 2.0 }} }}
    }}""")
    written = {"A", "C", "bias"}
    assert initializer(module.entry.body[0], written - {"bias"}) is None, why


def test_compiled_convolutions_and_linears_forward_their_bias() -> None:
    torch.manual_seed(0)
    for model, x in ((torch.nn.Conv2d(16, 64, 1), torch.randn(1, 16, 20, 20)),
                     (torch.nn.Conv2d(8, 32, 3, padding=1), torch.randn(2, 8, 13, 13)),
                     (torch.nn.Linear(96, 200), torch.randn(37, 96))):
        with torch.no_grad():
            compiled = polyir.compile(model.eval(), (x,), target=cpu(1))
            torch.testing.assert_close(compiled(x), model(x), rtol=1e-4, atol=1e-4)
        remarks = [r for s in compiled.last_plan.segments for r in s.executable.remarks
                   if r.pass_name == "forward-inits"]
        assert any(r.kind == "applied" for r in remarks), (model, [str(r) for r in remarks])


@st.composite
def tiled_products(draw: st.DrawFn) -> tuple[Module, dict[str, int]]:
    """An initialised product, tiled by ``auto-tile``'s pieces at random sizes."""
    init = draw(st.sampled_from(["0.0", "bias[j]", "bias[j] * A[i, 0]", "exp(bias[j]) - 1.0"]))
    rows = draw(st.sampled_from(["0 to M", "0 to M", "1 to M"]))     # 1: row 0 keeps the init
    text = f"""func f(A: f32[M, K], B: f32[K, N], bias: f32[N], C: f32[M, N]) {{
      for i = 0 to M {{ for j = 0 to N {{ S0: C[i, j] = {init} }} }}
      for i_1 = {rows} {{ for j_1 = 0 to N {{ for k = 0 to K {{
        S1: C[i_1, j_1] = C[i_1, j_1] + A[i_1, k] * B[k, j_1]
      }} }} }}
    }}"""
    mi, nj = draw(st.sampled_from([2, 3, 4, 8])), draw(st.sampled_from([2, 5, 8, 16]))
    pipeline = (f"tile{{loops=i_1,j_1 sizes={mi},{nj} names=ir,jr}},"
                "interchange{loops=ir,jr,i_1,j_1,k order=ir,jr,k,i_1,j_1},copies{at=jr buffers=C}")
    module = transform(polyir.parse(text), pipeline)
    sizes = {"M": draw(st.integers(1, 9)), "N": draw(st.integers(1, 17)), "K": draw(st.integers(1, 4))}
    return module, sizes


@settings(max_examples=examples(25), deadline=None)
@given(tiled_products())
def test_tiled_products_keep_their_meaning(case: tuple[Module, dict[str, int]]) -> None:
    module, sizes = case
    ctx = PassContext()
    result = transform(module, "forward-inits", verify_each=True, ctx=ctx)
    assert ctx.remarks_of("forward-inits"), "every initializer gets a remark"
    assert_equivalent(module, result, sizes=sizes)
    forwarded = bool(ctx.remarks_of("forward-inits", "applied"))
    assert forwarded == ("S0:" not in str(result))
    if "for i_1 = 1 to M" in str(module) or "ir = 1 to M" in str(module):
        assert not forwarded


@settings(max_examples=examples(25, 500))
@given(module=programs())
def test_random_programs_keep_their_meaning(module: Module) -> None:
    result = assert_preserves_or_refuses(lambda m: transform(m, "forward-inits", verify_each=True), module)
    assert isinstance(result, Module), result


def test_the_interpreter_agrees_on_a_forwarded_linear() -> None:
    module, result, _ = _run(TILED)
    rng = np.random.default_rng(3)
    M, N, K = 6, 9, 4
    A, B, bias = (rng.standard_normal(s, dtype=np.float32) for s in ((M, K), (K, N), (N,)))
    C = np.full((M, N), np.nan, dtype=np.float32)
    polyir.interpret(result, A, B, bias, C)
    np.testing.assert_allclose(C, bias * 2.0 + A @ B, rtol=1e-5, atol=1e-5)
