"""``polyir.explain``: each pass's remarks and changes, the same remarks as a
plain ``transform``, the same result, and a readable report."""
from __future__ import annotations

from pathlib import Path

import pytest

import polyir
from polyir.context import PassContext
from polyir.errors import PassError
from polyir.passes import PipelineError
from polyir.report.explain import Explanation

ROOT = Path(__file__).resolve().parents[2]
MATMUL = polyir.parse((ROOT / "examples/matmul.ir").read_text())
PIPELINE = "reschedule,distribute,mark-parallel"


def test_explain_reports_what_transform_does_and_says() -> None:
    report = polyir.explain(MATMUL, PIPELINE)
    assert isinstance(report, Explanation)
    ctx = PassContext()
    result = polyir.transform(MATMUL, PIPELINE, ctx=ctx)
    assert report.after == result and report.before is MATMUL
    assert [str(r) for r in report] == [str(r) for r in ctx.remarks] and len(report) == len(ctx.remarks)
    assert [s.title for s in report.steps] == ["reschedule", "distribute", "mark-parallel"]
    reschedule, distribute, mark = report.steps
    assert not reschedule.changed and reschedule.remarks == ()
    assert distribute.change_lines()[0] == "top-level nests: 1 -> 2"
    assert mark.change_lines() == ["loops i, j, i_1, j_2 marked parallel"]
    (missed,) = report.missed("mark-parallel")
    assert missed.where == "function 'matmul', loop 'k_2'" and "witness: S1(" in missed.why


def test_the_report_reads_as_text_and_markdown() -> None:
    report = polyir.explain(MATMUL, PIPELINE)
    text = str(report).splitlines()
    assert text[0] == "explain reschedule,distribute,mark-parallel on matmul for cpu"
    assert text[1:3] == ["1. reschedule", "   no change, no remark"]
    assert "   changed: loops i, j, i_1, j_2 marked parallel" in text
    missed = [line for line in text if line.startswith("   missed:")]
    assert missed == ["   missed: function 'matmul', loop 'k_2': stays sequential: loop k_2 carries "
                      "RAW S1 -> S1 on C: carried at levels [3] direction (=, =, <)"]
    witness = text[text.index(missed[0]) + 1]
    assert witness.startswith("       witness: S1(i_1=0, j_2=0, k_2=0) writes C[0, 0] before")
    markdown = report._repr_markdown_()
    assert markdown.startswith("**explain reschedule,distribute,mark-parallel on matmul for cpu**")
    assert "    - *missed*: function 'matmul', loop 'k_2'" in markdown
    assert repr(report) == ("<Explanation of 'reschedule,distribute,mark-parallel': 3 passes, "
                            "1 remark (1 missed)>")


def test_explain_takes_functions_text_pass_lists_and_targets() -> None:
    from polyir.polyhedral.passes import MarkParallel
    by_text = polyir.explain(str(MATMUL), "mark-parallel{loops=k}", target="cuda:sm_80")
    assert by_text.target == "cuda:sm_80" and by_text.steps[0].title == "mark-parallel{loops=k}"
    by_list = polyir.explain(MATMUL.entry, [MarkParallel()])
    assert by_list.pipeline == "mark-parallel" and len(by_list.missed()) == 1
    assert polyir.explain(MATMUL, "").steps == ()


def test_failures_name_the_pass_and_those_before_it() -> None:
    with pytest.raises(PipelineError):
        polyir.explain(MATMUL, "mark-parallel,no-such-pass")
    with pytest.raises(PassError, match=r"pass 'mark-parallel\{loops=zz\}' failed \(passes run before it: "
                                        r"reschedule\)"):
        polyir.explain(MATMUL, "reschedule,mark-parallel{loops=zz}")
    with pytest.raises(TypeError, match="not int"):
        polyir.explain(3, "mark-parallel")
