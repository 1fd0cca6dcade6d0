"""Frontends: ways into polyir IR.

* ``polyir.frontends.pykernel``  ``@polyir.kernel``: plain Python loop nests
  (``pycheck`` checks the subset, ``pyexpr``/``pyast`` lower it, ``pytypes``
  holds the numpy-style type promotion).
* ``polyir.frontends.fx`` / ``aten``  PyTorch graphs.
* ``polyir.frontends.mlir``  affine MLIR in (via xDSL) and out.
* ``polyir.frontends.jax``  jaxprs (``polyir.jax.jit``).
* ``polyir.frontends.lowering``  the framework-neutral builders both graph
  frontends lower with (no torch, no jax).
"""
