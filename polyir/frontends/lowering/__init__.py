"""Framework-neutral lowering: tensor values, loop-nest builders, index maps.

What every graph frontend (the ATen table in :mod:`polyir.frontends.aten`, the
jaxpr table in :mod:`polyir.frontends.jax`) builds its rules from. Nothing here
imports torch or jax: a rule reads its operands as
:class:`~polyir.frontends.lowering.context.TensorValue` objects and emits loop
nests through a :class:`~polyir.frontends.lowering.context.LoweringContext`.

* :mod:`.context`   tensor values, the context (buffers, names, statements), dtypes
* :mod:`.scalar`    scalar expression builders (rounding, division, clamps, GELU)
* :mod:`.reduce`    reduction nests, index reductions (argmax), scans
* :mod:`.views`     index maps: reshape, permute, broadcast, slice, flip
* :mod:`.copies`    concatenation, padding, gathers
* :mod:`.contract`  matrix products and general contractions
* :mod:`.conv`      convolutions (grouped, strided, dilated, padded, transposed)
* :mod:`.partition` grouping supported nodes into compiled segments
"""
from __future__ import annotations
