"""``pack`` (``polyir.tiling.transpack``): one operand's strided reads packed
transposed into a tile-sized local, and the auto-tile plans using it (the
register tile with a packed column operand, packed row tiles for
strict-order row sums): the IR they make, their results against the
interpreter and the plain Python function at odd and symbolic sizes, their
refusals, and random programs through the pass."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import polyir
from polyir.context import PassContext
from polyir.errors import PolyirError
from polyir.ir.affine import Aff
from polyir.ir.interpreter import interpret
from polyir.ir.nodes import Assign, Buffer, For, Load, Module
from polyir.ir.types import MemorySpace
from polyir.ir.walk import walk_nodes
from polyir.passes import transform
from polyir.polyhedral.extract import affine_index, expr_loads
from polyir.testing import assert_preserves_or_refuses, programs
from polyir.testing.corpus import corpus_kernel, mvt, syrk
from polyir.tiling.bands import UnsupportedNest
from polyir.tiling.transpack import pack_operand
from tests.conftest import examples
from tests.tiling.test_autotile import AVX512, TINY

ALWAYS = "auto-tile{gemm_work=0 register_work=0}"


def _syrk_module(n: int = 9, m: int = 5) -> tuple[Module, list[object]]:
    kernel = corpus_kernel("syrk")
    args = kernel.make_args({"n": n, "m": m}, np.random.default_rng(0))
    return transform(polyir.kernel(syrk).ir(*args), "distribute"), args


def _run(module: Module, args: list[object]) -> list[object]:
    out = [np.array(a, copy=True) if isinstance(a, np.ndarray) else a for a in args]
    interpret(module, *out)
    return out


def _python(func, args: list[object]) -> list[object]:  # type: ignore[no-untyped-def]
    out = [np.array(a, copy=True) if isinstance(a, np.ndarray) else a for a in args]
    func(*out)
    return out


def _locals(module: Module) -> list[Buffer]:
    return [b for node in walk_nodes(module.entry.body) if isinstance(node, For) for b in node.locals]


def _assigns(module: Module) -> list[Assign]:
    return [n for n in walk_nodes(module.entry.body) if isinstance(n, Assign)]


def _close(got: list[object], want: list[object]) -> None:
    for g, w in zip(got, want, strict=True):
        if isinstance(w, np.ndarray):
            np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-12)


# ------------------------------------------------------------------ the mechanism
def test_pack_copies_only_the_strided_operand_transposed() -> None:
    module, args = _syrk_module()
    tiled = transform(module, "interchange{loops=i_1,k_1,j_2 order=j_2,i_1,k_1},"
                      "tile{loops=j_2 sizes=4 names=jt},interchange{loops=j_2,i_1,k_1 order=i_1,k_1,j_2},"
                      "pack{at=jt buffer=A along=j_2 order=1,0}")
    packed = [b for b in _locals(tiled) if b.name == "A_jt"]
    assert len(packed) == 1 and packed[0].space == MemorySpace.LOCAL
    assert str(packed[0].shape[1]) == "4"  # [m, 4]: the tile's columns last
    copy = next(s for s in _assigns(tiled) if s.buffer == "A_jt")
    # the copy transposes: A_jt[k, j - jt] = A[j, k]
    assert isinstance(copy.value, Load) and copy.value.buffer == "A"
    row, col = (affine_index(x) for x in copy.value.indices)
    assert affine_index(copy.indices[0]) == col and affine_index(copy.indices[1]) == row - Aff.var("jt")
    update = next(s for s in _assigns(tiled) if s.name.startswith("S1"))
    reads = {ld.buffer: ld for ld in expr_loads(update.value)}
    assert "A_jt" in reads and "A" in reads  # A[i, k] stays, A[j, k] is packed
    assert "j_2" in {str(v) for v in affine_index(reads["A_jt"].indices[-1]).variables()}
    for n, m in [(9, 5), (1, 1), (13, 7), (4, 3)]:
        kernel = corpus_kernel("syrk")
        sized = kernel.make_args({"n": n, "m": m}, np.random.default_rng(n))
        _close(_run(tiled, sized), _python(syrk, sized))
    assert args


def test_pack_refuses_a_buffer_written_inside_and_a_read_without_stride() -> None:
    module, _ = _syrk_module()
    function = module.entry
    with pytest.raises(UnsupportedNest, match="written"):
        pack_operand(function, "i_1", "C", "j_2")
    with pytest.raises(UnsupportedNest, match="stride"):
        pack_operand(function, "i_1", "A", "k_1")


# ------------------------------------------------------------------ the plans
@pytest.mark.parametrize("sizes", [{"n": 150, "m": 37}, {"n": 67, "m": 5}, {"n": 13, "m": 130}])
def test_auto_tile_packs_syrks_column_operand_and_keeps_its_results(sizes: dict[str, int]) -> None:
    kernel = corpus_kernel("syrk")
    args = kernel.make_args(sizes, np.random.default_rng(1))
    module = polyir.kernel(syrk).ir(*args)  # symbolic n, m
    ctx = PassContext(AVX512)
    tiled = transform(module, "distribute,auto-tile", ctx=ctx)
    why = [r.why for r in ctx.remarks if r.kind == "applied" and r.pass_name == "auto-tile"]
    assert any("packed transposed" in w and "pack{" in w for w in why), why
    assert any(b.name.startswith("A_") and b.space == MemorySpace.LOCAL for b in _locals(tiled))
    # the remark's pipeline replays to the same program
    pipeline = next(w for w in why if "pack{" in w).rsplit(": ", 1)[1]
    assert transform(transform(module, "distribute"), pipeline) == tiled
    got = _run(tiled, args)
    _close(got, _run(module, args))
    want = _python(syrk, args)
    _close(got, want)  # the sums keep their order: equal to the plain function


def test_register_plan_without_packing_when_the_column_operand_is_unit_stride() -> None:
    from tests.tiling.test_mechanism import MATMUL
    ctx = PassContext(AVX512)
    transform(polyir.parse(MATMUL), "auto-tile{gemm_work=1000000000000 register_work=0}", ctx=ctx)
    assert not any("pack{" in r.why for r in ctx.remarks)


def test_a_triangular_product_runs_column_tiles_outside() -> None:
    from polyir.testing.corpus import covariance
    kernel = corpus_kernel("covariance")
    args = kernel.make_args({"n": 23, "m": 75}, np.random.default_rng(3))
    module = polyir.kernel(covariance).ir(*args)
    ctx = PassContext(AVX512)
    tiled = transform(module, "distribute,auto-tile", ctx=ctx)
    why = [r.why for r in ctx.remarks if r.kind == "applied" and "register tile" in r.why]
    assert any("column tiles outer" in w for w in why), why
    _close(_run(tiled, args), _python(covariance, args))


def row_sums_reused(y, A, B):  # type: ignore[no-untyped-def]
    n, p = A.shape
    q = B.shape[1]
    for i in range(n):
        for j in range(p):
            for k in range(q):
                y[i] = y[i] + A[i, j] * B[j, k]


@pytest.mark.parametrize("shape", [(70, 3, 5), (33, 2, 9), (64, 4, 4)])
def test_packed_row_tiles_vectorise_across_rows_and_keep_each_sum(shape: tuple[int, int, int]) -> None:
    n, p, q = shape
    rng = np.random.default_rng(2)
    args = [rng.standard_normal(n), rng.standard_normal((n, p)), rng.standard_normal((p, q))]
    module = polyir.kernel(row_sums_reused).ir(*args)
    ctx = PassContext(TINY)
    tiled = transform(module, ALWAYS, ctx=ctx)
    why = [r.why for r in ctx.remarks if r.kind == "applied"]
    assert any("vectorised across" in w and "pack{" in w for w in why), why
    assert any(b.name.startswith("A_") for b in _locals(tiled))
    _close(_run(tiled, args), _python(row_sums_reused, args))


def test_a_matrix_read_once_is_not_packed() -> None:
    """The packing would be a whole extra pass over A (measured slower for
    ``mvt``): the cost model keeps the unroll-and-jam plan."""
    kernel = corpus_kernel("mvt")
    args = kernel.make_args({"n": 100}, np.random.default_rng(0))
    ctx = PassContext(AVX512)
    tiled = transform(polyir.kernel(mvt).ir(*args), "fuse,distribute,auto-tile", ctx=ctx)
    assert not any("pack{" in r.why for r in ctx.remarks)
    _close(_run(tiled, args), _python(mvt, args))


# ------------------------------------------------------------------ random programs
@settings(max_examples=examples(25), deadline=None)
@given(programs(max_depth=3, max_statements=3), st.data())
def test_pack_preserves_or_refuses_on_random_programs(module: Module, data: st.DataObject) -> None:
    chains = [(outer, inner) for outer in walk_nodes(module.entry.body) if isinstance(outer, For)
              for inner in walk_nodes(outer.body) if isinstance(inner, For)]
    if not chains:
        return
    outer, inner = data.draw(st.sampled_from(chains))
    stmts = [s for s in walk_nodes(outer.body) if isinstance(s, Assign)]
    written = {s.buffer for s in stmts}
    # mostly read-only buffers (a written one is refused; a few are drawn too)
    reads = sorted({ld.buffer for s in stmts for ld in expr_loads(s.value)
                    if ld.indices and (ld.buffer not in written or len(written) == len(stmts) == 1)})
    if not reads:
        return
    buffer = data.draw(st.sampled_from(reads))
    rank = module.entry.buffers[buffer].rank
    order = ",".join(str(d) for d in reversed(range(rank)))
    pipeline = f"pack{{at={outer.var} buffer={buffer} along={inner.var} order={order}}}"
    result = assert_preserves_or_refuses(lambda m: transform(m, pipeline), module)
    if not isinstance(result, PolyirError):
        assert any(b.name.startswith(buffer) for b in _locals(result)) or result == module


# ------------------------------------------------------------------ native code
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_native_syrk_with_the_packed_operand_matches_the_plain_function(dtype: type) -> None:
    kernel = corpus_kernel("syrk")
    args = kernel.make_args({"n": 133, "m": 29}, np.random.default_rng(4), dtype=dtype)
    compiled = polyir.kernel(syrk)
    executable = compiled.compile_for(*args)
    assert any("pack{" in r.why for r in executable.remarks)
    got = [np.array(a, copy=True) if isinstance(a, np.ndarray) else a for a in args]
    compiled(*got)
    want = _python(syrk, args)
    tolerance = 1e-5 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(got[0], want[0], rtol=tolerance, atol=tolerance)
