"""``polyir.explain(ir, pipeline)``: what each pass of a pipeline did, and why not.

The pipeline runs one pass at a time on one :class:`~polyir.context.PassContext`
(the same passes, options, target and analysis cache as ``polyir.transform``),
and the :class:`Explanation` keeps, per pass, its remarks (what it did not do
and why: the loop that stayed sequential and the dependence with two
instances it would reorder, the nests left unfused, the band left untiled)
and the changes seen in the IR (nests fused, loops marked parallel, buffers
shrunk; :mod:`polyir.report.changes`). A pass that changed nothing and said
nothing is reported as such.
"""
from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from polyir.context import PassContext, Remark
from polyir.ir.nodes import Function, Module
from polyir.report.changes import FunctionChanges, compare
from polyir.target import Target, resolve


@dataclass(frozen=True)
class Step:
    """One pass of an explained pipeline."""

    title: str                          # the pass as pipeline text, with its options
    remarks: tuple[Remark, ...]
    changes: tuple[FunctionChanges, ...]
    seconds: float

    @property
    def changed(self) -> bool:
        return any(not c.identical for c in self.changes)

    def change_lines(self) -> list[str]:
        lines: list[str] = []
        for change in self.changes:
            prefix = f"{change.function}: " if len(self.changes) > 1 else ""
            lines.extend(prefix + line for line in change.lines())
        return lines


def _why_lines(remark: Remark) -> tuple[str, str]:
    """The remark's reason and its witness (split off onto a line of its own)."""
    why, _, witness = remark.why.partition("; witness: ")
    return why, witness


@dataclass(frozen=True)
class Explanation:
    """The report of :func:`explain`: ``steps`` (one :class:`Step` per pass),
    ``before`` and ``after`` (the modules). Iterating gives every remark in
    order; ``missed()`` the ones saying what was not done."""

    pipeline: str
    target: str
    before: Module
    after: Module
    steps: tuple[Step, ...]

    @property
    def remarks(self) -> list[Remark]:
        return [r for step in self.steps for r in step.remarks]

    def __iter__(self) -> Iterator[Remark]:
        return iter(self.remarks)

    def __len__(self) -> int:
        return len(self.remarks)

    def missed(self, pass_name: str | None = None) -> list[Remark]:
        """The ``missed`` remarks (of one pass when named)."""
        return [r for r in self.remarks if r.kind == "missed"
                and (pass_name is None or r.pass_name == pass_name)]

    def _heading(self) -> str:
        names = ", ".join(f.name for f in self.before.functions if f.kind == "host")
        return f"explain {self.pipeline or '(empty pipeline)'} on {names} for {self.target}"

    def __repr__(self) -> str:
        from polyir.polyhedral.report import plural, short
        missed = len(self.missed())
        return short(f"<Explanation of {self.pipeline!r}: {plural(len(self.steps), 'pass', 'passes')}, "
                     f"{plural(len(self.remarks), 'remark')} ({missed} missed)>")

    def __str__(self) -> str:
        lines = [self._heading()]
        for number, step in enumerate(self.steps, 1):
            lines.append(f"{number}. {step.title}")
            changes = step.change_lines()
            for change in changes:
                lines.append(f"   changed: {change}")
            for remark in step.remarks:
                why, witness = _why_lines(remark)
                lines.append(f"   {remark.kind}: {remark.where}: {why}")
                if witness:
                    lines.append(f"       witness: {witness}")
            if not changes and not step.remarks:
                lines.append("   no change, no remark")
        return "\n".join(lines)

    def _repr_markdown_(self) -> str:
        parts = [f"**{self._heading()}**", ""]
        for number, step in enumerate(self.steps, 1):
            parts.append(f"{number}. `{step.title}`")
            for change in step.change_lines():
                parts.append(f"    - changed: {change}")
            for remark in step.remarks:
                why, witness = _why_lines(remark)
                parts.append(f"    - *{remark.kind}*: {remark.where}: {why}")
                if witness:
                    parts.append(f"        - witness: `{witness}`")
            if not step.change_lines() and not step.remarks:
                parts.append("    - no change, no remark")
        return "\n".join(parts)


def as_module(ir: Module | Function | str) -> Module:
    """``ir`` as a module: a function is wrapped, text is parsed (``ParseError``)."""
    if isinstance(ir, Module):
        return ir
    if isinstance(ir, Function):
        return Module((ir,))
    if isinstance(ir, str):
        from polyir.ir.parser import parse
        return parse(ir)
    raise TypeError(f"expected polyir IR (a Module, a Function or IR text), not {type(ir).__name__}")


def explain(ir: Module | Function | str, pipeline: str | Sequence[Any],
            target: Target | str | None = None) -> Explanation:
    """Run ``pipeline`` on ``ir`` pass by pass and report each pass's remarks and
    changes (see the module docstring).

    ``ir``: a module, a function or IR text; ``pipeline``: a pipeline string
    (``"reschedule,mark-parallel"``) or pass instances; ``target``: what the
    passes compile for (default: the host CPU). Raises ``VerifyError`` for
    invalid input, ``PipelineError`` for a malformed pipeline and ``PassError``
    (naming the pass and those before it) when a pass fails.
    """
    from polyir.errors import PassError
    from polyir.ir.verifier import verify
    from polyir.passes import format_pass, parse_pipeline, transform
    module = as_module(ir)
    passes = parse_pipeline(pipeline) if isinstance(pipeline, str) else list(pipeline)
    verify(module)
    ctx = PassContext(resolve(target))
    steps: list[Step] = []
    current = module
    for instance in passes:
        title = format_pass(instance)
        seen = len(ctx.remarks)
        start = time.perf_counter()
        try:
            result = transform(current, [instance], ctx=ctx)
        except PassError as error:
            raise PassError(title, [s.title for s in steps], error.cause) from error.cause
        steps.append(Step(title, tuple(ctx.remarks[seen:]), tuple(compare(current, result)),
                          time.perf_counter() - start))
        current = result
    text = pipeline if isinstance(pipeline, str) else ",".join(s.title for s in steps)
    return Explanation(text, ctx.target.name, module, current, tuple(steps))


__all__ = ["explain", "Explanation", "Step", "as_module"]
