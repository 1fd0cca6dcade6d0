#!/usr/bin/env bash
# Create .venv (once) and install polyir with torch (CPU), JAX (CPU), test, plot and MLIR extras.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
    "$PYTHON" -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip >/dev/null
# torch==2.13.0 is the CPU build; an unpinned torch would pull a multi-GB CUDA build.
.venv/bin/python -m pip install -q -e ".[torch,jax,test,plots,mlir]"
