"""Session diagnostic (H200, session 9): from do_bench's rep to kernelvet's, one step at a time.

Session 9's diag_order run: for torch.mm at 256^3 (do_bench not host-bound) do_bench read 12.16 us,
diag_order's copy of its order (flush -> start -> call -> end, 256 MB) 11.81 and kernelvet's
reference timing 11.55. diag_order's copy differed from do_bench in more than the order: a uint8
flush buffer (do_bench zeroes int32), fresh events per rep, a sync every 32 reps, 600 reps. Here
each difference is added in turn, in one process, alternating, several rounds:
  dobench        triton.testing.do_bench itself (median)
  copy           its loop, copied: int32 256 MB flush, events made up front, one sync at the end
  +u8            kernelvet's flush buffer (uint8, 2 x L2, at least 256 MiB)
  +batches       fresh events per rep, a sync every 32 reps (kernelvet's batches)
  +spin          a spin of kernelvet's lead between the flush and the start event
  +touch         every input read (a clone) before the flush
and the single steps on `copy` alone (copy+u8, copy+batches, copy+spin, copy+touch).
kernelvet's own timing of the torch reference (a vet, audit never) is read in each round.
Session 9's first run: `copy` read 0.4 us under do_bench itself (11.71 against 12.13 us, torch.mm),
and kernelvet's reference timing read as `copy` (11.73). What `copy` leaves out of do_bench:
  copy+burst     do_bench's warm-up first: its back-to-back calls for 25 ms, no flush, no sync
  copy+kvwarm    kernelvet's warm-up first instead: 25 ms of calls, a sync every 8
  copy+fresh     a flush buffer allocated for the run, as do_bench allocates one per call
  dobench_w0     do_bench itself with warmup=0 (one warm-up call)
With --what=steps (the default) the first run's steps; --what=warm the warm-up variants.
Usage: python bench/diag_steps.py OUT.json [--kernel=torch|triton] [--what=steps|warm]
"""
from __future__ import annotations

import statistics
import sys
import time

import torch
import triton

import kernelvet
from kernelvet import devices, load_problem, spawn
from kernelvet.practice import by_name, kernels

from diag_order import lead_like_kernelvet, write_rounds   # bench/ is this script's directory

ROUNDS, SYNC_EVERY = 5, 32
STEPS = ("u8", "batches", "spin", "touch")


def warm_up(fn, steps: set, n_warmup: int) -> None:
    if "burst" in steps:            # do_bench's
        for _ in range(n_warmup):
            fn()
    elif "kvwarm" in steps:         # kernelvet's (worker._do_time)
        t0 = time.perf_counter()
        i = 0
        while i < 3 or time.perf_counter() - t0 < 25e-3:
            fn()
            i += 1
            if i % 8 == 0:
                torch.cuda.synchronize()
        torch.cuda.synchronize()


def rep_loop(fn, steps: set, bufs: dict, lead_cycles: int, inputs, n: int, n_warmup: int = 0) -> float:
    """do_bench's timed loop with the given kernelvet steps; the median, ms."""
    flush = bufs["u8"] if "u8" in steps else bufs["i32"]
    if "fresh" in steps:
        flush = triton.runtime.driver.active.get_empty_cache_for_benchmark()
    warm_up(fn, steps, n_warmup)
    batches = "batches" in steps
    made = [] if batches else [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
                               for _ in range(n)]
    times, pending = [], []
    for i in range(n):
        st, en = (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) if batches else made[i]
        if "touch" in steps:
            for x in inputs:
                x.clone()
        flush.zero_()
        if "spin" in steps:
            torch.cuda._sleep(lead_cycles)
        st.record()
        fn()
        en.record()
        pending.append((st, en))
        if batches and (len(pending) >= SYNC_EVERY or i == n - 1):
            en.synchronize()
            times += [s.elapsed_time(e) for s, e in pending]
            pending.clear()
    if not batches:
        torch.cuda.synchronize()
        times = [s.elapsed_time(e) for s, e in pending]
    return statistics.median(times)


def main() -> None:
    dest = sys.argv[1]
    kernel = next((x.split("=", 1)[1] for x in sys.argv[2:] if x.startswith("--kernel=")), "torch")
    n = 256
    g = torch.Generator(device="cuda").manual_seed(0)
    a = torch.randn(n, n, device="cuda", generator=g)
    b = torch.randn(n, n, device="cuda", generator=g)
    torch.backends.cuda.matmul.allow_tf32 = False   # the reference's float32, as the judge runs it
    fn = (lambda: torch.mm(a, b)) if kernel == "torch" else (lambda: kernels.matmul(a, b, ieee=True))
    flush = devices.flush_bytes(devices.describe(torch.device("cuda")), 2.0)   # as a worker sizes it
    bufs = {"i32": triton.runtime.driver.active.get_empty_cache_for_benchmark(),
            "u8": torch.empty(flush, dtype=torch.uint8, device="cuda")}
    _, lead_s, lead_cycles = lead_like_kernelvet(fn)
    # as many reps as do_bench takes for its 100 ms
    st, en = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    st.record()
    for _ in range(5):
        bufs["i32"].zero_()
        fn()
    en.record()
    torch.cuda.synchronize()
    estimate_ms = st.elapsed_time(en) / 5
    reps, n_warmup = max(1, int(100 / estimate_ms)), max(1, int(25 / estimate_ms))
    variants = {"copy": set()}
    if "--what=warm" in sys.argv:
        for extra in ("burst", "kvwarm", "fresh"):
            variants["copy+" + extra] = {extra}
        variants["copy+burst+fresh"] = {"burst", "fresh"}
    else:
        for i, step in enumerate(STEPS):
            variants["+" + step] = set(STEPS[:i + 1])
            variants["copy+" + step] = {step}
    launcher = spawn.shared_launcher()
    prob = load_problem("matmul", (n, n, n))
    res = {"kernel": kernel, "device": torch.cuda.get_device_name(0), "torch": torch.__version__,
           "triton": triton.__version__, "reps": reps, "lead_us": lead_s * 1e6, "flush_bytes": bufs["u8"].numel(),
           "rounds": []}
    for r in range(ROUNDS):
        row = {"dobench": triton.testing.do_bench(fn, warmup=25, rep=100, return_mode="median")}
        if "--what=warm" in sys.argv:
            row["dobench_w0"] = triton.testing.do_bench(fn, warmup=0, rep=100, return_mode="median")
        for name, steps in variants.items():
            row[name] = rep_loop(fn, steps, bufs, lead_cycles, (a, b), reps, n_warmup)
        rep = kernelvet.vet(by_name("triton_gemm_ieee").path, prob, device="cuda", launcher=launcher, audit="never")
        row["kernelvet_ref"] = statistics.median(rep.timing.reference_raw_ms) if rep.timing else None
        row["kernelvet_triton"] = rep.timing.median_ms if rep.timing else None
        row["dobench_after"] = triton.testing.do_bench(fn, warmup=25, rep=100, return_mode="median")
        res["rounds"].append(row)
        print(r, " ".join(f"{k}={v * 1e3:.2f}" for k, v in row.items() if isinstance(v, float)), flush=True)
    write_rounds(res, dest)


if __name__ == "__main__":
    main()
