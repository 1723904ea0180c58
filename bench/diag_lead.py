"""Session diagnostic (H200): what moves a launch-bound kernel's reading by a few percent.

Session 14's call 4 found, on one machine, do_bench reading the 256^3 Triton GEMM at 12.3 us while
kernelvet and the spin-led do_bench (dobench_process.spin_lead) read 12.8-12.9; on call 3's
machine all three agreed. Two differences between them are candidates: idle device time between
reps (a spin before the flush: 200 us in spin_lead, a lead per batch in kernelvet), and kernelvet
drawing its inputs from several sets (do_bench times one). Here, in one process on one machine,
rounds of do_bench (its per-rep median and host pace) under each variant, for the Triton GEMM and
torch.mm, with a kernelvet vet per round:
  plain, spin 20 us, spin 200 us, inputs rotated over 4 sets, spin 200 us + rotated.
Usage: python bench/diag_lead.py OUT.json [ROUNDS]
"""
from __future__ import annotations

import contextlib
import itertools
import json
import statistics
import sys
import time

import torch

import dobench_process   # bench/ is this script's directory
import kernelvet
from kernelvet import load_problem, spawn
from kernelvet.practice import by_name, kernels


@contextlib.contextmanager
def _lead(us: int):
    dobench_process.LEAD_US = us
    with dobench_process.spin_lead():
        yield


def _fns(rotate: int):
    g = torch.Generator(device="cuda").manual_seed(0)
    sets = [(torch.randn(256, 256, device="cuda", generator=g), torch.randn(256, 256, device="cuda", generator=g))
            for _ in range(rotate)]
    it = itertools.cycle(sets)
    return {"triton": lambda: kernels.matmul(*next(it), ieee=True), "torch": lambda: torch.mm(*next(it))}


VARIANTS = {"plain": (0, 1), "spin 20 us": (20, 1), "spin 200 us": (200, 1), "rotated 4": (0, 4),
            "spin 200 us + rotated 4": (200, 4)}


def main() -> None:
    out, rounds = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 3
    fns = {rot: _fns(rot) for rot in {r for _, r in VARIANTS.values()}}
    launcher = spawn.shared_launcher()
    prob = load_problem("matmul", (256, 256, 256))
    res = {"rounds": []}
    for r in range(rounds):
        row = {}
        for name, (lead, rot) in VARIANTS.items():
            for which, fn in fns[rot].items():
                with _lead(lead) if lead else contextlib.nullcontext():
                    times, gaps = dobench_process.dobench_stamped(fn)
                row[f"{name} | {which}"] = [round(statistics.median(times) * 1e3, 3), round(statistics.median(gaps))]
        rep = kernelvet.vet(by_name("triton_gemm_ieee").path, prob, device="cuda", launcher=launcher, audit="never")
        row["kernelvet | triton"] = round(rep.timing.median_ms * 1e3, 3)
        row["kernelvet | torch ref"] = round(rep.timing.reference_median_ms * 1e3, 3)
        time.sleep(1.2)   # the next vet's worker starts CUDA now: not while do_bench runs
        res["rounds"].append(row)
        print(r, json.dumps(row), flush=True)
    with open(out, "w") as fh:
        json.dump(res, fh, indent=1)


if __name__ == "__main__":
    main()
