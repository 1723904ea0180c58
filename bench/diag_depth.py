"""Session diagnostic (H200, session 10): does the depth of the queued reps move the 256^3 reading?

Session 10's diag_clock run: NVML read the SM clock at 1980 MHz throughout do_bench and
kernelvet, so the offset is not a clock state NVML sees. But a fixed spin (torch.cuda._sleep)
timed between events read longer the deeper the reps were queued: 20000 cycles took 12.8 us
synced every rep, 13.4 us synced every 32 and 13.2-13.6 never synced (do_bench's way). Here:
  spin         two cycle counts per queue depth: the slope is the SM clock the kernel runs at,
               the intercept the event-to-event overhead around one kernel
  do_bench     torch.mm and the Triton GEMM, 256^3
  kernelvet    vets of the Triton GEMM (its torch reference timed beside it) with reps_per_sync
               32 (default) and 256 (session 10 also ran 4096, which the worker caps at a quarter
               of its budget's reps, ~300 there)
Session 11 runs it again after the worker's lead began to cover a whole rep's queueing (rehearse).
alternating, several rounds, one process.
Usage: python bench/diag_depth.py OUT.json
"""
from __future__ import annotations

import json
import statistics
import sys

import triton

from kernelvet.judge import Settings

from diag_clock import spin_ms   # bench/ is this script's directory
from diag_order import gemm_256

ROUNDS, CYCLES, DEPTHS = 4, (10_000, 40_000), (0, 32, 1)
PER_SYNC = (32, 256)


def main() -> None:
    dest = sys.argv[1]
    g = gemm_256()
    for r in range(ROUNDS):
        row = {}
        for name, fn in g.fns.items():
            row[f"do_bench {name} us"] = triton.testing.do_bench(fn, warmup=25, rep=100, return_mode="median") * 1e3
        for per_sync in PER_SYNC:
            rep = g.vet(Settings(reps_per_sync=per_sync))
            if rep.timing:
                row[f"kernelvet/{per_sync} triton us"] = rep.timing.median_ms * 1e3
                row[f"kernelvet/{per_sync} torch us"] = statistics.median(rep.timing.reference_raw_ms) * 1e3
        for depth in DEPTHS:
            t = [spin_ms(g.flush, depth, c) * 1e3 for c in CYCLES]
            slope = (t[1] - t[0]) / (CYCLES[1] - CYCLES[0])   # us per cycle
            row[f"spin sync/{depth} MHz"] = 1 / slope
            row[f"spin sync/{depth} overhead us"] = t[0] - CYCLES[0] * slope
        g.res["rounds"].append(row)
        print(r, json.dumps({k: round(v, 3) for k, v in row.items()}), flush=True)
    g.res["medians"] = {k: statistics.median(r[k] for r in g.res["rounds"] if k in r) for k in g.res["rounds"][0]}
    print("medians", json.dumps({k: round(v, 3) for k, v in g.res["medians"].items()}), flush=True)
    with open(dest, "w") as fh:
        json.dump(g.res, fh, indent=1)


if __name__ == "__main__":
    main()
