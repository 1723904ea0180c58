"""Session diagnostic (H200): why kernelvet and do_bench disagree at 256^3 (a ~13 us kernel).

Two suspects, each measured in one process, alternating, several rounds:
  - the rep's order: do_bench queues flush -> start -> call -> end; kernelvet queued
    flush -> spin (the launch lead) -> start -> call -> end, so its call starts after the flush's
    writes have settled. Variants: flush-start, flush-spin-start, spin-flush-start, with our flush
    size and do_bench's 256 MB.
  - the device's clock after idle: do_bench right after 2 s of idle (as the bench ran it), and
    right after 0.3 s of device work.
  - (session 7) kernelvet reads every input (a clone) before its flush, seen and unseen sets alike,
    and reads ~0.45 us under do_bench at 256^3 even where do_bench is not host-bound (the torch
    reference: 0.958-0.997). Variant touch-flush-spin, and --kernel=torch for torch.mm (whose
    launch is cheap, so do_bench is not host-bound there).
kernelvet's own vet (fork, audit never) is read in each round too (`kernelvet_ref`: its median
for the torch reference).
Usage: python bench/diag_order.py OUT.json [--kernel=triton|torch]
"""
from __future__ import annotations

import json
import statistics
import sys
import time
import types

import torch
import triton

import kernelvet
from kernelvet import devices, load_problem, spawn
from kernelvet.practice import by_name, kernels

REPS, SYNC_EVERY = 600, 32


def busy(seconds: float) -> None:
    t = time.perf_counter()
    x = torch.randn(2048, 2048, device="cuda")
    while time.perf_counter() - t < seconds:
        x @ x
    torch.cuda.synchronize()


def queued(fn, flush, order: str, lead_cycles: int, inputs=()) -> float:
    """Median of REPS event-timed calls, queued like kernelvet's reps (a sync every SYNC_EVERY)."""
    times, pending = [], []
    for i in range(REPS):
        st, en = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        for step in order.split("-"):
            if step == "flush":
                flush.zero_()
            elif step == "spin":
                torch.cuda._sleep(lead_cycles)
            elif step == "touch":
                for x in inputs:
                    x.clone()
        st.record()
        fn()
        en.record()
        pending.append((st, en))
        if len(pending) >= SYNC_EVERY or i == REPS - 1:
            en.synchronize()
            times += [s.elapsed_time(e) for s, e in pending]
            pending.clear()
    return statistics.median(times)


def lead_like_kernelvet(fn) -> tuple[list[float], float, int]:
    """Host launch times of 50 synchronised calls (s), and the spin lead kernelvet would size from
    them (worker._Reps.lead_for: 90th percentile x 1.25 + 10 us), in seconds and SM cycles."""
    host = []
    for _ in range(50):
        torch.cuda.synchronize()
        t = time.perf_counter()
        fn()
        host.append(time.perf_counter() - t)
    lead_s = min(1.25 * sorted(host)[44] + 10e-6, 2e-3)
    return host, lead_s, int(lead_s * torch.cuda.get_device_properties(0).clock_rate * 1e3)


def main() -> None:
    dest = sys.argv[1]
    n = 256
    g = torch.Generator(device="cuda").manual_seed(0)
    a = torch.randn(n, n, device="cuda", generator=g)
    b = torch.randn(n, n, device="cuda", generator=g)
    kernel = next((x.split("=", 1)[1] for x in sys.argv[2:] if x.startswith("--kernel=")), "triton")
    fn = (lambda: torch.mm(a, b)) if kernel == "torch" else (lambda: kernels.matmul(a, b, ieee=True))
    pk = devices.peaks(devices.describe(torch.device("cuda")))
    ours = torch.empty(int(2 * pk.l2_bytes), dtype=torch.uint8, device="cuda")
    theirs = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    host, lead_s, lead_cycles = lead_like_kernelvet(fn)
    launcher = spawn.shared_launcher()
    prob = load_problem("matmul", (n, n, n))
    torch.backends.cuda.matmul.allow_tf32 = False   # the reference's float32, as the judge runs it
    res = {"kernel": kernel, "device": torch.cuda.get_device_name(0), "torch": torch.__version__, "triton": triton.__version__,
           "l2_bytes": pk.l2_bytes, "lead_us": lead_s * 1e6, "host_launch_us_median": statistics.median(host) * 1e6,
           "rounds": []}
    for r in range(5):
        row = {}
        time.sleep(2.0)
        row["do_bench_after_idle"] = triton.testing.do_bench(fn, warmup=25, rep=100, return_mode="median")
        busy(0.3)
        row["do_bench_after_busy"] = triton.testing.do_bench(fn, warmup=25, rep=100, return_mode="median")
        for label, flush in (("ours", ours), ("256MB", theirs)):
            for order in ("flush", "flush-spin", "spin-flush", "touch-flush-spin"):
                row[f"{order}/{label}"] = queued(fn, flush, order, lead_cycles, (a, b))
        rep = kernelvet.vet(by_name("triton_gemm_ieee").path, prob, device="cuda", launcher=launcher, audit="never")
        row["kernelvet"] = rep.timing.median_ms if rep.timing else None
        row["kernelvet_ref"] = statistics.median(rep.timing.reference_raw_ms) if rep.timing else None
        row["kernelvet_lead_ms"] = rep.timing.lead_ms if rep.timing and hasattr(rep.timing, "lead_ms") else None
        row["do_bench_after_vet"] = triton.testing.do_bench(fn, warmup=25, rep=100, return_mode="median")
        res["rounds"].append(row)
        print(r, " ".join(f"{k}={v * 1e3:.2f}" for k, v in row.items() if isinstance(v, float)), flush=True)
    write_rounds(res, dest)


def gemm_256():
    """The 256^3 session diagnostics' common start: float32 operands on CUDA (seeded, no TF32),
    do_bench's own flush buffer, the shared launcher, the matmul problem at 256^3, the two GEMMs
    as do_bench calls them, the results' header, and `vet(settings)`: a vet of the Triton GEMM."""
    torch.backends.cuda.matmul.allow_tf32 = False
    g = torch.Generator(device="cuda").manual_seed(0)
    a = torch.randn(256, 256, device="cuda", generator=g)
    b = torch.randn(256, 256, device="cuda", generator=g)
    flush = triton.runtime.driver.active.get_empty_cache_for_benchmark()
    fns = {"torch": lambda: torch.mm(a, b), "triton": lambda: kernels.matmul(a, b, ieee=True)}
    res = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__, "triton": triton.__version__,
           "rounds": []}
    launcher, prob = spawn.shared_launcher(), load_problem("matmul", (256, 256, 256))

    def vet(settings=None):   # the Triton GEMM, its torch reference timed beside it (audit never)
        return kernelvet.vet(by_name("triton_gemm_ieee").path, prob, device="cuda", launcher=launcher,
                             audit="never", settings=settings)
    return types.SimpleNamespace(a=a, b=b, flush=flush, fns=fns, res=res, vet=vet)


def write_rounds(res: dict, dest: str) -> None:
    """Each variant's median over the rounds (us), printed and kept beside the rounds in `dest`."""
    keys = [k for k in res["rounds"][0] if isinstance(res["rounds"][0][k], float)]
    res["median_us"] = {k: statistics.median(x[k] for x in res["rounds"] if x[k] is not None) * 1e3 for k in keys}
    print(json.dumps(res["median_us"], indent=1))
    with open(dest, "w") as fh:
        json.dump(res, fh, indent=1)


if __name__ == "__main__":
    main()
