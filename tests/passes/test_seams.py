"""The mid-level seams: pass context, one driver, the analysis cache, loop
identity, loop-scoped buffers, remarks, the Target, loop distribution."""
from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings

import polyir
from polyir.context import PassContext
from polyir.driver import compile_ir, default_pipeline
from polyir.errors import CompileError, IllegalTransform, PassError, VerifyError
from polyir.ir.names import UnknownLoop, unique_loop_vars
from polyir.ir.nodes import For, Function, Module
from polyir.ir.walk import walk_nodes
from polyir.passes import register_pass, transform
from polyir.polyhedral.legality import check_parallel
from polyir.target import cpu, cuda, resolve
from polyir.testing import assert_equivalent, assert_preserves_or_refuses, programs
from polyir.testing.corpus import CORPUS
from tests.conftest import examples

ROOT = Path(__file__).resolve().parents[2]


def _loops(module: Module) -> list[For]:
    return [n for f in module.functions for n in walk_nodes(f.body) if isinstance(n, For)]


def _parallel_degrees(module: Module, originals: set[str] | None = None) -> dict[str, int]:
    """Statement -> dimension of its instances along the loops *marked* parallel
    in the IR (a loop running once for it does not count)."""
    from polyir.polyhedral.extract import extract
    from polyir.polyhedral.passes import parallel_degrees, statement_degrees
    scop = extract(module.entry)
    marked = {ident for ident, info in scop.loops.items() if info.node.parallel}
    degrees = parallel_degrees(scop, marked)
    return statement_degrees(degrees, originals if originals is not None else set(degrees))


def _parallel_count(module: Module) -> int:
    return sum(1 for loop in _loops(module) if loop.parallel)


# ------------------------------------------------------------------ pass context
@register_pass("test-seams-probe")
@dataclass(frozen=True)
class _Probe:
    """Records what it sees in the context (test only)."""

    def run(self, module: Module, ctx: PassContext) -> Module:
        ctx.remark("test-seams-probe", f"module '{module.entry.name}'", f"target {ctx.target.name}",
                   kind="analysis")
        return module


def test_passes_get_the_target_analyses_and_remarks() -> None:
    module = polyir.parse((ROOT / "examples/matmul.ir").read_text())
    ctx = PassContext(cuda(80))
    assert transform(module, "test-seams-probe", ctx=ctx) is module
    assert [r.why for r in ctx.remarks] == ["target cuda:sm_80"]
    assert polyir.transform(module, "test-seams-probe", target="cuda:sm_90") is module
    assert ctx.timings and ctx.timings[0][0] == "pass test-seams-probe"


def test_passes_written_without_a_context_still_run() -> None:
    @dataclass(frozen=True)
    class Old:
        """Takes only the module."""

        def run(self, module: Module) -> Module:
            return module

    module = polyir.parse((ROOT / "examples/matmul.ir").read_text())
    assert transform(module, [Old()]) is module


# --------------------------------------------------------------------- the driver
def test_cuda_default_pipeline_maps_parallel_nests_to_real_grids() -> None:
    assert default_pipeline("cuda").endswith("mark-parallel,gpu-tensorcore,gpu-map")
    module = polyir.parse((ROOT / "examples/matmul.ir").read_text())
    exe = compile_ir(module, "cuda:sm_80")
    (launch,) = exe.ir.entry.body
    assert max(a.constant for a in launch.grid if a.is_constant) >= 1
    assert any(not g.is_constant for g in launch.grid)  # grid sizes follow M and N
    assert launch.block[0] * launch.block[1] * launch.block[2] > 1
    with pytest.raises(CompileError, match="not mapped"):
        polyir.driver.build(module, "cuda:sm_80")


def test_kernel_for_cuda_gets_blocks_larger_than_one() -> None:
    @polyir.kernel(target="cuda")
    def scale(Y, X):
        for i in range(X.shape[0]):
            for j in range(X.shape[1]):
                Y[i, j] = 2.0 * X[i, j]

    x = np.ones((8, 8), np.float32)
    exe = scale.compile_for(x, x)
    launches = [n for n in exe.ir.entry.body if hasattr(n, "block")]
    assert launches and all(np.prod(n.block) > 1 for n in launches)


def test_driver_verifies_input_and_reports_remarks_and_timings() -> None:
    good = polyir.parse("func f(A: f32[N]) {\n  for i = 0 to N {\n    S0: A[i] = 1.0\n  }\n}")
    exe = compile_ir(good, "interpret", "mark-parallel")
    assert exe.timings and exe.remarks == []
    broken = Module((Function("f", good.entry.params, (good.entry.body[0], good.entry.body[0])),))
    with pytest.raises(VerifyError, match="already used by another loop"):
        compile_ir(broken, "interpret")


# ------------------------------------------------------------------- analyses
def test_dependences_are_computed_once_per_function_in_a_pipeline() -> None:
    module = polyir.parse((ROOT / "examples/matmul.ir").read_text())
    ctx = PassContext()
    seen: list[Module] = []
    result = transform(module, "mark-parallel,mark-parallel,mark-parallel", ctx=ctx,
                       dump_after_each=lambda _text: None)
    assert _parallel_count(result) == 2
    # the input, then the marked function (the 2nd pass changes nothing: the 3rd reuses it)
    assert ctx.analyses.computed["dependences"] == 2
    ctx = PassContext()
    transform(module, "reschedule,mark-parallel,mark-parallel", ctx=ctx)
    assert ctx.analyses.computed["dependences"] == 3  # input, rescheduled, then marked
    del seen


def test_each_compilation_has_its_own_isl_context() -> None:
    a, b = PassContext(), PassContext()
    assert a.analyses.isl is not b.analyses.isl
    module = polyir.parse((ROOT / "examples/matmul.ir").read_text())
    scop = a.analyses.scop(module.entry)
    assert a.analyses.scop(module.entry) is scop  # cached
    import islpy as isl
    assert scop.ctx._wraps_same_instance_as(a.analyses.isl)
    assert not scop.ctx._wraps_same_instance_as(isl.DEFAULT_CONTEXT)
    assert not scop.ctx._wraps_same_instance_as(b.analyses.isl)
    deps = a.analyses.dependences(module.entry)
    assert all(d.relation.get_ctx()._wraps_same_instance_as(a.analyses.isl) for d in deps)


# ------------------------------------------------------------------ loop identity
def test_loop_variables_are_unique_and_unknown_loops_are_typed_errors() -> None:
    text = "func f(A: f32[N]) {\n  for i = 0 to N {\n    S0: A[i] = 1.0\n  }\n" \
           "  for i = 0 to N {\n    S1: A[i] = 2.0\n  }\n}"
    module = polyir.parse(text)
    with pytest.raises(VerifyError, match="loop variable 'i' is already used by another loop"):
        polyir.verify(module)
    fixed = Module((unique_loop_vars(module.entry),))
    polyir.verify(fixed)
    assert [loop.var for loop in _loops(fixed)] == ["i", "i_1"]
    with pytest.raises(UnknownLoop, match="no loop 'x'.*i, i_1"):
        check_parallel(fixed.entry, "x")
    with pytest.raises(PassError, match="no loop 'x'"):
        transform(fixed, "mark-parallel{loops=x}")
    only = transform(fixed, "mark-parallel{loops=i_1}")
    assert [loop.parallel for loop in _loops(only)] == [False, True]


def test_frontends_rename_duplicate_loops() -> None:
    gemm = next(k for k in CORPUS if k.name == "gemm")
    module = polyir.kernel(gemm.func).ir(*gemm.make_args(gemm.sizes, np.random.default_rng(0)))
    names = [loop.var for loop in _loops(module)]
    assert len(names) == len(set(names)) and "j_1" in names


@pytest.mark.parametrize("kernel", CORPUS, ids=lambda k: k.name)
def test_reschedule_then_mark_parallel_never_loses_parallel_loops(kernel) -> None:
    args = kernel.make_args(kernel.sizes, np.random.default_rng(0))
    module = polyir.kernel(kernel.func).ir(*args)
    alone = transform(module, "mark-parallel")
    both = transform(module, "reschedule,mark-parallel")  # every pass's output is verified
    # isl may fuse loops and drop one-iteration loops: compare each statement's degree of
    # parallelism along the loops mark-parallel marked, not loop counts
    before = _parallel_degrees(alone)
    after = _parallel_degrees(both, set(before))
    assert set(after) == set(before)
    assert all(after[s] >= before[s] for s in before), f"{before} -> {after}\n{both}"


def test_reschedule_keeps_hints_of_loops_it_maps_one_to_one() -> None:
    text = """func f(A: f32[N, M], B: f32[N, M]) {
  for i = 0 to N unroll=2 {
    for j = 0 to M vectorize=8 {
      S0: B[i, j] = A[i, j] * 2.0
    }
  }
}"""
    result = transform(polyir.parse(text), "reschedule")
    loops = {loop.var: loop for loop in _loops(result)}
    assert loops["i"].unroll == 2 and loops["j"].vectorize == 8


# --------------------------------------------------------------- loop-scoped buffers
SHRUNK = """func f(A: f32[N, M], B: f32[N, M]) {
  for i = 0 to N {
    local t: f32[M]
    for j = 0 to M {
      S0: t[j] = A[i, j] * 2.0
    }
    for j2 = 0 to M {
      S1: B[i, j2] = t[j2] + t[M - 1 - j2]
    }
  }
}"""


def test_a_buffer_declared_inside_a_loop_is_private_to_its_iterations() -> None:
    module = polyir.parse(SHRUNK)
    assert polyir.parse(str(module)) == module
    marked = transform(module, "mark-parallel")
    assert _loops(marked)[0].parallel  # t carries no dependence on i
    function_scoped = polyir.parse(SHRUNK.replace("    local t: f32[M]\n", "").replace(
        "func f(A: f32[N, M], B: f32[N, M]) {\n", "func f(A: f32[N, M], B: f32[N, M]) {\n  local t: f32[M]\n"))
    assert not _loops(transform(function_scoped, "mark-parallel"))[0].parallel
    for order in ("reverse", "shuffle"):
        assert_equivalent(module, marked, parallel_order=order)
    a = np.random.default_rng(1).random((9, 5), dtype=np.float32)
    expected, native = np.zeros_like(a), np.zeros_like(a)
    polyir.interpret(module, a, expected)
    compile_ir(marked, cpu(2), cache_dir=None)(a, native)
    np.testing.assert_array_equal(native, expected)
    np.testing.assert_allclose(expected, 2 * a + 2 * a[:, ::-1], rtol=1e-6)


def test_loop_locals_are_scoped_by_the_verifier() -> None:
    outside = SHRUNK.replace("      S1: B[i, j2] = t[j2] + t[M - 1 - j2]\n    }\n  }\n",
                             "      S1: B[i, j2] = 1.0\n    }\n  }\n  for k = 0 to N {\n"
                             "    S2: B[k, 0] = t[0]\n  }\n")
    with pytest.raises(VerifyError, match="undefined buffer 't'"):
        polyir.verify(polyir.parse(outside))
    symbolic_in_loop = SHRUNK.replace("local t: f32[M]", "local t: f32[i]")
    with pytest.raises(VerifyError, match="undefined variable 'i'"):
        polyir.verify(polyir.parse(symbolic_in_loop))


# ------------------------------------------------------------------------ remarks
def test_remarks_say_which_loop_stays_sequential_and_why(caplog) -> None:
    module = polyir.parse((ROOT / "examples/matmul.ir").read_text())
    ctx = PassContext()
    with caplog.at_level(logging.DEBUG, logger="polyir"):
        transform(module, "mark-parallel", ctx=ctx)
    (remark,) = ctx.remarks_of("mark-parallel")
    assert "loop 'k'" in remark.where and "witness: S1(" in remark.why
    assert any("stays sequential" in r.getMessage() for r in caplog.records)


def test_polyir_opt_prints_remarks(tmp_path, capsys) -> None:
    from polyir.cli import main
    path = tmp_path / "m.ir"
    path.write_text((ROOT / "examples/matmul.ir").read_text())
    assert main([str(path), "--pipeline", "mark-parallel", "--remarks"]) == 0
    captured = capsys.readouterr()
    assert "parallel" in captured.out and "remark: mark-parallel: missed:" in captured.err
    assert main([str(path), "--target", "nope"]) == 1


# ------------------------------------------------------------------------- Target
def test_target_is_the_one_source_of_hardware_facts() -> None:
    host = cpu()
    assert host.vector_bits in (128, 256, 512) and host.caches and host.cache(1).size > 0
    a100, h200 = cuda(80), cuda(90)
    assert (a100.sm_count, h200.sm_count) == (108, 132)
    assert h200.shared_memory_bytes > a100.shared_memory_bytes > 48 * 1024
    assert "m16n16k16.bf16.f32" in a100.mma_shapes
    assert resolve("cuda:sm_80") == a100
    with pytest.raises(CompileError, match="sm_70"):
        cuda(70)
    big = """func f(A: f32[N, 64]) {
  local T: f32[256, 256] @shared
  for b = 0 to N parallel {
    for i = 0 to 64 parallel {
      S0: T[i, 0] = A[b, i]
    }
    for i2 = 0 to 64 parallel {
      S1: A[b, i2] = T[63 - i2, 0]
    }
  }
}"""
    with pytest.raises(PassError, match="262144 bytes of shared memory, more than the 232448"):
        compile_ir(polyir.parse(big), "cuda:sm_90")  # 256 x 256 f32 = 256 KiB > 227 KiB per block
    small = big.replace("f32[256, 256]", "f32[64, 1]")
    assert compile_ir(polyir.parse(small), "cuda:sm_90").ptx


# ------------------------------------------------------------------- distribution
MATMUL_EPILOGUE = """func mm(C: f32[M, N], A: f32[M, K], B: f32[K, N], bias: f32[N]) {
  for i = 0 to M {
    for j = 0 to N {
      S0: C[i, j] = 0.0
      for k = 0 to K {
        S1: C[i, j] = C[i, j] + A[i, k] * B[k, j]
      }
      S2: C[i, j] = max(C[i, j] + bias[j], 0.0)
    }
  }
}"""


def test_distribute_makes_the_matmul_band_perfect() -> None:
    module = polyir.parse(MATMUL_EPILOGUE)
    result = transform(module, "distribute")
    nests = result.entry.body
    assert len(nests) == 3
    depths = []
    for nest in nests:
        depth, node = 0, nest
        while isinstance(node, For):
            depth += 1
            assert len(node.body) == 1
            node = node.body[0]
        depths.append(depth)
    assert depths == [2, 3, 2]
    assert_equivalent(module, result)


def test_automatic_distribution_keeps_a_nest_past_its_isl_budget(monkeypatch) -> None:
    import polyir.tiling.distribute as distribute

    module = polyir.parse(MATMUL_EPILOGUE)
    monkeypatch.setattr(distribute, "AUTOMATIC_OPERATIONS", 50)
    ctx = PassContext()
    assert transform(module, "distribute", ctx=ctx) is module
    assert any("isl operations" in remark.why for remark in ctx.remarks), ctx.remarks
    # named loops are never cut short: the explicit pass still distributes
    outer = module.entry.body[0]
    assert isinstance(outer, For) and isinstance(outer.body[0], For)
    inner = outer.body[0].var
    split = transform(module, f"distribute{{loops={inner}}}").entry.body[0]
    assert isinstance(split, For) and len(split.body) == 3


def test_distribute_refuses_a_cycle_with_a_witness() -> None:
    text = """func f(A: f32[N], B: f32[N]) {
  for i = 1 to N {
    S0: A[i] = B[i - 1] + 1.0
    for j = 0 to 2 {
      S1: B[i] = A[i] * 2.0
    }
  }
}"""
    module = polyir.parse(text)
    with pytest.raises(PassError) as info:
        transform(module, "distribute{loops=i}")
    assert isinstance(info.value.cause, IllegalTransform)
    assert "S1(i=1, j=0) writes B[1] before S0(i=2) reads it" in str(info.value.cause.witness)
    ctx = PassContext()
    assert transform(module, "distribute", ctx=ctx) is module
    assert "dependence cycle" in ctx.remarks[0].why


@settings(max_examples=examples(20))
@given(programs())
def test_distribute_preserves_or_refuses_on_random_programs(module) -> None:
    for order in ("forward", "reverse"):
        assert_preserves_or_refuses(lambda m: transform(m, "distribute"), module, parallel_order=order)


def test_invalid_pass_output_is_a_failure_of_the_testing_kit() -> None:
    @dataclass(frozen=True)
    class Breaks:
        """Duplicates the body (invalid: statement names twice)."""

        def run(self, module: Module, ctx: PassContext) -> Module:
            f = module.entry
            return Module((Function(f.name, f.params, f.body + f.body, f.locals),))

    module = polyir.parse((ROOT / "examples/matmul.ir").read_text())
    with pytest.raises(AssertionError, match="invalid IR"):
        assert_preserves_or_refuses(lambda m: transform(m, [Breaks()]), module)


def test_info_logging_times_each_pass_and_the_backend(caplog, tmp_path) -> None:
    module = polyir.parse((ROOT / "examples/matmul.ir").read_text())
    passes = default_pipeline(resolve("cpu"))
    with caplog.at_level(logging.INFO, logger="polyir"):
        executable = compile_ir(module, "cpu", cache_dir=str(tmp_path))
    (line,) = [r.getMessage() for r in caplog.records
               if r.name == "polyir.driver" and r.levelno == logging.INFO and "compiled" in r.getMessage()]
    stages = [stage for stage, _ in executable.timings]
    assert "backend" in stages and len(stages) == len(passes.split(",")) + 2
    for stage in stages:
        assert f"{stage} " in line, (stage, line)
