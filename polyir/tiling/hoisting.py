"""Where ``auto-tile`` makes each read-only scratchpad copy: the hoisting
policy over ``polyir.tiling.hoist``'s mechanism (one copy before the outermost
loop that does not move it, within ``sizes.hoist_budget``)."""
from __future__ import annotations

import math
from collections.abc import Callable

from polyir.errors import PolyirError
from polyir.ir.nodes import Assign, Function
from polyir.ir.walk import walk_nodes
from polyir.passes import format_pipeline
from polyir.target import Target
from polyir.tiling.bands import enclosing_loops
from polyir.tiling.hoist import find_copy, hoist_copy, kept_loops
from polyir.tiling.levels import largest_trip_count
from polyir.tiling.passes import HoistCopy
from polyir.tiling.sizes import hoist_budget

Remark = Callable[[str, str, str], None]


def hoist_copies(function: Function, copies: set[str], target: Target, where: str,
                 remark: Remark) -> tuple[Function, list[HoistCopy]]:
    """``function`` with each read-only copy among the statements ``copies``
    (a plan's ``copies``/``pack`` scratchpads) made once before the outermost
    loop around it that does not move it (``polyir.tiling.hoist``), when the
    loops it leaves would repeat it at least twice (their constant trip
    counts; unknown counts are taken as repeating) and the hoisted local fits
    ``sizes.hoist_budget`` (see there why that bound). The loop is chosen
    outermost first (the most repetitions saved); a loop the copy's start
    moves with is no candidate, nor are those above it only by way of one.
    A copy left in place although loops around it repeat it gets a
    ``missed`` remark saying why (too large, or the mechanism's refusal: a
    source written in the loop, a copy that moves with it). Also the
    ``hoist-copy`` steps applied."""
    steps: list[HoistCopy] = []
    for name in sorted(copies):
        statement = next((n for n in walk_nodes(function.body)
                          if isinstance(n, Assign) and n.name == name), None)
        if statement is None:
            continue
        try:
            at, copy = find_copy(function, statement.buffer)
        except PolyirError:
            continue  # a copy-back, or a copy the later steps versioned
        chain = enclosing_loops(function, at.var) + [at]
        reasons: list[str] = []
        for position, loop in enumerate(chain):
            below = chain[position:]
            kept = {k.var for k in kept_loops(below, copy)}
            if loop.var in kept:
                continue
            counts = [largest_trip_count(p) for p in below if p.var not in kept]
            known = [c for c in counts if c is not None]
            if len(known) == len(counts) and math.prod(known) < 2:
                continue
            try:
                hoisted, made = hoist_copy(function, statement.buffer, loop.var)
            except PolyirError as error:
                reasons.append(f"not out of loop '{loop.var}': {error}")
                continue
            size = math.prod(extent.constant if extent.is_constant else -1 for extent in made.shape)
            element = function.buffers[copy.source].dtype.storage_bytes()
            budget = hoist_budget(target)
            if size < 0 or size * element > budget:
                reasons.append(f"not out of loop '{loop.var}': the hoisted copy would hold "
                               f"{'a symbolic number of' if size < 0 else size * element} bytes, "
                               f"more than half the last cache level ({budget})")
                continue
            function = hoisted
            step = HoistCopy(statement.buffer, loop.var)
            steps.append(step)
            repeats = str(math.prod(known)) if len(known) == len(counts) else "an unknown number of"
            remark(where, f"copy '{statement.buffer}' of {copy.source} made once before loop "
                          f"'{loop.var}' ({size * element} bytes, one block per iteration of "
                          f"{', '.join(made.kept) or 'no loop'}) instead of {repeats} times: "
                          f"{format_pipeline([step])}", "applied")
            break
        else:
            if reasons:
                remark(where, f"copy '{statement.buffer}' of {copy.source} not hoisted: "
                              f"{'; '.join(reasons)}", "missed")
    return function, steps


__all__ = ["hoist_copies"]
