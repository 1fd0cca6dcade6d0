"""The simple passes of ``polyir.transforms``: golden outputs on hand-written
IR and, on random programs, preservation of meaning (interpreter oracle)."""
from __future__ import annotations

import pytest
from hypothesis import given, settings

import polyir
from polyir.ir.nodes import Assign, For, If, Module
from polyir.ir.verifier import verify
from polyir.passes import transform
from polyir.testing import assert_equivalent, assert_preserves_or_refuses, programs
from tests.conftest import examples


def _run(pipeline: str, text: str) -> str:
    result = transform(polyir.parse(text), pipeline, verify_each=True)
    return str(result).rstrip()


def _golden(text: str) -> str:
    return str(polyir.parse(text)).rstrip()


# ------------------------------------------------------------ simplify-bounds
def test_simplify_bounds_drops_dominated_terms() -> None:
    source = """\
func f(A: f32[N, N], n: index) {
  for i = max(0, 2, 1) to min(N, N + 3, N) {
    S0: A[i, 0] = 1.0
  }
}
"""
    assert _run("simplify-bounds", source) == _golden("""\
func f(A: f32[N, N], n: index) {
  for i = 2 to N {
    S0: A[i, 0] = 1.0
  }
}
""")


def test_simplify_bounds_keeps_terms_it_cannot_compare() -> None:
    source = """\
func f(A: f32[N, N]) {
  for i = 0 to N {
    for j = max(0, i - 1, i + 1, i) to min(N, i + 3, i + 2) {
      S0: A[i, j] = 1.0
    }
  }
}
"""
    assert _run("simplify-bounds", source) == _golden("""\
func f(A: f32[N, N]) {
  for i = 0 to N {
    for j = max(0, i + 1) to min(N, i + 2) {
      S0: A[i, j] = 1.0
    }
  }
}
""")


def test_simplify_bounds_removes_empty_loops_and_folds_constant_ifs() -> None:
    source = """\
func f(A: f32[N], B: f32[N]) {
  for a = 3 to 3 {
    S0: A[a] = 1.0
  }
  for b = N to min(N, 7) {
    S1: A[0] = 2.0
  }
  for i = 0 to N {
    if (0 < 1, i >= 2) {
      S2: A[i] = B[i]
    }
    if (2 <= 1) {
      S3: A[i] = 0.0
    } else {
      S4: B[i] = A[i] * 2.0
    }
    if (i + 1 > i, N == N) {
      S5: A[i] = A[i] + 1.0
    } else {
      S6: A[i] = 7.0
    }
    for j = i + 1 to i + 1 {
      S7: A[j] = 3.0
    }
  }
}
"""
    assert _run("simplify-bounds", source) == _golden("""\
func f(A: f32[N], B: f32[N]) {
  for i = 0 to N {
    if (i >= 2) {
      S2: A[i] = B[i]
    }
    S4: B[i] = A[i] * 2.0
    S5: A[i] = A[i] + 1.0
  }
}
""")


def test_simplify_bounds_negates_an_if_whose_then_branch_empties() -> None:
    source = """\
func f(A: f32[N]) {
  for i = 0 to N {
    if (i < 3) {
      for j = 2 to 1 {
        S0: A[j] = 1.0
      }
    } else {
      S1: A[i] = 2.0
    }
  }
}
"""
    assert _run("simplify-bounds", source) == _golden("""\
func f(A: f32[N]) {
  for i = 0 to N {
    if (i >= 3) {
      S1: A[i] = 2.0
    }
  }
}
""")


# ------------------------------------------------------ remove-dead-statements
def test_remove_dead_statements_is_transitive_and_drops_unused_locals() -> None:
    source = """\
func f(A: f32[N], B: f32[N]) {
  local t: f32[]
  local u: f32[]
  local T: f32[N]
  local W: f32[N]
  for i = 0 to N {
    S0: t[] = A[i] * 2.0
    S1: T[i] = t[] + 1.0
    S2: u[] = B[i]
    S3: W[i] = u[] + T[i]
    S4: B[i] = t[] - 1.0
  }
  for i_1 = 0 to N {
    S5: W[i_1] = W[i_1] * 0.5
  }
}
"""
    assert _run("remove-dead-statements", source) == _golden("""\
func f(A: f32[N], B: f32[N]) {
  local t: f32[]
  for i = 0 to N {
    S0: t[] = A[i] * 2.0
    S4: B[i] = t[] - 1.0
  }
}
""")


def test_remove_dead_statements_keeps_locals_that_feed_parameters() -> None:
    source = """\
func f(A: f32[N], s: f32[]) {
  local T: f32[N]
  for i = 0 to N {
    S0: T[i] = A[i]
  }
  for i_1 = 0 to N {
    if (i_1 >= 1) {
      S1: T[i_1] = T[i_1] + T[i_1 - 1]
    } else {
      S2: s[] = T[0]
    }
  }
}
"""
    assert _run("remove-dead-statements", source) == _golden(source)


def test_remove_dead_statements_negates_if_with_empty_then() -> None:
    source = """\
func f(A: f32[N]) {
  local W: f32[N]
  for i = 0 to N {
    if (i <= 2) {
      S0: W[i] = 1.0
    } else {
      S1: A[i] = 2.0
    }
  }
}
"""
    assert _run("remove-dead-statements", source) == _golden("""\
func f(A: f32[N]) {
  for i = 0 to N {
    if (i > 2) {
      S1: A[i] = 2.0
    }
  }
}
""")


# --------------------------------------------------------- canonicalize-names
def test_canonicalize_names_renumbers_in_program_order() -> None:
    source = """\
func f(A: f32[N]) {
  S9: A[0] = 1.0
  for i = 0 to N {
    if (i >= 1) {
      init: A[i] = 2.0
    } else {
      S3: A[i] = 3.0
    }
    S1: A[i] = A[i] + 1.0
  }
}
"""
    expected = """\
func f(A: f32[N]) {
  S0: A[0] = 1.0
  for i = 0 to N {
    if (i >= 1) {
      S1: A[i] = 2.0
    } else {
      S2: A[i] = 3.0
    }
    S3: A[i] = A[i] + 1.0
  }
}
"""
    assert _run("canonicalize-names", source) == _golden(expected)
    renamed = expected
    for k in range(4):
        renamed = renamed.replace(f"S{k}:", f"X{k}:")
    assert _run("canonicalize-names{prefix=X}", source) == _golden(renamed)


# ------------------------------------------------------------- differential
PIPELINES = ["simplify-bounds", "remove-dead-statements", "canonicalize-names",
             "simplify-bounds,remove-dead-statements,canonicalize-names"]


@pytest.mark.parametrize("pipeline", PIPELINES)
@settings(max_examples=examples(25, 500))
@given(module=programs())
def test_simple_passes_preserve_meaning(pipeline: str, module: Module) -> None:
    result = assert_preserves_or_refuses(lambda m: transform(m, pipeline, verify_each=True), module)
    assert isinstance(result, Module), f"{pipeline} refused: {result}"


@settings(max_examples=examples(25, 500))
@given(module=programs())
def test_simple_passes_are_idempotent(module: Module) -> None:
    once = transform(module, "simplify-bounds,remove-dead-statements")
    assert transform(once, "simplify-bounds,remove-dead-statements") == once


def _names(nodes: tuple) -> list[str]:
    names: list[str] = []
    for node in nodes:
        if isinstance(node, Assign):
            names.append(node.name)
        elif isinstance(node, For):
            names += _names(node.body)
        elif isinstance(node, If):
            names += _names(node.then_body) + _names(node.else_body)
    return names


@settings(max_examples=examples(25, 500))
@given(module=programs())
def test_canonicalize_names_numbers_consecutively(module: Module) -> None:
    result = transform(module, "canonicalize-names")
    verify(result)
    assert _names(result.entry.body) == [f"S{k}" for k in range(len(_names(module.entry.body)))]
    assert_equivalent(module, result, trials=1)
