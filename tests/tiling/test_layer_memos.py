"""Repeated layers: a nest the same as an earlier one up to names takes the
earlier nest's spill and widening decisions renamed (``spill_for_tiling``'s
and ``widen_function``'s memos), with the same remarks, without trying or
proving them again; the result keeps the program's meaning exactly."""
from __future__ import annotations

import re

import pytest

import polyir
from polyir.context import PassContext
from polyir.passes import transform
from polyir.testing import assert_equivalent
from polyir.tiling import spill, widen
from tests.tiling.test_autotile import AVX2
from tests.tiling.test_widen import FUSED as CONV

LINEAR = """\
  for i = 0 to 64 {
    for j = 0 to 48 {
      local acc: f32[]
      S0: acc[] = b[j]
      for k = 0 to 48 {
        S1: acc[] = acc[] + A[i, k] * W[j, k]
      }
      S2: out[i, j] = max(acc[] * 0.5 + R[i, j], 0.0)
    }
  }
"""


def _second(text: str, names: dict[str, str]) -> str:
    """``text`` with every name in ``names`` replaced (whole words)."""
    return re.sub(r"\b(" + "|".join(map(re.escape, names)) + r")\b", lambda m: names[m.group(1)], text)


def _two_linears() -> polyir.Module:
    second = _second(LINEAR, {"i": "p", "j": "q", "k": "r", "acc": "acc2", "S0": "S3", "S1": "S4",
                              "S2": "S5", "A": "out", "out": "out2", "W": "W2", "b": "b2", "R": "R2"})
    return polyir.parse("func f(out: f32[64, 48], out2: f32[64, 48], A: f32[64, 48], W: f32[48, 48], "
                        "b: f32[48], R: f32[64, 48], W2: f32[48, 48], b2: f32[48], R2: f32[64, 48]) {\n"
                        + LINEAR + second + "}")


def _counting(monkeypatch: pytest.MonkeyPatch, module: object, name: str) -> list[int]:
    calls = [0]
    original = getattr(module, name)

    def counted(*args, **kwargs):
        calls[0] += 1
        return original(*args, **kwargs)

    monkeypatch.setattr(module, name, counted)
    return calls


def test_a_repeated_linear_layer_takes_the_first_spill(monkeypatch: pytest.MonkeyPatch) -> None:
    module = _two_linears()
    tries = _counting(monkeypatch, spill, "spill_accumulator")
    ctx = PassContext(AVX2)
    result = transform(module, "auto-tile", ctx=ctx)
    spilled = [r for r in ctx.remarks_of("auto-tile", "applied") if "spilled into" in r.why]
    assert [r.where for r in spilled] == ["function 'f', loop 'j'", "function 'f', loop 'q'"]
    assert "'acc2' spilled into 'out2'" in spilled[1].why
    assert tries[0] == 1
    assert "acc" not in str(result) and "acc2" not in str(result)
    assert_equivalent(module, result, trials=1, rtol=0, atol=0)


def _two_convs() -> polyir.Module:
    conv = CONV.replace("LO", "0").replace("CO", "16").replace("H", "5").replace("W", "9")
    conv = conv.replace("CI", "16")
    header, body = conv.split("{\n", 1)
    body = body.rsplit("}", 1)[0]
    second = _second(body, {"co": "c2", "h": "h2", "w": "w2", "ci": "d2", "kh": "y2", "kw": "x2",
                            "acc": "acc2", "bn": "bn2", "S0": "T0", "S1": "T1", "S2": "T2",
                            "S3": "T3", "I": "O", "O": "P", "F": "F2", "G": "G2"})
    return polyir.parse("func conv(O: f32[16, 5, 9], P: f32[16, 5, 9], I: f32[16, 5, 9], "
                        "F: f32[16, 16, 3, 3], G: f32[16], F2: f32[16, 16, 3, 3], G2: f32[16]) {\n"
                        + body + second + "}")


def test_a_repeated_convolution_is_widened_without_a_second_proof(monkeypatch: pytest.MonkeyPatch) -> None:
    module = _two_convs()
    proofs = _counting(monkeypatch, widen, "check_rewrite")
    ctx = PassContext(AVX2)
    result = transform(module, "auto-tile", ctx=ctx)
    widened = [r for r in ctx.remarks_of("auto-tile", "applied") if "widened to a tile" in r.why]
    assert len(widened) == 2, [str(r) for r in ctx.remarks]
    assert proofs[0] == 1
    assert_equivalent(module, result, trials=1, rtol=1e-6, atol=1e-6)
