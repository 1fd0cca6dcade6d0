"""The greedy fusion policy: which producer goes into which consumer, at what depth.

``plan_and_fuse(function, ctx, options)`` visits the nests in order; for each
consumer it tries its producers (nearest first) at every depth of the
consumer's outer loop chain, ranks the candidates with the cost model
(``polyir.fusion.cost``: traffic saved, work repeated, working set against
the target's cache), and applies the best one whose fused program passes the
value-based check (the slice is the proposal; the check is the proof). After
a fusion the graph is rebuilt and the scan starts again, so chains cascade
(an element-wise chain becomes one nest; a normalisation's mean, variance and
scaling become one nest per row; an epilogue moves into the producing matmul
after its reduction loop).

Every fusion becomes a :class:`FusionStep` (printed as the explicit
``fuse-nests{producer=S3 consumer=S7 depth=2}`` that replays it), and every
producer-consumer pair left unfused gets a remark with the reason: the
dependence and its witness, or the cost.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

import islpy as isl

from polyir.errors import IllegalTransform
from polyir.fusion.cost import DEFAULT_TOLERANCE, Estimate, decide, estimate
from polyir.fusion.graph import NestGraph
from polyir.fusion.producer_consumer import fuse_into, observable_buffers, window, window_scop
from polyir.fusion.reuse import contractions, reuse_lost
from polyir.ir.affine import Aff
from polyir.ir.canonical import CanonicalForm, canonical_form, transfer
from polyir.ir.names import names_in
from polyir.ir.nodes import Assign, For, Function, Node
from polyir.ir.walk import buffer_accesses, loads, walk_nodes
from polyir.polyhedral.extract import Scop, affine_index
from polyir.polyhedral.footprint import Footprints, footprints
from polyir.polyhedral.slices import Slice, SliceError, compute_slice, loop_chain
from polyir.target import Target
from polyir.tiling.levels import _windowed


@dataclass(frozen=True)
class FusionStep:
    """One applied fusion: nests named by a statement they hold."""

    producer: str
    consumer: str
    depth: int
    reason: str = ""

    def __str__(self) -> str:
        return f"fuse-nests{{producer={self.producer} consumer={self.consumer} depth={self.depth}}}"


@dataclass(frozen=True)
class FusionOptions:
    """``max_depth``: deepest fusion tried (0: no limit); ``tolerance``: extra
    producer work accepted; ``sizes``: symbol values for the estimates."""

    max_depth: int = 0
    tolerance: float = DEFAULT_TOLERANCE
    sizes: dict[str, int] = field(default_factory=dict)


@dataclass
class FusionReport:
    """What the policy did: the steps in order and the pairs it left, with why."""

    steps: list[FusionStep] = field(default_factory=list)
    unfused: dict[tuple[str, str], str] = field(default_factory=dict)

    @property
    def pipeline(self) -> str:
        """The explicit steps as a pipeline string that replays the plan."""
        return ",".join(str(s) for s in self.steps)


def working_set(scop: Scop, nest: int, depth: int, sizes: dict[str, int], device: str,
                only: tuple[str, ...] = (), per_iteration: int = 1,
                known: dict[tuple[int, int], Footprints] | None = None) -> tuple[int, int]:
    """``(bytes, elements of only)``: what one iteration of nest ``nest``'s first
    ``depth`` loops touches in ``scop`` (footprint boxes, outer variables at 0),
    ``per_iteration`` times (a producer slice runs its chain body that often).
    ``known``: footprints of ``scop`` already computed, by ``(nest, depth)``
    (filled in as they are computed)."""
    known = {} if known is None else known
    found = known.get((nest, depth))
    if found is None:
        found = known[(nest, depth)] = footprints(scop, nest, depth)
    members = scop.statements_in_nest(nest)
    env = {v: 0 for v in members[0].loop_vars[:depth]}
    env.update({p: sizes.get(p, 64) for p in scop.params})
    total, wanted = 0, 0
    buffers = scop.function.buffers
    for name, foot in found.items():
        count = 1
        for low, high in foot.box:
            try:
                count *= max(0, high.evaluate(env) - low.evaluate(env) + 1)
            except KeyError:
                count *= 64
        count *= per_iteration
        total += count * buffers[name].dtype.storage_bytes(device)
        if name in only:
            wanted += count
    return total, wanted


def _slice_points(piece: Slice, sizes: dict[str, int]) -> int:
    """Producer chain iterations per consumer iteration (1 + the recompute, at least 1)."""
    del sizes
    return max(1, round(1 + piece.recompute))


def _candidates(function: Function, producer: int, consumer: int, options: FusionOptions) -> list[int]:
    node = function.body[consumer]
    assert isinstance(node, For)
    deepest = len(loop_chain(node))
    if options.max_depth:
        deepest = min(deepest, options.max_depth)
    return list(range(deepest, 0, -1))


_KEPT = Estimate(0, 0, 0.0, 0, 0, 0)
"""What any depth of a pair whose producer must stay is worth: no bytes saved."""


def try_pair(function: Function, producer: int, consumer: int, target: Target, ctx: isl.Context,
             options: FusionOptions) -> tuple[Function | None, FusionStep | None, str]:
    """The best legal, profitable fusion of one pair: ``(fused function, step,
    reason)``; ``(None, None, why not)`` when there is none."""
    graph = NestGraph(function)
    names = (graph.nests[producer].name, graph.nests[consumer].name)
    device = "cuda" if target.kind == "cuda" else "cpu"
    ranked: list[tuple[tuple[float, int], int, Estimate]] = []
    reasons: list[str] = []
    known: dict[tuple[int, int], Footprints] = {}   # the producer's boxes serve every depth
    tolerance = options.tolerance
    too_shallow: set[int] = set()
    if device == "cpu" and has_contraction(function.body[producer]):
        tolerance = min(tolerance, CONTRACTION_TOLERANCE)
        _, written = buffer_accesses((function.body[producer],))
        windowed = has_contraction(function.body[producer], windowed=True)
        if accumulates_over(function.body[consumer], written, 1 if windowed else 2) \
                and (windowed or shared_operand(function.body[producer])):
            too_shallow = splitting_depths(function.body[producer])
    removed = _producer_removable(function, producer, consumer)
    scop = None
    for depth in _candidates(function, producer, consumer, options):
        # the refusals that do not depend on the slice come first: nothing computed for them
        if depth in too_shallow:
            reasons.append(f"depth {depth}: the convolution's output channels would run one at a "
                           f"time in the fused loops: no register tile across them")
            continue
        if not removed:     # the producer stays: no traffic saved at any depth
            reasons.append(f"depth {depth}: {decide(_KEPT, target, tolerance).reason}")
            continue
        if scop is None:
            scop = window_scop(function, producer, consumer, ctx)
            last = len(scop.function.body) - 1
        try:
            piece = compute_slice(scop, 0, last, depth, options.sizes)
        except SliceError as error:
            reasons.append(f"depth {depth}: {error}")
            continue
        try:
            ws_consumer, _ = working_set(scop, last, depth, options.sizes, device, known=known)
            chain = len(piece.chain)
            ws_producer, shrunk = working_set(scop, 0, chain, options.sizes, device, piece.buffers,
                                              _slice_points(piece, options.sizes), known)
        except (ValueError, isl.Error) as error:
            reasons.append(f"depth {depth}: no footprint ({error})")
            continue
        candidate = estimate(function, function, consumer, depth, piece.buffers, removed,
                             piece.recompute, ws_consumer + ws_producer, shrunk, options.sizes, device)
        lost, note = reuse_lost(function, producer, consumer, depth, piece, target, options.sizes, device)
        candidate = replace(candidate, reuse_lost=lost, reuse_note=note)
        verdict = decide(candidate, target, tolerance)
        if not verdict.accepted:
            reasons.append(f"depth {depth}: {verdict.reason}")
            continue
        ranked.append(((-candidate.storage_reduction, -depth), depth, candidate))
    ranked.sort(key=lambda item: item[0])
    for _, depth, candidate in ranked:
        try:
            fused = fuse_into(function, producer, consumer, depth, ctx, check=True, scop=scop)
        except IllegalTransform as error:
            witness = f"; witness: {error.witness}" if error.witness else ""
            reasons.append(f"depth {depth}: {error.message}{witness}")
            continue
        verdict = decide(candidate, target, tolerance)
        return fused.function, FusionStep(names[0], names[1], depth, verdict.reason), ""
    return None, None, "; ".join(reasons) or "no depth to fuse at"


CONTRACTION_TOLERANCE = 0.0
"""Extra work accepted when the producer is a contraction (a convolution, a
matrix product; :func:`has_contraction`) on the CPU: none. A recomputed
slice of a contraction is a sum per output element inside the consumer's
loops, which no register tile fits: ResNet's stem (7x7 convolution, batch
norm, ReLU) fused into its 3x3 max pool repeated 21% of the convolution and
ran 3x slower than unfused (one thread, 224x224: 37 ms against 12.6 ms for
eager); MobileNetV2's 1x1 expansion fused into the depthwise convolution per
row repeated 21% of it. Attention's scores are fused into softmax without
repeating any, so this costs them nothing."""


def _contraction_site(node: object) -> tuple[tuple[For, ...], Assign] | None:
    """The loops around the first contraction statement in ``node``, and it."""
    return next(iter(contractions(node)), None)


def has_contraction(node: object, windowed: bool = False) -> bool:
    """Does ``node`` hold a contraction (``X += A * B``)? With ``windowed``,
    only when its first one is a convolution's: an operand subscript combines
    two of its loops or scales one (``x[2*h + kh]``, ``levels._windowed``);
    not a matrix product's (attention's scores are fused into their softmax
    rows on purpose)."""
    site = _contraction_site(node)
    if site is None or not windowed:
        return site is not None
    path, stmt = site
    return _windowed([ld for ld in loads(stmt.value) if ld.buffer != stmt.buffer],
                     [loop.var for loop in path])


def _variables(indices: object) -> set[str]:
    found: set[str] = set()
    for index in indices:  # type: ignore[attr-defined]
        aff = affine_index(index)
        found |= set(aff.variables()) if aff is not None else set()
    return found


def _roles(stmt: Assign) -> tuple[set[str], set[str], set[str]] | None:
    """``(output loops, loops of operand A, loops of operand B)`` of a
    contraction statement (its first two operand buffers)."""
    operands = [ld for ld in loads(stmt.value) if ld.buffer != stmt.buffer]
    buffers = list(dict.fromkeys(ld.buffer for ld in operands))[:2]
    if len(buffers) < 2:
        return None
    a, b = (set().union(*(_variables(ld.indices) for ld in operands if ld.buffer == name))
            for name in buffers)
    return _variables(stmt.indices), a, b


def accumulates_over(node: object, buffers: set[str], dimensions: int = 1) -> bool:
    """Does ``node`` accumulate values of ``buffers`` over at least
    ``dimensions`` loops (a statement reading the element it writes, ``X = X
    op e`` or a NaN-propagating max written as a ``select``, and reading one
    of ``buffers`` with that many loops the written element does not move
    with: a pooling window or a depthwise convolution's, 2; a row sum, 1;
    not a residual add after another convolution's sum, 0)?"""
    for stmt in walk_nodes((node,)):  # type: ignore[arg-type]
        if isinstance(stmt, Assign):
            read = list(loads(stmt.value))
            written = _variables(stmt.indices)
            if any(ld.buffer == stmt.buffer and ld.indices == stmt.indices for ld in read) \
                    and any(ld.buffer in buffers and len(_variables(ld.indices) - written) >= dimensions
                            for ld in read):
                return True
    return False


def shared_operand(node: object) -> bool:
    """Is one operand of the first contraction of ``node`` indexed by none of
    the other's output loops (weights: a 1x1 convolution's, a linear
    layer's; also attention's ``q . k`` at one head, which is why the callers
    ask for a two-dimensional window too: a pool or a depthwise convolution
    after a 1x1 convolution, not softmax after scores)?"""
    site = _contraction_site(node)
    roles = _roles(site[1]) if site is not None else None
    if roles is None:
        return False
    out, a, b = roles
    return not (a & b & out)


def splitting_depths(node: object) -> set[int]:
    """The fusion depths at which the first contraction of ``node`` would
    keep no register tile: the loops inside the depth no longer hold two
    output loops that one operand uses and the other does not (a
    convolution's output channel, which only the weights use, and its
    output width, which only the input uses). Fused at such a depth into a
    consumer that accumulates over its results (a pooling window;
    :func:`accumulates_over`), the convolution runs one output channel at a
    time, a sum of vectors no register tile can reuse weights across
    (ResNet's stem, its 7x7 convolution fused into the max pool per channel:
    2.2x eager's time; not fused: 0.3x). Fused at the batch loop the
    channels stay inside, so that depth is kept (a batch of 8 images of a
    small CNN: 0.69 ms fused per image, 1.0 ms not)."""
    site = _contraction_site(node)
    roles = _roles(site[1]) if site is not None else None
    if site is None or roles is None:
        return set()
    path = site[0]
    out, a, b = roles
    found = set()
    for depth in range(1, len(path) + 1):
        inner = [loop.var for loop in path[depth:] if loop.var in out]
        if not (any(v in a - b for v in inner) and any(v in b - a for v in inner)):
            found.add(depth)
    return found


def _producer_removable(function: Function, producer: int, consumer: int) -> bool:
    """Whether the producer nest can go once fused (what it writes is observed
    by no other node), as ``fuse_into`` decides."""
    observed = observable_buffers(function, producer, consumer)
    _, writes = buffer_accesses((function.body[producer],))
    between_reads, _ = buffer_accesses(function.body[producer + 1:consumer])
    return not (writes & observed) and not (writes & between_reads)


def pair_form(function: Function, producer: int, consumer: int) -> CanonicalForm:
    """The pair's window (see ``producer_consumer.window``) up to names, with the
    buffers observed outside it marked: two pairs with equal keys get the same
    decision (the slice, the estimates and the equivalence proof all look at the
    window alone)."""
    nodes = [function.body[k] for k in window(function, producer, consumer)]
    return canonical_form(function, nodes, {"observed": observable_buffers(function, producer, consumer)})


_Decided = tuple[int | None, str, tuple[CanonicalForm, Node, bool] | None]
"""A pair's decision: the depth (``None``: not fused), the reason (names
canonical) and, when fused, the pair's form, the fused consumer and whether
the producer went."""


def _decide_pair(function: Function, producer: int, consumer: int, target: Target, ctx: isl.Context,
                 options: FusionOptions, decided: dict[str, _Decided]
                 ) -> tuple[Function | None, FusionStep | None, str]:
    """:func:`try_pair`, or the decision already taken for a pair that is the same up
    to names (a stack of identical layers asks isl once, not once per layer): its
    fused consumer, renamed (``polyir.ir.canonical.transfer``; the slice, the
    loops isl generated for it and the proof all look at the window alone)."""
    form = pair_form(function, producer, consumer)
    known = decided.get(form.key)
    if known is None:
        fused, step, why = try_pair(function, producer, consumer, target, ctx, options)
        result = None
        if fused is not None:
            removed = len(fused.body) == len(function.body) - 1
            result = (form, fused.body[consumer - removed], removed)
        decided[form.key] = (step.depth if step else None,
                             form.canonical(step.reason if step else why), result)
        return fused, step, why
    depth, text, result = known
    if depth is None or result is None:
        return None, None, form.actual(text)
    first, node, removed = result
    graph = NestGraph(function)
    names = (graph.nests[producer].name, graph.nests[consumer].name)
    body = list(function.body)
    body[consumer] = transfer((node,), first, form, names_in(function))[0]
    if removed:
        del body[producer]
    return replace(function, body=tuple(body)), FusionStep(names[0], names[1], depth, form.actual(text)), ""


def plan_and_fuse(function: Function, target: Target, ctx: isl.Context,
                  options: FusionOptions | None = None) -> tuple[Function, FusionReport]:
    """Fuse greedily (see the module docstring); returns the new function and the report."""
    options = options or FusionOptions()
    report = FusionReport()
    tried: dict[tuple[int, int], str] = {}
    alive: list[object] = []   # keeps the nodes of ``tried``'s keys alive (ids stay unique)
    decided: dict[str, _Decided] = {}
    changed = True
    while changed:
        changed = False
        graph = NestGraph(function)
        for consumer in range(len(graph.nests)):
            if not graph.nests[consumer].is_loop:
                continue
            for producer, _ in graph.producers(consumer):
                pair = (graph.nests[producer].name, graph.nests[consumer].name)
                key = (id(function.body[producer]), id(function.body[consumer]))
                if key in tried:
                    continue
                fused, step, why = _decide_pair(function, producer, consumer, target, ctx, options,
                                                decided)
                if fused is None:
                    tried[key] = why
                    alive.extend((function.body[producer], function.body[consumer]))
                    report.unfused[pair] = why
                    continue
                assert step is not None
                report.steps.append(step)
                report.unfused.pop((step.producer, step.consumer), None)
                function = fused
                changed = True
                break
            if changed:
                break
    live = {nest.name for nest in NestGraph(function).nests}
    report.unfused = {pair: why for pair, why in report.unfused.items()
                      if pair[0] in live and pair[1] in live}
    return function, report


__all__ = ["sibling_traversal_conflict", "FusionStep", "FusionOptions", "FusionReport", "pair_form", "plan_and_fuse", "try_pair",
           "working_set"]


def _strides(nest: For, depth: int, buffers: frozenset[str]) -> dict[str, set[str]]:
    """How the loop at ``depth`` of ``nest``'s chain walks each of ``buffers``:
    ``"unit"`` (it indexes only the last dimension), ``"strided"`` (an outer
    dimension), per buffer; subscripts it does not use add nothing."""
    var = loop_chain(nest, depth)[-1].var
    found: dict[str, set[str]] = {}
    accesses: list[tuple[str, tuple[object, ...]]] = []
    for node in walk_nodes((nest,)):
        if isinstance(node, Assign):
            accesses.append((node.buffer, node.indices))
            accesses.extend((ld.buffer, ld.indices) for ld in loads(node.value))
    for buffer, indices in accesses:
        if buffer not in buffers:
            continue
        uses = [d for d, index in enumerate(indices)
                if isinstance(index, Aff) and var in index.variables()]
        if uses:
            found.setdefault(buffer, set()).add("unit" if uses == [len(indices) - 1] else "strided")
    return found


def sibling_traversal_conflict(a: For, b: For, depth: int, shared: frozenset[str]) -> str | None:
    """Why sibling fusion of ``a`` and ``b`` at ``depth`` would cost more than the
    reuse it gains, or ``None``: the innermost shared loop walks a shared buffer
    along its rows in one nest and down its columns in the other (``x1[i] +=
    A[i, j] * y1[j]`` and ``x2[i] += A[j, i] * y2[j]``), so one of the two loses
    the loop order ``auto-tile`` would give it alone (a unit-stride inner loop
    or rows of independent sums)."""
    left, right = _strides(a, depth, shared), _strides(b, depth, shared)
    for buffer in sorted(shared):
        kinds = left.get(buffer, set()), right.get(buffer, set())
        if ("unit" in kinds[0] and "strided" in kinds[1]) or ("strided" in kinds[0] and "unit" in kinds[1]):
            return (f"the nests walk {buffer} in different orders at depth {depth} (along its "
                    f"rows in one, down its columns in the other): fused, one would lose its "
                    f"loop order")
    return None
