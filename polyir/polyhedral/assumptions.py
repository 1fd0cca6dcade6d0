"""What the polyhedral analyses assume about a function's arguments, in one place.

Every analysis and pass reasons under the isl *context* of a function
(``polyir.polyhedral.extract``), and a pass's rewrite is proved only for the
argument values inside it. The context is taken from the domains the
arguments really have:

* every explicit ``Symbol`` parameter is ``>= 0`` (sizes, offsets, counts);
  a negative value is refused at call time (``ArgumentError``), because code a
  pass has transformed (a loop marked parallel, a schedule) may be wrong for it;
* every dimension of every buffer *parameter* is ``>= 0``: an empty array is a
  legal argument, so nothing may assume a dimension is at least 1.

:func:`assumptions` lists these as affine expressions that must be ``>= 0``;
:func:`check_symbol` is the call-time check every backend applies to a
symbol's value (the dimensions are checked by the backends' shape checks,
which compare each dimension with the array's real, non-negative extent).
"""
from __future__ import annotations

from polyir.errors import ArgumentError
from polyir.ir.affine import Aff
from polyir.ir.nodes import Buffer, Function, Symbol

INT64_MIN = -(2 ** 63)
INT64_MAX = 2 ** 63 - 1


def assumptions(function: Function) -> tuple[Aff, ...]:
    """The affine expressions (in the function's symbols) assumed ``>= 0`` by
    every analysis of ``function``: its explicit symbols, then each distinct
    non-constant dimension of its buffer parameters."""
    found: list[Aff] = [Aff.var(p.name) for p in function.params if isinstance(p, Symbol)]
    for param in function.params:
        if isinstance(param, Buffer):
            for dim in param.shape:
                if not dim.is_constant and dim not in found:
                    found.append(dim)
    return tuple(found)


def check_symbol(value: int, name: str, where: str) -> int:
    """``value`` for symbol ``name`` if the compiled code is valid for it.

    Refuses (``ArgumentError`` naming ``where`` and the symbol) a value outside
    int64 (native code would wrap it) and a negative value (the analyses
    assume symbols are ``>= 0``; see the module docstring)."""
    if value < INT64_MIN or value > INT64_MAX:
        raise ArgumentError(f"{where}: symbol '{name}' = {value} does not fit in int64")
    if value < 0:
        raise ArgumentError(f"{where}: symbol '{name}' = {value} is negative; compiled code "
                            f"assumes every size symbol is >= 0 (the passes' proofs hold "
                            f"only for such values)")
    return value
