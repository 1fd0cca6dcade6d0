#!/usr/bin/env bash
# Create .venv (once) and install polyir with torch (CPU), JAX (CPU), test, plot and MLIR extras.
# A second run with the same pyproject.toml, Python and checkout installs nothing (a stamp in
# .venv records what was installed); delete .venv/polyir-setup.stamp to force a reinstall.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
# The exact torch build the project is tested with: 2.13.0 from the package index this machine
# resolves to the CPU build (an unpinned torch would pull a multi-GB CUDA build). The package's
# own `torch` extra only asks for a range.
TORCH_PIN="torch==2.13.0"
if [ ! -x .venv/bin/python ]; then
    "$PYTHON" -m venv .venv
fi
stamp_file=.venv/polyir-setup.stamp
stamp=$( { cat pyproject.toml; echo "$TORCH_PIN"; pwd; .venv/bin/python -VV; } | sha256sum | cut -d' ' -f1)
if [ -f "$stamp_file" ] && [ "$(cat "$stamp_file")" = "$stamp" ] \
        && .venv/bin/python -c "import polyir" 2>/dev/null; then
    exit 0  # nothing changed since the last install
fi
rm -f "$stamp_file"
.venv/bin/python -m pip install -q --upgrade pip >/dev/null
.venv/bin/python -m pip install -q "$TORCH_PIN"
# setuptools cautions, on every editable install of a flat layout, that folders named like the
# package may shadow it; polyir is meant to be imported from this checkout, so it is silenced.
PYTHONWARNINGS="ignore:Editable installation${PYTHONWARNINGS:+,$PYTHONWARNINGS}" \
    .venv/bin/python -m pip install -q -e ".[torch,jax,test,plots,mlir]"
echo "$stamp" > "$stamp_file"
