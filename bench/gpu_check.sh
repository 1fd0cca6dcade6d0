#!/usr/bin/env bash
# GPU check for polyir: run the GPU tests and a small benchmark on a CUDA machine.
#
#   bash bench/gpu_check.sh OUTDIR            (from the repository root, Python 3.12)
#
# Installs wheels from .whl/ when present (no index, no dependencies) into
# /tmp/site, runs `pytest -m gpu tests/gpu`, then bench/gpu_bench.py. Writes to
# OUTDIR: gpu_check.log (everything), pytest.log, gpu_tests.xml (JUnit),
# gpu_bench.json (benchmark) and summary.json (exit codes, timings).
# Environment: PYTHON (default python3), GPU_CHECK_QUICK=1 for small sizes only.
set -u
OUT=${1:?usage: bash bench/gpu_check.sh OUTDIR}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
exec > >(tee -a "$OUT/gpu_check.log") 2>&1
PY=${PYTHON:-python3}
ROOT=$(pwd)
START=$(date +%s)

echo "== polyir gpu_check $(date -u +%FT%TZ) in $ROOT"
if ls .whl/*.whl >/dev/null 2>&1; then
  echo "== installing wheels from .whl/"
  "$PY" -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl
  export PYTHONPATH="$ROOT:/tmp/site${PYTHONPATH:+:$PYTHONPATH}"  # the checkout wins over a polyir wheel
else
  export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
fi
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv 2>/dev/null || echo "(no nvidia-smi)"
"$PY" - <<'EOF'
import sys
print("python", sys.version.split()[0])
for name in ("numpy", "llvmlite", "cupy", "torch", "islpy", "hypothesis", "polyir"):
    try:
        module = __import__(name)
        print(name, getattr(module, "__version__", "?"))
    except Exception as error:
        print(name, "MISSING:", error)
try:
    import cupy
    print("gpus:", cupy.cuda.runtime.getDeviceCount(), "cc", cupy.cuda.Device().compute_capability)
except Exception as error:
    print("cupy/GPU not usable:", error)
    sys.exit(3)
EOF
GPU_STATUS=$?
if [ "$GPU_STATUS" -ne 0 ]; then echo "!! no usable GPU/CuPy: the gpu tests below will be skipped"; fi

echo "== GPU tests"
T0=$(date +%s)
"$PY" -m pytest -m gpu tests/gpu -q -rs -p no:cacheprovider --junitxml="$OUT/gpu_tests.xml" \
  2>&1 | tee "$OUT/pytest.log"
TEST_STATUS=${PIPESTATUS[0]}
T1=$(date +%s)

echo "== benchmark"
QUICK=()
if [ "${GPU_CHECK_QUICK:-0}" = "1" ]; then QUICK=(--quick); fi
"$PY" bench/gpu_bench.py --out "$OUT/gpu_bench.json" "${QUICK[@]}"
BENCH_STATUS=$?
T2=$(date +%s)

cat > "$OUT/summary.json" <<EOF
{"gpu_usable": $([ "$GPU_STATUS" -eq 0 ] && echo true || echo false), "tests_exit": $TEST_STATUS, "tests_s": $((T1 - T0)), "bench_exit": $BENCH_STATUS,
 "bench_s": $((T2 - T1)), "total_s": $((T2 - START))}
EOF
echo "== summary: $(cat "$OUT/summary.json")"
if [ "$GPU_STATUS" -ne 0 ] || [ "$TEST_STATUS" -ne 0 ] || [ "$BENCH_STATUS" -ne 0 ]; then exit 1; fi
exit 0
