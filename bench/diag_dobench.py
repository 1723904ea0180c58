"""Session diagnostic (H200): do_bench at 256^3 reads ~12.8 us in some runs and 16-30 us in others
(calls 1 and 2 of session 6), while kernelvet reads 12.2-12.9 us and CUPTI 9.8 us for the kernel.
Hypothesis: do_bench's only lead is its L2 flush (a 256 MB zero_, ~75 us of device time); when the
host's pace per rep (flush launch + event + the Triton launch + event) is slower than the device's
(flush + kernel), the device drains the queue and each start event fires before the kernel is
launched: launch latency lands inside the window. Each run records do_bench's per-rep times
(return_mode="all") and the host's interval between the timed calls (stamped inside fn).
Usage: python bench/diag_dobench.py OUT.json
       python bench/diag_dobench.py --sweep OUT.json   (session 7: do_bench's host pace with its
         thread on one core, for several cores and unpinned, before any kernelvet process exists
         and again after a vet: is the slow pace the host's, and does pinning steady it?)
       python bench/diag_dobench.py --both OUT.json   (session 13: in each round, do_bench in a
         process of its own (dobench_process.py) and here, then a vet here: in session 12 the
         bench's in-process do_bench slowed from ~50 us a rep to 89-103 us after a few vets)
"""
from __future__ import annotations

import json
import os
import statistics
import sys
import time

import torch

import kernelvet
from kernelvet import load_problem, spawn
from kernelvet.practice import by_name, kernels

import dobench_process   # bench/ is this script's directory
from dobench_process import dobench_stamped, flush_us


def one_run(a, b) -> dict:
    times, gaps = dobench_stamped(lambda: kernels.matmul(a, b, ieee=True))
    n = len(times)
    us = sorted(t * 1e3 for t in times)
    return {"median_us": statistics.median(us), "p10_us": us[len(us) // 10], "p90_us": us[9 * len(us) // 10],
            "reps": n, "over_15us": sum(t > 15 for t in us) / n,
            "host_gap_median_us": statistics.median(gaps), "host_gap_p90_us": sorted(gaps)[9 * len(gaps) // 10]}


def operands():
    """The 256^3 GEMM's inputs, its kernel loaded (compiled or from the cache) and run once."""
    g = torch.Generator(device="cuda").manual_seed(0)
    a = torch.randn(256, 256, device="cuda", generator=g)
    b = torch.randn(256, 256, device="cuda", generator=g)
    kernels.matmul(a, b, ieee=True)
    return a, b


def kernelvet_us(launcher) -> float | None:
    """kernelvet's reported median for the honest 256^3 GEMM (audit never), in us."""
    prob = load_problem("matmul", (256, 256, 256))
    rep = kernelvet.vet(by_name("triton_gemm_ieee").path, prob, device="cuda", launcher=launcher, audit="never")
    return rep.timing.median_ms * 1e3 if rep.timing else None


def sweep(a, b, label: str, rounds: int) -> list[dict]:
    """Two stamped do_bench runs per core per round, unpinned (None) first; cores spread over the
    machine's affinity set."""
    cpus = sorted(os.sched_getaffinity(0))
    cores = [None] + cpus[:: max(1, len(cpus) // 6)][:6]
    rows = []
    for r in range(rounds):
        for c in cores:
            dobench_process.PIN_CPU = c
            for _ in range(2):
                row = {"when": label, "round": r, "core": c, **one_run(a, b)}
                rows.append(row)
                print(label, r, f"core={c}", f"median_us={row['median_us']:.2f}",
                      f"host_gap_median_us={row['host_gap_median_us']:.1f}", f"over_15us={row['over_15us']:.2f}",
                      flush=True)
    dobench_process.PIN_CPU = None
    return rows


def main_sweep(out: str) -> None:
    a, b = operands()
    res = {"flush_us": flush_us(), "cpus": len(os.sched_getaffinity(0)), "runs": []}
    print("flush us", round(res["flush_us"], 1), "cpus", res["cpus"], flush=True)
    res["runs"] += sweep(a, b, "no-kernelvet", 3)
    res["kernelvet_us"] = kernelvet_us(spawn.shared_launcher())
    print("kernelvet us", res["kernelvet_us"], flush=True)
    time.sleep(2.0)
    res["runs"] += sweep(a, b, "after-vet", 2)
    with open(out, "w") as fh:
        json.dump(res, fh, indent=1)


def main_both(out: str, rounds: int = 5) -> None:
    a, b = operands()
    launcher = spawn.shared_launcher()
    own = dobench_process.DoBenchProcess()
    res = {"flush_us": flush_us(), "runs": []}
    for r in range(rounds):
        there = own.run("matmul", (256, 256, 256))
        gaps = sorted(there["host_gaps_us"])
        res["runs"].append({"round": r, "where": "own process", "median_us": 1e3 * statistics.median(there["candidate"]),
                            "host_gap_median_us": statistics.median(gaps), "host_gap_p90_us": gaps[9 * len(gaps) // 10],
                            "flush_us": there["flush_us"]})
        res["runs"].append({"round": r, "where": "here", **one_run(a, b)})
        res["runs"].append({"round": r, "where": "kernelvet", "kernelvet_us": kernelvet_us(launcher)})
        for row in res["runs"][-3:]:
            print(" ".join(f"{k}={v:.2f}" if isinstance(v, float) else f"{k}={v}" for k, v in row.items()), flush=True)
        time.sleep(1.2)
    own.close()
    with open(out, "w") as fh:
        json.dump(res, fh, indent=1)


def main() -> None:
    if sys.argv[1] == "--sweep":
        main_sweep(sys.argv[2])
        return
    if sys.argv[1] == "--both":
        main_both(sys.argv[2])
        return
    a, b = operands()
    launcher = spawn.shared_launcher()
    res = {"flush_us": flush_us(), "runs": []}
    print("flush (do_bench's 256 MB zero_) us", round(res["flush_us"], 1), flush=True)
    for r in range(4):
        for _ in range(2):
            row = one_run(a, b)
            res["runs"].append(row)
            print(r, " ".join(f"{k}={v:.3f}" if isinstance(v, float) else f"{k}={v}" for k, v in row.items()), flush=True)
        res["runs"].append({"kernelvet_us": kernelvet_us(launcher)})
        print(r, "kernelvet", res["runs"][-1], flush=True)
        time.sleep(2.0)
    with open(sys.argv[1], "w") as fh:
        json.dump(res, fh, indent=1)


if __name__ == "__main__":
    main()
