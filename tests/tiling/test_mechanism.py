"""The tiling mechanisms (``tile``, ``interchange``, ``split-tiles``,
``unroll-jam``, ``copies``): each keeps the program's meaning (interpreter
oracle, symbolic and partial tiles, parallel loops reversed and shuffled) or
refuses with a typed error naming a dependence and two instances."""
from __future__ import annotations

import pytest
from hypothesis import given, settings

import polyir
from polyir.errors import IllegalTransform, PassError
from polyir.ir.nodes import Assign, For, Module
from polyir.ir.walk import walk_nodes
from polyir.passes import transform
from polyir.testing import assert_equivalent, assert_preserves_or_refuses, programs
from tests.conftest import examples

MATMUL = """func mm(C: f32[M, N], A: f32[M, K], B: f32[K, N]) {
  for i = 0 to M {
    for j = 0 to N {
      for k = 0 to K {
        S1: C[i, j] = C[i, j] + A[i, k] * B[k, j]
      }
    }
  }
}"""

SKEWED = """func f(A: f32[N, M]) {
  for i = 1 to N {
    for j = 0 to M - 1 {
      S0: A[i, j] = A[i - 1, j + 1] * 0.5 + 1.0
    }
  }
}"""

TRIANGULAR = """func f(C: f64[N, N], A: f64[N, N]) {
  for i = 0 to N {
    for j = 0 to i + 1 {
      for k = 0 to N {
        S0: C[i, j] = C[i, j] + A[i, k] * A[j, k]
      }
    }
  }
}"""

SIZES = [{"M": 7, "N": 5, "K": 9}, {"M": 8, "N": 8, "K": 4}, {"M": 1, "N": 3, "K": 1}]


def _check(module: Module, result: Module, **options: object) -> None:
    for sizes in SIZES:
        assert_equivalent(module, result, trials=1, sizes=sizes, **options)  # type: ignore[arg-type]


def _loops(module: Module) -> list[For]:
    return [n for n in walk_nodes(module.entry.body) if isinstance(n, For)]


def _statements(module: Module) -> list[Assign]:
    return [n for n in walk_nodes(module.entry.body) if isinstance(n, Assign)]


def test_tile_two_levels_with_partial_tiles_and_symbolic_extents() -> None:
    module = polyir.parse(MATMUL)
    result = transform(module, "tile{loops=i,j,k sizes=4,3,2 names=it,jt,kt},"
                               "tile{loops=i,j sizes=2,0 names=i2}")
    assert [loop.var for loop in _loops(result)] == ["it", "jt", "kt", "i2", "i", "j", "k"]
    assert "min(M, i2 + 2)" in str(result) and "min(N, jt + 3)" in str(result)
    _check(module, result)


def test_tile_triangular_band() -> None:
    module = polyir.parse(TRIANGULAR)
    result = transform(module, "tile{loops=i,j,k sizes=3,2,4}")
    for n in (1, 4, 7):
        assert_equivalent(module, result, trials=1, sizes={"N": n})


def test_tile_refuses_a_band_that_is_not_permutable_with_a_witness() -> None:
    with pytest.raises(PassError) as info:
        transform(polyir.parse(SKEWED), "tile{loops=i,j sizes=2,2}")
    cause = info.value.cause
    assert isinstance(cause, IllegalTransform) and cause.witness is not None
    assert "S0(i=" in str(cause.witness)


def test_interchange_legal_and_illegal() -> None:
    module = polyir.parse(MATMUL)
    result = transform(module, "interchange{loops=i,j,k order=k,i,j}")
    assert [loop.var for loop in _loops(result)] == ["k", "i", "j"]
    _check(module, result)
    with pytest.raises(PassError) as info:
        transform(polyir.parse(SKEWED), "interchange{loops=i,j order=j,i}")
    assert isinstance(info.value.cause, IllegalTransform)


def test_register_tile_pipeline_keeps_meaning_and_puts_accumulators_in_a_local() -> None:
    module = polyir.parse(MATMUL)
    pipeline = ("tile{loops=i,j sizes=3,4 names=ir,jr},"
                "interchange{loops=ir,jr,i,j,k order=ir,jr,k,i,j},"
                "copies{at=jr buffers=C},split-tiles{at=jr loops=i,j},unroll-jam{loops=i factors=3 depth=0}")
    result = transform(module, pipeline)
    jr = next(loop for loop in _loops(result) if loop.var == "jr")
    assert [b.name for b in jr.locals] == ["C_jr"]
    # the full tile: three jammed copies of the update in one k loop; three partial versions
    updates = [s.name for s in _statements(result) if s.name.startswith("S1")]
    assert len(updates) == 6, updates
    jammed = [loop for loop in _loops(result) if len(loop.body) == 3
              and all(isinstance(n, For) for n in loop.body)]
    assert len(jammed) == 1
    _check(module, result)


CONSTANT = """func mm(C: f32[{m}, {n}], A: f32[{m}, 5], B: f32[5, {n}]) {{
  for i = 0 to {m} {{
    for j = {lo} to {n} {{
      for k = 0 to 5 {{
        S0: C[i, j] = C[i, j] + A[i, k] * B[k, j]
      }}
    }}
  }}
}}"""


@pytest.mark.parametrize("m, n, lo, mi, nj", [(10, 56, 0, 4, 48), (8, 112, 0, 8, 48), (7, 30, 3, 3, 8),
                                               (6, 17, 1, 2, 16), (9, 48, 0, 3, 48)])
def test_the_last_tile_of_a_constant_extent_gets_constant_bounds(m: int, n: int, lo: int, mi: int,
                                                                  nj: int) -> None:
    # the partial version runs only at the last tile, whose start is known:
    # it is put in, and the point and copy loops get constant trip counts
    module = polyir.parse(CONSTANT.format(m=m, n=n, lo=lo))
    pipeline = (f"tile{{loops=i,j sizes={mi},{nj} names=ir,jr}},"
                "interchange{loops=ir,jr,i,j,k order=ir,jr,k,i,j},"
                f"copies{{at=jr buffers=C}},split-tiles{{at=jr loops=i,j}},"
                f"unroll-jam{{loops=i factors={mi} depth=0}}")
    result = transform(module, pipeline, verify_each=True)
    inner = [loop for loop in _loops(result) if loop.var not in ("ir", "jr")]
    variable = [str(loop) .split("{")[0] for loop in inner
                if len(loop.upper) != 1 or not (loop.upper[0] - loop.lower[0]).is_constant]
    assert not variable, variable
    partial = [loop for loop in inner if any(str((n - lo) % nj) == str(u - lw) for u in loop.upper
                                             for lw in loop.lower)]
    assert bool(partial) == bool((n - lo) % nj), [str(loop.upper) for loop in inner]
    _check(module, result)


def test_a_symbolic_extent_keeps_the_bounds_of_its_last_tile() -> None:
    module = polyir.parse(MATMUL)
    result = transform(module, "tile{loops=i,j sizes=3,4 names=ir,jr},"
                               "interchange{loops=ir,jr,i,j,k order=ir,jr,k,i,j},"
                               "copies{at=jr buffers=C},split-tiles{at=jr loops=i,j}")
    assert any(len(loop.upper) == 2 for loop in _loops(result))   # min(M, ir + 3) in the rest
    _check(module, result)


UPPER = """func f(C: f64[N, N], A: f64[N, N]) {
  for i = 0 to N {
    for j = i to N {
      for k = 0 to N {
        S0: C[i, j] = C[i, j] + A[k, i] * A[k, j]
      }
    }
  }
}"""

TRIANGLE_TILE = ("tile{loops=i,j sizes=2,3 names=ir,jr},"
                 "interchange{loops=ir,jr,i,j,k order=ir,jr,k,i,j},"
                 "copies{at=jr buffers=C},split-tiles{at=jr loops=i,j},"
                 "unroll-jam{loops=i factors=2 depth=0}")


@pytest.mark.parametrize("text", [TRIANGULAR, UPPER], ids=["lower", "upper"])
def test_register_tile_of_a_triangular_band(text: str) -> None:
    # the accumulators of a diagonal tile do not fill their box (copied in and
    # back whole: the elements nobody wrote go back unchanged); the full tiles
    # below (above) the diagonal get constant trip counts and the jammed rows
    module = polyir.parse(text)
    result = transform(module, TRIANGLE_TILE)
    jammed = [loop for loop in _loops(result) if loop.var == "k" and len(loop.body) == 2]
    assert len(jammed) == 1
    full = [loop for loop in walk_nodes(jammed[0].body) if isinstance(loop, For)]
    assert full and all(len(loop.lower) == 1 and len(loop.upper) == 1
                        and (loop.upper[0] - loop.lower[0]).is_constant for loop in full)
    for n in (1, 2, 5, 8):
        assert_equivalent(module, result, trials=1, sizes={"N": n})


def test_copies_of_a_box_not_filled_are_refused_inside_a_parallel_loop() -> None:
    module = transform(polyir.parse(TRIANGULAR), "tile{loops=i,j sizes=2,3 names=ir,jr},"
                                                 "interchange{loops=ir,jr,i,j,k order=ir,jr,k,i,j},"
                                                 "mark-parallel{loops=ir}")
    assert any(loop.parallel for loop in _loops(module))
    with pytest.raises(PassError, match="do not fill a box"):
        transform(module, "copies{at=jr buffers=C}")


def test_packing_blocks_and_transposed_layout() -> None:
    module = polyir.parse(MATMUL)
    pipeline = ("tile{loops=i,j,k sizes=4,6,3 names=ic,jc,kc},"
                "interchange{loops=ic,jc,kc order=jc,kc,ic},"
                "tile{loops=i,j sizes=2,3 names=ir,jr},"
                "interchange{loops=ir,jr,i,j,k order=jr,ir,k,i,j},"
                "copies{at=kc buffers=B blocks=jr},copies{at=ic buffers=A blocks=ir order=1,0}")
    result = transform(module, pipeline)
    text = str(result)
    assert "local B_kc" in text and "local A_ic" in text
    assert "B[" not in text.split("B_kc_in:")[1].split("\n", 1)[1]  # every later read is of the panel
    _check(module, result)


def test_unroll_jam_refuses_when_the_loop_cannot_move_inside() -> None:
    with pytest.raises(PassError) as info:
        transform(polyir.parse(SKEWED), "unroll-jam{loops=i factors=2}")
    assert isinstance(info.value.cause, IllegalTransform)


@settings(max_examples=examples(12), deadline=None)
@given(programs(max_depth=3, max_statements=3, perfect=True))
def test_tile_preserves_or_refuses_on_random_programs(module: Module) -> None:
    loops = _loops(module)
    if not loops:
        return
    outer = loops[0]
    chain = [outer]
    while len(chain[-1].body) == 1 and isinstance(chain[-1].body[0], For):
        chain.append(chain[-1].body[0])
    names = ",".join(loop.var for loop in chain)
    sizes = ",".join(str(2 + k) for k in range(len(chain)))
    for order in ("forward", "reverse"):
        assert_preserves_or_refuses(lambda m: transform(m, f"tile{{loops={names} sizes={sizes}}}"),
                                    module, parallel_order=order)


SCOPED_ACCUMULATOR = """func f(A: f32[N, K], B: f32[K, M], Y: f32[N]) {
  for t = 0 to 2 {
    local S: f32[N, M]
    for i = 0 to N {
      for j = 0 to M {
        S0: S[i, j] = 0.0
      }
    }
    for i2 = 0 to N {
      for j2 = 0 to M {
        for k = 0 to K {
          S1: S[i2, j2] = S[i2, j2] + A[i2, k] * B[k, j2] + Y[i2]
        }
      }
    }
    for i3 = 0 to N {
      S2: Y[i3] = 0.0
      for j3 = 0 to M {
        S3: Y[i3] = Y[i3] + S[i3, j3]
      }
    }
  }
}"""


def test_copies_of_a_loop_scoped_local_below_its_loop() -> None:
    # the online traversal's score tile: a local of an outer loop, register-tiled inside it
    module = polyir.parse(SCOPED_ACCUMULATOR)
    pipeline = ("tile{loops=i2,j2 sizes=2,3 names=ir,jr},"
                "interchange{loops=ir,jr,i2,j2,k order=ir,jr,k,i2,j2},copies{at=jr buffers=S}")
    result = transform(module, pipeline)
    jr = next(loop for loop in _loops(result) if loop.var == "jr")
    assert [b.name for b in jr.locals] == ["S_jr"]
    _check(module, result)
    inner = """func f(A: f32[N], Y: f32[N]) {
  for t = 0 to 2 {
    for i = 0 to N {
      local R: f32[1]
      S0: R[0] = A[i] * 2.0
      S1: Y[i] = R[0] + 1.0
    }
  }
}"""
    with pytest.raises(PassError, match="does not enclose"):   # R lives in each iteration of i
        transform(polyir.parse(inner), "copies{at=t buffers=R}")


CHUNKED_TILE = """func f(W: f32[N, 16], V: f32[N, 4], O: f32[16, 4]) {
  for jt = 0 to N step 8 {
    for jc = jt to min(N, jt + 8) step 5 {
      for i = 0 to 16 {
        for j = jc to min(N, jt + 8, jc + 5) {
          for d = 0 to 4 {
            S0: O[i, d] = O[i, d] + W[j, i] * V[j, d]
          }
        }
      }
    }
  }
}"""


def test_copies_of_chunks_of_a_tile_hold_one_chunk() -> None:
    # isl states the chunk's last key by cases of jc (jt + 4 for the first chunk, jt + 7
    # for the second), each written with jt: without the strides it is the min-list
    # min(N - 1, jt + 7, jc + 4), and the copy holds 5 rows, not the whole of V
    module = polyir.parse(CHUNKED_TILE)
    result = transform(module, "copies{at=jc buffers=V,W}")
    jc = next(loop for loop in _loops(result) if loop.var == "jc")
    shapes = {b.name: [str(e) for e in b.shape] for b in jc.locals}
    assert shapes == {"V_jc": ["5", "4"], "W_jc": ["5", "16"]}
    for n in (1, 5, 8, 11, 13, 16, 21):
        assert_equivalent(module, result, trials=1, sizes={"N": n})
