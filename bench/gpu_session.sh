#!/usr/bin/env bash
# The GPU work on one CUDA machine, in parts that each fit a 10-minute limit:
#   bench/gpu_session.sh all       the whole GPU test suite, then bench/gpu_bench.py at every size
#                                  (bench/timing.py's and bench/cost.py's rows) and its table, in
#                                  one invocation; each step's seconds in steps.txt
#   bench/gpu_session.sh bench     bench/gpu_bench.py (timing against do_bench, latency, the CLI)
#   bench/gpu_session.sh tests     the whole GPU test suite (every test marked gpu)
#   bench/gpu_session.sh practice [PATTERN ...]   kernelvet practice --device cuda --ablate --json
#                                  (split by pattern across invocations if need be;
#                                  bench/practice_merge.py joins the JSON files and gives the whole
#                                  run's verdict)
#   bench/gpu_session.sh verify [PATTERN ...]   after a change: the GPU tests outside the corpus
#                                  matrix, then practice for the patterns given (the matrix's checks),
#                                  each given what is left of 580 s
#   bench/gpu_session.sh sweep LEVELS RANGE [SECONDS]   a part of the KernelBench sweep into
#                                  $OUT/sweep (bench/kernelbench_sweep.py; default 560 s): stopped by
#                                  SIGINT, then SIGKILL, when its time is up, so that every verdict
#                                  written so far stays; the same folder resumes it (RESUME=DIR: a
#                                  part's folder carried from here, copied in first)
#                                  and the host's and device's memory every 2 s in $OUT/mem.log
#   bench/gpu_session.sh parts TOTAL_S PART ...   several parts of the sweep in one invocation of at
#                                  most TOTAL_S seconds, each PART LEVEL:RANGE:SECONDS[:RESUMEDIR]
#                                  (SECONDS 0: what is left; RANGE as the sweep takes it, 45,21,22
#                                  included), each part's folder, memory log and log packed into
#                                  $OUT/pN.tgz (a device run returns few files); GPU tests first
#                                  where TESTS names them, into $OUT/gpu-tests.log, stopped after
#                                  TESTS_S (default 120) seconds
#   bench/gpu_session.sh phases SPECS [BUDGET_S [SECONDS]]   bench/diagnostics/kernelbench_phases.py
#                                  (where a big vet's time goes: the judge's steps timed) into
#                                  $OUT/phases.jsonl, stopped after SECONDS (its vet under way recorded)
#   bench/gpu_session.sh suite [SECONDS [LOG ...]]   the whole GPU test suite over as many calls as it
#                                  takes: every test marked gpu that no earlier part's LOG (a log this
#                                  mode wrote, carried back) reports, verbose, into $OUT/gpu-tests.log,
#                                  stopped by SIGINT after SECONDS (default 560) with what it reached
#   bench/gpu_session.sh short     practice, then the GPU tests the practice matrix does not cover
#                                  (streams at 4096^3, the audit, CUDA endings), then the latency
#                                  rows of the bench, each given what is left of 580 s
# Results land in $OUT; bench/README.md says how they become bench/results/<date>-<device>/.
# Carry .kernelbench/KernelBench for the sweep, and .whl where it holds wheels (see below).
set -u
export PYTHONPATH="$PWD/src" PYTHONUNBUFFERED=1 COLUMNS=200
# Packages some problems import that the device lacks (KernelBench's Mamba2 problems: einops), as
# wheels in the git-ignored .whl/: installed into a folder under the repository, which workers see.
if ls .whl/*.whl > /dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$PWD/.kernelbench/site" .whl/*.whl \
    && export PYTHONPATH="$PYTHONPATH:$PWD/.kernelbench/site"
fi
OUT=${OUT:-/tmp/kv-out}
mkdir -p "$OUT"
# Leftovers of an earlier invocation that was killed: kernelvet's launchers, workers, device judges and practice runs, but never
# this script or what called it (a caller's command line may name kernelvet.practice too).
stop_leftovers() {
  local mine=" " p=$$
  while [ -n "$p" ] && [ "$p" -gt 1 ]; do mine+="$p "; p=$(ps -o ppid= -p "$p" 2>/dev/null | tr -d ' '); done
  for pid in $(pgrep -f "[k]ernelvet\.(launcher|practice|worker|batch\.devjudge)"); do
    case "$mine" in *" $pid "*) ;; *) kill "$pid" 2>/dev/null ;; esac
  done
}
# A killed judge's device memory can outlive it for a while: wait (up to 60 s) until the device
# holds less than 2 GiB before anything is measured, and say what it held.
wait_for_free_device() {
  local used
  for _ in $(seq 60); do
    used=$(nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits 2>/dev/null | head -1)
    [ -z "$used" ] || [ "$used" -lt 2048 ] && return 0
    sleep 1
  done
  echo "the device still holds $used MiB: $(nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader | tr '\n' ' ')"
}
# The host's and the device's memory every 2 s, into $1: seconds since the epoch, MemAvailable,
# Committed_AS and Shmem (memfds in flight among them) in GiB, the largest process's resident
# anonymous and shared GiB, the device's MiB in use, the three largest processes (resident GiB:pid:args),
# and after "apps" the device MiB each process holds (pid:MiB, the driver's account: a worker's share
# is not the worker's word). A judge the host runs out of memory is killed without a word; this is
# what says so.
memory_log() {
  while true; do
    top=$(ps -eo pid= --sort=-rss | head -1 | tr -d ' ')
    echo "$(date +%s) $(awk '/MemAvailable|Committed_AS|^Shmem:/{printf "%s %d ", $1, $2/1048576}' /proc/meminfo)largest $(awk '/RssAnon|RssShmem/{printf "%s%d ", $1, $2/1048576}' /proc/$top/status 2>/dev/null)gpu_mib $(nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits 2>/dev/null | head -1) $(ps -eo rss=,pid=,args= --sort=-rss | head -3 | awk '{printf "%dGiB:%s:%s:%s ", $1/1048576, $2, $4, $5}')apps $(nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader,nounits 2>/dev/null | tr -d ' ' | tr ',\n' ': ')" >> "$1"
    sleep 2
  done
}
# One part of the KernelBench sweep into DIR/sweep (resumed from RESUMEDIR where given), its
# memory log in DIR/mem.log and its output in DIR/sweep.log, stopped after SECONDS:
#   sweep_part DIR LEVELS RANGE SECONDS [RESUMEDIR]
sweep_part() {
  local dir=$1 pid timer sampler
  mkdir -p "$dir/sweep"; [ -n "${5:-}" ] && [ -d "$5" ] && cp -r "$5"/. "$dir/sweep"/
  memory_log "$dir/mem.log" & sampler=$!
  # A pool of one GPU (--gpus all): its judge a process of its own, started afresh if the host kills it
  setsid python3 bench/kernelbench_sweep.py --results "$dir/sweep" --levels "$2" \
    --range "$3" -- --no-progress --gpus all > "$dir/sweep.log" 2>&1 &
  pid=$!
  # SIGINT, then the pool's own stop of its judge (up to 20 s), then SIGKILL
  ( sleep "$4"; kill -INT -- -"$pid" 2>/dev/null; sleep 25; kill -KILL -- -"$pid" 2>/dev/null ) & timer=$!
  wait "$pid"; echo "sweep exit $? after $((SECONDS - START)) s"; kill "$timer" "$sampler" 2>/dev/null
  stop_leftovers; wait_for_free_device   # a judge the stop left behind holds device memory the next step needs
  python3 bench/kernelbench_sweep.py --results "$dir/sweep" --levels "$2" --table-only > /dev/null 2>&1
}
stop_leftovers
wait_for_free_device
{
  date -u; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  python3 -c 'import torch, triton, sys; print("python", sys.version.split()[0], "torch", torch.__version__, "triton", triton.__version__, "cuda", torch.version.cuda)'
} > "$OUT/env.txt" 2>&1
cat "$OUT/env.txt"
START=$SECONDS
left() { echo $(( 580 - (SECONDS - START) - $1 )); }   # seconds left, keeping $1 for what follows
NOT_MATRIX='not test_cuda_cheat_is_rejected and not test_cuda_ablation and not test_cuda_honest'
case "${1:-bench}" in
  all)
    timeout "$(left 60)" python3 -m pytest -m gpu -q -p no:cacheprovider -rA --durations=20 tests/ \
      > "$OUT/gpu-tests.log" 2>&1
    echo "tests: exit $? after $((SECONDS - START)) s" | tee "$OUT/steps.txt"; tail -3 "$OUT/gpu-tests.log"
    stop_leftovers; wait_for_free_device
    timeout "$(left 0)" python3 bench/gpu_bench.py "$OUT" --parts=latency,small,cli,big > "$OUT/gpu-bench.log" 2>&1
    echo "bench: exit $? after $((SECONDS - START)) s" | tee -a "$OUT/steps.txt"; tail -45 "$OUT/gpu-bench.log" ;;
  bench)
    python3 bench/gpu_bench.py "$OUT" "${@:2}" 2>&1 | tee "$OUT/gpu-bench.log" | tail -60 ;;
  tests)
    python3 -m pytest -m gpu -q -p no:cacheprovider -rA tests/ "${@:2}" 2>&1 \
      | tee "$OUT/gpu-tests.log" | tail -40 ;;
  practice)
    python3 -m kernelvet practice "${@:2}" --device cuda --ablate --json "$OUT/practice-cuda.json" \
      > "$OUT/practice-cuda.txt" 2>&1
    echo "practice exit $?"; tail -60 "$OUT/practice-cuda.txt" ;;
  verify)
    timeout "$(left 250)" python3 -m pytest -m gpu -q -p no:cacheprovider -rA tests/ \
      -k "$NOT_MATRIX" > "$OUT/gpu-tests.log" 2>&1
    echo "tests exit $? after $((SECONDS - START)) s"; tail -16 "$OUT/gpu-tests.log"
    stop_leftovers; wait_for_free_device
    timeout "$(left 0)" python3 -m kernelvet practice "${@:2}" --device cuda --ablate --json "$OUT/practice-cuda.json" \
      > "$OUT/practice-cuda.txt" 2>&1
    echo "practice exit $? after $((SECONDS - START)) s"; grep -E "^[0-9]+/[0-9]+ |cheats rejected" "$OUT/practice-cuda.txt" ;;
  sweep)
    # RESUME=DIR: an earlier part's folder (results.jsonl, problems.json), carried to the device: resumed
    sweep_part "$OUT" "${2:?levels}" "${3:?range}" "${4:-560}" "${RESUME:-}"
    tail -30 "$OUT/sweep/sweep.md" ;;
  parts)
    end=$(( SECONDS + ${2:?total seconds} ))
    if [ -n "${TESTS:-}" ]; then
      timeout -s INT "${TESTS_S:-120}" python3 -m pytest -m gpu -v -p no:cacheprovider -rA $TESTS > "$OUT/gpu-tests.log" 2>&1
      echo "tests exit $? after $((SECONDS - START)) s"; tail -1 "$OUT/gpu-tests.log"
      stop_leftovers; wait_for_free_device
    fi
    n=0
    for part in "${@:3}"; do
      n=$((n + 1)); IFS=: read -r level range secs resume <<< "$part"
      left=$(( end - SECONDS - 10 ))
      [ "${secs:-0}" -eq 0 ] || [ "$secs" -gt "$left" ] && secs=$left
      [ "$secs" -lt 60 ] && { echo "part $n ($part) not started: $secs s left"; break; }
      mkdir -p "$OUT/p$n"
      echo "part $n: $part, $secs s"
      sweep_part "$OUT/p$n" "$level" "$range" "$((secs - 35))" "${resume:-}"
      grep -E "^\| $level \| " "$OUT/p$n/sweep/sweep.md" | grep -v "| - | - | - |" | head -20
      tar -czf "$OUT/p$n.tgz" -C "$OUT" "p$n" && rm -rf "${OUT:?}/p$n"
    done ;;
  phases)
    # bench/diagnostics/kernelbench_phases.py for SPECS (e.g. 44:allowed), after any leftover judge
    # has let the device go: where a big vet's time goes, step by step
    timeout "${4:-$(left 0)}" python3 bench/diagnostics/kernelbench_phases.py "$OUT/phases.jsonl" "${2:?specs}" "${3:-60}" \
      > "$OUT/phases.log" 2>&1
    echo "phases exit $? after $((SECONDS - START)) s"; tail -c 3000 "$OUT/phases.jsonl" ;;
  suite)
    # the ids of the tests marked gpu, less those an earlier part reported (PASSED, FAILED, ERROR, SKIPPED)
    python3 -m pytest -m gpu -q -p no:cacheprovider --collect-only tests/ 2>/dev/null | grep "::" | sort > "$OUT/all-ids.txt"
    cat "${@:3}" /dev/null | grep -oE "^tests/[^ ]+ (PASSED|FAILED|ERROR|SKIPPED)" | cut -d" " -f1 | sort -u > "$OUT/done-ids.txt"
    comm -23 "$OUT/all-ids.txt" "$OUT/done-ids.txt" > "$OUT/ids.txt"
    echo "$(wc -l < "$OUT/ids.txt") of $(wc -l < "$OUT/all-ids.txt") tests to run"
    if [ -s "$OUT/ids.txt" ]; then
      timeout -s INT "${2:-560}" python3 -m pytest -m gpu -v -p no:cacheprovider -rA --durations=20 \
        $(cat "$OUT/ids.txt") > "$OUT/gpu-tests.log" 2>&1
      echo "tests exit $? after $((SECONDS - START)) s"; grep -E " (FAILED|ERROR)( |$)" "$OUT/gpu-tests.log" | head -20
      tail -1 "$OUT/gpu-tests.log"
    fi
    rm -f "$OUT/all-ids.txt" "$OUT/done-ids.txt" ;;
  short)
    timeout "$(left 170)" python3 -m kernelvet practice --device cuda --ablate --json "$OUT/practice-cuda.json" \
      > "$OUT/practice-cuda.txt" 2>&1
    echo "practice exit $? after $((SECONDS - START)) s"; tail -45 "$OUT/practice-cuda.txt"
    stop_leftovers; wait_for_free_device
    timeout "$(left 65)" python3 -m pytest -m gpu -q -p no:cacheprovider -rA tests/ \
      -k "$NOT_MATRIX" > "$OUT/gpu-tests.log" 2>&1
    echo "tests exit $? after $((SECONDS - START)) s"; tail -22 "$OUT/gpu-tests.log"
    timeout "$(left 0)" python3 bench/gpu_bench.py "$OUT" --parts=latency > "$OUT/gpu-bench.log" 2>&1
    echo "bench exit $? after $((SECONDS - START)) s"; tail -25 "$OUT/gpu-bench.log" ;;
esac
