"""A memo of the isl problems the polyhedral layer solves, shared by every pass.

The passes of one compilation ask isl the same questions many times:
auto-tile and widen analyse a nest, ``check_rewrite`` analyses the tiled
result (whose untouched buffers pose the very dataflow problems the original
did), distribution analyses each split, and every one of them extracts the
statements' domains again. :class:`IslMemo` keeps the answers.

A problem is keyed by its kind, by the printed text of its inputs (isl's
printed form states every parameter, tuple name, constraint and existential,
and parses back to the same set: equal text is the same problem) and by the
context options that shape isl's answers; the answer is kept as printed text
too, and every caller gets a new object parsed from that text on its own
context. Keeping text, not objects, matters twice: isl normalises objects in
place (coalescing a union map rewrites the maps it shares), so a kept object
would not print as a fresh one does; and a text answer holds no context
alive, so compilations (each with its own ``isl.Context``) share the memo.
Since a computed answer also goes through print and parse
(:meth:`IslMemo.answer`), a hit returns exactly what a miss returns (the same
set as the computation without the memo, printed the same way whenever the
computation is repeated).

What is never memoised:

* a problem on a context with an isl operation limit set
  (``isl.Context.set_max_operations``): there the answer depends on the
  budget left, and a memo hit would let a call succeed that a fresh
  computation would refuse, so results would depend on what was asked before;
* a failure: nothing is stored.

Every problem computed on a context without a limit is bounded on its own:
:data:`PROBLEM_OPERATIONS` isl operations (the counter reset before and after
it, so the bound depends on the problem alone and a memo hit answers exactly
what a fresh computation would). Past it the problem raises
:class:`polyir.polyhedral.analysis.AnalysisLimit` (a ``NotPolyhedral``, so the
passes keep the code as it is with a remark) instead of running for minutes.
Problems cheaper to compute than to look up (the memory-based dependences,
one pair of accesses at a time) are bounded the same way without the memo
(:func:`bounded`).

The memo is a bounded LRU (:data:`MEMO_CHARACTERS` characters of answers).
``ISL_MEMO.hits``, ``.misses`` and ``.bypassed`` (problems on a context with
a limit) count lookups per kind of problem; a test or a profile reads them,
:meth:`IslMemo.clear` resets.
"""
from __future__ import annotations

import hashlib
import threading
from collections import Counter, OrderedDict
from collections.abc import Callable, Sequence
from typing import TypeVar, Union

import islpy as isl

MEMO_CHARACTERS = 32_000_000
"""Characters of answers :data:`ISL_MEMO` keeps (the transformer encoder's
compile asks a few hundred distinct problems of a few kilobytes each)."""

IslObject = Union[isl.UnionMap, isl.UnionSet, isl.Map, isl.Set]
Answer = TypeVar("Answer", isl.UnionMap, isl.UnionSet, isl.Map, isl.Set)


def _options(ctx: isl.Context) -> str:
    """The options of ``ctx`` that change how isl answers (not only whether)."""
    return (f"coalesce {ctx.get_coalesce_bounded_wrapping()} {ctx.get_coalesce_preserve_locals()}"
            f" pip {ctx.get_pip_symmetry()} gbr {ctx.get_gbr_only_first()} bound {ctx.get_bound()}")


PROBLEM_OPERATIONS = 50_000_000
"""isl operations one memoised problem may spend on a context without a limit
(seconds; the models and the corpus need far less)."""


def bounded(kind: str, ctx: isl.Context, compute: Callable[[], Answer]) -> Answer:
    """``compute()`` with at most :data:`PROBLEM_OPERATIONS` isl operations on
    ``ctx`` (counted from zero; raises ``AnalysisLimit`` past them), or as it is
    on a context that already has a limit (the caller's budget counts it): the
    bound of a problem not worth memoising (cheaper to compute than to look up)."""
    if ctx.get_max_operations() != 0:
        return compute()
    return _bounded(kind, ctx, compute)


def _bounded(kind: str, ctx: isl.Context, compute: Callable[[], Answer]) -> Answer:
    """``compute()``, with at most :data:`PROBLEM_OPERATIONS` operations on ``ctx``."""
    from polyir.polyhedral.analysis import AnalysisLimit
    ctx.reset_operations()
    ctx.set_max_operations(PROBLEM_OPERATIONS)
    try:
        return compute()
    except isl.Error as error:
        failure = str(error)  # raised below, outside this block: an isl.Error as the
        # context of the new exception would make tools that compare exceptions fail
        # (islpy objects refuse ``==``)
    finally:
        ctx.set_max_operations(0)
        ctx.reset_operations()
    raise AnalysisLimit(f"isl gave up on a {kind} problem within its bound of "
                        f"{PROBLEM_OPERATIONS} operations ({failure})")


class IslMemo:
    """A bounded LRU of isl answers (see the module docstring).

    ``capacity``: the characters of answer text kept (at least 1)."""

    def __init__(self, capacity: int = MEMO_CHARACTERS):
        if capacity < 1:
            raise ValueError(f"an isl memo keeps at least one character, not {capacity}")
        self.capacity = capacity
        self.hits: Counter[str] = Counter()
        self.misses: Counter[str] = Counter()
        self.bypassed: Counter[str] = Counter()
        self._answers: OrderedDict[tuple[str, bytes], str] = OrderedDict()
        self._size = 0
        self._lock = threading.Lock()  # compilations may run on several threads

    def __len__(self) -> int:
        return len(self._answers)

    def __repr__(self) -> str:
        return (f"<IslMemo of {len(self)} answers ({self._size}/{self.capacity} characters): "
                f"{sum(self.hits.values())} hits, {sum(self.misses.values())} misses>")

    def clear(self) -> None:
        """Forget every answer and reset the counters."""
        with self._lock:
            self._answers.clear()
            self._size = 0
            self.hits.clear()
            self.misses.clear()
            self.bypassed.clear()

    def answer(self, kind: str, ctx: isl.Context, inputs: Sequence[IslObject | str],
               compute: Callable[[], Answer], result: type[Answer]) -> Answer:
        """The answer of the problem of ``kind`` on ``ctx`` stated by ``inputs``
        (isl objects or isl text): ``compute()`` printed and parsed back as a
        ``result`` on ``ctx``, from the memo when known; on a context with an
        operation limit, ``compute()`` itself. ``compute`` must be a function of
        ``kind``, ``inputs`` and ``ctx``'s options only."""
        if ctx.get_max_operations() != 0:
            with self._lock:
                self.bypassed[kind] += 1
            return compute()
        digest = hashlib.blake2b(_options(ctx).encode(), digest_size=20)
        for item in inputs:
            digest.update(b"\x00")
            digest.update(str(item).encode())
        key = (kind, digest.digest())
        with self._lock:
            text = self._answers.get(key)
            if text is not None:
                self._answers.move_to_end(key)
                self.hits[kind] += 1
            else:
                self.misses[kind] += 1
        if text is None:
            text = str(_bounded(kind, ctx, compute))  # outside the lock: isl may take seconds
            self._store(key, text)
        return result(text, context=ctx)

    def _store(self, key: tuple[str, bytes], text: str) -> None:
        with self._lock:
            if key in self._answers:  # another thread computed it meanwhile
                return
            self._answers[key] = text
            self._size += len(text)
            while self._size > self.capacity and len(self._answers) > 1:
                _, evicted = self._answers.popitem(last=False)
                self._size -= len(evicted)


ISL_MEMO = IslMemo()
"""The memo of dependence problems (``polyir.polyhedral.dependences``) and of
the statement domains extraction builds (``polyir.polyhedral.extract``)."""

__all__ = ["MEMO_CHARACTERS", "PROBLEM_OPERATIONS", "IslMemo", "ISL_MEMO", "bounded"]
