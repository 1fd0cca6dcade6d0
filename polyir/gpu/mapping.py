"""GPU mapping: outline kernels, map parallel loops to blocks and threads.

``map_module(module, options)`` turns every top-level node of every host
function into one ``kernel`` function and one ``Launch`` in the host, so the
host body becomes a sequence of launches (existing ``Launch`` nodes and
kernels are kept). For one top-level nest:

* The *band*: the outermost perfectly nested loops marked ``parallel`` (at
  most 3) whose bounds depend on size symbols only.
* **Flat mode** (nothing parallel below the band, no fragments, no shared
  buffer): the band is tiled by the block sizes; each thread runs one band
  iteration ``i = lo + step * (B * block + thread)`` under a guard
  ``if (i < N, ...)``; the rest of the nest runs sequentially in that thread.
  A nest with no parallel loop at all becomes a *single-thread kernel*
  (grid 1, block 1): correct, slow, and it keeps everything on the GPU.
* **Cooperative mode** (parallel loops below the band, fragment operations,
  or buffers placed in shared memory): each band iteration is one block.
  Inside, parallel loop nests become *phases* distributed cyclically over the
  block's threads (``for i = lo + s*t to hi step s*T``); sequential loops and
  ``if``s around phases run in every thread (their bounds are uniform);
  other statements run in thread 0 only; fragment operations run in every
  thread (they are warp-collective; blocks of fragment nests are one warp).
  Barriers are placed by ``polyir.gpu.barriers`` wherever two phases may
  touch the same shared or global element from different threads.

Local buffers used by one nest only move into its kernel: ``@shared`` ones
(or those named in ``options.shared``) as block-shared memory, ``@local`` and
scalar temporaries as per-thread registers (a scalar read outside phases in
cooperative mode becomes a shared scalar), fragments as fragments. Other
locals stay in the host and are passed to the kernels as global memory.

Kernel parameters are the buffers the nest uses (host parameters first) and
one explicit ``Symbol`` for every size symbol the kernel needs (in bounds or
in buffer shapes), so a kernel never derives sizes from arrays.
"""
from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from math import prod

from polyir.errors import CompileError
from polyir.gpu.barriers import BlockContext, schedule_block
from polyir.gpu.reductions import serialise_shared_reductions
from polyir.gpu.rewrite import (
    FRAGMENT_NODES,
    bound_variables,
    contains,
    contains_parallel_loop,
    fresh_name,
    guard,
    used_variables,
)
from polyir.ir.affine import Aff, Constraint, FloorDiv
from polyir.ir.nodes import Barrier, Buffer, For, Function, If, Launch, Module, Node, Symbol
from polyir.ir.types import MemorySpace
from polyir.ir.walk import buffers_used, substitute, walk_nodes
from polyir.target import Target, cuda

DEFAULT_BLOCKS = {0: (1, 1, 1), 1: (256, 1, 1), 2: (32, 8, 1), 3: (32, 4, 2)}


@dataclass(frozen=True)
class MapOptions:
    """Options of the mapping.

    ``block_sizes``: threads per block along x, y, z (missing ones are 1);
    empty means automatic (256; 32x8; 32x4x2 by the depth of the parallel
    nests; one warp for fragment nests). ``shared``: names of local buffers
    to place in shared memory. ``max_grid_dims``: at most this many band loops
    become grid dimensions. ``target``: the GPU's facts (warp size, threads
    per block, shared memory per block and its static limit); default sm_90.
    """

    block_sizes: tuple[int, ...] = ()
    shared: tuple[str, ...] = ()
    max_grid_dims: int = 3
    target: Target = field(default_factory=lambda: cuda(90))

    def __post_init__(self) -> None:
        if self.target.kind != "cuda":
            raise ValueError(f"GPU mapping needs a CUDA target, not {self.target.name}")
        if len(self.block_sizes) > 3 or any(b <= 0 for b in self.block_sizes):
            raise ValueError(f"block_sizes must be 1 to 3 positive ints, not {self.block_sizes}")
        if prod(self.block_sizes) > self.target.max_threads_per_block:
            raise ValueError(f"block_sizes {self.block_sizes} exceed "
                             f"{self.target.max_threads_per_block} threads per block")
        if not 0 <= self.max_grid_dims <= 3:
            raise ValueError(f"max_grid_dims must be 0..3, not {self.max_grid_dims}")


def map_module(module: Module, options: MapOptions | None = None,
               report: Callable[[str, str], None] | None = None) -> Module:
    """``module`` with every host function's nests outlined into mapped kernels.

    A parallel loop whose iterations reduce into shared elements is mapped as
    a serial loop (``polyir.gpu.reductions``); ``report(where, why)`` hears of
    each (default: a ``polyir`` warning)."""
    options = options or MapOptions()
    module = serialise_shared_reductions(module, report or _warn)
    taken = {f.name for f in module.functions}
    functions: list[Function] = []
    for function in module.functions:
        if function.kind != "host":
            functions.append(function)
            continue
        host, kernels = map_function(function, options, taken)
        functions.append(host)
        functions.extend(kernels)
    return Module(tuple(functions))


def _warn(where: str, why: str) -> None:
    warnings.warn(f"polyir gpu-map: {where}: {why}", RuntimeWarning, stacklevel=3)


def map_function(function: Function, options: MapOptions,
                 taken: set[str]) -> tuple[Function, list[Function]]:
    """The host function (a sequence of launches) and the kernels it launches."""
    groups = _group_top_level(function)
    users: dict[str, int] = {}
    for group in groups:
        if is_launch_code(group[0]):
            names = {a for n in walk_nodes(group) if isinstance(n, Launch) for a in n.args}
        else:
            names = buffers_used(group)
        for name in names:
            users[name] = users.get(name, 0) + 1
    host_locals = {b.name: b for b in function.locals}
    moved: set[str] = set()
    kernels: list[Function] = []
    body: list[Node] = []
    for group in groups:
        if is_launch_code(group[0]):
            body.append(group[0])
            continue
        own_locals = [host_locals[n] for n in sorted(buffers_used(group))
                      if n in host_locals and users[n] == 1]
        name = fresh_name(f"{function.name}_k{len(kernels)}", taken)
        if _is_premapped(group):
            nest = group[0]
            assert isinstance(nest, For)
            kernel, launch, kept_local, nonempty = _outline_premapped(function, nest, name,
                                                                      own_locals, options.target)
        else:
            kernel, launch, kept_local, nonempty = _outline(function, group, name, own_locals,
                                                            options)
        moved |= {b.name for b in own_locals} - kept_local
        kernels.append(kernel)
        body.extend(guard(nonempty, (launch,)))
    locals_left = tuple(
        b if b.space in (MemorySpace.GLOBAL, MemorySpace.LOCAL) else replace(b, space=MemorySpace.GLOBAL)
        for b in function.locals if b.name not in moved and users.get(b.name, 0) > 0)
    return replace(function, body=tuple(body), locals=locals_left), kernels


def _group_top_level(function: Function) -> list[tuple[Node, ...]]:
    """Top-level nodes, one group per kernel: each loop or ``if`` alone, runs of
    plain statements together, each ``Launch`` alone."""
    groups: list[tuple[Node, ...]] = []
    run: list[Node] = []
    for node in function.body:
        if isinstance(node, Barrier):
            raise CompileError(f"function '{function.name}': barrier outside a kernel")
        if isinstance(node, (For, If, Launch)):
            if run:
                groups.append(tuple(run))
                run = []
            groups.append((node,))
        else:
            run.append(node)
    if run:
        groups.append(tuple(run))
    for group in groups:
        if is_launch_code(group[0]) or _is_premapped(group):
            continue
        for node in walk_nodes(group):
            if isinstance(node, For) and node.mapping is not None:
                raise CompileError(f"function '{function.name}': loop '{node.var}' is mapped to "
                                   f"gpu={node.mapping} but is not part of a top-level nest of "
                                   f"block loops around thread loops")
            if isinstance(node, Launch) and len(group) > 1 or (
                    isinstance(node, Launch) and node is not group[0]):
                raise CompileError(f"function '{function.name}': launch of '{node.kernel}' "
                                   f"inside a loop or if")
    return groups


def is_launch_code(node: Node) -> bool:
    """True for a ``Launch``, or an ``if`` whose branches hold only launch code
    (the guard the mapping puts around launches whose grid may be empty)."""
    if isinstance(node, Launch):
        return True
    return isinstance(node, If) and all(is_launch_code(n) for n in (*node.then_body, *node.else_body))


# ------------------------------------------------------- already-mapped nests
def _is_premapped(group: tuple[Node, ...]) -> bool:
    """A top-level loop already mapped (``gpu=block.*``/``thread.*``) by hand."""
    return len(group) == 1 and isinstance(group[0], For) and group[0].mapping is not None


def _outline_premapped(function: Function, nest: For, name: str, own_locals: list[Buffer],
                       target: Target
                       ) -> tuple[Function, Launch, set[str], list[Constraint]]:
    """Outline a host nest mapped by hand: perfectly nested ``block`` loops, then
    ``thread`` loops with constant extents, then any body. The launch's grid
    and block are the loops' extents; locals keep their declared spaces."""
    where = f"function '{function.name}', loop '{nest.var}'"
    grid: list[Aff] = [Aff.const(1)] * 3
    block = [1, 1, 1]
    nonempty: list[Constraint] = []
    seen: set[str] = set()
    loop: Node = nest
    phase = "block"
    while isinstance(loop, For) and loop.mapping is not None:
        kind, axis = loop.mapping.split(".")
        if kind == "block" and phase == "thread":
            raise CompileError(f"{where}: gpu={loop.mapping} inside a thread loop")
        phase = kind
        if loop.mapping in seen:
            raise CompileError(f"{where}: gpu={loop.mapping} appears twice in one nest")
        seen.add(loop.mapping)
        if len(loop.lower) != 1 or len(loop.upper) != 1:
            raise CompileError(f"{where}: mapped loop '{loop.var}' needs a single lower and "
                               f"upper bound to fix its launch size")
        extent = (loop.upper[0] - loop.lower[0] + loop.step - 1) // loop.step
        dim = "xyz".index(axis)
        if kind == "block":
            if not extent.variables() <= set(function.symbols):
                raise CompileError(f"{where}: block loop '{loop.var}' has an extent that is not "
                                   f"a function of size symbols: {extent}")
            grid[dim] = extent
            if not _nonnegative(loop.upper[0] - loop.lower[0]):
                nonempty.append(Constraint(loop.upper[0], ">", loop.lower[0]))
                nonempty = list(dict.fromkeys(nonempty))
        else:
            if not extent.is_constant or extent.constant < 1:
                raise CompileError(f"{where}: thread loop '{loop.var}' needs a constant positive "
                                   f"extent (the block size), not {extent}")
            block[dim] = extent.constant
        if len(loop.body) != 1 or not isinstance(loop.body[0], For) or loop.body[0].mapping is None:
            break
        loop = loop.body[0]
    if phase != "thread":
        raise CompileError(f"{where}: a mapped nest needs thread loops perfectly nested inside "
                           f"its block loops")
    if prod(block) > target.max_threads_per_block:
        raise CompileError(f"{where}: {prod(block)} threads per block, at most "
                           f"{target.max_threads_per_block} on {target.name}")
    body = (nest,)
    params = _kernel_params(function, body, own_locals)
    kernel = Function(name, tuple(params), body, tuple(own_locals), kind="kernel")
    shared_total = sum(_buffer_bytes(b) for b in own_locals if b.space is MemorySpace.SHARED
                       and b.name not in _register_staged(kernel, target))
    launch = Launch(name, (grid[0], grid[1], grid[2]), (block[0], block[1], block[2]),
                    tuple(p.name for p in params),
                    _dynamic_shared(shared_total, target, where))
    return kernel, launch, set(), nonempty


# ------------------------------------------------------------------ outlining
@dataclass
class _Plan:
    band: list[For]
    inner: tuple[Node, ...]
    cooperative: bool
    block: tuple[int, int, int]
    has_fragments: bool
    shared_names: set[str] = field(default_factory=set)


def _band(group: tuple[Node, ...], symbols: set[str], limit: int) -> list[For]:
    band: list[For] = []
    nodes = group
    while len(band) < limit and len(nodes) == 1 and isinstance(nodes[0], For):
        loop = nodes[0]
        bound_vars = set().union(*(a.variables() for a in (*loop.lower, *loop.upper)))
        if not loop.parallel or not bound_vars <= symbols:
            break
        if loop.step != 1 and len(loop.lower) > 1:
            break
        band.append(loop)
        nodes = loop.body
    return band


def _parallel_depth(nodes: tuple[Node, ...]) -> int:
    """Deepest perfect nest of parallel loops (capped at 3) among the phases of
    ``nodes`` (looking through sequential loops and ifs)."""
    depth = 0
    for node in nodes:
        if isinstance(node, For) and node.parallel:
            d, loop = 1, node
            while d < 3 and len(loop.body) == 1 and isinstance(loop.body[0], For) \
                    and loop.body[0].parallel:
                d, loop = d + 1, loop.body[0]
            depth = max(depth, d)
        elif isinstance(node, For):
            depth = max(depth, _parallel_depth(node.body))
        elif isinstance(node, If):
            depth = max(depth, _parallel_depth(node.then_body), _parallel_depth(node.else_body))
    return depth


def _plan(function: Function, group: tuple[Node, ...], own_locals: list[Buffer],
          options: MapOptions) -> _Plan:
    symbols = set(function.symbols)
    band = _band(group, symbols, options.max_grid_dims)
    inner = band[-1].body if band else group
    has_fragments = contains(group, FRAGMENT_NODES)
    shared_names = {b.name for b in own_locals
                    if b.space is MemorySpace.SHARED or b.name in options.shared}
    cooperative = contains_parallel_loop(inner) or has_fragments or bool(shared_names)
    if options.block_sizes:
        sizes = tuple(options.block_sizes) + (1,) * (3 - len(options.block_sizes))
    elif cooperative:
        sizes = (options.target.warp_size, 1, 1) if has_fragments \
            else DEFAULT_BLOCKS[max(1, _parallel_depth(inner))]
    else:
        sizes = DEFAULT_BLOCKS[len(band)]
    if not cooperative:  # one band iteration per thread: unused dimensions must be 1
        sizes = tuple(size if dim < len(band) else 1 for dim, size in enumerate(sizes))
    warp = options.target.warp_size
    if has_fragments and sizes[0] % warp:
        raise CompileError(f"function '{function.name}': a nest with fragment operations needs "
                           f"block x size a multiple of {warp}, not {sizes[0]}")
    block = (sizes[0], sizes[1], sizes[2])
    return _Plan(band, inner, cooperative, block, has_fragments, shared_names)


def _outline(function: Function, group: tuple[Node, ...], name: str, own_locals: list[Buffer],
             options: MapOptions) -> tuple[Function, Launch, set[str], list[Constraint]]:
    """One kernel and its launch for ``group``; also the own locals left in the
    host and the conditions under which the grid is not empty (when they are
    not always true: a grid size must not be negative)."""
    plan = _plan(function, group, own_locals, options)
    names = used_variables(group) | set(function.buffers) | set(function.symbols)
    rank = max(1, len(plan.band), max((i + 1 for i, b in enumerate(plan.block) if b > 1), default=1))
    block_vars = [fresh_name(f"b{axis}", names) for axis in "xyz"[:rank]]
    thread_vars = [fresh_name(f"t{axis}", names) for axis in "xyz"[:rank]]

    grid: list[Aff] = [Aff.const(1)] * 3
    mapping: dict[str, Aff] = {}
    guards: list[Constraint] = []
    nonempty: list[Constraint] = []
    for k, loop in enumerate(plan.band):
        dim = len(plan.band) - 1 - k  # innermost band loop -> x
        step, lo = loop.step, loop.lower[0]
        if plan.cooperative:
            per_block = step
            base = lo + step * Aff.var(block_vars[dim])
        else:
            per_block = step * plan.block[dim]
            base = lo + step * (plan.block[dim] * Aff.var(block_vars[dim]) + Aff.var(thread_vars[dim]))
        grid[dim] = (loop.upper[0] - lo + per_block - 1) // per_block
        if not _nonnegative(loop.upper[0] - lo):
            nonempty.append(Constraint(loop.upper[0], ">", lo))
        mapping[loop.var] = base
        guards += [Constraint(base, "<", u) for u in loop.upper]
        guards += [Constraint(base, ">=", extra) for extra in loop.lower[1:]]
    inner = substitute(plan.inner, mapping)

    kernel_locals, kept_local = _kernel_locals(function, group, own_locals, plan)
    band_locals = [b for loop in plan.band for b in loop.locals]
    if plan.cooperative:
        # loop-scoped locals outside the phases are one per block: shared memory
        inner, hoisted = _hoist_block_locals(inner)
        kernel_locals += [_as_shared(b, function) for b in band_locals + hoisted]
    else:  # one band iteration per thread: its loop-scoped locals are the thread's own
        kernel_locals += [replace(b, space=MemorySpace.LOCAL) for b in band_locals]
    if plan.cooperative:
        private = {b.name for b in kernel_locals
                   if b.space in (MemorySpace.LOCAL, MemorySpace.FRAGMENT)}
        context = BlockContext(thread_vars=tuple(thread_vars), block=plan.block[:rank],
                               uniform=frozenset(function.symbols) | frozenset(block_vars),
                               private=frozenset(private))
        per_thread = schedule_block(inner, context)
        body = guard(guards, per_thread)
    else:
        body = guard(guards, inner)
    for dim in range(rank):
        body = (For(thread_vars[dim], (Aff.const(0),), (Aff.const(plan.block[dim]),), body,
                    mapping=f"thread.{'xyz'[dim]}"),)
    for dim in range(rank):
        body = (For(block_vars[dim], (Aff.const(0),), (grid[dim],), body,
                    mapping=f"block.{'xyz'[dim]}"),)
    # Outermost to innermost: block.z .. block.x, thread.z .. thread.x.

    params = _kernel_params(function, body, kernel_locals)
    kernel = Function(name, tuple(params), body, tuple(kernel_locals), kind="kernel")
    shared_total = sum(_buffer_bytes(b) for b in kernel_locals if b.space is MemorySpace.SHARED
                       and b.name not in _register_staged(kernel, options.target))
    launch = Launch(name, (grid[0], grid[1], grid[2]), plan.block, tuple(p.name for p in params),
                    _dynamic_shared(shared_total, options.target, f"function '{function.name}'"))
    return kernel, launch, kept_local, nonempty


def _register_staged(kernel: Function, target: Target) -> set[str]:
    """The shared tiles of ``kernel`` that the NVPTX lowering keeps in
    registers instead (``polyir.ptx.staging``): they take no shared memory."""
    if target.kind != "cuda":
        return set()
    from polyir.ptx.staging import register_staged  # the backend's own rule
    return set(register_staged(kernel, target.sm))


def _dynamic_shared(total: int, target: Target, where: str) -> int:
    """The launch's dynamic shared bytes (0 when the static limit suffices);
    ``CompileError`` when the kernel needs more than a block may have."""
    if total > target.shared_memory_bytes:
        raise CompileError(f"{where}: the kernel needs {total} bytes of shared memory, more than "
                           f"the {target.shared_memory_bytes} a block may use on {target.name}")
    return total if total > target.static_shared_bytes else 0


def _nonnegative(extent: Aff) -> bool:
    """True when ``extent`` (in size symbols) is >= 0 for all symbols >= 0."""
    if extent.constant < 0:
        return False
    for atom, coefficient in extent.terms:
        if coefficient < 0:
            return False
        if isinstance(atom, FloorDiv) and not _nonnegative(atom.expr):
            return False
    return True


def _kernel_locals(function: Function, group: tuple[Node, ...], own_locals: list[Buffer],
                   plan: _Plan) -> tuple[list[Buffer], set[str]]:
    """Locals that move into the kernel (with their new space), and the names of
    own locals that stay in the host as global memory.

    The mapping runs the iterations of parallel loops at the same time, so a
    local that each iteration uses as scratch must be private to what runs one
    iteration: per thread (``@local``) in flat mode, or when every use is in
    one phase; per block (``@shared``) otherwise. Locals with symbolic shapes
    stay global (shared by all blocks and threads)."""
    moved: list[Buffer] = []
    kept: set[str] = set()
    one_phase = _single_phase_buffers(plan.inner) if plan.cooperative else None
    for b in own_locals:
        constant = all(d.is_constant for d in b.shape)
        if b.space is MemorySpace.FRAGMENT:
            moved.append(b)
        elif b.name in plan.shared_names:
            if not constant:
                raise CompileError(f"function '{function.name}': buffer '{b.name}' has a "
                                   f"symbolic shape and cannot live in shared memory")
            moved.append(replace(b, space=MemorySpace.SHARED))
        elif not constant:
            kept.add(b.name)
        elif one_phase is None or b.name in one_phase:
            moved.append(replace(b, space=MemorySpace.LOCAL))
        else:
            moved.append(replace(b, space=MemorySpace.SHARED))
    return moved, kept


def _single_phase_buffers(nodes: tuple[Node, ...]) -> set[str]:
    """Buffers touched inside exactly one phase (parallel loop at block level)
    and nowhere else in ``nodes``."""
    phases: dict[str, int] = {}
    outside: set[str] = set()

    def visit(items: tuple[Node, ...]) -> None:
        for node in items:
            if isinstance(node, For) and node.parallel:
                for name in buffers_used((node,)):
                    phases[name] = phases.get(name, 0) + 1
            elif isinstance(node, For):
                visit(node.body)
            elif isinstance(node, If):
                visit(node.then_body)
                visit(node.else_body)
            else:
                outside.update(buffers_used((node,)))

    visit(nodes)
    return {name for name, count in phases.items() if count == 1} - outside


def _hoist_block_locals(nodes: tuple[Node, ...]) -> tuple[tuple[Node, ...], list[Buffer]]:
    """``nodes`` with the loop-scoped locals of loops that are not parallel phases
    (which every thread of the block runs) taken out, and those locals. A
    parallel phase loop keeps its locals and those inside it (per thread)."""
    hoisted: list[Buffer] = []

    def visit(items: tuple[Node, ...]) -> tuple[Node, ...]:
        out: list[Node] = []
        for node in items:
            if isinstance(node, For) and not node.parallel and node.mapping is None:
                moved = [b for b in node.locals if b.space is not MemorySpace.FRAGMENT]
                hoisted.extend(moved)
                node = replace(node, locals=tuple(b for b in node.locals if b not in moved),
                               body=visit(node.body))
            elif isinstance(node, If):
                node = replace(node, then_body=visit(node.then_body), else_body=visit(node.else_body))
            out.append(node)
        return tuple(out)

    return visit(nodes), hoisted


def _as_shared(buffer: Buffer, function: Function) -> Buffer:
    if not all(d.is_constant for d in buffer.shape):
        raise CompileError(f"function '{function.name}': loop-scoped local '{buffer.name}' is shared "
                           f"by the threads of a block but has a symbolic shape "
                           f"{[str(d) for d in buffer.shape]}; shared memory needs constant sizes")
    return replace(buffer, space=MemorySpace.SHARED)


def _kernel_params(function: Function, body: tuple[Node, ...],
                   kernel_locals: list[Buffer]) -> list[Buffer | Symbol]:
    local_names = {b.name for b in kernel_locals}
    local_names |= {b.name for n in walk_nodes(body) if isinstance(n, For) for b in n.locals}
    used = buffers_used(body) - local_names
    buffers = [p for p in function.params if isinstance(p, Buffer) and p.name in used]
    buffers += [replace(b, space=MemorySpace.GLOBAL) for b in function.locals
                if b.name in used and b.name not in local_names]
    missing = used - {b.name for b in buffers}
    if missing:
        raise CompileError(f"function '{function.name}': unknown buffers {sorted(missing)}")
    needed = used_variables(body) - bound_variables(body)
    for b in [*buffers, *kernel_locals]:
        for dim in b.shape:
            needed |= dim.variables()
    unknown = needed - set(function.symbols)
    if unknown:
        raise CompileError(f"function '{function.name}': variables {sorted(unknown)} are "
                           f"neither loop variables nor size symbols")
    symbols = [Symbol(s) for s in function.symbols if s in needed]
    return [*buffers, *symbols]


def _buffer_bytes(buffer: Buffer) -> int:
    count = prod(d.constant for d in buffer.shape) if buffer.shape else 1
    return count * buffer.dtype.storage_bytes("cuda")


__all__ = ["MapOptions", "map_module", "map_function", "is_launch_code"]
