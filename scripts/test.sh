#!/usr/bin/env bash
# Set up (scripts/setup.sh) and run the whole test suite on all cores.
# HYPOTHESIS_PROFILE=deep bash scripts/test.sh runs the deep property tests.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/python -m pytest -n auto -q "$@"
