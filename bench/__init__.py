"""polyir benchmarks: ``python -m bench [--quick]``. See bench/README.md."""
