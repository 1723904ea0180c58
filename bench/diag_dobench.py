"""Session diagnostic (H200): do_bench at 256^3 reads ~12.8 us in some runs and 16-30 us in others
(calls 1 and 2 of session 6), while kernelvet reads 12.2-12.9 us and CUPTI 9.8 us for the kernel.
Hypothesis: do_bench's only lead is its L2 flush (a 256 MB zero_, ~75 us of device time); when the
host's pace per rep (flush launch + event + the Triton launch + event) is slower than the device's
(flush + kernel), the device drains the queue and each start event fires before the kernel is
launched: launch latency lands inside the window. Each run records do_bench's per-rep times
(return_mode="all") and the host's interval between the timed calls (stamped inside fn).
Usage: python bench/diag_dobench.py OUT.json
"""
from __future__ import annotations

import json
import statistics
import sys
import time

import torch

import kernelvet
from kernelvet import load_problem, spawn
from kernelvet.practice import by_name, kernels

from gpu_bench import _dobench_stamped as dobench_stamped, _flush_us as flush_us   # bench/ is this script's directory


def one_run(a, b) -> dict:
    times, gaps = dobench_stamped(lambda: kernels.matmul(a, b, ieee=True))
    n = len(times)
    us = sorted(t * 1e3 for t in times)
    return {"median_us": statistics.median(us), "p10_us": us[len(us) // 10], "p90_us": us[9 * len(us) // 10],
            "reps": n, "over_15us": sum(t > 15 for t in us) / n,
            "host_gap_median_us": statistics.median(gaps), "host_gap_p90_us": sorted(gaps)[9 * len(gaps) // 10]}


def main() -> None:
    g = torch.Generator(device="cuda").manual_seed(0)
    a = torch.randn(256, 256, device="cuda", generator=g)
    b = torch.randn(256, 256, device="cuda", generator=g)
    kernels.matmul(a, b, ieee=True)
    launcher = spawn.shared_launcher()
    prob = load_problem("matmul", (256, 256, 256))
    res = {"flush_us": flush_us(), "runs": []}
    print("flush (do_bench's 256 MB zero_) us", round(res["flush_us"], 1), flush=True)
    for r in range(4):
        for _ in range(2):
            row = one_run(a, b)
            res["runs"].append(row)
            print(r, " ".join(f"{k}={v:.3f}" if isinstance(v, float) else f"{k}={v}" for k, v in row.items()), flush=True)
        rep = kernelvet.vet(by_name("triton_gemm_ieee").path, prob, device="cuda", launcher=launcher, audit="never")
        res["runs"].append({"kernelvet_us": rep.timing.median_ms * 1e3 if rep.timing else None})
        print(r, "kernelvet", res["runs"][-1], flush=True)
        time.sleep(2.0)
    with open(sys.argv[1], "w") as fh:
        json.dump(res, fh, indent=1)


if __name__ == "__main__":
    main()
