#!/usr/bin/env bash
# Set up (scripts/setup.sh) and run the demo on built-in inputs (no downloads).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/python -m polyir.demo "$@"
