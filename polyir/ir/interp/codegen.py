"""Compile a polyir Module to Python source: one Python function per IR function.

Generated code works on flat memoryviews with row-major strides:

* host function ``f``   -> ``_host_f(_rt, <buffer memoryviews>, <symbols>)``
* kernel ``k``          -> ``_kern_k(_rt, _grid, _block, <buffers>, <symbols>)``
  which defines the per-thread closure ``_thread`` and hands it to
  ``_rt.run_grid`` (see ``gpu.py``). A GPU-mapped loop nest directly in a host
  function compiles to the same shape inline: the grid is the trip counts of
  its ``block.*`` loops, the block the trip counts of its ``thread.*`` loops.
* Inside GPU code a mapped loop binds ``v = lo + id * step`` and runs when
  ``v < hi``; ``barrier`` is ``yield <node>`` and a fragment op is
  ``yield (<op>, operands...)``, so a thread with barriers is a generator.
* Parallel loops iterate over ``_par(lo, hi, step)``: ``range``, reversed or
  shuffled according to ``parallel_order``.
"""
from __future__ import annotations

from polyir.ir.interp.emit import STORAGE_FORMAT, Block, Names, aff_code, bound_code, constraint_code
from polyir.ir.interp.exprs import BufferInfo, ExprCompiler, LoopContext, Val
from polyir.ir.nodes import (
    Assign,
    Barrier,
    Buffer,
    For,
    FragmentFill,
    FragmentLoad,
    FragmentMMA,
    FragmentStore,
    Function,
    If,
    Launch,
    Module,
    Node,
)
from polyir.ir.types import DType, MemorySpace
from polyir.ir.walk import FRAGMENT_NODES
from polyir.ir.walk import buffers_used as walk_buffers_used

_AXES = {"x": 0, "y": 1, "z": 2}
_IDS = {"block": ("_bx", "_by", "_bz"), "thread": ("_tx", "_ty", "_tz")}
_SIZES = {"block": ("_gx", "_gy", "_gz"), "thread": ("_kx", "_ky", "_kz")}
FRAGMENT_OPS = FRAGMENT_NODES


def buffers_used(nodes: tuple[Node, ...]) -> set[str]:
    """Names of the buffers a body reads or writes (a launch's arguments are not
    counted: its kernel is compiled on its own)."""
    return walk_buffers_used(nodes, launches=False)


def _trip(lo: str, hi: str, step: int) -> str:
    return f"max(0, {hi} - {lo})" if step == 1 else f"max(0, ({hi} - {lo} + {step - 1}) // {step})"


class ModuleCompiler:
    """Compiles every function of a module into one Python source text."""

    def __init__(self, module: Module, check_bounds: bool = True, detect_races: bool = False):
        self.module = module
        self.check_bounds = check_bounds
        self.detect_races = detect_races
        self.nodes: list[tuple[str, object]] = []      # (function name, node) by index
        self.block = Block()

    def node_index(self, function: str, node: object) -> int:
        self.nodes.append((function, node))
        return len(self.nodes) - 1

    def compile(self) -> tuple[str, list[int]]:
        """The module's source and, for each source line, the node index it came from."""
        for fn in self.module.functions:
            FunctionCompiler(self, fn).compile()
            self.block.emit("")
        texts, nodes = self.block.render()
        return "\n".join(texts) + "\n", nodes


class FunctionCompiler(ExprCompiler):
    """Statements, loops, GPU nests and prologues of one function."""

    def __init__(self, owner: ModuleCompiler, fn: Function):
        super().__init__(fn.name, {}, Names(), owner.nodes, owner.check_bounds, owner.detect_races)
        self.owner = owner
        self.fn = fn
        self.in_gpu = False
        self.fn_node = owner.node_index(fn.name, fn)
        self.node = self.fn_node

    # ------------------------------------------------------------ function
    def compile(self) -> None:
        fn = self.fn
        names = self.names
        buffer_params = [p for p in fn.params if isinstance(p, Buffer)]
        symbols = list(fn.symbols)
        self.scope = set(symbols)
        args = [names.buf(p.name) for p in buffer_params] + [names.var(s) for s in symbols]
        kernel = fn.kind == "kernel"
        head = "_kern_" if kernel else "_host_"
        extra = "_rt, _grid, _block" if kernel else "_rt"
        out = self.owner.block
        out.emit(f"def {head}{fn.name}({', '.join([extra] + args)}):", self.fn_node)
        prologue = Block()
        self.block = prologue
        self.emit("_rf = _rt.cell")
        self.emit("_par = _rt.par")
        for buf in list(buffer_params) + list(fn.locals):
            self.declare(buf)
        if not kernel:
            for buf in fn.locals:
                self.emit(f"{self.buffers[buf.name].py} = _rt.alloc({STORAGE_FORMAT[buf.dtype]!r}, "
                          f"{self.size_code(buf)})")
            body = self.body(fn.body)
            prologue.extend(body)
        else:
            self.gpu_nest(fn.body, fn.locals, grid=None)
        out.extend(prologue, 1)

    def declare(self, buf: Buffer) -> None:
        names = self.names
        info = BufferInfo(buf, names.buf(buf.name), [names.dim(buf.name, a) for a in range(buf.rank)],
                          [names.stride(buf.name, a, buf.rank) for a in range(buf.rank)])
        self.buffers[buf.name] = info
        for axis, dim in enumerate(buf.shape):
            self.emit(f"{info.dims[axis]} = {self.aff(dim)}")
        for axis in range(buf.rank - 2, -1, -1):
            self.emit(f"{info.strides[axis]} = {info.dims[axis + 1]} * {info.strides[axis + 1]}")

    def size_code(self, buf: Buffer) -> str:
        info = self.buffers[buf.name]
        if not buf.rank:
            return "1"
        return f"_rt.size({self.node}, {buf.name!r}, ({''.join(d + ', ' for d in info.dims)}))"

    # -------------------------------------------------------------- bodies
    def body(self, nodes: tuple[Node, ...]) -> Block:
        saved, self.block = self.block, Block()
        try:
            for node in nodes:
                self.statement(node)
            return self.block
        finally:
            self.block = saved

    def loop_body(self, node: For) -> Block:
        """A loop's body, led by the allocation of its loop-scoped locals: each
        iteration (of each thread, in a GPU nest) gets fresh, zero-filled copies.
        Their sizes depend on symbols only, so they are computed before the loop."""
        for buf in node.locals:
            self.declare(buf)
        saved, self.block = self.block, Block()
        saved_private = self.private
        if self.in_gpu and node.locals:
            self.private = set(self.private) | {b.name for b in node.locals}
        try:
            for buf in node.locals:
                self.emit(f"{self.buffers[buf.name].py} = _rt.alloc({STORAGE_FORMAT[buf.dtype]!r}, "
                          f"{self.size_code(buf)})")
            for child in node.body:
                self.statement(child)
            return self.block
        finally:
            self.block = saved
            self.private = saved_private

    def index(self, node: object) -> int:
        return self.owner.node_index(self.fn.name, node)

    def statement(self, node: Node) -> None:
        saved_node = self.node
        self.node = self.index(node)
        try:
            if isinstance(node, Assign):
                self.assign(node)
            elif isinstance(node, For):
                self.loop_node(node)
            elif isinstance(node, If):
                self.if_node(node)
            elif isinstance(node, Barrier):
                self.emit(f"yield {self.node}" if self.in_gpu else "pass")
            elif isinstance(node, FRAGMENT_OPS):
                self.fragment(node)
            elif isinstance(node, Launch):
                self.launch(node)
            else:
                raise self.error(f"unknown node {type(node).__name__}")
        finally:
            self.node = saved_node

    def assign(self, node: Assign) -> None:
        info = self.buffer(node.buffer)
        dtype = info.buffer.dtype
        val = self.expr(node.value)
        if val.dtype != dtype:
            val = self.cast(val, dtype)
        if dtype in (DType.F16, DType.BF16):
            val = Val(f"_round_{dtype.value}({self.clean(val).code})", dtype, True)
        elif dtype is not DType.F32:
            val = self.clean(val)
        offset = self.access(info, node.indices, write=True)
        self.emit(f"{info.py}[{offset}] = {val.code}")

    def if_node(self, node: If) -> None:
        cond = " and ".join(f"({constraint_code(c, self.var_code)})" for c in node.conditions) or "True"
        if self.loop is not None:
            self.loop.conditional += 1
        try:
            then_block = self.body(node.then_body)
            else_block = self.body(node.else_body)
        finally:
            if self.loop is not None:
                self.loop.conditional -= 1
        self.emit(f"if {cond}:")
        then_block.body_into(self.block, 1, self.node)
        if else_block.lines:
            self.emit("else:")
            self.block.extend(else_block, 1)

    def loop_node(self, node: For) -> None:
        if node.mapping is not None:
            if self.in_gpu:
                self.mapped_loop(node)
            else:
                self.inline_nest(node)
            return
        lo, hi = self.temp("_lo"), self.temp("_hi")
        self.emit(f"{lo} = {bound_code(node.lower, 'max', self.var_code)}")
        self.emit(f"{hi} = {bound_code(node.upper, 'min', self.var_code)}")
        if node.step < 1:
            raise self.error(f"loop step must be positive, not {node.step}")
        context = LoopContext(node.var, frozenset(self.scope), lo, self.temp("_last"))
        saved_loop = self.loop
        self.loop = context
        self.scope.add(node.var)
        try:
            body = self.loop_body(node)
        finally:
            self.scope.discard(node.var)
            self.loop = saved_loop
        self.block.extend(context.prelude)
        if context.checks.lines:
            self.emit(f"if {lo} < {hi}:")
            last = f"{hi} - 1" if node.step == 1 else f"{lo} + ({hi} - {lo} - 1) // {node.step} * {node.step}"
            self.block.emit(f"{context.last} = {last}", self.node, 1)
            self.block.extend(context.checks, 1)
        step = "" if node.step == 1 else f", {node.step}"
        iterate = "_par" if node.parallel else "range"
        self.emit(f"for {self.names.var(node.var)} in {iterate}({lo}, {hi}{step}):")
        body.body_into(self.block, 1, self.node)

    # ------------------------------------------------------------------ GPU
    def mapped_loop(self, node: For) -> None:
        level, _, axis = node.mapping.partition(".")  # type: ignore[union-attr]
        if level not in _IDS or axis not in _AXES:
            raise self.error(f"unknown GPU mapping '{node.mapping}'")
        ident, size = _IDS[level][_AXES[axis]], _SIZES[level][_AXES[axis]]
        lo, hi = self.temp("_lo"), self.temp("_hi")
        self.emit(f"{lo} = {bound_code(node.lower, 'max', self.var_code)}")
        self.emit(f"{hi} = {bound_code(node.upper, 'min', self.var_code)}")
        self.emit(f"if {_trip(lo, hi, node.step)} > {size}: _rt.mapping_error({self.node}, "
                  f"{_trip(lo, hi, node.step)}, {size})")
        var = self.names.var(node.var)
        self.emit(f"{var} = {lo} + {ident}" + ("" if node.step == 1 else f" * {node.step}"))
        saved_loop, self.loop = self.loop, None
        self.scope.add(node.var)
        try:
            body = self.loop_body(node)
        finally:
            self.scope.discard(node.var)
            self.loop = saved_loop
        self.emit(f"if {var} < {hi}:")
        body.body_into(self.block, 1, self.node)

    def inline_nest(self, node: For) -> None:
        """A GPU-mapped loop nest in a host function: run it as a launch."""
        used = buffers_used((node,))
        local_bufs = tuple(b for b in self.fn.locals if b.name in used and b.space is not MemorySpace.GLOBAL)
        grid = self.temp("_grid")
        self.emit(f"{grid} = [1, 1, 1]")
        dims = Block()
        dims.emit("_d = [1, 1, 1]", self.node)
        self.nest_sizes(node, frozenset(self.scope), self.block, grid, dims, set(self.scope))
        dims.emit("return _d", self.node)
        dims_fn = self.temp("_dims")
        self.emit(f"def {dims_fn}(_bx, _by, _bz):")
        self.block.extend(dims, 1)
        self.gpu_nest((node,), local_bufs, grid=(f"tuple({grid})", dims_fn))

    def nest_sizes(self, node: Node, host_scope: frozenset[str], grid_block: Block, grid: str,
                   dims: Block, scope: set[str]) -> None:
        """Emit grid sizes (block loops, host scope only) and per-block thread sizes."""
        if isinstance(node, If):
            for child in node.then_body + node.else_body:
                self.nest_sizes(child, host_scope, grid_block, grid, dims, scope)
            return
        if not isinstance(node, For):
            return
        bound_vars = set().union(*(a.variables() for a in node.lower + node.upper))
        lo = bound_code(node.lower, "max", self.names.var)
        hi = bound_code(node.upper, "min", self.names.var)
        level, _, axis = (node.mapping or "").partition(".")
        if level == "block":
            if not bound_vars <= host_scope:
                raise self.error(f"bounds of block loop '{node.var}' use variables bound inside the "
                                 f"GPU nest: {sorted(bound_vars - host_scope)}")
            a = _AXES[axis]
            grid_block.emit(f"{grid}[{a}] = max({grid}[{a}], {_trip(lo, hi, node.step)})", self.node)
            step = "" if node.step == 1 else f" * {node.step}"
            dims.emit(f"{self.names.var(node.var)} = {lo} + {_IDS['block'][a]}{step}", self.node)
            scope = scope | {node.var}
        elif level == "thread":
            if not bound_vars <= scope:
                raise self.error(f"bounds of thread loop '{node.var}' use variables that are not "
                                 f"known per block: {sorted(bound_vars - scope)}")
            a = _AXES[axis]
            dims.emit(f"_d[{a}] = max(_d[{a}], {_trip(lo, hi, node.step)})", self.node)
        for child in node.body:
            self.nest_sizes(child, host_scope, grid_block, grid, dims, scope)

    def gpu_nest(self, body: tuple[Node, ...], local_bufs: tuple[Buffer, ...],
                 grid: tuple[str, str] | None) -> None:
        """Emit the per-thread closure for ``body`` and the ``run_grid`` call."""
        shared = [b for b in local_bufs if b.space is MemorySpace.SHARED]
        frags = [b for b in local_bufs if b.space is MemorySpace.FRAGMENT]
        private = [b for b in local_bufs if b.space not in (MemorySpace.SHARED, MemorySpace.FRAGMENT)]
        thread = self.temp("_thread")
        head = Block()
        saved, self.block = self.block, head
        self.emit("_rf = _rt.cell")
        self.emit("_bx, _by, _bz = _bid")
        self.emit("_tx, _ty, _tz = _tid")
        self.emit("_gx, _gy, _gz = _grid")
        self.emit("_kx, _ky, _kz = _block")
        for group, source in ((shared, "_sh"), (frags, "_fr")):
            if group:
                self.emit(f"{', '.join(self.buffers[b.name].py for b in group)}, = {source}")
        for buf in private:
            self.emit(f"{self.buffers[buf.name].py} = _rt.alloc({STORAGE_FORMAT[buf.dtype]!r}, "
                      f"{self.size_code(buf)})")
        self.block = saved
        saved_gpu, saved_loop, saved_private = self.in_gpu, self.loop, self.private
        self.in_gpu, self.loop, self.private = True, None, {b.name for b in private}
        try:
            inner = self.body(body)
        finally:
            self.in_gpu, self.loop, self.private = saved_gpu, saved_loop, saved_private
        head.extend(inner)
        self.emit(f"def {thread}(_bid, _tid, _grid, _block, _sh, _fr, _acc):")
        self.block.extend(head, 1)
        specs = [f"({STORAGE_FORMAT[b.dtype]!r}, {self.size_code(b)}, ({''.join(d + ', ' for d in self.buffers[b.name].dims)}))"
                 for b in shared + frags]
        shared_specs = "(" + "".join(s + ", " for s in specs[:len(shared)]) + ")"
        frag_specs = "(" + "".join(s + ", " for s in specs[len(shared):]) + ")"
        grid_code, block_code = grid if grid is not None else ("_grid", "_block")
        self.emit(f"_rt.run_grid({self.node}, {thread}, {grid_code}, {block_code}, "
                  f"{shared_specs}, {frag_specs})")

    def fragment(self, node: Node) -> None:
        b = self.buffer
        if isinstance(node, FragmentFill):
            value = self.clean(self.expr(node.value))
            payload = f"{b(node.fragment).py}, {value.code}"
        elif isinstance(node, FragmentLoad):
            src = b(node.buffer)
            idx = ", ".join(self.aff(i) for i in node.indices)
            payload = f"{b(node.fragment).py}, {src.py}, ({''.join(d + ', ' for d in src.dims)}), ({idx},)"
        elif isinstance(node, FragmentMMA):
            payload = ", ".join(b(n).py for n in (node.result, node.a, node.b, node.acc))
        elif isinstance(node, FragmentStore):
            dst = b(node.buffer)
            idx = ", ".join(self.aff(i) for i in node.indices)
            payload = f"{b(node.fragment).py}, {dst.py}, ({''.join(d + ', ' for d in dst.dims)}), ({idx},)"
        else:
            raise self.error(f"unknown fragment operation {type(node).__name__}")
        if self.in_gpu:
            self.emit(f"yield ({self.node}, {payload})")
        else:
            self.emit(f"_rt.fragment_op(({self.node}, {payload}))")

    def launch(self, node: Launch) -> None:
        if self.in_gpu or self.fn.kind == "kernel":
            raise self.error("launch inside GPU code")
        args = []
        for name in node.args:
            if name in self.buffers:
                info = self.buffers[name]
                args.append(f"({info.py}, ({''.join(d + ', ' for d in info.dims)}))")
            else:
                args.append(self.var_code(name))
        grid = ", ".join(aff_code(g, self.var_code) for g in node.grid)
        self.emit(f"_rt.launch({self.node}, ({grid},), ({''.join(a + ', ' for a in args)}))")
