"""Parallel loops on the OpenMP runtime: same results as serial code, privatised
reductions, the size policy, errors as statuses, one runtime per process."""
from __future__ import annotations

import copy
import subprocess
import sys
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import polyir
from polyir.cpu.jit import build_cpu
from polyir.ir.interpreter import interpret
from polyir.target import Target, cpu
from polyir.testing import programs, random_arguments
from tests.conftest import examples

RNG = np.random.default_rng(3)


def dispatching(cores: int) -> Target:
    """A target whose policy sends every non-empty parallel loop to the team
    (however late the team comes)."""
    return replace(cpu(cores), parallel_dispatch_ns=0.0, team_late_ns=2**62)


def build(text: str, target: Target, fast_math: bool = False):
    return build_cpu(polyir.parse(text), target, cache_dir=None, fast_math=fast_math)


PROGRAMS = {
    "outer": """
func f(C: f32[N, M], A: f32[N, M], s: f32[]) {
  for i = 0 to N parallel {
    for j = 0 to M {
      S0: C[i, j] = C[i, j] + A[i, j] * s[] + cast<f32>(i)
    }
  }
}""",
    # parallel loop under a serial loop, bounds from outer variables, step 3,
    # a nested parallel loop (serial inside the team)
    "nested": """
func f(C: f32[N, M], A: f32[N, M], s: f32[]) {
  for t = 0 to 3 {
    for i = max(0, t - 1) to N - t step 3 parallel {
      for j = 0 to min(M, i + 4) parallel {
        S0: C[i, j] = C[i, j] * 0.5 + A[i, j] * s[] + cast<f32>(t)
      }
    }
  }
}""",
    # a private local (only used inside the loop) and a shared one
    "locals": """
func f(C: f32[N, M], A: f32[N, M], s: f32[]) {
  local row: f32[64] @local
  local big: f32[N, M] @global
  local t: f32[] @local
  for i = 0 to N parallel {
    for j = 0 to M {
      S0: row[j % 64] = A[i, j] * s[]
      S1: t[] = row[j % 64] + 1.0
      S2: big[i, j] = t[]
    }
  }
  for i2 = 0 to N {
    for j2 = 0 to M {
      S3: C[i2, j2] = big[i2, j2] + C[i2, j2]
    }
  }
}""",
}


@pytest.mark.parametrize("name", sorted(PROGRAMS))
@pytest.mark.parametrize("shape", [(1, 1), (7, 5), (200, 70)])
def test_parallel_equals_serial(name, shape):
    serial = build(PROGRAMS[name], cpu(1))
    parallel = build(PROGRAMS[name], dispatching(2))
    assert "GOMP_parallel" in parallel.llvm_ir and ".par0" in parallel.llvm_ir
    assert ".par0" not in serial.llvm_ir
    C = RNG.standard_normal(shape).astype(np.float32)
    A = RNG.standard_normal(shape).astype(np.float32)
    C_serial, C_parallel = C.copy(), C.copy()
    serial(C_serial, A, 1.5)
    parallel(C_parallel, A, 1.5)
    np.testing.assert_array_equal(C_parallel, C_serial)
    assert parallel.parallel_stats()["dispatches"] >= 1
    assert serial.parallel_stats() == {"dispatches": 0, "team": 0, "deferred": 0}


def test_dispatch_uses_the_whole_team():
    ex = build(PROGRAMS["outer"], dispatching(2))
    C = np.zeros((10, 1000), np.float32)
    ex(C, np.ones((10, 1000), np.float32), 2.0)
    np.testing.assert_array_equal(C, np.broadcast_to(2.0 + np.arange(10)[:, None], C.shape))
    assert ex.parallel_stats() == {"dispatches": 1, "team": 2, "deferred": 0}


def test_nested_loop_dispatches_once_per_outer_iteration():
    """The parallel loop under ``for t = 0 to 3`` runs three times; its inner
    parallel loop runs serially inside the team and never dispatches."""
    ex = build(PROGRAMS["nested"], dispatching(2))
    C = np.zeros((40, 9), np.float32)
    ex(C, np.ones((40, 9), np.float32), 1.0)
    assert ex.parallel_stats()["dispatches"] == 3


SIZE_POLICY = """
func f(y: f32[N], x: f32[N]) {
  for i = 0 to N parallel {
    S0: y[i] = x[i] * 2.0 + 1.0
  }
}"""


def test_size_policy_keeps_small_loops_serial_and_dispatches_big_ones():
    target = cpu(2)
    assert 0 < target.min_parallel_work < float("inf")
    ex = build(SIZE_POLICY, target)
    small = np.ones(16, np.float32)
    out = np.zeros_like(small)
    ex(out, small)
    np.testing.assert_array_equal(out, 3.0)
    assert ex.parallel_stats()["dispatches"] == 0
    # 4 work units per iteration (load, mul, add, store): well above the threshold
    n = int(4 * target.min_parallel_work)
    big = np.ones(n, np.float32)
    out = np.zeros_like(big)
    ex(out, big)
    np.testing.assert_array_equal(out, 3.0)
    assert ex.parallel_stats() == {"dispatches": 1, "team": 2, "deferred": 0}


def test_size_policy_counts_inner_loops_with_symbolic_bounds():
    """The work of one iteration is the inner trip count (a runtime value) times
    its body: a short outer loop over long rows dispatches, over short rows not."""
    target = cpu(2)
    ex = build(PROGRAMS["outer"], target)
    long_rows = int(target.min_parallel_work)  # 2 rows x >= 6 units per element
    C = np.zeros((2, long_rows), np.float32)
    ex(C, np.ones_like(C), 1.0)
    assert ex.parallel_stats()["dispatches"] == 1
    C = np.zeros((2, 8), np.float32)
    ex(C, np.ones_like(C), 1.0)
    assert ex.parallel_stats()["dispatches"] == 1


def test_a_late_team_sends_the_loop_serial_for_a_while():
    """With ``team_late_ns=-1`` every team counts as late: the next big-enough
    run of the loop is serial (counted as deferred), and after the back-off
    (100 ms at first) the loop tries the team again. Results stay exact."""
    import time

    target = replace(cpu(2), parallel_dispatch_ns=0.0, team_late_ns=-1)
    ex = build(SIZE_POLICY, target)
    x = np.arange(1000, dtype=np.float32)
    for expected in ({"dispatches": 1, "team": 2, "deferred": 0},
                     {"dispatches": 1, "team": 2, "deferred": 1}):
        y = np.zeros_like(x)
        ex(y, x)
        np.testing.assert_array_equal(y, x * 2 + 1)
        assert ex.parallel_stats() == expected
    time.sleep(0.25)
    ex(y, x)
    assert ex.parallel_stats() == {"dispatches": 2, "team": 2, "deferred": 1}


def test_a_late_team_never_defers_a_privatised_reduction():
    """Reductions keep using the team (their result depends on its size)."""
    text = """
func r(s: f64[1], a: f64[N]) {
  for k = 0 to N parallel {
    S0: s[0] = s[0] + a[k]
  }
}"""
    ex = build(text, replace(cpu(2), parallel_dispatch_ns=0.0, team_late_ns=-1))
    a = RNG.standard_normal(5000)
    results = set()
    for _ in range(3):
        s = np.zeros(1)
        ex(s, a)
        results.add(s.tobytes())
    assert len(results) == 1
    assert ex.parallel_stats() == {"dispatches": 3, "team": 2, "deferred": 0}


def test_one_core_target_never_outlines():
    ex = build(SIZE_POLICY, cpu(1))
    assert "GOMP_parallel" not in ex.llvm_ir


def test_shared_subtree_does_not_privatise_its_locals():
    """IR may hold the same loop object twice; a local both copies use stays shared."""
    from polyir.ir.nodes import Function, Module
    parsed = polyir.parse("""
func f(C: f32[N], A: f32[N]) {
  local t: f32[N] @global
  for i = 0 to N parallel {
    S0: t[i] = t[i] + A[i]
    S1: C[i] = t[i]
  }
}""").entry
    twice = parsed.body[0]
    shared = Module((Function(parsed.name, parsed.params, (twice, twice), parsed.locals),))
    ex = build_cpu(shared, dispatching(2), cache_dir=None)
    A = np.arange(50, dtype=np.float32)
    C = np.zeros(50, np.float32)
    ex(C, A)
    np.testing.assert_array_equal(C, 2 * A)
    assert ex.parallel_stats()["dispatches"] == 2


# ------------------------------------------------------------ reductions
REDUCTIONS = {
    "+": ("s[0] = s[0] + a[k]", np.sum, 0.0),
    "*": ("s[0] = s[0] * a[k]", np.prod, 1.0),
    "max": ("s[0] = max(s[0], a[k])", np.max, -np.inf),
    "min": ("s[0] = min(s[0], a[k])", np.min, np.inf),
}


@pytest.mark.parametrize("op", sorted(REDUCTIONS))
@pytest.mark.parametrize("n", [1, 2, 3, 1000, 100_003])
def test_scalar_reduction_is_privatised(op, n):
    statement, reference, start = REDUCTIONS[op]
    text = f"func r(s: f64[1], a: f64[N]) {{\n  for k = 0 to N parallel {{\n    S0: {statement}\n  }}\n}}"
    ex = build(text, dispatching(2))
    assert ".combine" in ex.llvm_ir or "combine.e" in ex.llvm_ir
    a = 1.0 + RNG.random(n) * 1e-4 if op == "*" else RNG.standard_normal(n)
    s = np.array([start])
    ex(s, a)
    np.testing.assert_allclose(s[0], reference(a), rtol=1e-12)
    # one iteration does not pay for filling and combining two copies: serial
    assert ex.parallel_stats() == ({"dispatches": 1, "team": 2, "deferred": 0} if n > 1 else
                                   {"dispatches": 0, "team": 0, "deferred": 0})


def test_forty_sums_are_exact_up_to_reassociation():
    """The issue-16 case: ``mark-parallel{accept_reassociation=true}`` marks the
    reduction loop parallel; 12 of 40 sums lost updates before privatisation."""
    text = """
func r(s: f32[1], a: f32[N]) {
  for k = 0 to N {
    S0: s[0] = s[0] + a[k]
  }
}"""
    marked = polyir.transform(polyir.parse(text), "mark-parallel{accept_reassociation=true}")
    assert "parallel" in str(marked)
    ex = build_cpu(marked, dispatching(2), cache_dir=None)
    wrong = 0
    for trial in range(40):
        a = np.random.default_rng(trial).random(200_000, dtype=np.float32)
        s = np.zeros(1, np.float32)
        ex(s, a)
        exact = a.astype(np.float64).sum()
        wrong += abs(float(s[0]) - exact) > 1e-5 * exact
    assert wrong == 0
    assert ex.parallel_stats()["dispatches"] == 40


def test_column_sums_under_a_parallel_reduction_loop():
    """``C[i] = C[i] + A[k, i]`` under a parallel ``k``: C is privatised whole."""
    text = """
func colsum(C: f64[M], A: f64[K, M]) {
  for k = 0 to K parallel {
    for i = 0 to M {
      S0: C[i] = C[i] + A[k, i]
    }
  }
}"""
    ex = build(text, dispatching(2))
    A = RNG.standard_normal((301, 17))
    C = RNG.standard_normal(17)
    expected = C + A.sum(axis=0)
    ex(C, A)
    np.testing.assert_allclose(C, expected, rtol=1e-12, atol=1e-12)


def test_untouched_elements_keep_their_bits():
    """Copies start at the exact identity: elements no iteration updates keep
    NaN, -0.0 and infinities bit for bit, for every operator."""
    for op, update in (("+", "X[j] + a[k]"), ("*", "X[j] * a[k]"), ("max", "max(X[j], a[k])"),
                       ("min", "min(X[j], a[k])")):
        text = f"""
func r(X: f32[8], a: f32[N]) {{
  for k = 0 to N parallel {{
    for j = 0 to 2 {{
      S0: X[j] = {update}
    }}
  }}
}}"""
        ex = build(text, dispatching(2))
        X = np.array([0, 0, np.nan, -0.0, np.inf, -np.inf, 0.0, -np.nan], np.float32)
        if op == "*":
            X[:2] = 1.0
        before = X.copy()
        ex(X, np.full(10, 0.5, np.float32))
        assert X[2:].tobytes() == before[2:].tobytes(), op


def test_integer_reduction_is_exact():
    text = """
func r(s: i32[4], a: i32[N]) {
  for k = 0 to N parallel {
    S0: s[k % 4] = s[k % 4] + a[k] * a[k]
  }
}"""
    ex = build(text, dispatching(2))
    a = RNG.integers(-1000, 1000, 10_001).astype(np.int32)
    s = np.arange(4, dtype=np.int32)
    expected = np.arange(4) + np.array([(a[r::4].astype(np.int64) ** 2).sum() for r in range(4)])
    ex(s, a)
    np.testing.assert_array_equal(s, expected.astype(np.int32))


def test_distinct_elements_are_not_privatised():
    """``C[i] = C[i] + ...`` under a parallel ``i`` updates one element per
    iteration: no copies, dynamic chunks."""
    text = """
func rows(C: f32[N], A: f32[N, M]) {
  for i = 0 to N parallel {
    for j = 0 to M {
      S0: C[i] = C[i] + A[i, j]
    }
  }
}"""
    ex = build(text, dispatching(2))
    assert "fill0" not in ex.llvm_ir and "chunk.next" in ex.llvm_ir
    A = RNG.standard_normal((33, 20)).astype(np.float32)
    C = np.zeros(33, np.float32)
    ex(C, A)
    np.testing.assert_allclose(C, A.sum(axis=1), rtol=1e-5, atol=1e-5)


JAMMED_ROWS = """
func rows(x: f32[N], A: f32[N, M], y: f32[M]) {
  for t = 0 to N step 4 parallel {
    if (t + 4 <= N) {
      for j = 0 to M {
        S0: x[t] = x[t] + A[t, j] * y[j]
        S1: x[t + 1] = x[t + 1] + A[t + 1, j] * y[j]
        S2: x[t + 2] = x[t + 2] + A[t + 2, j] * y[j]
        S3: x[t + 3] = x[t + 3] + A[t + 3, j] * y[j]
      }
    } else {
      for i = t to min(N, t + 4) {
        for j2 = 0 to M {
          S4: x[i] = x[i] + A[i, j2] * y[j2]
        }
      }
    }
  }
}"""


def test_jammed_rows_are_not_privatised_and_stay_bit_equal():
    """The copies of an unrolled and jammed row loop (``x[t]`` ... ``x[t + 3]``,
    and ``x[i]`` for ``i = t to t + 4`` in the tail) write each iteration's own
    rows: no private copies, so each sum keeps its order (a copy would start it
    from zero and add ``x`` last: a different rounding); bit-equal to serial
    code. Wider windows than the step are privatised."""
    ex = build(JAMMED_ROWS, dispatching(2))
    assert "fill0" not in ex.llvm_ir
    serial = build(JAMMED_ROWS, cpu(1))
    A = RNG.standard_normal((131, 129)).astype(np.float32)
    y = RNG.standard_normal(129).astype(np.float32)
    x0 = RNG.standard_normal(131).astype(np.float32)
    got, want = x0.copy(), x0.copy()
    ex(got, A, y)
    serial(want, A, y)
    assert ex.parallel_stats()["dispatches"] == 1
    assert np.array_equal(got, want)
    overlapping = JAMMED_ROWS.replace("min(N, t + 4)", "min(N, t + 5)")
    assert "fill0" in build(overlapping, dispatching(2)).llvm_ir


def test_privatised_reduction_result_does_not_depend_on_timing():
    """Static chunks and combination in thread order: the same input gives the
    same bits on every call."""
    text = """
func r(s: f32[1], a: f32[N]) {
  for k = 0 to N parallel {
    S0: s[0] = s[0] + a[k]
  }
}"""
    ex = build(text, dispatching(2))
    a = RNG.standard_normal(50_000).astype(np.float32)
    results = set()
    for _ in range(10):
        s = np.zeros(1, np.float32)
        ex(s, a)
        results.add(s.tobytes())
    assert len(results) == 1


def _compare(expected: list, actual: list, context: str) -> None:
    for index, (e, a) in enumerate(zip(expected, actual, strict=True)):
        if not isinstance(e, np.ndarray):
            continue
        if e.dtype.kind == "f":
            np.testing.assert_allclose(a, e, rtol=1e-4, atol=1e-5,
                                       err_msg=f"argument {index} of\n{context}")
        else:
            np.testing.assert_array_equal(a, e, err_msg=f"argument {index} of\n{context}")


@settings(max_examples=examples(10), deadline=None)
@given(programs(max_depth=3, dtypes=("f32", "f64")))
def test_random_programs_under_mark_parallel_with_reassociation(module):
    """Whatever ``mark-parallel{accept_reassociation=true}`` marks, native code on
    1 and 2 threads (every marked loop dispatched) equals the interpreter
    within float reassociation."""
    marked = polyir.transform(module, "mark-parallel{accept_reassociation=true}")
    args = random_arguments(marked, 2, 7)
    expected = copy.deepcopy(args)
    interpret(module, *expected)
    for target in (cpu(1), dispatching(2)):
        actual = copy.deepcopy(args)
        build_cpu(marked, target, cache_dir=None)(*actual)
        _compare(expected, actual, f"{target.cores} cores:\n{marked}")


_SUBSCRIPTS = {"": [""], "M": ["i"], "4": ["i % 4", "(i + k) % 4", "2"],
               "M, 3": ["i, k % 3", "i, 1"]}
_UPDATES = {"+": "X[{s}] + A[k, i]", "*": "X[{s}] * A[k, i]", "max": "max(X[{s}], A[k, i])",
            "min": "min(A[k, i], X[{s}])"}


@st.composite
def reduction_programs(draw: st.DrawFn) -> tuple[str, str, str]:
    """A parallel ``k`` loop whose body reduces ``A[k, i]`` into ``X`` with a
    random operator, dtype, accumulator shape and subscript (constant, an inner
    variable, one mixing ``k`` in non-injectively), rectangular or triangular
    inner bounds, and sometimes a race-free store beside it."""
    op = draw(st.sampled_from(sorted(_UPDATES)))
    dtype = draw(st.sampled_from(["f32", "f64", "i32"]))
    shape = draw(st.sampled_from(sorted(_SUBSCRIPTS)))
    subscript = draw(st.sampled_from(_SUBSCRIPTS[shape]))
    upper = draw(st.sampled_from(["M", "min(M, k + 1)"]))
    other = draw(st.booleans())
    x_shape = f"[{shape}]"
    update = _UPDATES[op].format(s=subscript)
    side = "\n      S1: Y[k] = A[k, i]" if other else ""
    text = f"""
func r(X: {dtype}{x_shape}, Y: {dtype}[K], A: {dtype}[K, M]) {{
  for k = 0 to K parallel {{
    for i = 0 to {upper} {{
      S0: X[{subscript}] = {update}{side}
    }}
  }}
}}"""
    return text, op, dtype


@settings(max_examples=examples(12), deadline=None)
@given(reduction_programs(), st.one_of(st.integers(0, 40), st.integers(1000, 3000)),
       st.integers(0, 9), st.integers(0, 2**16))
def test_random_reductions_are_privatised_exactly(program, k, m, seed):
    """Native code on a team of 2 (every loop dispatched) equals the interpreter:
    exactly for integers, within reassociation for floats; untouched elements
    keep their values."""
    text, op, dtype = program
    module = polyir.parse(text)
    function = module.entry
    rng = np.random.default_rng(seed)
    numpy_dtype = {"f32": np.float32, "f64": np.float64, "i32": np.int32}[dtype]
    shape = tuple(m if d.terms else d.constant for d in function.params[0].shape)
    if dtype == "i32":
        A = rng.integers(-50, 50, (k, m)).astype(np.int32)
        X = rng.integers(-50, 50, shape).astype(np.int32)
    elif op == "*":
        A = rng.uniform(0.9, 1.1, (k, m)).astype(numpy_dtype)
        X = rng.uniform(0.5, 2, shape).astype(numpy_dtype)
    else:
        A = rng.standard_normal((k, m)).astype(numpy_dtype)
        X = rng.standard_normal(shape).astype(numpy_dtype)
    Y = np.zeros(k, numpy_dtype)
    expected = [X.copy(), Y.copy(), A]
    interpret(module, *expected)
    actual = [X.copy(), Y.copy(), A]
    build_cpu(module, dispatching(2), cache_dir=None)(*actual)
    for e, a in zip(expected[:2], actual[:2], strict=True):
        if dtype == "i32":
            np.testing.assert_array_equal(a, e, err_msg=text)
        else:
            np.testing.assert_allclose(a, e, rtol=1e-4, atol=1e-5, err_msg=text)


# ------------------------------------------------------------ errors
ALLOCATING = """
func f(C: f32[M], G: i64[M], N: index) {
  local big: f32[N, N] @global
  for i = 0 to M parallel {
    S0: big[0, 0] = C[i]
    S1: C[i] = big[0, G[i]] + 1.0
  }
}"""
"""The gathered read keeps LLVM from proving the local unneeded (it elides
allocations whose contents it can forward)."""


@pytest.mark.parametrize("target", [cpu(1), cpu(2), dispatching(2)],
                         ids=["serial", "policy-serial", "team"])
def test_allocation_failure_in_a_chunk_is_a_memory_error(target):
    """A local private to the loop is allocated in each chunk (at function
    entry on one core); calloc of 2**62 elements fails and the status comes
    back, through the team when there is one."""
    ex = build(ALLOCATING, target)
    C = np.zeros(64, np.float32)
    G = np.zeros(64, np.int64)
    ex(C, G, 2)
    np.testing.assert_array_equal(C, 1.0)
    with pytest.raises(MemoryError, match="cannot allocate"):
        ex(C, G, 2**31)
    if target.parallel_dispatch_ns == 0.0:
        assert ex.parallel_stats() == {"dispatches": 2, "team": 2, "deferred": 0}


# ------------------------------------------------------------ one runtime
_ONE_RUNTIME = """
import numpy as np
from dataclasses import replace
import polyir
from polyir.cpu.jit import build_cpu
from polyir.cpu.omp import loaded_openmp_libraries, openmp
from polyir.target import cpu
ex = build_cpu(polyir.parse('''func f(y: f32[N]) {
  for i = 0 to N parallel {
    S0: y[i] = y[i] + 1.0
  }
}'''), replace(cpu(2), parallel_dispatch_ns=0.0, team_late_ns=2**62), cache_dir=None)
y = np.zeros(100, np.float32)
ex(y)
assert (y == 1).all() and ex.parallel_stats()["team"] == 2
import torch
torch.set_num_threads(2)
assert float(torch.ones(256, 256).sum()) == 65536.0
print(openmp().source, len(loaded_openmp_libraries()))
"""


def test_one_openmp_runtime_when_polyir_loads_it_before_torch():
    """polyir loads torch's libgomp; ``import torch`` then resolves its own
    dependency to it: one runtime, and torch's parallel code works."""
    result = subprocess.run([sys.executable, "-c", _ONE_RUNTIME], capture_output=True,
                            text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["torch", "1"]


_TEAM_AT_LOAD = """
import os, polyir
from polyir.cpu.jit import build_cpu
from polyir.target import cpu
text = "func f(y: f32[N], x: f32[N]) { for i = 0 to N parallel { S0: y[i] = x[i] * 2.0 } }"
before = len(os.listdir('/proc/self/task'))
build_cpu(polyir.parse(text), cpu(2), cache_dir=None)
print(before, len(os.listdir('/proc/self/task')))
"""


def test_team_threads_exist_before_the_first_dispatch():
    """Loading an executable with parallel loops has the OpenMP runtime create
    its team (``polyir.cpu.omp.start_team``), so that the first dispatch does
    not pay for creating threads and count its team as late."""
    result = subprocess.run([sys.executable, "-c", _TEAM_AT_LOAD], capture_output=True,
                            text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr
    before, after = map(int, result.stdout.split())
    assert after >= before + 1


def test_one_openmp_runtime_in_this_process():
    """Whatever came first here (torch or polyir), one OpenMP library is mapped."""
    import torch

    from polyir.cpu.omp import loaded_openmp_libraries, openmp
    ex = build(SIZE_POLICY, dispatching(2))
    out = np.zeros(10, np.float32)
    ex(out, np.ones(10, np.float32))
    torch.ones(64, 64).sum()
    runtime = openmp()
    assert runtime is not None and runtime.source in ("loaded", "torch")
    assert len(loaded_openmp_libraries()) == 1


@pytest.mark.skipif(not hasattr(__import__("os"), "fork"), reason="needs fork()")
def test_forked_child_runs_parallel_loops_serially():
    """libgomp's threads do not survive fork(): a dispatch in the child would
    wait for them forever, so after fork every parallel loop runs serially."""
    import os
    import signal
    import time

    ex = build(SIZE_POLICY, dispatching(2))
    y = np.zeros(1000, np.float32)
    ex(y, np.ones(1000, np.float32))
    assert ex.parallel_stats()["dispatches"] == 1
    pid = os.fork()
    if pid == 0:  # the child: exit status 0 only if it ran, serially
        try:
            out = np.zeros(1000, np.float32)
            ex(out, np.ones(1000, np.float32))
            late = build(SIZE_POLICY, dispatching(2))
            late(out, np.ones(1000, np.float32))
            ok = (out == 3.0).all() and ex.parallel_stats()["dispatches"] == 1 \
                and late.parallel_stats()["dispatches"] == 0
            os._exit(0 if ok else 1)
        except BaseException:
            os._exit(2)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            assert os.waitstatus_to_exitcode(status) == 0
            return
        time.sleep(0.05)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    pytest.fail("the forked child hung in a parallel loop")
