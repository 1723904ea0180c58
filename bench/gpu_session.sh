#!/usr/bin/env bash
# The GPU work of a session on the lent H200, in parts that each fit one 10-minute call:
#   bench/gpu_session.sh bench     environment, a smoke subset of the GPU tests, bench/gpu_bench.py
#   bench/gpu_session.sh tests     the whole GPU test suite (tests/test_gpu*.py)
#   bench/gpu_session.sh practice  kernelvet practice --device cuda --ablate --json
# Results land in $OUT (copied to bench/results/<date>-h200/ by hand afterwards).
set -u
export PYTHONPATH="$PWD/src" PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/kv-out}
mkdir -p "$OUT"
{
  date -u; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  python3 -c 'import torch, triton, sys; print("python", sys.version.split()[0], "torch", torch.__version__, "triton", triton.__version__, "cuda", torch.version.cuda)'
} > "$OUT/env.txt" 2>&1
cat "$OUT/env.txt"
case "${1:-bench}" in
  bench)
    python3 -m pytest -m gpu -q -p no:cacheprovider -rA tests/test_gpu_endings.py tests/test_gpu.py \
      -k "audit or endings or illegal or memory or ctypes or decoy or hidden_stream" 2>&1 | tee "$OUT/gpu-smoke.log" | tail -30
    python3 bench/gpu_bench.py "$OUT" 2>&1 | tee "$OUT/gpu-bench.log" | tail -60 ;;
  tests)
    python3 -m pytest -m gpu -q -p no:cacheprovider -rA tests/test_gpu.py tests/test_gpu_endings.py "${@:2}" 2>&1 \
      | tee "$OUT/gpu-tests.log" | tail -40 ;;
  practice)
    COLUMNS=200 python3 -m kernelvet practice --device cuda --ablate --json "$OUT/practice-cuda.json" 2>&1 \
      | tee "$OUT/practice-cuda.txt" | tail -80 ;;
esac
