"""Reports on what passes did: :func:`polyir.report.explain.explain` (remarks and
changes per pass) and :mod:`polyir.report.changes` (the effect of a pipeline,
read from the IR before and after)."""
