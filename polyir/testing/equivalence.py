"""Differential checks: run two programs on the same random inputs and compare.

The oracle is the reference interpreter (``polyir.ir.interpreter``). A
program is a ``Module`` (its entry function runs) or a ``Function`` (run as a
module of its own).
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Union

import numpy as np

from polyir.errors import PassError, PolyirError, VerifyError
from polyir.ir.nodes import Buffer, Function, Module, Symbol
from polyir.ir.types import DType, round_to_dtype

Program = Union[Module, Function]
Sizes = Union[Mapping[str, int], int, None]

DEFAULT_SIZES: tuple[tuple[int, ...], ...] = (
    (5, 4, 3, 6, 2, 7),
    (3, 6, 2, 4, 7, 5),
    (1, 2, 1, 3, 1, 2),
)
"""Symbol values by position in ``Function.symbols``: trial ``t`` of
``assert_equivalent`` uses row ``t % 3`` when no ``sizes`` are given (the third
row catches off-by-one errors at extent 1)."""


def _module(program: Program) -> Module:
    if isinstance(program, Module):
        return program
    if isinstance(program, Function):
        return Module((program,))
    raise TypeError(f"expected a polyir Module or Function, got {type(program).__name__}")


def _text(program: Program) -> str:
    try:
        return str(_module(program))
    except Exception as error:  # the printer itself may refuse invalid IR
        return f"<cannot print: {type(error).__name__}: {error}>"


def symbol_values(function: Function | Module, sizes: Sizes = None, variant: int = 0) -> dict[str, int]:
    """Values for every size symbol of ``function`` (``Function.symbols``).

    ``sizes`` is ``None`` (row ``variant`` of ``DEFAULT_SIZES``, by symbol
    position), an int (every symbol gets it), or a mapping from symbol name to
    value (symbols it does not name take the defaults; names the function
    does not have are ignored, so one mapping can serve many programs).
    Values must be >= 1, the range ``programs()`` is valid for.
    """
    if isinstance(function, Module):
        function = function.entry
    row = DEFAULT_SIZES[variant % len(DEFAULT_SIZES)]
    values = {name: row[i % len(row)] for i, name in enumerate(function.symbols)}
    if isinstance(sizes, bool):
        raise TypeError("sizes must be an int or a mapping of symbol name to int, not a bool")
    if isinstance(sizes, int):
        values = {name: sizes for name in values}
    elif sizes is not None:
        values.update({name: int(value) for name, value in sizes.items() if name in values})
    for name, value in values.items():
        if value < 1:
            raise ValueError(f"symbol {name} = {value}: sizes must be >= 1")
    return values


def _random_array(dtype: DType, shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
    if dtype.is_float:
        return round_to_dtype(rng.uniform(-1.0, 1.0, size=shape), dtype)
    if dtype is DType.BOOL:
        return rng.integers(0, 2, size=shape).astype(np.bool_)
    return rng.integers(-4, 5, size=shape).astype(dtype.numpy)


def random_arguments(function: Function | Module, rng: np.random.Generator | int,
                     sizes: Sizes = None) -> list[Any]:
    """Arguments for ``function`` following its calling convention.

    Buffer parameters get fresh arrays of the parameter's dtype (float32 for
    bf16, values rounded) and shape evaluated at ``symbol_values(function,
    sizes)``: floats uniform in [-1, 1], ints in [-4, 4]. A 0-d parameter gets
    a 0-d array (so results written to it can be compared). ``Symbol``
    parameters get their int value. ``rng`` is a numpy Generator or a seed.
    """
    if isinstance(function, Module):
        function = function.entry
    if not isinstance(rng, np.random.Generator):
        rng = np.random.default_rng(rng)
    values = symbol_values(function, sizes)
    arguments: list[Any] = []
    for param in function.params:
        if isinstance(param, Symbol):
            arguments.append(values[param.name])
            continue
        shape = tuple(dim.evaluate(values) for dim in param.shape)
        if any(extent < 0 for extent in shape):
            raise ValueError(f"parameter {param.name}: shape {shape} is negative at sizes {values}")
        arguments.append(_random_array(param.dtype, shape, rng))
    return arguments


def _signature_problems(fa: Function, fb: Function) -> list[str]:
    problems: list[str] = []
    if len(fa.params) != len(fb.params):
        problems.append(f"first has {len(fa.params)} parameters, second has {len(fb.params)}")
    for index, (pa, pb) in enumerate(zip(fa.params, fb.params, strict=False)):
        if type(pa) is not type(pb):
            problems.append(f"parameter {index}: {type(pa).__name__} {pa.name} vs "
                            f"{type(pb).__name__} {pb.name}")
        elif pa.name != pb.name:
            problems.append(f"parameter {index}: named {pa.name} vs {pb.name}")
        elif isinstance(pa, Buffer) and isinstance(pb, Buffer):
            if pa.dtype is not pb.dtype:
                problems.append(f"parameter {pa.name}: dtype {pa.dtype} vs {pb.dtype}")
            if pa.shape != pb.shape:
                problems.append(f"parameter {pa.name}: shape [{', '.join(map(str, pa.shape))}] vs "
                                f"[{', '.join(map(str, pb.shape))}]")
    if set(fa.symbols) != set(fb.symbols):
        problems.append(f"size symbols {sorted(fa.symbols)} vs {sorted(fb.symbols)}")
    return problems


def _first_difference(expected: np.ndarray, actual: np.ndarray, rtol: float, atol: float) -> str | None:
    if expected.shape != actual.shape:
        return f"shape {expected.shape} vs {actual.shape}"
    if expected.dtype.kind in "fc":
        close = np.isclose(actual, expected, rtol=rtol, atol=atol, equal_nan=True)
    else:
        close = expected == actual
    if np.all(close):
        return None
    bad = np.argwhere(~np.asarray(close))
    first = tuple(int(i) for i in bad[0])
    where = f"[{', '.join(map(str, first))}]"
    return (f"{len(bad)} of {expected.size} elements differ; first at {where}: "
            f"first program {expected[first].item()!r}, second program {actual[first].item()!r}")


def _run(module: Module, args: list[Any], which: str, trial: int, parallel_order: str, seed: int) -> None:
    from polyir.ir.interpreter import interpret
    try:
        interpret(module, *args, parallel_order=parallel_order, seed=seed)
    except Exception as error:
        note = f"while interpreting the {which} program (trial {trial}):\n{_text(module)}"
        if hasattr(error, "add_note"):  # Python >= 3.11
            error.add_note(note)
        raise


def assert_equivalent(a: Program, b: Program, *, trials: int = 2, seed: int = 0, rtol: float = 1e-5,
                      atol: float = 1e-6, sizes: Sizes = None, parallel_order: str = "forward") -> None:
    """Assert that ``a`` and ``b`` leave every buffer parameter equal.

    Runs each trial on fresh random arguments (``random_arguments`` with seed
    ``seed + trial``), copied so both programs see the same inputs; with
    ``sizes=None`` trial ``t`` uses row ``t`` of ``DEFAULT_SIZES``. Floats are
    compared with ``rtol``/``atol`` (NaN equals NaN), other types exactly.
    ``parallel_order`` ("forward", "reverse", "shuffle") is how both programs
    run their parallel loops (``shuffle`` seeded per trial). Raises
    ``AssertionError`` naming the buffer, the first differing index and both
    values, and printing both programs; or when the signatures differ.
    """
    ma, mb = _module(a), _module(b)
    fa, fb = ma.entry, mb.entry
    problems = _signature_problems(fa, fb)
    if problems:
        raise AssertionError("programs have incompatible signatures:\n  " + "\n  ".join(problems) +
                             f"\n--- first program:\n{_text(ma)}\n--- second program:\n{_text(mb)}")
    for trial in range(trials):
        trial_sizes = sizes
        if sizes is None:
            trial_sizes = symbol_values(fa, None, variant=trial)
        args_a = random_arguments(fa, np.random.default_rng(seed + trial), trial_sizes)
        args_b = [x.copy() if isinstance(x, np.ndarray) else x for x in args_a]
        _run(ma, args_a, "first", trial, parallel_order, seed + trial)
        _run(mb, args_b, "second", trial, parallel_order, seed + trial)
        for param, xa, xb in zip(fa.params, args_a, args_b, strict=True):
            if not isinstance(param, Buffer):
                continue
            difference = _first_difference(xa, xb, rtol, atol)
            if difference is not None:
                values = symbol_values(fa, trial_sizes)
                raise AssertionError(
                    f"programs differ in buffer {param.name} (trial {trial}, seed {seed + trial}, "
                    f"sizes {values}, parallel_order={parallel_order!r}): {difference}\n"
                    f"--- first program:\n{_text(ma)}\n--- second program:\n{_text(mb)}")


def _refusal_reason(error: PolyirError) -> PolyirError | None:
    """The PolyirError that explains a refusal, or None when the error hides a bug
    (a non-polyir exception, or a ``VerifyError``: invalid output of the pass
    itself is a failure, never a refusal)."""
    if isinstance(error, PassError):
        cause = error.cause
        return _refusal_reason(cause) if isinstance(cause, PolyirError) else None
    if isinstance(error, VerifyError):
        return None
    return error


def assert_preserves_or_refuses(pass_fn: Callable[[Module], Module], module: Module,
                                **equivalence_options: Any) -> Module | PolyirError:
    """Assert the property every pass must have on ``module``.

    ``pass_fn(module)`` either returns a module that the verifier accepts and
    that ``assert_equivalent`` finds equivalent to ``module`` (returned), or
    raises a ``PolyirError`` (``IllegalTransform`` and the like, or a
    ``PassError`` wrapping one) with a non-empty reason (returned). Any other
    exception, a ``VerifyError`` (the pass produced invalid IR, whether it
    raised it or returned it), an empty reason, invalid or inequivalent output
    fails with ``AssertionError``. ``equivalence_options`` go to
    ``assert_equivalent``.
    """
    from polyir.ir.verifier import verify
    try:
        result = pass_fn(module)
    except PolyirError as error:
        reason = _refusal_reason(error)
        if reason is None:
            raise AssertionError(f"the pass failed with a non-polyir error or produced invalid IR "
                                 f"(a bug, not a refusal): {error}\n--- input program:\n"
                                 f"{_text(module)}") from error
        if not str(reason).strip():
            raise AssertionError(f"the pass refused with {type(reason).__name__} but gave no reason\n"
                                 f"--- input program:\n{_text(module)}") from error
        return error
    except Exception as error:
        raise AssertionError(f"the pass raised {type(error).__name__} (a bug, not a refusal): {error}\n"
                             f"--- input program:\n{_text(module)}") from error
    if not isinstance(result, Module):
        raise AssertionError(f"the pass returned {type(result).__name__}, not a Module")
    try:
        verify(result)
    except PolyirError as error:
        raise AssertionError(f"the pass produced invalid IR: {error}\n--- input program:\n{_text(module)}"
                             f"\n--- output program:\n{_text(result)}") from error
    assert_equivalent(module, result, **equivalence_options)
    return result
