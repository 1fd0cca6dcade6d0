"""The ``gpu-map`` pass, checked in the reference interpreter (no GPU needed):
mapped IR equals the unmapped IR on random programs and on hand-written
nests; golden checks of the mapped text; the barriers it places are needed."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings

from polyir.errors import CompileError
from polyir.gpu.mapping import MapOptions, map_module
from polyir.ir.interpreter import InterpretError, interpret
from polyir.ir.nodes import Barrier, For, Launch
from polyir.ir.parser import parse
from polyir.ir.verifier import verify
from polyir.passes import PipelineError, transform
from polyir.testing import assert_equivalent, programs, random_arguments, symbol_values
from tests.conftest import examples
from tests.gpu.kernels import ELEMENTWISE, HAND_MAPPED_HOST, SHARED_TILED_MATMUL, host_fragment_matmul

SMALL_SIZES = {"N": 5, "M": 3, "P": 4}


def _kernels(module):
    return [f for f in module.functions if f.kind == "kernel"]


def _walk(nodes):
    for node in nodes:
        yield node
        for attribute in ("body", "then_body", "else_body"):
            yield from _walk(getattr(node, attribute, ()))


# ------------------------------------------------------------------ golden
def test_flat_mapping_of_a_2d_nest_golden() -> None:
    mapped = map_module(parse(ELEMENTWISE))
    assert str(mapped) == """\
func chain(Y: f32[N, M], X: f32[N, M], b: f32[M]) {
  launch chain_k0 grid((M + 31) // 32, (N + 7) // 8, 1) block(32, 8, 1) (Y, X, b, N, M)
}

kernel chain_k0(Y: f32[N, M], X: f32[N, M], b: f32[M], N: index, M: index) {
  for by = 0 to (N + 7) // 8 gpu=block.y {
    for bx = 0 to (M + 31) // 32 gpu=block.x {
      for ty = 0 to 8 gpu=thread.y {
        for tx = 0 to 32 gpu=thread.x {
          if (8*by + ty < N, 32*bx + tx < M) {
            S0: Y[8*by + ty, 32*bx + tx] = tanh(X[8*by + ty, 32*bx + tx] * 2.0 + b[32*bx + tx]) * sigmoid(X[8*by + ty, 32*bx + tx]) + exp(-X[8*by + ty, 32*bx + tx] * X[8*by + ty, 32*bx + tx])
          }
        }
      }
    }
  }
}
"""
    verify(mapped)
    assert parse(str(mapped)) == mapped


def test_shared_tiles_get_barriers_golden() -> None:
    mapped = map_module(parse(SHARED_TILED_MATMUL))
    verify(mapped)
    kernel = _kernels(mapped)[0]
    assert [(b.name, str(b.space)) for b in kernel.locals] == [("At", "shared"), ("Bt", "shared")]
    kk = next(n for n in _walk(kernel.body) if isinstance(n, For) and n.var == "kk")
    kinds = [type(n).__name__ for n in kk.body]
    # copy At, copy Bt, barrier (copies -> use), compute, barrier (use -> next copies)
    assert kinds == ["For", "For", "Barrier", "For", "Barrier"]
    assert mapped.entry.locals == ()


def test_non_parallel_nest_becomes_a_single_thread_kernel() -> None:
    module = parse("""
func f(A: f32[N]) {
  for i = 1 to N {
    S0: A[i] = A[i] + A[i - 1]
  }
}
""")
    mapped = map_module(module)
    (launch,) = mapped.entry.body
    assert isinstance(launch, Launch)
    assert launch.block == (1, 1, 1) and all(str(g) == "1" for g in launch.grid)
    assert_equivalent(module, mapped, sizes=SMALL_SIZES)


def test_sequential_loop_around_parallel_loops_runs_in_one_block() -> None:
    module = parse("""
func f(A: f32[N], B: f32[N]) {
  for t = 0 to 4 {
    for i = 1 to N - 1 parallel {
      S0: B[i] = (A[i - 1] + A[i] + A[i + 1]) * 0.33
    }
    for i_1 = 1 to N - 1 parallel {
      S1: A[i_1] = B[i_1]
    }
  }
}
""")
    mapped = map_module(module, MapOptions(block_sizes=(4,)))
    verify(mapped)
    kernel = _kernels(mapped)[0]
    t_loop = next(n for n in _walk(kernel.body) if isinstance(n, For) and n.var == "t")
    assert [type(n).__name__ for n in t_loop.body] == ["For", "Barrier", "For", "Barrier"]
    for order in ("forward", "reverse", "shuffle"):
        assert_equivalent(module, mapped, sizes={"N": 11}, parallel_order=order)


def test_removing_the_barriers_breaks_the_shared_tile_kernel() -> None:
    """The interpreter runs threads phase by phase; without the barriers the
    tiles are read before they are written, so the barriers are necessary."""
    module = parse(SHARED_TILED_MATMUL)
    mapped = map_module(module, MapOptions(block_sizes=(4, 4)))

    def drop_barriers(nodes):
        from dataclasses import replace
        out = []
        for node in nodes:
            if isinstance(node, Barrier):
                continue
            if isinstance(node, For):
                node = replace(node, body=drop_barriers(node.body))
            elif hasattr(node, "then_body"):
                node = replace(node, then_body=drop_barriers(node.then_body),
                               else_body=drop_barriers(node.else_body))
            out.append(node)
        return tuple(out)

    from dataclasses import replace
    broken = replace(mapped, functions=tuple(
        replace(f, body=drop_barriers(f.body)) if f.kind == "kernel" else f for f in mapped.functions))
    rng = np.random.default_rng(1)
    n, m, k = 20, 18, 33
    args = [np.zeros((n, m), np.float32), rng.standard_normal((n, k)).astype(np.float32),
            rng.standard_normal((k, m)).astype(np.float32)]
    expected = args[0] + args[1] @ args[2]
    good = [a.copy() for a in args]
    interpret(mapped, *good, parallel_order="reverse", detect_races=True)
    np.testing.assert_allclose(good[0], expected, rtol=1e-4, atol=1e-4)
    bad = [a.copy() for a in args]
    interpret(broken, *bad, parallel_order="reverse")
    assert not np.allclose(bad[0], expected, rtol=1e-4, atol=1e-4)
    with pytest.raises(InterpretError, match="data race"):
        interpret(broken, *[a.copy() for a in args], detect_races=True)


def test_fragment_nest_maps_to_one_warp_per_tile() -> None:
    module = parse(host_fragment_matmul())
    mapped = map_module(module)
    verify(mapped)
    (launch,) = mapped.entry.body
    assert launch.block == (32, 1, 1)
    assert [str(b.space) for b in _kernels(mapped)[0].locals] == ["fragment"] * 3
    rng = np.random.default_rng(2)
    m, n, k = 32, 48, 32
    c = rng.standard_normal((m, n)).astype(np.float32)
    a = rng.standard_normal((m, k)).astype(np.float16)
    b = rng.standard_normal((k, n)).astype(np.float16)
    got = c.copy()
    interpret(mapped, got, a, b, parallel_order="shuffle", detect_races=True)
    np.testing.assert_allclose(got, c + a.astype(np.float32) @ b.astype(np.float32), rtol=1e-4, atol=1e-4)
    with pytest.raises(CompileError, match="multiple of 32"):
        map_module(module, MapOptions(block_sizes=(16,)))


def test_scratch_locals_are_privatised() -> None:
    module = parse("""
func f(Y: f32[N, 4], X: f32[N, 4]) {
  local tmp: f32[4]
  local s: f32[]
  for i = 0 to N parallel {
    for k = 0 to 4 {
      S0: tmp[k] = X[i, k] * 2.0
    }
    S1: s[] = 0.0
    for k_1 = 0 to 4 {
      S2: s[] = s[] + tmp[k_1]
    }
    S3: Y[i, 0] = s[]
  }
}
""")
    mapped = map_module(module)
    kernel = _kernels(mapped)[0]
    assert {b.name: str(b.space) for b in kernel.locals} == {"tmp": "local", "s": "local"}
    assert mapped.entry.locals == ()
    assert_equivalent(module, mapped, sizes={"N": 37}, parallel_order="reverse")


def test_pipeline_options_and_errors() -> None:
    module = parse(ELEMENTWISE)
    mapped = transform(module, "gpu-map{block_sizes=64,2}")
    (launch,) = mapped.entry.body
    assert launch.block == (64, 2, 1)
    with pytest.raises(PipelineError, match="1024"):  # refused when the pipeline is parsed
        transform(module, "gpu-map{block_sizes=64,64}")
    with pytest.raises(PipelineError, match="positive"):
        transform(module, "gpu-map{block_sizes=0}")
    with pytest.raises(ValueError, match="positive"):
        MapOptions(block_sizes=(0,))
    already = map_module(module)
    assert map_module(already) == already  # launches and kernels are kept as they are


def test_hand_mapped_host_nest_is_outlined_as_is() -> None:
    module = parse(HAND_MAPPED_HOST)
    mapped = map_module(module)
    verify(mapped)
    (launch,) = mapped.entry.body
    assert isinstance(launch, Launch)  # N // 8 >= 0 needs no guard
    assert launch.block == (8, 8, 1) and [str(g) for g in launch.grid] == ["N // 8", "N // 8", "1"]
    kernel = _kernels(mapped)[0]
    assert kernel.body == module.entry.body and kernel.locals == module.entry.locals
    assert mapped.entry.locals == ()
    rng = np.random.default_rng(5)
    a, b = rng.standard_normal((16, 16)).astype(np.float32), rng.standard_normal((16, 16)).astype(np.float32)
    c = np.zeros((16, 16), np.float32)
    interpret(mapped, c, a, b, parallel_order="shuffle", detect_races=True)
    np.testing.assert_allclose(c, a @ b, rtol=1e-5, atol=1e-5)
    thread_extent = HAND_MAPPED_HOST.replace("for tx = 0 to 8 gpu", "for tx = 0 to N gpu")
    with pytest.raises(CompileError, match="constant positive extent"):
        map_module(parse(thread_extent))


def test_empty_grid_is_guarded() -> None:
    module = parse("""
func f(A: f32[N]) {
  for i = 3 to N parallel {
    S0: A[i] = 1.0
  }
}
""")
    mapped = map_module(module)
    (guarded,) = mapped.entry.body
    assert not isinstance(guarded, Launch) and isinstance(guarded.then_body[0], Launch)
    a = np.zeros(2, np.float32)
    interpret(mapped, a)  # grid would be negative: nothing runs
    assert not a.any()
    assert_equivalent(module, mapped, sizes={"N": 9})


# ------------------------------------------------------------ properties
@settings(max_examples=examples(8))
@given(programs(max_depth=3, max_statements=4))
def test_mapped_programs_equal_the_originals(module) -> None:
    marked = transform(module, "mark-parallel")
    mapped = map_module(marked)
    verify(mapped)
    assert parse(str(mapped)) == mapped
    for order in ("forward", "reverse"):
        assert_equivalent(module, mapped, trials=1, parallel_order=order)
    _assert_race_free(mapped)


def _assert_race_free(mapped) -> None:
    """No two threads (or blocks) touch an element between barriers, one writing."""
    sizes = symbol_values(mapped.entry, None)
    interpret(mapped, *random_arguments(mapped.entry, np.random.default_rng(0), sizes),
              detect_races=True)


@settings(max_examples=examples(8))
@given(programs(max_depth=3, max_statements=4))
def test_mapped_programs_with_small_2d_blocks(module) -> None:
    mapped = transform(module, "mark-parallel,gpu-map{block_sizes=4,2}")
    verify(mapped)
    assert_equivalent(module, mapped, trials=1, parallel_order="shuffle")
    _assert_race_free(mapped)


# ------------------------------------------------------------ classic corpus
def _corpus():
    from polyir.testing.corpus import CORPUS
    return CORPUS


@pytest.mark.parametrize("entry", _corpus(), ids=[k.name for k in _corpus()])
def test_corpus_kernels_mapped_match_python(entry) -> None:
    import copy

    import polyir
    args = entry.make_args(entry.sizes, np.random.default_rng(0), dtype=np.float32)
    expected = copy.deepcopy(args)
    entry.func(*expected)
    module = polyir.kernel(entry.func, target="interpret").ir(*args)
    mapped = transform(module, "mark-parallel,gpu-map{block_sizes=8,4}")
    verify(mapped)
    interpret(mapped, *args, parallel_order="reverse", detect_races=True)
    for position, (got, want) in enumerate(zip(args, expected, strict=False)):
        if isinstance(want, np.ndarray):
            np.testing.assert_allclose(got, want, rtol=2e-4, atol=2e-5, err_msg=f"argument {position}")
