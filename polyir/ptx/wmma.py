"""Tensor-core fragments on NVPTX: ``llvm.nvvm.wmma.*`` intrinsics.

A fragment buffer (``MemorySpace.FRAGMENT``) is one warp's share of a tile,
held per thread in a few 32-bit registers; here it lives in a small ``alloca``
array of its register type (SROA turns it into registers). Which registers a
fragment has follows from its element type and shape through ``MMA_SHAPES``
(the role whose shape and type match), and ``FRAGMENT_REGISTERS`` below:

=====================  =======  =================  ==========================
MMA_SHAPES key         role     registers          wmma type suffix
=====================  =======  =================  ==========================
m16n16k16.f16.f32      a, b     8 x <2 x half>     f16
m16n16k16.bf16.f32     a, b     4 x i32            bf16
m16n16k8.tf32.f32      a, b     4 x i32            tf32
any of them            acc      8 x float          f32
=====================  =======  =================  ==========================

Intrinsic names (LLVM 14 and later; checked with LLVM 22):
``llvm.nvvm.wmma.{m}{n}{k}.load.{a|b|c}.{row|col}.stride.{type}.p{AS}``,
``llvm.nvvm.wmma.{m}{n}{k}.mma.{alayout}.{blayout}.{acc}.{acc}`` for f16 inputs
(``alayout``/``blayout``: the layouts the a and b fragments were loaded with),
``llvm.nvvm.wmma.{m}{n}{k}.mma.{alayout}.{blayout}.{bf16|tf32}`` otherwise, and
``llvm.nvvm.wmma.{m}{n}{k}.store.d.{row|col}.stride.f32.p{AS}``. The stride
argument is the distance in elements between rows (``row``) or columns
(``col``) of the tile: the buffer's last dimension. tf32 inputs are loaded as
f32 and rounded with ``llvm.nvvm.f2tf32.rna`` (round to nearest, ties away;
the IR rounds ties to even, which differs only on exact ties).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from llvmlite import ir

from polyir.errors import CompileError
from polyir.ir.fragments import MMA_SHAPES, MMAShape
from polyir.ir.nodes import Buffer, FragmentFill, FragmentLoad, FragmentMMA, FragmentStore
from polyir.ir.types import DType
from polyir.llvm.hooks import F16, F32, I32, where

if TYPE_CHECKING:
    from polyir.llvm.lower import FunctionLowerer

HALF2 = ir.VectorType(F16, 2)


@dataclass(frozen=True)
class FragmentRegisters:
    """Per-thread registers of one fragment: ``count`` values of ``kind``."""

    count: int
    kind: str  # "half2", "i32" or "f32"
    wmma_type: str

    @property
    def llvm_type(self) -> ir.Type:
        return {"half2": HALF2, "i32": I32, "f32": F32}[self.kind]


_INPUT_REGISTERS: dict[DType, FragmentRegisters] = {
    DType.F16: FragmentRegisters(8, "half2", "f16"),
    DType.BF16: FragmentRegisters(4, "i32", "bf16"),
}
_TF32_REGISTERS = FragmentRegisters(4, "i32", "tf32")
_ACC_REGISTERS = FragmentRegisters(8, "f32", "f32")


def registers_for(shape: MMAShape, role: str) -> FragmentRegisters:
    """The register layout of a ``role`` fragment of ``shape``."""
    if role == "acc":
        if shape.acc_dtype is not DType.F32:
            raise CompileError(f"MMA shape {shape.key}: only f32 accumulators are lowered")
        return _ACC_REGISTERS
    if shape.k == 8 and shape.a_dtype is DType.F32:
        return _TF32_REGISTERS
    return _INPUT_REGISTERS[shape.role_dtype(role)]


def fragment_role(buffer: Buffer, shape_key: str | None = None) -> tuple[MMAShape, str]:
    """The MMA shape and role a fragment buffer's type and shape belong to
    (restricted to ``shape_key`` when given)."""
    dims = tuple(d.constant if d.is_constant else None for d in buffer.shape)
    candidates = [MMA_SHAPES[shape_key]] if shape_key else list(MMA_SHAPES.values())
    for shape in candidates:
        for role in ("acc", "a", "b"):
            if shape.role_shape(role) == dims and shape.role_dtype(role) is buffer.dtype:
                return shape, role
    raise CompileError(f"fragment buffer '{buffer.name}': {buffer.dtype}{list(dims)} is no "
                       f"fragment of {shape_key or 'any MMA shape'}")


def fragment_storage(buffer: Buffer) -> ir.ArrayType:
    """The alloca type of a fragment buffer."""
    shape, role = fragment_role(buffer)
    regs = registers_for(shape, role)
    return ir.ArrayType(regs.llvm_type, regs.count)


def _shape_prefix(shape: MMAShape) -> str:
    return f"m{shape.m}n{shape.n}k{shape.k}"


def _regs_of(lowerer: FunctionLowerer, name: str) -> tuple[ir.Value, Buffer]:
    binding = lowerer.buffers.get(name)
    if binding is None:
        raise CompileError(f"function '{lowerer.function.name}': unknown fragment '{name}'")
    return binding.pointer, binding.buffer


def _read_regs(lowerer: FunctionLowerer, pointer: ir.Value, regs: FragmentRegisters) -> list[ir.Value]:
    b = lowerer.builder
    array = ir.ArrayType(regs.llvm_type, regs.count)
    return [b.load(b.gep(pointer, [ir.Constant(I32, 0), ir.Constant(I32, i)], source_etype=array),
                   typ=regs.llvm_type) for i in range(regs.count)]


def _write_regs(lowerer: FunctionLowerer, pointer: ir.Value, regs: FragmentRegisters,
                values: list[ir.Value]) -> None:
    b = lowerer.builder
    array = ir.ArrayType(regs.llvm_type, regs.count)
    for i, value in enumerate(values):
        b.store(value, b.gep(pointer, [ir.Constant(I32, 0), ir.Constant(I32, i)], source_etype=array))


def _unpack(lowerer: FunctionLowerer, struct: ir.Value, count: int) -> list[ir.Value]:
    return [lowerer.builder.extract_value(struct, i) for i in range(count)]


def _stride(lowerer: FunctionLowerer, name: str) -> ir.Value:
    binding = lowerer.buffers[name]
    if binding.buffer.rank < 2:
        raise CompileError(f"function '{lowerer.function.name}': fragment tile in buffer "
                           f"'{name}' needs a buffer of rank 2 or more")
    return lowerer.builder.trunc(binding.strides[-2], I32)


def _address_space(pointer: ir.Value) -> int:
    return getattr(pointer.type, "addrspace", 0)


def lower_fragment(lowerer: FunctionLowerer,
                   node: FragmentFill | FragmentLoad | FragmentMMA | FragmentStore) -> None:
    """Emit the wmma code of one fragment node (all 32 threads of the warp run it)."""
    b = lowerer.builder
    if isinstance(node, FragmentFill):
        pointer, buffer = _regs_of(lowerer, node.fragment)
        shape, role = fragment_role(buffer)
        regs = registers_for(shape, role)
        value = lowerer.expr(node.value)
        _write_regs(lowerer, pointer, regs, [_splat(lowerer, value, buffer.dtype, regs)] * regs.count)
        return
    if isinstance(node, FragmentLoad):
        shape = _shape(lowerer, node)
        pointer, buffer = _regs_of(lowerer, node.fragment)
        role = node.role
        regs = registers_for(shape, role)
        letter = {"a": "a", "b": "b", "acc": "c"}[role]
        source = lowerer.element_pointer(node.buffer, node.indices)
        space = _address_space(source)
        struct = ir.LiteralStructType([regs.llvm_type] * regs.count)
        name = (f"llvm.nvvm.wmma.{_shape_prefix(shape)}.load.{letter}.{node.layout}.stride."
                f"{regs.wmma_type}.p{space}")
        fn = lowerer.intrinsic(name, struct, [source.type, I32])
        loaded = b.call(fn, [source, _stride(lowerer, node.buffer)])
        _check_fragment(lowerer, node, buffer, shape, role)
        registers = _unpack(lowerer, loaded, regs.count)
        if regs.wmma_type == "tf32":
            registers = [_round_tf32(lowerer, r) for r in registers]
        _write_regs(lowerer, pointer, regs, registers)
        return
    if isinstance(node, FragmentMMA):
        shape = _shape(lowerer, node)
        values: list[ir.Value] = []
        arg_types: list[ir.Type] = []
        for role, name in (("a", node.a), ("b", node.b), ("acc", node.acc)):
            pointer, buffer = _regs_of(lowerer, name)
            _check_fragment(lowerer, node, buffer, shape, role)
            regs = registers_for(shape, role)
            values += _read_regs(lowerer, pointer, regs)
            arg_types += [regs.llvm_type] * regs.count
        a_regs = registers_for(shape, "a")
        kind = "f32.f32" if a_regs.wmma_type == "f16" else a_regs.wmma_type
        # The register contents of an a/b fragment depend on the layout it was
        # loaded with, and the mma must name that layout.
        a_layout = _loaded_layout(lowerer, node, node.a)
        b_layout = _loaded_layout(lowerer, node, node.b)
        name = f"llvm.nvvm.wmma.{_shape_prefix(shape)}.mma.{a_layout}.{b_layout}.{kind}"
        struct = ir.LiteralStructType([F32] * 8)
        result = b.call(lowerer.intrinsic(name, struct, arg_types), values)
        pointer, buffer = _regs_of(lowerer, node.result)
        _check_fragment(lowerer, node, buffer, shape, "acc")
        _write_regs(lowerer, pointer, _ACC_REGISTERS, _unpack(lowerer, result, 8))
        return
    if isinstance(node, FragmentStore):
        shape = _shape(lowerer, node)
        pointer, buffer = _regs_of(lowerer, node.fragment)
        _check_fragment(lowerer, node, buffer, shape, "acc")
        target = lowerer.element_pointer(node.buffer, node.indices)
        if lowerer.buffers[node.buffer].buffer.dtype is not DType.F32:
            raise CompileError(f"{where(lowerer.function, node)}: fragment_store needs an f32 "
                               f"buffer, '{node.buffer}' is "
                               f"{lowerer.buffers[node.buffer].buffer.dtype}")
        space = _address_space(target)
        name = (f"llvm.nvvm.wmma.{_shape_prefix(shape)}.store.d.{node.layout}.stride.f32."
                f"p{space}")
        fn = lowerer.intrinsic(name, ir.VoidType(), [target.type] + [F32] * 8 + [I32])
        b.call(fn, [target, *_read_regs(lowerer, pointer, _ACC_REGISTERS),
                    _stride(lowerer, node.buffer)])
        return
    raise CompileError(f"function '{lowerer.function.name}': not a fragment node: {node!r}")


def _loaded_layout(lowerer: FunctionLowerer, node: object, fragment: str) -> str:
    """The one layout every ``fragment_load`` into ``fragment`` uses (``row`` when
    it is only filled)."""
    from polyir.ir.walk import walk_nodes

    layouts = {n.layout for n in walk_nodes(lowerer.function.body)
               if isinstance(n, FragmentLoad) and n.fragment == fragment}
    if len(layouts) > 1:
        raise CompileError(f"{where(lowerer.function, node)}: fragment '{fragment}' is loaded "
                           f"with layouts {sorted(layouts)}; a fragment needs one layout")
    return layouts.pop() if layouts else "row"


def _shape(lowerer: FunctionLowerer,
           node: FragmentLoad | FragmentMMA | FragmentStore) -> MMAShape:
    key = node.shape
    if key not in MMA_SHAPES:
        raise CompileError(f"{where(lowerer.function, node)}: unknown MMA shape '{key}'; "
                           f"expected one of {sorted(MMA_SHAPES)}")
    return MMA_SHAPES[key]


def _check_fragment(lowerer: FunctionLowerer, node: object, buffer: Buffer, shape: MMAShape,
                    role: str) -> None:
    dims = tuple(d.constant if d.is_constant else None for d in buffer.shape)
    if dims != shape.role_shape(role) or buffer.dtype is not shape.role_dtype(role):
        raise CompileError(f"{where(lowerer.function, node)}: fragment '{buffer.name}' is "
                           f"{buffer.dtype}{list(dims)}, role {role} of {shape.key} needs "
                           f"{shape.role_dtype(role)}{list(shape.role_shape(role))}")


def _round_tf32(lowerer: FunctionLowerer, register: ir.Value) -> ir.Value:
    """An f32 pattern rounded to tf32 (``cvt.rna.tf32.f32``): without it the
    tensor cores drop the low mantissa bits, where IR semantics round."""
    fn = lowerer.intrinsic("llvm.nvvm.f2tf32.rna", I32, [F32])
    return lowerer.builder.call(fn, [lowerer.builder.bitcast(register, F32)])


def _splat(lowerer: FunctionLowerer, value: ir.Value, dtype: DType, regs: FragmentRegisters) -> ir.Value:
    """One register holding ``value`` (compute type) in every element."""
    b = lowerer.builder
    if regs.kind == "f32":
        return value
    if regs.kind == "half2":
        half = b.fptrunc(value, F16)
        vec = b.insert_element(ir.Constant(HALF2, None), half, ir.Constant(I32, 0))
        return b.insert_element(vec, half, ir.Constant(I32, 1))
    if regs.wmma_type == "tf32":
        return _round_tf32(lowerer, b.bitcast(value, I32))
    bits = b.lshr(b.bitcast(lowerer.round_bf16(value), I32), ir.Constant(I32, 16))
    return b.or_(bits, b.shl(bits, ir.Constant(I32, 16)))


__all__ = ["FragmentRegisters", "registers_for", "fragment_role", "fragment_storage",
           "lower_fragment"]
