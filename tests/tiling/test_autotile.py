"""``auto-tile``: the analytical model (register tile and cache tiles from the
Target), the plans it applies (goldens), that they keep the meaning of
random programs and corpus kernels (interpreter oracle), the remarks it
gives where it does not apply, and the packed FMA code of a tiled matmul."""
from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings

import polyir
from polyir.context import PassContext
from polyir.driver import compile_ir, default_pipeline
from polyir.ir.interpreter import interpret
from polyir.ir.nodes import Buffer, For, Module
from polyir.ir.walk import walk_nodes
from polyir.passes import transform
from polyir.target import CacheLevel, Target, cpu
from polyir.testing import assert_equivalent, assert_preserves_or_refuses, programs
from polyir.testing.corpus import CORPUS
from polyir.tiling.sizes import gemm_sizes, register_tile
from tests.conftest import examples
from tests.tiling.test_mechanism import MATMUL, SKEWED

GOLDEN = Path(__file__).parent / "golden"

AVX512 = Target("cpu", vector_bits=512, vector_registers=32,
                caches=(CacheLevel(48 * 1024, 64, 12), CacheLevel(2 * 1024 * 1024, 64, 16),
                        CacheLevel(32 * 1024 * 1024, 64, 16)),
                cache_bytes=(48 * 1024, 2 * 1024 * 1024, 32 * 1024 * 1024))
AVX2 = Target("cpu", vector_bits=256, vector_registers=16,
              caches=(CacheLevel(32 * 1024, 64, 8), CacheLevel(256 * 1024, 64, 8),
                      CacheLevel(8 * 1024 * 1024, 64, 16)),
              cache_bytes=(32 * 1024, 256 * 1024, 8 * 1024 * 1024))
TINY = Target("cpu", vector_bits=128, vector_registers=16,
              caches=(CacheLevel(512, 64, 4), CacheLevel(2048, 64, 4), CacheLevel(8192, 64, 8)),
              cache_bytes=(512, 2048, 8192))
"""Caches so small that the tiles of a 10 x 10 product are full and partial."""

ALWAYS = "auto-tile{gemm_work=0 register_work=0}"


def _auto_tile(module: Module, target: Target = TINY, pipeline: str = ALWAYS) -> tuple[Module, PassContext]:
    ctx = PassContext(target)
    return transform(module, pipeline, ctx=ctx), ctx


# ------------------------------------------------------------------ the model
@pytest.mark.parametrize("target", [AVX512, AVX2, TINY], ids=["avx512", "avx2", "tiny"])
@pytest.mark.parametrize("elem", [4, 8])
def test_register_tile_fits_the_register_file_and_hides_the_fma_latency(target: Target, elem: int) -> None:
    tile = register_tile(target, elem)
    lanes = target.vector_bits // (8 * elem)
    assert tile.nr % lanes == 0 and tile.lanes == lanes
    vectors = tile.nr // lanes
    assert tile.accumulators + vectors + 1 <= target.vector_registers
    assert tile.accumulators >= 8  # FMA latency x throughput (Polly's 4 x 2)


def test_register_tile_on_avx512_f32_fills_the_register_file() -> None:
    tile = register_tile(AVX512, 4)
    assert tile.accumulators >= 20 and tile.nr >= 32


def test_cache_tiles_follow_the_caches_and_clip_to_the_extents() -> None:
    big = gemm_sizes(AVX512, 4)
    assert big.mc % big.register.mr == 0 and big.nc % big.register.nr == 0
    # the packed left block (Mc x Kc) stays within L2, the right micro-panel within about L1
    assert big.mc * big.kc * 4 <= AVX512.cache(2).size
    assert big.kc * big.register.nr * 4 <= 2 * AVX512.cache(1).size
    small = gemm_sizes(AVX512, 4, 20, 40, 30)
    assert small.kc == 30 and small.mc <= 24 and small.nc <= 64
    # smaller caches, smaller tiles
    assert gemm_sizes(AVX2, 8).mc < gemm_sizes(AVX512, 8).mc


@pytest.mark.parametrize("m", [100, 1000, 1024, 2048, 4099])
@pytest.mark.parametrize("cores", [2, 3, 4])
def test_shared_row_blocks_come_in_multiples_of_the_cores(m: int, cores: int) -> None:
    """Row blocks that the cores share: their count is a multiple of the
    cores, each at most the one-core ``Mc``; with the rows unknown, a quarter
    of it."""
    one = gemm_sizes(AVX512, 4, m, 1024, 1024)
    shared = gemm_sizes(AVX512, 4, m, 1024, 1024, cores)
    blocks = -(-m // shared.mc)
    assert shared.mc <= one.mc and shared.mc % shared.register.mr == 0
    assert blocks % cores == 0, (blocks, shared.mc)
    assert gemm_sizes(AVX512, 4, cores=cores).mc <= gemm_sizes(AVX512, 4).mc // 4


# ------------------------------------------------------------------ plans and goldens
def test_matmul_plan_golden_and_replay() -> None:
    module = polyir.parse(MATMUL)
    result, ctx = _auto_tile(module, AVX512, "auto-tile")
    applied = ctx.remarks_of("auto-tile", "applied")
    assert len(applied) == 1
    why = applied[0].why
    assert why.startswith("matrix product (rows i, columns j, reduction k): Mr x Nr = ")
    expected = (GOLDEN / "matmul_avx512.ir").read_text()
    assert str(result) == expected
    assert polyir.parse(expected) == result
    assert_equivalent(module, result, trials=1, sizes={"M": 13, "N": 70, "K": 5})


def test_the_remark_holds_a_pipeline_that_replays_the_plan() -> None:
    text = """func mm(C: f32[8, 24], A: f32[8, 6], B: f32[6, 24]) {
  for i = 0 to 8 {
    for j = 0 to 24 {
      for k = 0 to 6 {
        S1: C[i, j] = C[i, j] + A[i, k] * B[k, j]
      }
    }
  }
}"""
    module = polyir.parse(text)
    result, ctx = _auto_tile(module)
    plan = ctx.remarks_of("auto-tile", "applied")[0].why.split(": ", 2)[2]
    assert plan.startswith("tile{loops=i,j,k sizes=4,24,6 names=i_c,j_c,k_c},")
    assert transform(module, plan) == result  # every step checked on its own
    assert_equivalent(module, result, trials=1)


@pytest.mark.parametrize("sizes", [{"M": 10, "N": 10, "K": 10}, {"M": 3, "N": 17, "K": 1},
                                   {"M": 1, "N": 1, "K": 1}, {"M": 9, "N": 6, "K": 33}])
def test_gemm_plan_symbolic_extents_full_and_partial_tiles(sizes: dict[str, int]) -> None:
    module = polyir.parse(MATMUL)
    result, ctx = _auto_tile(module)
    assert "matrix product" in ctx.remarks_of("auto-tile", "applied")[0].why
    assert_equivalent(module, result, trials=1, sizes=sizes)


def test_constant_extents_and_transposed_operands() -> None:
    text = """func f(C: f64[12, 20], A: f64[30, 12], B: f64[20, 30]) {
  for i = 0 to 12 {
    for k = 0 to 30 {
      for j = 0 to 20 {
        S0: C[i, j] = C[i, j] + A[k, i] * B[j, k]
      }
    }
  }
}"""
    module = polyir.parse(text)
    result, ctx = _auto_tile(module)
    assert ctx.remarks_of("auto-tile", "applied")
    assert_equivalent(module, result, trials=2)


def test_batched_matmul_keeps_the_batch_loop_outside() -> None:
    text = """func f(C: f32[B, M, N], X: f32[B, M, K], Y: f32[B, K, N]) {
  for b = 0 to B {
    for i = 0 to M {
      for j = 0 to N {
        for k = 0 to K {
          S0: C[b, i, j] = C[b, i, j] + X[b, i, k] * Y[b, k, j]
        }
      }
    }
  }
}"""
    module = polyir.parse(text)
    result, ctx = _auto_tile(module)
    assert "matrix product" in ctx.remarks_of("auto-tile", "applied")[0].why
    assert result.entry.body[0].var == "b"  # type: ignore[attr-defined]
    assert_equivalent(module, result, trials=1, sizes={"B": 2, "M": 7, "N": 9, "K": 5})


def test_batch_loops_of_shared_weights_run_inside_the_weight_panel() -> None:
    """``Y[t, b, j] += X[b, t, k] * W[j, k]`` (torch's multi-head attention
    projects a sequence-first layout): W uses neither t nor b, so t runs
    inside the column panel's loops, as more rows, and each panel of W is
    copied once, not once per t (BERT's in-projection at batch 8: 166 -> 47
    ms). A batched product whose columns use the batch keeps it outside
    (test_batched_matmul_keeps_the_batch_loop_outside)."""
    text = """func f(Y: f32[T, B, N], X: f32[B, T, K], W: f32[N, K]) {
  for t = 0 to T {
    for b = 0 to B {
      for j = 0 to N {
        for k = 0 to K {
          S0: Y[t, b, j] = Y[t, b, j] + X[b, t, k] * W[j, k]
        }
      }
    }
  }
}"""
    module = polyir.parse(text)
    result, ctx = _auto_tile(module)
    assert "matrix product" in ctx.remarks_of("auto-tile", "applied")[0].why
    outer = result.entry.body[0]
    assert isinstance(outer, For) and outer.var != "t"
    def around_copies(nodes: tuple, path: tuple[str, ...]) -> list[tuple[str, ...]]:  # type: ignore[type-arg]
        found = []
        for node in nodes:
            if isinstance(node, For):
                found += around_copies(node.body, (*path, node.var))
            elif getattr(node, "name", "").startswith("W_"):
                found.append(path)
            found += around_copies(getattr(node, "then_body", ()) + getattr(node, "else_body", ()), path)
        return found

    paths = around_copies(result.entry.body, ())
    assert paths and all("t" not in path for path in paths), paths   # W copied outside t
    assert_equivalent(module, result, trials=1, sizes={"T": 3, "B": 5, "N": 9, "K": 7})


def test_a_batch_of_small_products_gets_the_register_tile_and_one_weight_panel() -> None:
    """A Linear layer fused per sequence (8 products of 32 x 64 x 256, shared
    weights): each product is below ``gemm_work``, so the register tile,
    whose packed weights are made once for the batch; one product of the
    whole work keeps BLIS's plan."""
    batched = """func f(Y: f32[8, 32, 64], X: f32[8, 32, 256], W: f32[64, 256]) {
  for b = 0 to 8 {
    for i = 0 to 32 {
      for j = 0 to 64 {
        for k = 0 to 256 {
          S0: Y[b, i, j] = Y[b, i, j] + X[b, i, k] * W[j, k]
        }
      }
    }
  }
}"""
    module = polyir.parse(batched)
    result, ctx = _auto_tile(module, AVX512, "auto-tile")
    applied = " ".join(r.why for r in ctx.remarks_of("auto-tile", "applied"))
    assert "register tile" in applied and "matrix product" not in applied
    assert "made once before loop 'b'" in applied
    assert_equivalent(module, result, trials=1)
    whole = batched.replace("f32[8, 32,", "f32[1, 256,").replace("0 to 8", "0 to 1") \
        .replace("i = 0 to 32", "i = 0 to 256")
    _, ctx = _auto_tile(polyir.parse(whole), AVX512, "auto-tile")
    assert "matrix product" in ctx.remarks_of("auto-tile", "applied")[0].why


def test_convolution_as_loops_gets_a_register_tile_with_the_reduction_order_kept() -> None:
    text = """func conv(O: f32[CO, H, W], I: f32[CI, H + 2, W + 2], F: f32[CO, CI, 3, 3]) {
  for co = 0 to CO {
    for h = 0 to H {
      for w = 0 to W {
        for ci = 0 to CI {
          for kh = 0 to 3 {
            for kw = 0 to 3 {
              S0: O[co, h, w] = O[co, h, w] + F[co, ci, kh, kw] * I[ci, h + kh, w + kw]
            }
          }
        }
      }
    }
  }
}"""
    module = polyir.parse(text)
    result, ctx = _auto_tile(module)
    why = ctx.remarks_of("auto-tile", "applied")[0].why
    assert "register tile (rows co, columns w, reduction ci, kh, kw)" in why
    # exact: every output element still sums over ci, kh, kw in the original order
    assert_equivalent(module, result, trials=1, sizes={"CO": 5, "CI": 2, "H": 3, "W": 9},
                      rtol=0, atol=0)


def test_two_reduction_loops_in_plan_order_get_the_register_tile() -> None:
    text = """func f(C: f32[M, N], A: f32[M, K, L], B: f32[K, L, N]) {
  for i = 0 to M {
    for j = 0 to N {
      for k = 0 to K {
        for l = 0 to L {
          S0: C[i, j] = C[i, j] + A[i, k, l] * B[k, l, j]
        }
      }
    }
  }
}"""
    module = polyir.parse(text)
    result, ctx = _auto_tile(module)
    assert "register tile (rows i, columns j, reduction k, l)" in ctx.remarks_of("auto-tile", "applied")[0].why
    assert_equivalent(module, result, trials=1, sizes={"M": 5, "N": 7, "K": 2, "L": 3}, rtol=0, atol=0)


def test_a_product_in_a_block_of_rows_is_sized_by_the_block() -> None:
    # a block of 8 rows (a query block of the online traversal): the rows' loop has
    # no constant trip count, but at most 8 iterations; 8 x 64 x 64 multiply-adds
    # are below gemm_work, so the register tile without cache tiles or packed rows
    text = """func f(C: f32[N, 64], A: f32[N, 64], B: f32[64, 64], D: f32[N]) {
  for ib = 0 to N step 8 {
    S1: D[ib] = 1.0
    for i = ib to min(N, ib + 8) {
      for j = 0 to 64 {
        for k = 0 to 64 {
          S0: C[i, j] = C[i, j] + A[i, k] * B[k, j]
        }
      }
    }
  }
}"""
    module = polyir.parse(text)
    result, ctx = _auto_tile(module, AVX512, "auto-tile{gemm_work=100000 register_work=0}")
    why = ctx.remarks_of("auto-tile", "applied")[0].why
    assert why.startswith("register tile (rows i, columns j, reduction k)"), why
    for n in (5, 8, 13, 16):
        assert_equivalent(module, result, trials=1, sizes={"N": n}, rtol=0, atol=0)


def test_column_walking_nest_gets_a_unit_stride_order() -> None:
    text = """func f(B: f32[N, M], A: f32[N, M]) {
  for j = 0 to M {
    for i = 0 to N {
      S0: B[i, j] = A[i, j] * 2.0
    }
  }
}"""
    module = polyir.parse(text)
    result, ctx = _auto_tile(module)
    assert "loop i innermost" not in str(ctx.remarks)
    assert [loop.var for loop in result.entry.body] == ["i"]  # type: ignore[attr-defined]
    assert_equivalent(module, result, trials=2)


def test_refusals_are_remarks_and_leave_the_function_alone() -> None:
    module = polyir.parse(SKEWED.replace("A[i - 1, j + 1]", "A[i - 1, j + 1] + A[i, j]"))
    result, ctx = _auto_tile(module)
    assert result is module
    # nothing to do for a unit-stride band that is not a product: silent; a CUDA target: a remark
    _, gpu = _auto_tile(polyir.parse(MATMUL), Target("cuda", sm=80))
    assert "not tiled" in gpu.remarks_of("auto-tile")[0].why


def test_an_illegal_loop_order_is_refused_with_a_remark_naming_two_instances() -> None:
    # the inner loop walks a column, but the anti-dependence (j + 1, i - 1) forbids i outermost
    text = """func f(A: f32[N, N]) {
  for j = 0 to N - 1 {
    for i = 1 to N {
      S0: A[i, j] = A[i - 1, j + 1] * 0.5 + 1.0
    }
  }
}"""
    module = polyir.parse(text)
    result, ctx = _auto_tile(module)
    assert result is module
    missed = ctx.remarks_of("auto-tile", "missed")
    assert len(missed) == 1 and "order plan not applied" in missed[0].why
    assert re.search(r"S0\(j=\d+, i=\d+\).*S0\(j=\d+, i=\d+\)", missed[0].why), missed[0].why


MATVEC = """func mv(x1: f32[N], x2: f32[N], y1: f32[N], y2: f32[N], A: f32[N, N]) {
  for i = 0 to N {
    for j = 0 to N {
      S0: x1[i] = x1[i] + A[i, j] * y1[j]
      S1: x2[i] = x2[i] + A[j, i] * y2[j]
    }
  }
}"""


def test_matrix_vector_rows_jammed_around_the_reduction() -> None:
    # moving i innermost would leave A[i, j] walking a column: the rows are
    # unrolled and jammed instead (independent sums, each in its own order)
    module = polyir.parse(MATVEC)
    result, ctx = _auto_tile(module, TINY, "auto-tile")
    applied = ctx.remarks_of("auto-tile", "applied")
    assert len(applied) == 1 and applied[0].why.endswith("unroll-jam{loops=i factors=4}"), applied
    jammed = [loop for loop in _all_loops(result) if loop.var == "j" and len(loop.body) == 8]
    assert len(jammed) == 1
    for n in (1, 4, 7):
        assert_equivalent(module, result, trials=1, sizes={"N": n}, rtol=0, atol=0)


ROW_SUMS = """func rows(s: f32[N], m: f32[N], A: f32[N, 64]) {
  for i = 0 to N {
    for j = 0 to 64 {
      S0: s[i] = s[i] + A[i, j]
      S1: m[i] = max(m[i], A[i, j])
    }
  }
}"""


def test_unit_stride_row_reductions_are_left_to_the_vectoriser_under_reassociation() -> None:
    module = polyir.parse(ROW_SUMS)
    exact, ctx = _auto_tile(module, TINY, "auto-tile")
    assert ctx.remarks_of("auto-tile", "applied")[0].why.endswith("unroll-jam{loops=i factors=4}")
    kept, ctx = _auto_tile(module, TINY, "auto-tile{reassociate=true}")
    assert str(kept) == str(module) and not ctx.remarks_of("auto-tile", "applied")
    why = [r.why for r in ctx.remarks_of("auto-tile", "analysis")]
    assert why == ["reduction along j, unit stride: left to the vectoriser (fast math lets it "
                   "reorder the sums)"], why
    # a row sum whose reads walk a column still gets its rows jammed: vectorised
    # as it stands, it would gather
    jammed, ctx = _auto_tile(polyir.parse(MATVEC), TINY, "auto-tile{reassociate=true}")
    assert ctx.remarks_of("auto-tile", "applied")[0].why.endswith("unroll-jam{loops=i factors=4}")
    assert "reassociate=true" in default_pipeline("cpu", True)
    assert "reassociate" not in default_pipeline("cpu", False)


def test_parallel_row_blocks_on_a_multi_core_target() -> None:
    module = polyir.parse(MATMUL)
    two = Target("cpu", cores=2, vector_bits=128, vector_registers=16, caches=TINY.caches,
                 cache_bytes=TINY.cache_bytes)
    serial, _ = _auto_tile(module, two, "auto-tile{gemm_work=0 register_work=0 parallel=false}")
    assert not any(loop.parallel for loop in _all_loops(serial))
    one_core, _ = _auto_tile(module, TINY)
    assert not any(loop.parallel for loop in _all_loops(one_core))
    result, ctx = _auto_tile(module, two)  # parallel by default on two cores
    marked = [loop.var for loop in _all_loops(result) if loop.parallel]
    assert marked == ["i_c"], marked
    assert ctx.remarks_of("auto-tile", "applied")[0].why.endswith("mark-parallel{loops=i_c}")
    for order in ("reverse", "shuffle"):
        assert_equivalent(module, result, trials=1, sizes={"M": 11, "N": 13, "K": 4}, parallel_order=order)


def _all_loops(module: Module) -> list[For]:
    return [n for n in walk_nodes(module.entry.body) if isinstance(n, For)]


def test_default_cpu_pipeline_tiles_after_fusion() -> None:
    pipeline = default_pipeline("cpu")
    assert pipeline.index("auto-tile") > pipeline.index("fuse")
    assert "auto-tile" not in default_pipeline("cuda")


# ------------------------------------------------------------------ oracles
@settings(max_examples=examples(10), deadline=None)
@given(programs(max_depth=3, max_statements=3))
def test_auto_tile_preserves_or_refuses_on_random_programs(module: Module) -> None:
    for order in ("forward", "reverse", "shuffle"):
        assert_preserves_or_refuses(lambda m: _auto_tile(m, TINY, "distribute," + ALWAYS)[0], module,
                                    parallel_order=order)


BLAS_LIKE = ["gemm", "2mm", "trmm", "syrk", "gemver", "mvt", "covariance", "lu", "conv2d-pad"]


@pytest.mark.parametrize("kernel", [k for k in CORPUS if k.name in BLAS_LIKE], ids=lambda k: k.name)
def test_corpus_kernels_keep_their_meaning(kernel) -> None:  # type: ignore[no-untyped-def]
    args = kernel.make_args(kernel.sizes, np.random.default_rng(0))
    module = polyir.kernel(kernel.func).ir(*args)
    result, _ = _auto_tile(module, TINY, "fuse,shrink-buffers,distribute," + ALWAYS)
    expected = [np.array(a, copy=True) if isinstance(a, np.ndarray) else a for a in args]
    actual = [np.array(a, copy=True) if isinstance(a, np.ndarray) else a for a in args]
    interpret(module, *expected)
    interpret(result, *actual, parallel_order="shuffle", seed=1)
    for param, want, got in zip(module.entry.params, expected, actual, strict=True):
        if isinstance(param, Buffer):
            np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12, err_msg=param.name)


# ------------------------------------------------------------------ native code
@pytest.mark.parametrize("cores", [1, 2])
def test_tiled_f32_matmul_has_packed_fma_in_its_register_tile(cores: int) -> None:
    target = dataclasses.replace(cpu(1), cores=cores)
    if not target.fma or target.vector_bits < 256:
        pytest.skip("the host has no 256-bit FMA")
    executable = compile_ir(polyir.parse(MATMUL), target, cache_dir=None, fast_math=True)
    assert any("matrix product" in r.why for r in executable.remarks)
    per_block: dict[str, int] = {}
    function = label = ""
    for line in executable.asm.splitlines():
        if re.match(r"^[A-Za-z_][\w.]*:", line):
            function = line
        if re.match(r"^\.?[\w.]+:", line):
            label = f"{function} {line}"
        elif re.search(r"vfmadd\d+ps\s+%[yz]mm\d+, %[yz]mm\d+, %[yz]mm", line):
            per_block[label] = per_block.get(label, 0) + 1
    tile = register_tile(target, 4)
    # one loop block runs the whole register tile: an FMA per accumulator, all
    # in registers; on two cores that block is in the outlined parallel body
    best = max(per_block, key=per_block.__getitem__, default="")
    assert per_block.get(best, 0) >= tile.accumulators, per_block
    if cores > 1:
        assert re.search(r"\.par\d+\.body:", best), best
    m, n, k = 37, 70, 29
    rng = np.random.default_rng(0)
    A = rng.standard_normal((m, k), dtype=np.float32)
    B = rng.standard_normal((k, n), dtype=np.float32)
    C = rng.standard_normal((m, n), dtype=np.float32)
    expected = C + A @ B
    executable(C, A, B)
    np.testing.assert_allclose(C, expected, rtol=1e-4, atol=1e-4)


TWO_LAYERS = """func two(C: f32[64, 96], A: f32[64, 80], B: f32[80, 96], E: f32[64, 96], D: f32[80, 96]) {
  for i = 0 to 64 {
    for j = 0 to 96 {
      for k = 0 to 80 {
        S1: C[i, j] = C[i, j] + A[i, k] * B[k, j]
      }
    }
  }
  for p = 0 to 64 {
    for q = 0 to 96 {
      for r = 0 to 80 {
        S3: E[p, q] = E[p, q] + A[p, r] * D[r, q]
      }
    }
  }
}"""


def test_a_nest_the_same_up_to_names_reuses_the_proven_plan(monkeypatch) -> None:
    """Two matrix products that differ only in names (two layers of a model):
    the second takes the first's plan, renamed, without its dependences or
    proofs again; the same code as planning each alone, and the same sums."""
    import polyir.tiling.autotile as autotile

    module = polyir.parse(TWO_LAYERS)
    calls = {"deps": 0, "prove": 0}
    deps, prove = autotile._band_dependences, autotile.prove

    def counted(name, function):
        def wrapper(*args, **kwargs):
            calls[name] += 1
            return function(*args, **kwargs)
        return wrapper

    monkeypatch.setattr(autotile, "_band_dependences", counted("deps", deps))
    monkeypatch.setattr(autotile, "prove", counted("prove", prove))
    result, ctx = _auto_tile(module, AVX512, ALWAYS)
    assert calls == {"deps": 1, "prove": 1}, [str(r) for r in ctx.remarks]
    applied = [r.why for r in ctx.remarks_of("auto-tile", "applied")]
    assert len(applied) == 2
    renamed = applied[1]
    for old, new in (("E", "C"), ("D", "B"), ("p", "i"), ("q", "j"), ("r", "k"), ("S3", "S1")):
        renamed = re.sub(rf"\b{old}(?=\b|_)", new, renamed)
    assert renamed == applied[0]
    monkeypatch.undo()
    first = polyir.parse(TWO_LAYERS.split("  for p")[0] + "}")
    alone, _ = _auto_tile(first, AVX512, ALWAYS)
    assert str(result.entry.body[0]) == str(alone.entry.body[0])
    assert_equivalent(module, result, trials=1)
