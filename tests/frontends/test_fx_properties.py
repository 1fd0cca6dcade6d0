"""Property tests: random shapes, broadcasting, view chains and reductions,
compiled through the reference interpreter and compared with eager."""
from __future__ import annotations

import math

import torch
from fx_support import check
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.conftest import examples

BINARY = {
    "add": torch.add, "sub": torch.sub, "mul": torch.mul, "maximum": torch.maximum,
    "where": lambda a, b: torch.where(a > b, a, b * 2), "lt": torch.lt,
}

dims = st.integers(1, 4)


@st.composite
def broadcast_pair(draw: st.DrawFn) -> tuple[tuple[int, ...], tuple[int, ...]]:
    shape = draw(st.lists(dims, min_size=0, max_size=3))
    other = [draw(st.sampled_from([size, 1])) for size in shape]
    other = other[draw(st.integers(0, len(other))):]  # drop leading dims
    if draw(st.booleans()):
        return tuple(shape), tuple(other)
    return tuple(other), tuple(shape)


@settings(max_examples=examples(15), deadline=None)
@given(broadcast_pair(), st.sampled_from(sorted(BINARY)), st.sampled_from([torch.float32, torch.int64]))
def test_binary_broadcasting_property(shapes, op, dtype) -> None:
    a = (torch.randn(shapes[0]) * 5).to(dtype)
    b = (torch.randn(shapes[1]) * 5).to(dtype)
    check(BINARY[op], a, b, target="interpret")


@st.composite
def view_chain(draw: st.DrawFn) -> tuple[tuple[int, ...], list[tuple[str, object]]]:
    shape = tuple(draw(st.lists(dims, min_size=1, max_size=4)))
    current = list(shape)
    steps: list[tuple[str, object]] = []
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["permute", "reshape", "slice", "unsqueeze", "expand"]))
        if kind == "permute":
            order = draw(st.permutations(range(len(current))))
            steps.append((kind, list(order)))
            current = [current[d] for d in order]
        elif kind == "reshape":
            total = math.prod(current)
            first = draw(st.sampled_from([d for d in range(1, total + 1) if total % d == 0]))
            steps.append((kind, (first, total // first)))
            current = [first, total // first]
        elif kind == "slice":
            dim = draw(st.integers(0, len(current) - 1))
            start = draw(st.integers(0, current[dim] - 1))
            step = draw(st.integers(1, 2))
            steps.append((kind, (dim, start, step)))
            current[dim] = len(range(start, current[dim], step))
        elif kind == "unsqueeze":
            dim = draw(st.integers(0, len(current)))
            steps.append((kind, dim))
            current.insert(dim, 1)
        else:
            sizes = [draw(st.sampled_from([s, 3])) if s == 1 else s for s in current]
            steps.append((kind, list(sizes)))
            current = sizes
    return shape, steps


def _apply(t: torch.Tensor, steps: list[tuple[str, object]]) -> torch.Tensor:
    for kind, arg in steps:
        if kind == "permute":
            t = t.permute(*arg)  # type: ignore[misc]
        elif kind == "reshape":
            t = t.reshape(*arg)  # type: ignore[misc]
        elif kind == "slice":
            dim, start, step = arg  # type: ignore[misc]
            t = t[(slice(None),) * dim + (slice(start, None, step),)]
        elif kind == "unsqueeze":
            t = t.unsqueeze(arg)  # type: ignore[arg-type]
        else:
            t = t.expand(*arg)  # type: ignore[misc]
    return t


@settings(max_examples=examples(20), deadline=None)
@given(view_chain())
def test_view_chains_property(chain) -> None:
    shape, steps = chain
    x = torch.randn(shape)
    check(lambda t: _apply(t * 2, steps) + 1, x, target="interpret")


REDUCTIONS = {
    "sum": lambda t, d, k: t.sum(d, keepdim=k), "mean": lambda t, d, k: t.mean(d, keepdim=k),
    "amax": lambda t, d, k: t.amax(d, keepdim=k), "var": lambda t, d, k: t.var(d, keepdim=k),
    "softmax": lambda t, d, k: torch.softmax(t, d[0]),
}


@settings(max_examples=examples(15), deadline=None)
@given(st.lists(dims, min_size=1, max_size=3), st.data(), st.sampled_from(sorted(REDUCTIONS)),
       st.booleans())
def test_reductions_property(shape, data, op, keepdim) -> None:
    rank = len(shape)
    chosen = data.draw(st.lists(st.integers(-rank, rank - 1), min_size=1, max_size=rank,
                                unique_by=lambda d: d % rank))
    x = torch.randn(shape) * 3
    check(lambda t: REDUCTIONS[op](t, tuple(chosen), keepdim), x, target="interpret",
          rtol=1e-4, atol=1e-5)
