#!/usr/bin/env bash
# GPU check for polyir: the GPU tests and the GPU benchmark on a CUDA machine.
#
#   bash bench/gpu_check.sh OUTDIR            (from the repository root, Python 3.12)
#
# Made for a bare GPU host that has torch, cupy, numpy, networkx, hypothesis and
# pytest but not islpy/llvmlite: first, on a machine with network access,
#   ../shared/gpu-host/prepare-wheels.sh --with-llvmlite     (fills .whl/)
# and send .whl/ along (device tool: carry [".whl"]). The wheels are installed
# here without an index or dependencies into /tmp/site.
#
# Steps, each under a time limit so that the whole run ends in about 10 minutes
# (GPU_CHECK_TEST_S, GPU_CHECK_BENCH_S seconds; GPU_CHECK_QUICK=1: small sizes):
#   1. environment: versions, GPU, ptxas if present          -> OUTDIR/env.json
#   2. pytest -m gpu tests/gpu (real runs against numpy/torch) -> OUTDIR/gpu_tests.xml
#   3. bench/gpu_bench.py: f16/bf16 matmul 1024^3..8192^3 vs torch.matmul (cuBLAS),
#      linear+relu vs eager and Inductor, ResNet-50 convolutions (batch 1, 8) vs cuDNN,
#      softmax rows vs torch.softmax, elementwise, attention (f16, sequence 2048,
#      head dim 128) vs F.scaled_dot_product_attention, every benchmark model at
#      batch 1 on CUDA tensors vs eager and Inductor (saved after every case)
#                                                           -> OUTDIR/gpu_bench.json
#   4. OUTDIR/summary.json (exit codes, timings); everything printed -> OUTDIR/gpu_check.log
# GPU_CHECK_PROFILE=1 first profiles the 4096^3 f16 matmul kernel with Nsight Compute
# (bench/gpu_profile.py -> OUTDIR/gpu_profile.txt).
# GPU_CHECK_SWEEP=1 first runs the tile-configuration sweep of the f16 matmul
# (bench/gpu_bench.py --sweep -> OUTDIR/gpu_sweep.json); GPU_CHECK_SKIP_BENCH=1 then stops.
# Exit status 0 only when the GPU was usable and tests and benchmark passed.
set -u
OUT=${1:?usage: bash bench/gpu_check.sh OUTDIR}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
exec > >(tee -a "$OUT/gpu_check.log") 2>&1
PY=${PYTHON:-python3}
ROOT=$(pwd)
START=$(date +%s)
TEST_S=${GPU_CHECK_TEST_S:-240}
BENCH_S=${GPU_CHECK_BENCH_S:-330}

echo "== polyir gpu_check $(date -u +%FT%TZ) in $ROOT"
if ls .whl/*.whl >/dev/null 2>&1; then
  echo "== installing wheels from .whl/: $(cd .whl && ls *.whl | tr '\n' ' ')"
  "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl || echo "!! wheel install failed"
  export PYTHONPATH="$ROOT:/tmp/site${PYTHONPATH:+:$PYTHONPATH}"  # the checkout wins over a polyir wheel
else
  export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
fi
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm --format=csv 2>/dev/null || echo "(no nvidia-smi)"
OUTDIR="$OUT" "$PY" - <<'EOF'
import json, os, shutil, subprocess, sys
env = {"python": sys.version.split()[0]}
for name in ("numpy", "llvmlite", "cupy", "torch", "islpy", "networkx", "hypothesis", "pytest", "polyir"):
    try:
        module = __import__(name)
        env[name] = getattr(module, "__version__", "?")
    except Exception as error:
        env[name] = f"MISSING: {error}"
ptxas = shutil.which("ptxas")
env["ptxas"] = subprocess.run([ptxas, "--version"], capture_output=True, text=True).stdout.strip().splitlines()[-1] if ptxas else None
status = 0
try:
    import cupy
    env["gpus"] = cupy.cuda.runtime.getDeviceCount()
    env["compute_capability"] = cupy.cuda.Device().compute_capability
    env["driver"] = cupy.cuda.runtime.driverGetVersion()
except Exception as error:
    env["gpu_error"] = f"{type(error).__name__}: {error}"
    status = 3
print(json.dumps(env, indent=1))
with open(os.path.join(os.environ["OUTDIR"], "env.json"), "w") as handle:
    json.dump(env, handle, indent=1)
sys.exit(status)
EOF
GPU_STATUS=$?
if [ "$GPU_STATUS" -ne 0 ]; then echo "!! no usable GPU/CuPy: the gpu tests below will be skipped"; fi

echo "== GPU tests (limit ${TEST_S}s)"
T0=$(date +%s)
timeout -k 10 "$TEST_S" "$PY" -m pytest -m gpu tests/gpu -q -rs -p no:cacheprovider \
  --junitxml="$OUT/gpu_tests.xml"
TEST_STATUS=$?
T1=$(date +%s)

if [ "${GPU_CHECK_PROFILE:-0}" = "1" ] && command -v ncu >/dev/null; then
  echo "== Nsight Compute profile of the 4096^3 f16 matmul kernel"
  timeout -k 10 180 ncu --clock-control none --kernel-name regex:mm_k0 --launch-skip 2 --launch-count 1 \
    --section SpeedOfLight --section Occupancy --section LaunchStats --section SchedulerStats \
    --section WarpStateStats --section MemoryWorkloadAnalysis --section InstructionStats \
    --metrics "regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio" \
    "$PY" bench/gpu_profile.py 4096 > "$OUT/gpu_profile.txt" 2>&1
  echo "ncu exit $?"; tail -n 150 "$OUT/gpu_profile.txt"
fi

if [ "${GPU_CHECK_SWEEP:-0}" = "1" ]; then
  echo "== tile sweep (limit ${BENCH_S}s)"
  timeout -k 10 "$BENCH_S" "$PY" bench/gpu_bench.py --sweep --out "$OUT/gpu_sweep.json"
  if [ "${GPU_CHECK_SKIP_BENCH:-0}" = "1" ]; then exit 0; fi
fi

echo "== benchmark (limit ${BENCH_S}s)"
QUICK=()
if [ "${GPU_CHECK_QUICK:-0}" = "1" ]; then QUICK=(--quick); fi
timeout -k 10 "$BENCH_S" "$PY" bench/gpu_bench.py --out "$OUT/gpu_bench.json" "${QUICK[@]}"
BENCH_STATUS=$?
T2=$(date +%s)

cat > "$OUT/summary.json" <<EOF
{"gpu_usable": $([ "$GPU_STATUS" -eq 0 ] && echo true || echo false), "tests_exit": $TEST_STATUS, "tests_s": $((T1 - T0)),
 "bench_exit": $BENCH_STATUS, "bench_s": $((T2 - T1)), "total_s": $((T2 - START)),
 "timed_out": {"tests": $([ "$TEST_STATUS" -eq 124 ] && echo true || echo false), "bench": $([ "$BENCH_STATUS" -eq 124 ] && echo true || echo false)}}
EOF
echo "== summary: $(cat "$OUT/summary.json")"
if [ "$GPU_STATUS" -ne 0 ] || [ "$TEST_STATUS" -ne 0 ] || [ "$BENCH_STATUS" -ne 0 ]; then exit 1; fi
exit 0
