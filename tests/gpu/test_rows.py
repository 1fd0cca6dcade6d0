"""Row reductions across a block's threads (``polyir.gpu.rows``).

Oracles: the mapped IR against the unmapped IR in the interpreter (forward,
reverse, shuffled, race detection on) at odd row lengths (partial shares),
exact with small integers for sums and max, to rounding for softmax; the
PTX assembled by ``ptxas`` for sm_80 and sm_90 within limits; refusals say why.
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from polyir.context import PassContext
from polyir.driver import compile_ir
from polyir.gpu.rows import NotRows, find_rows
from polyir.ir.interpreter import interpret
from polyir.ir.nodes import For
from polyir.ir.parser import parse
from polyir.passes import transform
from polyir.target import cuda
from polyir.testing import assert_preserves_or_refuses, programs, random_arguments, symbol_values
from tests.conftest import examples
from tests.gpu.ptxas import resource_usage

SOFTMAX = """
func sm(x: f32[ROWS, N], y: f32[ROWS, N]) {
  for i = 0 to ROWS parallel {
    local mx: f32[]
    local sm: f32[]
    S0: mx[] = -inf
    for r = 0 to N { S1: mx[] = max(mx[], x[i, r]) }
    S2: sm[] = 0.0
    for r_1 = 0 to N { S3: sm[] = sm[] + exp(x[i, r_1] - mx[]) }
    for j = 0 to N parallel { S4: y[i, j] = exp(x[i, j] - mx[]) / sm[] }
  }
}
"""

CENTRED = """
func centred(x: f32[_B_, _S_, _N_], y: f32[_B_, _S_, _N_], total: f32[_B_, _S_]) {
  for b = 0 to _B_ parallel {
    for s = 0 to _S_ parallel {
      local acc: f32[]
      local lo: f32[]
      S0: acc[] = 1.0
      for r = 0 to _N_ { S1: acc[] = acc[] + x[b, s, r] }
      S2: lo[] = inf
      for r_1 = 0 to _N_ { S3: lo[] = min(lo[], x[b, s, r_1]) }
      S4: total[b, s] = acc[]
      for j = 0 to _N_ parallel { S5: y[b, s, j] = x[b, s, j] * 8.0 - acc[] + lo[] }
    }
  }
}
"""


def _mapped(text: str, sizes: dict[str, str]):
    for name, value in sizes.items():
        text = text.replace(name, value)
    module = parse(text)
    ctx = PassContext(cuda(80))
    mapped = transform(module, "gpu-tensorcore,gpu-map", ctx=ctx)
    applied = [str(r) for r in ctx.remarks_of("gpu-tensorcore") if r.kind == "applied"]
    assert len(applied) == 1 and "row reductions" in applied[0], applied
    return module, mapped


def _compare(module, mapped, arrays, exact: bool) -> None:
    expected = [a.copy() for a in arrays]
    interpret(module, *expected)
    for order in ("forward", "reverse", "shuffle"):
        got = [a.copy() for a in arrays]
        interpret(mapped, *got, parallel_order=order, detect_races=True)
        for g, w in zip(got, expected, strict=True):
            if exact:
                np.testing.assert_array_equal(g, w, err_msg=order)
            else:
                np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-7, err_msg=order)


@pytest.mark.parametrize("rows,n", [(5, 37), (3, 301)])   # 32 and 128 threads, partial shares
def test_softmax_rows_on_a_block_of_threads(rows, n) -> None:
    module, mapped = _mapped(SOFTMAX, {"ROWS": str(rows), "N": str(n)})
    x = np.random.default_rng(1).standard_normal((rows, n)).astype(np.float32)
    _compare(module, mapped, [x, np.zeros_like(x)], exact=False)


def test_two_row_loops_sum_min_and_a_row_store_are_exact() -> None:
    module, mapped = _mapped(CENTRED, {"_B_": "2", "_S_": "3", "_N_": "45"})
    rng = np.random.default_rng(2)
    x = rng.integers(-4, 5, (2, 3, 45)).astype(np.float32)
    _compare(module, mapped, [x, np.zeros_like(x), np.zeros((2, 3), np.float32)], exact=True)


def test_symbolic_row_length_uses_256_threads() -> None:
    module = parse(SOFTMAX.replace("ROWS", "R"))
    ctx = PassContext(cuda(80))
    mapped = transform(module, "gpu-tensorcore,gpu-map", ctx=ctx)
    (launch,) = [n for n in mapped.entry.body if hasattr(n, "kernel")]
    assert launch.block == (256, 1, 1)
    x = np.random.default_rng(3).standard_normal((4, 300)).astype(np.float32)
    want, got = np.zeros_like(x), np.zeros_like(x)
    interpret(module, x, want)
    interpret(mapped, x, got, detect_races=True)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("sm", [80, 90])
def test_row_kernels_assemble_within_limits(sm) -> None:
    for text in (SOFTMAX.replace("ROWS", "4096").replace("N", "1024"),
                 CENTRED.replace("_B_", "8").replace("_S_", "128").replace("_N_", "768")):
        exe = compile_ir(parse(text), cuda(sm))
        assert ".extern .func llvm." not in exe.ptx and "bar.sync" in exe.ptx
        (usage,) = resource_usage(exe.ptx, f"sm_{sm}").values()
        assert usage["spill_stores"] == 0 and usage["spill_loads"] == 0 and usage["stack"] == 0
        assert 0 < usage["shared"] <= 2 * 256 * 4 and usage["registers"] <= 64, usage


def test_not_rows_says_why() -> None:
    reads_back = SOFTMAX.replace("ROWS", "4").replace("N", "8").replace(
        "S3: sm[] = sm[] + exp(x[i, r_1] - mx[])", "S3: sm[] = sm[] + y[i, r_1]")
    module = parse(reads_back)
    nest = next(n for n in module.entry.body if isinstance(n, For))
    with pytest.raises(NotRows, match="reads what it writes"):
        find_rows(module.entry, nest)
    plain = parse("""func f(y: f32[4, 8], x: f32[4, 8]) {
  for i = 0 to 4 parallel { for j = 0 to 8 parallel { S0: y[i, j] = x[i, j] } }
}""")
    with pytest.raises(NotRows, match="no reduction"):
        find_rows(plain.entry, plain.entry.body[0])


@settings(max_examples=examples(10), deadline=None)
@given(programs(max_depth=3, max_statements=4, locals=True))
def test_tensor_core_and_row_mapping_preserve_or_refuse_on_random_programs(module) -> None:
    def mapped(m):
        return transform(m, "mark-parallel,gpu-tensorcore,gpu-map", target="cuda:sm_80")

    for order in ("forward", "reverse"):
        result = assert_preserves_or_refuses(mapped, module, trials=1, parallel_order=order)
    if not isinstance(result, Exception):
        sizes = symbol_values(result.entry, None)
        interpret(result, *random_arguments(result.entry, np.random.default_rng(0), sizes),
                  detect_races=True)


@settings(max_examples=examples(6), deadline=None)
@given(rows=st.integers(1, 4), n=st.integers(1, 700), op=st.sampled_from(["+", "max", "min"]),
       init=st.sampled_from(["0.0", "3.0", "-inf", "inf"]))
def test_random_row_reductions_are_exact_on_integers(rows, n, op, init) -> None:
    value = "acc[] + x[i, r]" if op == "+" else f"{op}(acc[], x[i, r])"
    text = f"""func f(x: f32[{rows}, {n}], y: f32[{rows}, {n}], out: f32[{rows}]) {{
  for i = 0 to {rows} parallel {{
    local acc: f32[]
    S0: acc[] = {init}
    for r = 0 to {n} {{ S1: acc[] = {value} }}
    S2: out[i] = acc[]
    for j = 0 to {n} parallel {{ S3: y[i, j] = x[i, j] - acc[] }}
  }}
}}"""
    module, mapped = _mapped(text, {})
    x = np.random.default_rng(n).integers(-50, 50, (rows, n)).astype(np.float32)
    _compare(module, mapped, [x, np.zeros_like(x), np.zeros(rows, np.float32)], exact=True)


def test_a_row_local_written_in_an_elementwise_loop_is_refused() -> None:
    module = parse("""func f(x: f32[4, 8], y: f32[4]) {
  for i = 0 to 4 parallel {
    local acc: f32[]
    local last: f32[]
    S0: acc[] = 0.0
    for r = 0 to 8 { S1: acc[] = acc[] + x[i, r] }
    for j = 0 to 8 parallel { S2: last[] = x[i, j] }
    S3: y[i] = acc[] + last[]
  }
}""")
    with pytest.raises(NotRows, match="writes row locals"):
        find_rows(module.entry, module.entry.body[0])
