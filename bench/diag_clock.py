"""Session diagnostic (H200; written in session 9, run in session 10): is the device's SM clock what moves
kernelvet's 256^3 readings away from do_bench's?

Session 9 (results/2026-11-30-h200-s9, calls 5-6): torch.mm at 256^3 read 12.0-12.35 us in
do_bench (its queue never lets the device idle), 11.55-11.65 us in kernelvet (idle once per 32
reps, while the host verifies outputs) and 11.0-11.1 us with one rep per sync (idle before
every rep). Here NVML samples the SM clock, the memory clock and the power draw every ms in a
thread while each of those runs, and each run's median is printed beside the clocks it ran at.
A fixed count of spin cycles is also timed with events, queued the way each harness queues its
reps, for the SM clock as the kernels themselves see it.
Usage: python bench/diag_clock.py OUT.json
"""
from __future__ import annotations

import json
import statistics
import sys
import threading
import time

import pynvml
import torch
import triton

from kernelvet.judge import Settings

from diag_order import gemm_256   # bench/ is this script's directory

ROUNDS, SPIN_CYCLES = 3, 20_000


class Sampler(threading.Thread):
    """NVML's SM clock (MHz), memory clock (MHz) and power (W), every ms until stopped."""

    def __init__(self, handle):
        super().__init__(daemon=True)
        self.handle, self.rows, self.stop = handle, [], threading.Event()

    def run(self):
        while not self.stop.is_set():
            self.rows.append((pynvml.nvmlDeviceGetClockInfo(self.handle, pynvml.NVML_CLOCK_SM),
                              pynvml.nvmlDeviceGetClockInfo(self.handle, pynvml.NVML_CLOCK_MEM),
                              pynvml.nvmlDeviceGetPowerUsage(self.handle) / 1e3))
            time.sleep(1e-3)

    def summary(self) -> dict:
        if not self.rows:
            return {}
        sm, mem, watts = zip(*self.rows)
        return {"sm_mhz": statistics.median(sm), "sm_mhz_min": min(sm), "mem_mhz": statistics.median(mem),
                "watts": statistics.median(watts), "samples": len(self.rows)}


def sampled(handle, fn):
    s = Sampler(handle)
    s.start()
    try:
        out = fn()
    finally:
        s.stop.set()
        s.join()
    return out, s.summary()


def spin_ms(flush, sync_every: int, cycles: int = SPIN_CYCLES, n: int = 400) -> float:
    """Median event time (ms) of `cycles` of torch.cuda._sleep after each flush, queued with a
    sync every `sync_every` reps (do_bench: never, 0; kernelvet: 32)."""
    pending = []
    for i in range(n):
        st, en = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        flush.zero_()
        st.record()
        torch.cuda._sleep(cycles)
        en.record()
        pending.append((st, en))
        if sync_every and len(pending) % sync_every == 0:
            torch.cuda.synchronize()
    torch.cuda.synchronize()
    return statistics.median(s.elapsed_time(e) for s, e in pending)


def spin_mhz(flush, sync_every: int) -> float:
    """SM clock as a kernel sees it (launch overhead included): SPIN_CYCLES over their event time."""
    return SPIN_CYCLES / (spin_ms(flush, sync_every) * 1e3)


def main() -> None:
    dest = sys.argv[1]
    pynvml.nvmlInit()
    handle = pynvml.nvmlDeviceGetHandleByIndex(torch.cuda.current_device())
    g = gemm_256()
    for r in range(ROUNDS):
        row = {}
        ms, row["do_bench clocks"] = sampled(handle, lambda: triton.testing.do_bench(
            g.fns["torch"], warmup=25, rep=100, return_mode="median"))
        row["do_bench us"] = ms * 1e3
        for label, per_sync in (("kernelvet", 32), ("kernelvet 1 per sync", 1)):
            rep, row[f"{label} clocks"] = sampled(handle, lambda: g.vet(Settings(reps_per_sync=per_sync)))
            row[f"{label} reference us"] = statistics.median(rep.timing.reference_raw_ms) * 1e3 if rep.timing else None
            time.sleep(2.0)   # the next vet's worker starts CUDA now
        for label, per_sync in (("spin, never synced", 0), ("spin, synced every 32", 32), ("spin, synced every rep", 1)):
            row[f"{label} MHz"] = spin_mhz(g.flush, per_sync)
        g.res["rounds"].append(row)
        print(r, json.dumps(row), flush=True)
    with open(dest, "w") as fh:
        json.dump(g.res, fh, indent=1)


if __name__ == "__main__":
    main()
