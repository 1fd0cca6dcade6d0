"""Run ``polyir.ptx.mathlib`` code on the host CPU (it is plain arithmetic), so
the device math functions can be checked against numpy without a GPU."""
from __future__ import annotations

import ctypes
from collections.abc import Callable

import llvmlite.binding as llvm
import numpy as np
from llvmlite import ir

from polyir.ptx.mathlib import emit_math


class _Lowerer:
    """The two things ``emit_math`` uses from a ``FunctionLowerer``."""

    def __init__(self, module: ir.Module, builder: ir.IRBuilder):
        self.llvm_module = module
        self.builder = builder

    def intrinsic(self, name: str, ret: ir.Type, args: list[ir.Type]) -> ir.Function:
        existing = self.llvm_module.globals.get(name)
        if existing is not None:
            return existing
        return ir.Function(self.llvm_module, ir.FunctionType(ret, list(args)), name)


_ENGINES: list[object] = []


def compile_math(fn: str, dtype: type, arity: int = 1) -> Callable[..., np.ndarray]:
    """An elementwise numpy function computing ``fn`` with the device code."""
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    typ = ir.DoubleType() if dtype == np.float64 else ir.FloatType()
    ptr = typ.as_pointer()
    i64 = ir.IntType(64)
    module = ir.Module(name=f"math_{fn}")
    module.triple = llvm.get_process_triple()
    func = ir.Function(module, ir.FunctionType(ir.VoidType(), [ptr] * (arity + 1) + [i64]), "run")
    *inputs, out, count = func.args
    entry = func.append_basic_block("entry")
    head = func.append_basic_block("head")
    body = func.append_basic_block("body")
    done = func.append_basic_block("done")
    b = ir.IRBuilder(entry)
    b.branch(head)
    b.position_at_end(head)
    index = b.phi(i64)
    index.add_incoming(ir.Constant(i64, 0), entry)
    b.cbranch(b.icmp_signed("<", index, count), body, done)
    b.position_at_end(body)
    values = [b.load(b.gep(p, [index])) for p in inputs]
    result = emit_math(_Lowerer(module, b), fn, values)
    b.store(result, b.gep(out, [index]))
    index.add_incoming(b.add(index, ir.Constant(i64, 1)), b.block)
    b.branch(head)
    b.position_at_end(done)
    b.ret_void()
    ref = llvm.parse_assembly(str(module))
    ref.verify()
    machine = llvm.Target.from_default_triple().create_target_machine()
    engine = llvm.create_mcjit_compiler(ref, machine)
    engine.finalize_object()
    _ENGINES.append(engine)
    cfunc = ctypes.CFUNCTYPE(None, *([ctypes.c_void_p] * (arity + 1)), ctypes.c_int64)(
        engine.get_function_address("run"))

    def run(*arrays: np.ndarray) -> np.ndarray:
        arrays = tuple(np.ascontiguousarray(a, dtype=dtype) for a in arrays)
        result = np.empty_like(arrays[0])
        cfunc(*(a.ctypes.data for a in arrays), result.ctypes.data, result.size)
        return result

    return run
