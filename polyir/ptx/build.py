"""IR -> PTX for CUDA targets: ``build_cuda(module, target) -> CudaExecutable``.

The module must already be mapped (host functions hold only launches; the
driver's ``compile_ir`` runs ``mark-parallel,gpu-map`` first). Every kernel is
lowered by the shared lowering (``polyir.llvm.lower``) with ``NvptxHooks``,
optimised at O3 for NVPTX, and emitted as PTX by LLVM's NVPTX backend
(``sm_80``/``sm_90``, PTX ISA 8.0). Compiling needs neither a GPU nor CuPy;
calling the executable does (``polyir.ptx.runtime``).
"""
from __future__ import annotations

import re
import threading
from dataclasses import dataclass, field
from typing import Any

import llvmlite.binding as llvm

from polyir.errors import CompileError
from polyir.ir.nodes import Launch, Module
from polyir.llvm.diagnostics import llvm_diagnostics
from polyir.llvm.lower import LoweredFunction, lower_module
from polyir.ptx.nvptx import NvptxHooks
from polyir.target import Target

TRIPLE = "nvptx64-nvidia-cuda"
PTX_FEATURES = "+ptx80"
SUPPORTED_SM = (80, 86, 89, 90)

_LOCK = threading.Lock()
_MACHINES: dict[int, llvm.TargetMachine] = {}


def target_machine(sm: int) -> llvm.TargetMachine:
    """The NVPTX target machine for ``sm_<sm>`` (created once per process)."""
    if sm not in SUPPORTED_SM:
        raise CompileError(f"CUDA target sm_{sm} is not supported; expected one of "
                           f"{', '.join(f'sm_{s}' for s in SUPPORTED_SM)}")
    with _LOCK:
        machine = _MACHINES.get(sm)
        if machine is None:
            llvm.initialize_all_targets()
            llvm.initialize_all_asmprinters()
            target = llvm.Target.from_triple(TRIPLE)
            machine = target.create_target_machine(cpu=f"sm_{sm}", features=PTX_FEATURES,
                                                   opt=3, codemodel="default")
            _MACHINES[sm] = machine
        return machine


def needs_mapping(module: Module) -> bool:
    """True when some host function holds anything but launches."""
    from polyir.gpu.mapping import is_launch_code
    return any(f.kind == "host" and not all(is_launch_code(n) for n in f.body)
               for f in module.functions)


def lower_kernels(module: Module, sm: int,
                  check_subscripts: bool = False) -> tuple[str, dict[str, LoweredFunction]]:
    """LLVM IR text (optimised, NVPTX) of every kernel of ``module``
    (``check_subscripts``: data-dependent subscripts checked in the kernels,
    ``polyir.ptx.subscripts``)."""
    launches: dict[str, Launch] = {}
    from polyir.ir.walk import walk_nodes
    for function in module.functions:
        for node in walk_nodes(function.body):
            if isinstance(node, Launch):
                launches.setdefault(node.kernel, node)
    names = [f.name for f in module.functions if f.kind == "kernel"]
    if not names:
        raise CompileError("module has no kernel to compile for CUDA")
    llvm_module, lowered = lower_module(module, NvptxHooks(launches, sm, check_subscripts),
                                          names=names)
    with llvm_diagnostics(f"NVPTX sm_{sm}"):
        machine = target_machine(sm)
        llvm_module.triple = TRIPLE
        llvm_module.data_layout = str(machine.target_data)
        ref = llvm.parse_assembly(str(llvm_module))
        ref.verify()
        tuning = llvm.create_pipeline_tuning_options(speed_level=3)
        builder = llvm.create_pass_builder(machine, tuning)
        builder.getModulePassManager().run(ref, builder)
        ref.verify()
        return str(ref), lowered


def emit_ptx(llvm_ir: str, sm: int) -> str:
    """PTX assembly of NVPTX LLVM IR text. Raises ``CompileError`` when the PTX
    declares an external ``llvm.*`` function: an intrinsic LLVM does not know
    (a misspelled name passes its verifier) would only fail when loaded."""
    with llvm_diagnostics(f"NVPTX sm_{sm}"):
        ref = llvm.parse_assembly(llvm_ir)
        ref.verify()
        ptx = target_machine(sm).emit_assembly(ref)
    unknown = sorted(set(re.findall(r"\.extern \.func[^;]*?\b(llvm\.[\w.]+)", ptx)))
    if unknown:
        raise CompileError(f"PTX for sm_{sm} calls unknown intrinsics {', '.join(unknown)} "
                           f"(not selected by LLVM's NVPTX backend)")
    return ptx


@dataclass
class CudaExecutable:
    """A compiled module for a CUDA GPU.

    ``ir``: the mapped IR (host launches + kernels); ``llvm_ir``: the NVPTX LLVM
    IR; ``ptx``: the PTX text; ``kernels``: each kernel's lowered signature
    (a kernel whose data-dependent subscripts are checked in the kernel has
    the extra parameter ``polyir.ptx.subscripts.STATUS_PARAM``).
    Calling it runs the entry function's launches on the GPU (needs CuPy and a
    GPU; raises ``polyir.DeviceError`` otherwise).
    """

    ir: Module
    target: Target
    llvm_ir: str
    ptx: str
    kernels: dict[str, LoweredFunction]
    _runtime: Any = field(default=None, repr=False)
    bounds: Any = field(default=None, repr=False)
    """A ``polyir.cpu.bounds.BoundsCheck`` of the unmapped function, run on the
    size symbols before any launch (``polyir.driver.compile_ir`` sets it)."""

    def __call__(self, *args: Any) -> None:
        if not self.kernels:  # an empty program (everything it computed was dead)
            return
        if self._runtime is None:
            from polyir.ptx.runtime import CudaProgram
            self._runtime = CudaProgram(self.ir, self.ptx, self.kernels, self.bounds)
        self._runtime(*args)


def build_cuda(module: Module, target: Target, bounds: Any = None) -> CudaExecutable:
    """Lower and emit PTX for ``target.sm`` (default 90). Raises ``CompileError``
    when a host function still holds loops (not mapped: run ``gpu-map``, or use
    ``polyir.driver.compile_ir``, which does).

    ``bounds``: the ``polyir.cpu.bounds.BoundsCheck`` of the unmapped function
    (``None``: no bounds check), run before the launches; when it lists
    data-dependent subscripts it cannot hoist (``unchecked``), the kernels
    check their data-dependent subscripts themselves (``polyir.ptx.subscripts``)."""
    sm = target.sm or 90
    if needs_mapping(module):
        host = next(f.name for f in module.functions if f.kind == "host")
        raise CompileError(f"function '{host}' is not mapped for the GPU (it holds loops, not only "
                           f"launches): run the 'gpu-map' pass first, or compile with "
                           f"polyir.driver.compile_ir, which does")
    mapped = module
    from polyir.ir.verifier import verify
    verify(mapped)
    if not any(f.kind == "kernel" for f in mapped.functions):  # nothing left to run on the GPU
        return CudaExecutable(mapped, target, "", "", {}, bounds=bounds)
    from polyir.ptx.staging import fit_launches
    mapped = fit_launches(mapped, sm, target.static_shared_bytes)  # register-staged tiles
    llvm_ir, lowered = lower_kernels(mapped, sm, bool(bounds is not None and bounds.unchecked))
    ptx = emit_ptx(llvm_ir, sm)
    return CudaExecutable(mapped, target, llvm_ir, ptx, lowered, bounds=bounds)


__all__ = ["build_cuda", "CudaExecutable", "lower_kernels", "emit_ptx", "needs_mapping",
           "target_machine", "TRIPLE"]
