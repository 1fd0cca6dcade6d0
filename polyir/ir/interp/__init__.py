"""The reference interpreter's implementation; use :func:`polyir.ir.interpreter.interpret`.

Modules: ``scalar`` (value semantics), ``emit``/``exprs``/``codegen`` (IR ->
Python source), ``binding`` (calling convention), ``runtime`` (cache, per-call
state, launches), ``gpu`` (blocks, barriers, warp fragments).
"""
