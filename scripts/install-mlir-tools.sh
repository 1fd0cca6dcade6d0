#!/usr/bin/env bash
# Install MLIR's command-line tools (mlir-opt, mlir-runner, FileCheck) from Debian's
# mlir-22-tools package, unless mlir-opt is already there. Needs root (CI runs as root).
set -euo pipefail
if command -v mlir-opt >/dev/null 2>&1 || command -v mlir-opt-22 >/dev/null 2>&1; then
    exit 0
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -q >/dev/null
apt-get install -y -q mlir-22-tools >/dev/null
command -v mlir-opt-22 >/dev/null
