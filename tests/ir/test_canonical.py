"""Canonical forms: nests the same up to names share pass decisions, exactly."""
from __future__ import annotations

import itertools
import re

import pytest
import torch

import polyir
from polyir.fusion import policy, privatize
from polyir.ir import canonical
from polyir.ir.canonical import canonical_form, rename_nodes, transfer
from polyir.tiling import distribute

TWO_NESTS = """
func f(A: f32[N, M], B: f32[N, M], C: f32[N, M], D: f32[N, M], E: f32[N, 5]) {
  for i = 0 to N {
    for j = 0 to M {
      S0: B[i, j] = A[i, j] * 2.0
    }
  }
  for i2 = 0 to N {
    for j2 = 0 to M {
      S1: D[i2, j2] = C[i2, j2] * 2.0
    }
  }
  for i3 = 0 to N {
    for j3 = 0 to 5 {
      S2: E[i3, j3] = C[i3, j3] * 2.0
    }
  }
}
"""


def _function() -> polyir.ir.nodes.Function:
    return polyir.parse(TWO_NESTS).entry


def test_nests_equal_up_to_names_have_one_key_and_translate_names() -> None:
    f = _function()
    first, second, third = (canonical_form(f, (node,)) for node in f.body)
    assert first.key == second.key
    assert third.key != first.key          # other bounds and another buffer shape
    assert first.names == ("i", "j", "S0", "B", "A")
    assert second.actual(first.canonical("S0 reads A at i")) == "S1 reads C at i2"
    marked = canonical_form(f, (f.body[0],), {"observed": {"B"}})
    assert marked.key != first.key         # what the caller marks is part of the key


def test_transfer_renames_a_result_and_gives_new_names_fresh_ones() -> None:
    f = _function()
    first, second = (canonical_form(f, (node,)) for node in f.body[:2])
    assert rename_nodes(f.body[:1], second.renaming(first)) == f.body[1:2]
    extra = polyir.parse(TWO_NESTS.replace("S0: B[i, j] = A[i, j] * 2.0",
                                           "S0: B[i, j] = A[i, j] * 2.0\n      S9: B[i, j] = B[i, j] + 1.0"))
    made = extra.entry.body[0]             # what a pass made of nest 0: a statement more
    taken = {"S9", "S1", "i2", "j2"}
    moved = transfer((made,), first, second, taken)
    text = polyir.ir.printer.print_node(moved[0])
    assert "S1: D[i2, j2] = C[i2, j2] * 2.0" in text and "S9_1: D[i2, j2] = D[i2, j2] + 1.0" in text
    assert "S9_1" in taken


class _Layer(torch.nn.Module):
    """Linear, layer norm, centring over the batch (a reduction across rows, so the
    layers do not all fuse into one nest over rows), GELU."""

    def __init__(self) -> None:
        super().__init__()
        self.linear, self.norm = torch.nn.Linear(24, 24), torch.nn.LayerNorm(24)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.norm(self.linear(x))
        return torch.nn.functional.gelu(y - y.mean(dim=0))


def _stack(layers: int) -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(*[_Layer() for _ in range(layers)]).eval()


def _up_to_names(text: str, form: canonical.CanonicalForm) -> str:
    """A remark with the final IR's names made canonical, and a loop that tiling
    replaced (``i_36``, now ``i_36_t`` and ``i_36_r``) named after its tile loop."""
    stems = {name[:-2]: name for name in form.names if name.endswith(("_t", "_r"))}
    return form.canonical(re.sub(r"\b\w+\b", lambda m: stems.get(m.group(0), m.group(0)) + "~"
                                 if m.group(0) in stems and m.group(0) not in form.names else m.group(0),
                                 text))


@pytest.mark.parametrize("target", ["interpret", "cpu"])
def test_identical_layers_compile_to_the_ir_and_remarks_of_deciding_each_alone(monkeypatch, tmp_path,
                                                                              target) -> None:
    model, x = _stack(4), torch.randn(3, 24)
    monkeypatch.setenv("POLYIR_CACHE_DIR", str(tmp_path / "first"))  # both compiles run the passes
    calls: dict[str, int] = {}
    for module, name in ((policy, "try_pair"), (privatize, "plan_shrink"), (distribute, "_distribute_nest")):
        original = getattr(module, name)

        def counted(*args, _original=original, _name=name, **kwargs):  # noqa: ANN002, ANN003, ANN202
            calls[_name] = calls.get(_name, 0) + 1
            return _original(*args, **kwargs)

        monkeypatch.setattr(module, name, counted)

    def compile_once() -> tuple[list[str], list[str]]:
        """The IR and the remarks, up to the names passes made up: a decision
        taken once and transferred claims fresh names without the attempts
        (a refused split) that made the pass skip some when deciding alone."""
        with torch.no_grad():
            compiled = polyir.compile(model, (x,), target=target)
            torch.testing.assert_close(compiled(x), model(x), rtol=1e-4, atol=1e-5)
        plan = compiled.last_plan
        forms = [canonical_form(s.executable.ir.entry, s.executable.ir.entry.body) for s in plan.segments]
        return ([form.key for form in forms],
                [_up_to_names(str(r), form) for s, form in zip(plan.segments, forms, strict=True)
                 for r in s.executable.remarks])

    remembered = compile_once()
    with_memo = dict(calls)
    calls.clear()
    counter = itertools.count()

    def never_equal(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        form = canonical.canonical_form(*args, **kwargs)
        return canonical.CanonicalForm(f"{form.key}/{next(counter)}", form.names)

    for module in (policy, privatize, distribute):
        monkeypatch.setattr(module, "canonical_form", never_equal)
    monkeypatch.setenv("POLYIR_CACHE_DIR", str(tmp_path / "second"))
    alone = compile_once()
    assert remembered == alone
    assert with_memo["try_pair"] < calls["try_pair"]
    assert with_memo["plan_shrink"] < calls["plan_shrink"]
    if target == "cpu":
        assert with_memo["_distribute_nest"] < calls["_distribute_nest"]


SORTED_APART = """
func f(X: f32[N, 128], Y: f32[N, 4, 32], Z: f32[N, 128], W: f32[N, 4, 32]) {
  for b_3 = 0 to N {
    for h_3 = 0 to 4 {
      for d_3 = 0 to 32 {
        S0: Y[b_3, h_3, d_3] = X[b_3, 32*h_3 + d_3] * 2.0
      }
    }
  }
  for b_12 = 0 to N {
    for a_12 = 0 to 4 {
      for z_12 = 0 to 32 {
        S1: W[b_12, a_12, z_12] = Z[b_12, 32*a_12 + z_12] * 2.0
      }
    }
  }
}
"""


def test_layers_whose_names_sort_apart_share_a_key() -> None:
    """Two layers the same up to names whose subscripts print their terms in
    different orders (``32*h_3 + d_3`` sorts by name; ``a_12`` < ``z_12`` puts
    the product first, ``d_3`` < ``h_3`` the other way round): one key, and
    each name maps to its counterpart. A different constant: another key."""
    function = polyir.parse(SORTED_APART).entry
    first, second = (canonical_form(function, (node,)) for node in function.body)
    assert "32*h_3 + d_3" in str(function.body[0]) or "d_3 + 32*h_3" in str(function.body[0])
    assert first.key == second.key
    assert second.renaming(first) == {"b_3": "b_12", "h_3": "a_12", "d_3": "z_12", "S0": "S1",
                                      "X": "Z", "Y": "W"}
    other = polyir.parse(SORTED_APART.replace("Z[b_12, 32*a_12 + z_12] * 2.0",
                                              "Z[b_12, 32*a_12 + z_12] * 3.0")).entry
    assert canonical_form(other, (other.body[1],)).key != first.key
