"""Box tiles: ``split-tiles{pad=}`` computes a triangular band's diagonal tiles
over their box into the accumulators' local (``polyir.tiling.pad``)."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings

import polyir
from polyir.errors import PassError
from polyir.ir.interpreter import interpret
from polyir.ir.nodes import Assign, For, If, Module
from polyir.ir.walk import walk_nodes
from polyir.passes import transform
from polyir.testing import assert_preserves_or_refuses, programs
from polyir.tiling.bands import UnsupportedNest
from tests.conftest import examples

UPPER = """func tri(data: f32[n, m], cov: f32[m, m]) {
  for i = 0 to m {
    for j = i to m {
      for k = 0 to n {
        S0: cov[i, j] = cov[i, j] + data[k, i] * data[k, j]
      }
    }
  }
}
"""

STRICT_UPPER = UPPER.replace("for j = i to m", "for j = i + 1 to m")

LOWER = """func tri(data: f32[n, m], cov: f32[m, m]) {
  for i = 0 to m {
    for j = 0 to i + 1 {
      for k = 0 to n {
        S0: cov[i, j] = cov[i, j] - data[i, k] * data[j, k]
      }
    }
  }
}
"""

PLAN = ("interchange{{loops=i,j,k order={order}}},tile{{loops={tiled} sizes={sizes} names=t0,t1}},"
        "interchange{{loops=t0,t1,{points},k order=t0,t1,k,{points}}},copies{{at=t1 buffers=cov}},"
        "split-tiles{{at=t1 loops=i,j pad=ib,jb}},unroll-jam{{loops=i,ib factors={mr},{mr} depth=0}}")


def _plan(upper: bool, mr: int = 3, nr: int = 8) -> str:
    if upper:  # column tiles outside, as auto-tile's triangular plan
        return PLAN.format(order="j,i,k", tiled="j,i", sizes=f"{nr},{mr}", points="j,i", mr=mr)
    return PLAN.format(order="i,j,k", tiled="i,j", sizes=f"{mr},{nr}", points="i,j", mr=mr)


def _same(original: Module, result: Module, n: int, m: int, seed: int = 0) -> bool:
    rng = np.random.default_rng(seed)
    data = rng.uniform(-1, 1, (n, m)).astype(np.float32)
    want = rng.uniform(-1, 1, (m, m)).astype(np.float32)
    got = want.copy()
    interpret(original, data, want)
    interpret(result, data, got)
    return np.array_equal(want, got)


@pytest.mark.parametrize("source, upper", [(UPPER, True), (STRICT_UPPER, True)])
def test_box_tiles_are_bit_equal(source: str, upper: bool) -> None:
    module = polyir.parse(source)
    result = transform(module, _plan(upper))
    # odd sizes, sizes below one tile, one more than a tile, several tiles
    for n, m in [(1, 1), (3, 2), (5, 7), (2, 9), (4, 17), (3, 26), (2, 33)]:
        assert _same(module, result, n, m, seed=n * 100 + m), (n, m)


def test_pad_refuses_a_box_reaching_past_what_the_band_reads() -> None:
    # j < i + 1 in row tiles: a box of 8 columns reaches rows of data no
    # instance reads (j up to the column tile's end, past the last row i)
    with pytest.raises(PassError) as info:
        transform(polyir.parse(LOWER), _plan(False))
    assert isinstance(info.value.cause, UnsupportedNest)
    assert "outside what the nest accesses" in str(info.value.cause)


def test_box_tiles_run_the_padded_loops_over_the_box_and_guard_the_copy_back() -> None:
    result = transform(polyir.parse(UPPER), _plan(True))
    loops = {node.var: node for node in walk_nodes(result.entry.body) if isinstance(node, For)}
    # the box tiles' loops have constant trip counts: no bound using i
    assert "jb" in loops and all("i" not in b.variables() for b in loops["jb"].lower)
    guarded = [node for node in walk_nodes(result.entry.body) if isinstance(node, If)
               and any(isinstance(s, Assign) and s.buffer == "cov" for s in node.then_body)]
    assert guarded, "the copy back of the box tiles is guarded by the triangle"


def test_pad_refuses_a_statement_writing_a_global() -> None:
    # without copies the statement writes cov itself: added instances would write it
    plan = _plan(True).replace("copies{at=t1 buffers=cov},", "")
    with pytest.raises(PassError) as info:
        transform(polyir.parse(UPPER), plan)
    assert isinstance(info.value.cause, UnsupportedNest)
    assert "not a local" in str(info.value.cause)


def test_pad_refuses_integer_division_by_a_variable() -> None:
    source = """func tri(a: i32[m], cov: i32[m, m]) {
  for i = 0 to m {
    for j = i to m {
      for k = 0 to 3 {
        S0: cov[i, j] = cov[i, j] + a[i] / a[j]
      }
    }
  }
}
"""
    with pytest.raises(PassError) as info:
        transform(polyir.parse(source), _plan(True))
    assert "trap" in str(info.value.cause)


def test_rectangular_tiles_split_as_without_pad() -> None:
    source = UPPER.replace("for j = i to m", "for j = 0 to m")
    module = polyir.parse(source)
    padded = transform(module, _plan(True).replace(",unroll-jam{loops=i,ib factors=3,3 depth=0}", ""))
    plain = transform(module, _plan(True).replace(" pad=ib,jb", "")
                      .replace(",unroll-jam{loops=i,ib factors=3,3 depth=0}", ""))
    assert padded == plain


def test_auto_tile_pads_the_diagonal_of_a_triangular_product() -> None:
    from polyir.driver import compile_ir
    module = polyir.parse(UPPER)
    executable = compile_ir(module, "interpret", "auto-tile{register_work=1}")
    applied = [r.why for r in executable.remarks if r.pass_name == "auto-tile" and r.kind == "applied"]
    assert applied and "pad=" in applied[0]
    assert _same(module, executable.ir, 5, 37)


@settings(max_examples=examples(12), deadline=None)
@given(programs(max_depth=3, max_statements=2, perfect=True, locals=False))
def test_split_with_pad_preserves_or_refuses_on_random_programs(module: Module) -> None:
    loops = [node for node in walk_nodes(module.entry.body) if isinstance(node, For)]
    if len(loops) < 2 or not isinstance(loops[0].body[0], For) or len(loops[0].body) != 1:
        return
    outer, inner = loops[0], loops[0].body[0]
    written = next((n.buffer for n in walk_nodes(inner.body) if isinstance(n, Assign)), None)
    if written is None:
        return
    plan = (f"tile{{loops={outer.var},{inner.var} sizes=2,3 names=t0,t1}},"
            f"copies{{at=t1 buffers={written}}},"
            f"split-tiles{{at=t1 loops={outer.var},{inner.var} pad=pb0,pb1}}")
    for order in ("forward", "reverse"):
        assert_preserves_or_refuses(lambda m: transform(m, plan), module, parallel_order=order)


@settings(max_examples=examples(8), deadline=None)
@given(programs(max_depth=2, max_statements=1, perfect=True, locals=False, ints=False,
                gathers=False))
def test_split_with_pad_on_random_bodies_in_a_triangle(module: Module) -> None:
    """A random statement moved into a triangular band (``j >= i``) over its
    own loops' body: the triangle is what the padding handles."""
    from dataclasses import replace

    from polyir.ir.affine import Aff
    loops = [node for node in walk_nodes(module.entry.body) if isinstance(node, For)]
    if len(loops) < 2 or loops[0].body != (loops[1],):
        return
    outer, inner = loops[0], loops[1]
    if inner.step != 1 or outer.step != 1:
        return
    triangle = replace(inner, lower=inner.lower + (Aff.var(outer.var),))
    function = replace(module.entry, body=(replace(outer, body=(triangle,)),))
    module = Module((function,))
    written = next(n.buffer for n in walk_nodes(inner.body) if isinstance(n, Assign))
    plan = (f"tile{{loops={outer.var},{inner.var} sizes=2,4 names=t0,t1}},"
            f"copies{{at=t1 buffers={written}}},"
            f"split-tiles{{at=t1 loops={outer.var},{inner.var} pad=pb0,pb1}}")
    assert_preserves_or_refuses(lambda m: transform(m, plan), module)


def test_triangular_tiles_start_on_the_grid_from_zero() -> None:
    # j = i + 1 starts at 1: tile origins 0, 8, 16, ... (the last tile full
    # when m is a multiple of 8), the point loop keeping j >= i + 1
    module = polyir.parse(STRICT_UPPER)
    result = transform(module, "interchange{loops=i,j,k order=j,i,k},tile{loops=j,i sizes=8,3 names=t0,t1}")
    tile = next(node for node in walk_nodes(result.entry.body) if isinstance(node, For) and node.var == "t0")
    assert [str(b) for b in tile.lower] == ["0"]
    for n, m in [(2, 1), (3, 8), (2, 17)]:
        assert _same(module, result, n, m)


def test_tiles_ending_at_the_loop_end_put_the_partial_tile_first() -> None:
    module = polyir.parse(UPPER)
    result = transform(module, "interchange{loops=i,j,k order=j,i,k},"
                               "tile{loops=j,i sizes=8,3 names=t0,t1 ends=j}")
    tile = next(node for node in walk_nodes(result.entry.body) if isinstance(node, For) and node.var == "t0")
    assert [str(b) for b in tile.upper] == ["m"]
    for n, m in [(2, 1), (3, 8), (2, 13), (3, 21)]:
        assert _same(module, result, n, m, seed=m)
    # and the whole triangular plan with them
    plan = _plan(True).replace("names=t0,t1}", "names=t0,t1 ends=j}")
    result = transform(module, plan)
    for n, m in [(1, 1), (3, 7), (2, 9), (4, 17), (3, 26)]:
        assert _same(module, result, n, m, seed=n + m)


@settings(max_examples=examples(12), deadline=None)
@given(programs(max_depth=3, max_statements=3, perfect=True))
def test_tile_with_ends_preserves_or_refuses_on_random_programs(module: Module) -> None:
    loops = [node for node in walk_nodes(module.entry.body) if isinstance(node, For)]
    if not loops:
        return
    chain = [loops[0]]
    while len(chain[-1].body) == 1 and isinstance(chain[-1].body[0], For):
        chain.append(chain[-1].body[0])
    names = ",".join(loop.var for loop in chain)
    sizes = ",".join(str(2 + k) for k in range(len(chain)))
    plan = f"tile{{loops={names} sizes={sizes} ends={names}}}"
    for order in ("forward", "reverse"):
        assert_preserves_or_refuses(lambda m: transform(m, plan), module, parallel_order=order)
