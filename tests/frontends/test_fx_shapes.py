"""Shape operators (views as index maps, cat/pad as copies) against eager, and
checks that views really cost no copy."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from fx_support import Fn, check

import polyir
from polyir.ir.nodes import Assign, For

torch.manual_seed(3)


def test_reshape_and_permute_chains() -> None:
    x = torch.randn(2, 3, 4)
    check(lambda t: (t.view(6, 4) * 1, t.reshape(4, 6) * 1, t.reshape(2, 12).t() + 0,
                     t.permute(2, 0, 1) * 2, t.transpose(0, 2).reshape(-1) + 1,
                     t.flatten() * 1, t.view(2, 3, 2, 2).permute(3, 1, 0, 2).reshape(4, 6) + 0,
                     t.unsqueeze(1).expand(2, 5, 3, 4) * 1, t[:, None, :, None] * 1),
          x, ops=["aten.view.default", "aten.permute.default", "aten.expand.default"])


def test_slicing_select_split_unbind() -> None:
    x = torch.randn(5, 7, 3)
    check(lambda t: (t[1:4] * 1, t[:, ::2] * 1, t[-3:, 1:-1:3] + 0, t[2] * 1, t[:, -1] * 1,
                     *[p * 1 for p in t.split(2, dim=1)], *[p + 0 for p in t.chunk(2, dim=0)],
                     *[p * 1 for p in t.unbind(2)], t.narrow(1, 2, 3) * 1,
                     *[p * 1 for p in torch.split(t, [1, 4, 2], dim=1)]),
          x, ops=["aten.slice.Tensor", "aten.select.int", "aten.split_with_sizes.default"])


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_cat_and_stack(dim: int) -> None:
    a, b, c = torch.randn(2, 3), torch.randn(2, 3), torch.randn(2, 3)
    check(lambda x, y, z: (torch.cat([x, y, z], dim), torch.stack([x, y], dim),
                           torch.cat([x.t(), y.t()], dim)), a, b, c, ops=["aten.cat.default"])


def test_cat_of_different_sizes() -> None:
    a, b = torch.randn(2, 1, 4), torch.randn(2, 5, 4)
    check(lambda x, y: torch.cat([x, y * 2, x], 1), a, b, ops=["aten.cat.default"])


def test_constant_pad() -> None:
    x = torch.randn(2, 3, 4)
    check(lambda t: (F.pad(t, (1, 2)), F.pad(t, (2, 0, 1, 1), value=-3.0), F.pad(t, (-1, 1)),
                     F.pad(t, (0, 0, 0, 0, 1, 1))), x, ops=["aten.constant_pad_nd.default"])


def test_outputs_that_are_views_inputs_or_repeats() -> None:
    x = torch.randn(3, 4)

    def fn(t: torch.Tensor) -> tuple[torch.Tensor, ...]:
        y = t * 2
        return y, y.t(), t, y, t[1:], [y.sum()], {"k": y.view(12)}
    check(fn, x)


def test_views_cost_no_copies() -> None:
    """A chain of views between two elementwise ops adds no loop nest: it is an
    index map on the first op's buffer."""
    x = torch.randn(2, 3, 4)
    compiled = polyir.compile(Fn(lambda t: (t * 2).permute(2, 0, 1).reshape(4, 6)[1:3].exp()), (x,),
                              target="cpu")
    (module,) = compiled.ir()
    nests = [node for node in module.entry.body if isinstance(node, For)]
    assert len(nests) == 2
    torch.testing.assert_close(compiled(x), (x * 2).permute(2, 0, 1).reshape(4, 6)[1:3].exp())


def test_intermediates_are_global_locals_and_params_are_ordered() -> None:
    layer = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU()).eval()
    x = torch.randn(2, 4)
    compiled = polyir.compile(layer, (x,), target="cpu")
    (module,) = compiled.ir()
    entry = module.entry
    shapes = [tuple(d.constant for d in p.shape) for p in entry.params]
    assert shapes == [(2, 4), (3, 4), (3,), (2, 3)]  # input, weight, bias, output
    assert all(str(b.space) == "global" for b in entry.locals)
    written = {n.buffer for n in _statements(entry.body)}
    assert entry.params[-1].name in written
    assert not written & {p.name for p in entry.params[:-1]}  # inputs are never written


def _statements(nodes) -> list[Assign]:
    found = []
    for node in nodes:
        if isinstance(node, Assign):
            found.append(node)
        for attr in ("body", "then_body", "else_body"):
            found += _statements(getattr(node, attr, ()))
    return found


def test_flip_repeat_diagonal_roll() -> None:
    x = torch.randn(3, 4, 5)
    m = torch.randn(4, 6)
    check(lambda t, s: (torch.flip(t, [0, 2]) * 1, t.repeat(2, 1, 3) + 0, t.repeat(2, 1, 1, 1) * 1,
                        torch.diagonal(s) * 1, torch.diagonal(s, 2) * 1, torch.diagonal(s, -1) * 1,
                        torch.diagonal(t, 0, 0, 2) * 1, torch.roll(s, 2, 1) * 1),
          x, m, ops=["aten.flip.default", "aten.repeat.default", "aten.diagonal.default"])


def test_advanced_indexing_and_gather() -> None:
    x = torch.randn(5, 6, 4)
    rows = torch.tensor([4, 0, -1, 2])          # negative indices count from the end
    cols = torch.tensor([[1], [5], [0]])
    lanes = torch.tensor([3, -4, 1])
    index = torch.randint(0, 6, (5, 3, 4))
    check(lambda t, r, c, k, i: (t[r] * 1, t[:, r] * 1, t[r[:3, None], c] * 1,
                                 t[c % 5, :, k] * 1,  # non-adjacent: broadcast dims go first
                                 t[:, c, k] * 1, torch.gather(t, 1, i), torch.gather(t, 0, i[:2] % 5)),
          x, rows, cols, lanes, index, ops=["aten.index.Tensor", "aten.gather.default"])


def test_nearest_upsampling() -> None:
    x = torch.randn(1, 2, 3, 4)
    check(lambda t: (F.interpolate(t, scale_factor=2), F.interpolate(t, size=(5, 7))), x,
          ops=["aten.index.Tensor"])
