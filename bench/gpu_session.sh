#!/usr/bin/env bash
# All GPU work of a session in one call on the lent H200: environment, the GPU test suite, and the
# corpus table with evidence. Results land in $OUT (copied to bench/results/ by hand afterwards).
set -u
export PYTHONPATH="$PWD/src" PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/kv-out}
mkdir -p "$OUT"
{
  date -u; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  python3 -c 'import torch, triton, sys; print("python", sys.version.split()[0], "torch", torch.__version__, "triton", triton.__version__, "cuda", torch.version.cuda)'
} > "$OUT/env.txt" 2>&1
cat "$OUT/env.txt"
python3 -m pytest -m gpu -q -p no:cacheprovider -rA tests/test_gpu.py "$@" 2>&1 | tee "$OUT/gpu-tests.log" | tail -40
python3 bench/corpus_table.py --device cuda --json "$OUT/corpus-cuda.json" 2>&1 | tee "$OUT/corpus-cuda.log" | tail -45
