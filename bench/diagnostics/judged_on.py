"""Where should a judge that has started CUDA compare a small problem: on the host or the device?

A warm API vet of the 256^3 GEMM judged on the host against the same vet judged on the device
(`judge.placement.HOST_JUDGE_FLOPS` set to 0), alternating in one process, each 1 s after the last (its
spare ready), so that both see one machine's pace. The recorded run
(bench/results/2026-11-30-h200/diagnostics/judged-on.json) is why a judge whose CUDA is already
started compares on the device.
Usage: python bench/diagnostics/judged_on.py OUT.json [PAIRS]
"""
from __future__ import annotations

import json
import statistics
import sys
import time

from vet_phases import gemm_256_ready   # bench/diagnostics/ is this script's directory
from kernelvet import judge
from kernelvet.judge import placement

HOST = placement.HOST_JUDGE_FLOPS


def main() -> None:
    out, pairs = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 5
    launcher, prob, path = gemm_256_ready()
    for limit in (HOST, 0):   # both paths warmed (the judge's CUDA context, Triton's cache)
        placement.HOST_JUDGE_FLOPS = limit
        judge.vet(path, prob, device="cuda", launcher=launcher)
    res = {"host": [], "device": []}
    for _ in range(pairs):
        for side, limit in (("host", HOST), ("device", 0)):
            placement.HOST_JUDGE_FLOPS = limit
            time.sleep(1.0)
            t0 = time.perf_counter()
            report = judge.vet(path, prob, device="cuda", launcher=launcher)
            res[side].append({"wall_s": time.perf_counter() - t0, "judged_on": report.device["judged_on"],
                              "verdict": str(report.verdict), "phases_s": dict(report.phases_s)})
    for side in ("host", "device"):
        walls = [r["wall_s"] for r in res[side]]
        cand = [r["phases_s"].get("candidate", 0) for r in res[side]]
        print(side, {r["judged_on"] for r in res[side]}, "wall", [round(w, 2) for w in walls], "median",
              round(statistics.median(walls), 3), "candidate phase median", round(statistics.median(cand), 3),
              flush=True)
    with open(out, "w") as fh:
        json.dump(res, fh, indent=1)


if __name__ == "__main__":
    main()
