"""Session diagnostic (H200, session 9): kernelvet's per-rep times of torch.mm at 256^3 alternate
by rep parity (even and odd reps ~1 us apart in every report of session 9), and their median sits
in the trough between the two modes; the Triton GEMM's do not. Is it kernelvet's holding each
rep's output until its batch is verified (consecutive outputs in different allocator blocks;
do_bench's output block is reused every call)?

Per-rep times, with the medians of even and odd reps, for:
  dobench        do_bench's own (return_mode="all")
  free           do_bench's loop (int32 256 MB flush, events per rep, one sync at the end)
  hold           the same, each output kept until a sync every 32 reps (kernelvet's batches)
  hold+clone     and the inputs read (a clone each) before the flush, as kernelvet does
and kernelvet's times from a vet (torch.mm: its reference timing), as it is and with
`Settings(reps_per_sync=1)` (each rep's output verified and freed before the next rep).
Both kernels: torch.mm and the Triton GEMM.
Added in session 10 (not yet run), torch.mm only, into preallocated outputs taken in turn:
  out1, out2, out32   1, 2 or 32 buffers (no allocation per rep)
If out2 splits by parity and out1 does not, the split follows the output's address (held outputs
alternate between allocator blocks); if neither splits, the allocation itself is what moves it.
Usage: python bench/diag_parity.py OUT.json
"""
from __future__ import annotations

import itertools
import json
import statistics
import sys
import time

import torch
import triton

from kernelvet.judge import Settings

from diag_order import gemm_256   # bench/ is this script's directory

ROUNDS, REPS, BATCH = 3, 1000, 32


def split(times_ms) -> dict:
    us = [t * 1e3 for t in times_ms]
    return {"median": statistics.median(us), "even": statistics.median(us[0::2]), "odd": statistics.median(us[1::2])}


def loop(fn, flush, hold: bool, clone: bool, inputs, reps: int = REPS) -> list[float]:
    events, held = [], []
    for i in range(reps):
        if clone:
            for x in inputs:
                x.clone()
        flush.zero_()
        st, en = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        st.record()
        out = fn()
        en.record()
        events.append((st, en))
        if hold:
            held.append(out)
            if len(held) >= BATCH:
                en.synchronize()
                held.clear()
    torch.cuda.synchronize()
    return [s.elapsed_time(e) for s, e in events]


def into_outputs(a, b, k: int):
    """torch.mm(a, b) into k preallocated outputs, one after the other."""
    bufs, turn = [torch.empty_like(a) for _ in range(k)], itertools.count()
    return lambda: torch.mm(a, b, out=bufs[next(turn) % k])


def main() -> None:
    dest = sys.argv[1]
    g = gemm_256()
    for r in range(ROUNDS):
        row = {}
        for name, fn in g.fns.items():
            row[f"{name}/dobench"] = split(triton.testing.do_bench(fn, warmup=25, rep=100, return_mode="all"))
            for variant, hold, clone in (("free", False, False), ("hold", True, False), ("hold+clone", True, True)):
                row[f"{name}/{variant}"] = split(loop(fn, g.flush, hold, clone, (g.a, g.b)))
        for k in (1, 2, 32):
            row[f"torch/out{k}"] = split(loop(into_outputs(g.a, g.b, k), g.flush, False, False, ()))
        for label, settings in (("kernelvet", None), ("kernelvet-sync1", Settings(reps_per_sync=1))):
            rep = g.vet(settings)
            if rep.timing:
                row[f"torch/{label}"] = split(rep.timing.reference_raw_ms)
                row[f"triton/{label}"] = split(rep.timing.raw_ms)
            time.sleep(2.0)
        g.res["rounds"].append(row)
        for k, v in row.items():
            print(r, f"{k:20s} median {v['median']:.2f} even {v['even']:.2f} odd {v['odd']:.2f}", flush=True)
        torch.cuda.synchronize()
        time.sleep(2.0)   # the next vet's worker starts CUDA now: not while the loops run
    with open(dest, "w") as fh:
        json.dump(g.res, fh, indent=1)


if __name__ == "__main__":
    main()
