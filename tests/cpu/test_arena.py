"""The block of an entry function's shared locals is kept between calls
(``LocalAllocation._cached_arena``): later calls reuse it (zero-filled again),
a larger request replaces it, and calls that overlap (threads) each get
memory of their own. Checked against the plain Python result."""
from __future__ import annotations

import threading

import numpy as np
from hypothesis import example, given, settings
from hypothesis import strategies as st

import polyir
from polyir.cpu.jit import WHOLE_FUNCTION_NESTS
from polyir.driver import compile_ir
from polyir.target import cpu
from tests.conftest import examples

SHARED = """func f(A: f32[N], B: f32[N]) {
  local T: f32[N]
  for i = 0 to N {
    S0: B[i] = T[i] + 1.0
  }
  for j = 0 to N {
    S1: T[j] = A[j] * 2.0
  }
  for k = 0 to N {
    S2: B[k] = B[k] + T[N - 1 - k]
  }
PADDING}"""
# more nests than WHOLE_FUNCTION_NESTS: the function is split into kernels and
# T, shared by three of them, lives in the entry's kept block
SHARED = SHARED.replace("PADDING", "".join(
    f"  for p{n} = 0 to N {{\n    P{n}: B[p{n}] = B[p{n}] * 1.0\n  }}\n"
    for n in range(WHOLE_FUNCTION_NESTS)))


def _expected(a: np.ndarray) -> np.ndarray:
    return (1.0 + 2.0 * a[::-1]).astype(np.float32)


def test_kept_block_is_reused_refilled_with_zeros_and_grown() -> None:
    exe = compile_ir(polyir.parse(SHARED), cpu(1), pipeline="")
    assert ".arena_busy" in str(exe.llvm_ir)
    rng = np.random.default_rng(0)
    for n in (50_000, 50_000, 400_000, 7, 50_000):   # the third call grows the block
        a = rng.standard_normal(n).astype(np.float32)
        b = np.full(n, np.nan, np.float32)
        exe(a, b)
        # T is read before it is written: zero on every call, not the last call's values
        np.testing.assert_array_equal(b, _expected(a))


def test_overlapping_calls_each_get_their_own_memory() -> None:
    exe = compile_ir(polyir.parse(SHARED), cpu(1), pipeline="")
    failures: list[str] = []

    def worker(seed: int) -> None:
        rng = np.random.default_rng(seed)
        for _ in range(40):
            a = rng.standard_normal(200_000).astype(np.float32)
            b = np.empty_like(a)
            exe(a, b)
            if not np.array_equal(b, _expected(a)):
                failures.append(f"thread {seed}")
                return

    threads = [threading.Thread(target=worker, args=(seed,)) for seed in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not failures, failures


# ------------------------------------------------------------------ which locals are cleared
WRITTEN_FIRST = """func g(A: f32[N], B: f32[N]) {
  local T: f32[N]
  local U: f32[N]
  for j = 0 to N {
    S1: T[j] = A[j] * 2.0
  }
  for i = 0 to N {
    S0: U[i] = U[i] + T[N - 1 - i]
  }
  for k = 0 to N {
    S2: B[k] = T[k] + U[k]
  }
PADDING}""".replace("PADDING", "".join(
    f"  for p{n} = 0 to N {{\n    P{n}: B[p{n}] = B[p{n}] * 1.0\n  }}\n"
    for n in range(WHOLE_FUNCTION_NESTS)))


def test_only_locals_read_before_written_are_cleared() -> None:
    from polyir.cpu.split import reads_initial
    function = polyir.parse(WRITTEN_FIRST).entry
    # T is written whole by the first nest touching it; U is accumulated into unwritten
    assert reads_initial(function, ["T", "U"]) == frozenset({"U"})
    assert reads_initial(polyir.parse(SHARED).entry, ["T"]) == frozenset({"T"})
    partial = polyir.parse(WRITTEN_FIRST.replace("for j = 0 to N {", "for j = 1 to N {")).entry
    assert reads_initial(partial, ["T"]) == frozenset({"T"})   # T[0] is read, never written
    gathered = polyir.parse("""func h(A: f32[N], G: i32[N], B: f32[N]) {
      local T: f32[N]
      for j = 0 to N { S1: T[j] = A[j] }
      for k = 0 to N { S2: B[k] = T[abs(cast<i64>(G[k])) % N] }
    }""").entry
    # written whole by its first nest: a data-dependent read finds its element written
    assert reads_initial(gathered, ["T"]) == frozenset()
    half = polyir.parse("""func h(A: f32[N], G: i32[N], B: f32[N]) {
      local T: f32[N]
      for j = 1 to N { S1: T[j] = A[j] }
      for k = 0 to N { S2: B[k] = T[abs(cast<i64>(G[k])) % N] }
    }""").entry
    assert reads_initial(half, ["T"]) == frozenset({"T"})      # a data-dependent read: cleared


def test_a_local_is_judged_by_its_own_first_nest_alone() -> None:
    """V's first nest writes all of T too, but after T[0] was read unwritten:
    T's first nest alone decides whether T is written whole."""
    from polyir.cpu.split import reads_initial
    function = polyir.parse("""func h(A: f32[N], B: f32[N]) {
      local T: f32[N]
      local V: f32[N]
      for j = 1 to N { S1: T[j] = A[j] }
      for k = 0 to N { S2: B[k] = T[k] }
      for m = 0 to N {
        S3: V[m] = A[m]
        S4: T[m] = A[m] + 1.0
      }
      for n = 0 to N { S5: B[n] = B[n] + T[n] + V[n] }
    }""").entry
    assert reads_initial(function, ["T", "V"]) == frozenset({"T"})


def test_a_local_written_first_keeps_the_last_calls_values_unseen() -> None:
    exe = compile_ir(polyir.parse(WRITTEN_FIRST), cpu(1), pipeline="")
    text = str(exe.llvm_ir)
    assert ".arena_busy" in text and "llvm.memset" in text
    rng = np.random.default_rng(1)
    for n in (1000, 1000, 5000, 3, 1000):
        a = rng.standard_normal(n).astype(np.float32)
        b = np.full(n, np.nan, np.float32)
        exe(a, b)
        want = b.copy()
        polyir.interpret(polyir.parse(WRITTEN_FIRST), a, want)   # the interpreter's fresh zeros
        np.testing.assert_array_equal(b, (2.0 * a + 2.0 * a[::-1]).astype(np.float32))
        np.testing.assert_array_equal(b, want)


NESTS = [
    "for i = 0 to N {{ {s}: T[i] = A[i] * 2.0 }}",                      # T written whole
    "for i = 1 to N {{ {s}: T[i] = A[i] + 1.0 }}",                      # T written but T[0]
    "for i = 0 to N {{ {s}: U[i] = U[i] + T[N - 1 - i] }}",             # U accumulated
    "for i = 0 to N {{ {s}: U[i] = A[i] }}",                            # U written whole
    "for i = 0 to N {{ {s}: B[i] = B[i] + T[i] * 2.0 + U[i] }}",        # both read
    "for i = 0 to N - 1 {{ {s}: T[i + 1] = T[i] + A[i] }}",             # T read and written
]


@settings(max_examples=examples(25), deadline=None)
@given(st.lists(st.integers(0, len(NESTS) - 1), min_size=2, max_size=6))
@example([1, 4, 0])   # T[0] read after a partial write, written later: the next call must not see it
@example([2, 3, 4])   # U accumulated before anything writes it
def test_random_sequences_of_shared_locals_called_twice(choice: list[int]) -> None:
    # nests over two locals shared by several kernels, written whole, in
    # part, accumulated into or read first, in a random order; padded past
    # WHOLE_FUNCTION_NESTS (split into kernels, the locals in the kept
    # block) and called twice on fresh inputs, each against the interpreter:
    # a local cleared too little shows the first call's values in the second
    body = [NESTS[k].format(s=f"S{n}").replace("i", f"i{n}").replace("Si", "S")
            for n, k in enumerate(choice)]
    body += [f"for p{n} = 0 to N {{ P{n}: B[p{n}] = B[p{n}] * 1.0 }}" for n in range(WHOLE_FUNCTION_NESTS)]
    text = "func f(A: f32[N], B: f32[N]) {\n  local T: f32[N]\n  local U: f32[N]\n  " + \
        "\n  ".join(body) + "\n}"
    module = polyir.parse(text)
    exe = compile_ir(module, cpu(1), pipeline="", cache_dir=None)
    for trial, n in enumerate((9, 9)):
        rng = np.random.default_rng(trial)
        a = rng.standard_normal(n).astype(np.float32)
        b = rng.standard_normal(n).astype(np.float32)
        want = b.copy()
        exe(a, b)
        polyir.interpret(module, a, want)
        np.testing.assert_array_equal(b, want, err_msg=f"call {trial + 1}\n{text}")
