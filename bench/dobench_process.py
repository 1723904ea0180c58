"""`triton.testing.do_bench` as a user runs it: in a process of its own that holds nothing of
kernelvet's (no judge, no launcher client, no worker handles, no references on the device).

gpu_bench.py starts one (`DoBenchProcess`) and asks it for one case at a time, alternating with
kernelvet's vets. do_bench in the bench's own process, beside the judge of every vet, saw its
host pace per rep swing (~50 us to 89-103 us), and a host slower than the device's flush + kernel
puts launch latency inside do_bench's windows (256^3: 19-33 us against 12.7-13.5 us). Side by
side, the pace swung in a process of its own too, from moment to moment and process to process:
the judge was not the cause. The process of its own stays as the cleaner method: nothing of the
judge's can slow the reading kernelvet is compared with.

Also the helpers gpu_bench uses in-process (`dobench_stamped`, `flush_us`, `pinned`).

Each case is timed twice: as do_bench is, and with a spin kernel before each of its
flushes (`spin_lead`), which keeps the device busier per rep than the host's pace, so that
do_bench's windows hold no launch latency even where its host falls behind (the 256^3 GEMM on
the H200's host).

Protocol (one JSON object per line): the process prints {"ready": true}; then for each line
{"kind": "matmul"|"softmax", "shape": [...]} on stdin it prints {"candidate": [ms per rep],
"host_gaps_us": [...], "reference": [ms per rep], "reference_host_gaps_us": [...], "flush_us": F,
"paced": [ms per rep], "paced_host_gaps_us": [...], "reference_paced": [ms per rep],
"reference_paced_host_gaps_us": [...], "paced_flush_us": F} (the torch reference is timed both
ways too). Operands are drawn as gpu_bench draws them (seed 0 on the device), once per case.
Usage: python bench/dobench_process.py [--pin=CPU]
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time

import torch
import triton

PIN_CPU: int | None = None   # --pin=N: do_bench's thread on core N while it runs (see pinned)


@contextlib.contextmanager
def pinned():
    """do_bench's host pace decides whether its windows hold launch latency; an experiment for
    steadier pacing: the calling thread held to one core while do_bench runs (Linux affinity is
    per thread). On the H200's host every core had fast (~50 us) and slow (72-88 us) runs."""
    if PIN_CPU is None:
        yield
        return
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {PIN_CPU})
    try:
        yield
    finally:
        os.sched_setaffinity(0, before)


def dobench_stamped(fn) -> tuple[list[float], list[float]]:
    """do_bench's per-rep times (ms), and the host's intervals between its timed calls (us, stamped
    in fn). do_bench's only lead is its L2 flush: when the host's pace per rep is slower than the
    device's (flush + kernel), the device drains its queue and launch latency lands inside the
    window (256^3 on an H200: host intervals of 84-99 us against a 64 us flush and a 10 us kernel
    read 15-28 us; 54-55 us read 12.7-13.3)."""
    stamps = []

    def stamped():
        stamps.append(time.perf_counter())
        fn()

    with pinned():
        times = triton.testing.do_bench(stamped, warmup=25, rep=100, return_mode="all")
    n = len(times)
    return times, [(y - x) * 1e6 for x, y in zip(stamps[-n:], stamps[-n + 1:])]


LEAD_US = 200   # device time of the spin before each of do_bench's flushes (spin_lead)


@contextlib.contextmanager
def spin_lead():
    """do_bench with a spin kernel of LEAD_US before each of its flushes (patched on Triton's
    driver, whose `clear_cache` do_bench calls before every timed call; torch.cuda._sleep, as
    kernelvet's own lead). The device then spends longer per rep than the host's pace (50-125 us
    a rep seen on the H200's host), so the host stays ahead and no launch latency falls inside a
    window. The flush itself is do_bench's (256 MB), so the kernel meets the same cache and TLB
    state: a 1 GiB flush instead read the 256^3 GEMM 4% slower (13.4 us against 12.8) and the
    softmax 2%. Its host pace is stamped all the same, to show it held. A stand-in, not an
    equal: on one H200 machine it read the 256^3 GEMM at 12.8 us where do_bench, keeping pace,
    read 12.3-12.45; on another they agreed."""
    drv = triton.runtime.driver.active
    own = drv.clear_cache
    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    cycles = int(LEAD_US * (getattr(props, "clock_rate", 0) or 1_980_000) / 1e3)   # clock_rate: kHz

    def clear_cache(cache):
        torch.cuda._sleep(cycles)
        own(cache)

    drv.clear_cache = clear_cache
    try:
        yield
    finally:
        del drv.clear_cache   # the class's method again


def flush_us() -> float:
    """Device time of do_bench's flush (its 256 MB zero_; inside spin_lead, the spin too), in us."""
    drv = triton.runtime.driver.active
    cache = drv.get_empty_cache_for_benchmark()
    st, en = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    drv.clear_cache(cache)
    st.record()
    for _ in range(20):
        drv.clear_cache(cache)
    en.record()
    en.synchronize()
    return st.elapsed_time(en) / 20 * 1e3


def case_fns(kind: str, shape) -> tuple:
    """(candidate, reference) callables on operands drawn with seed 0 on the device."""
    from kernelvet.practice import kernels
    g = torch.Generator(device="cuda").manual_seed(0)
    if kind == "matmul":
        m, n, k = shape
        a = torch.randn(m, k, device="cuda", generator=g)
        b = torch.randn(k, n, device="cuda", generator=g)
        return (lambda: kernels.matmul(a, b, ieee=True)), (lambda: torch.mm(a, b))
    if kind == "softmax":
        x = torch.randn(*shape, device="cuda", generator=g)
        return (lambda: kernels.softmax(x)), (lambda: torch.softmax(x, dim=-1))
    raise ValueError(f"unknown case kind {kind!r}")


class DoBenchProcess:
    """The bench's side: one do_bench process, asked for one case at a time."""

    def __init__(self, pin: int | None = None):
        argv = [sys.executable, os.path.abspath(__file__)] + ([f"--pin={pin}"] if pin is not None else [])
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1)
        if json.loads(self._line()).get("ready") is not True:
            raise RuntimeError("the do_bench process did not start")

    def _line(self) -> str:
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"the do_bench process ended (exit {self.proc.wait()})")
        return line

    def run(self, kind: str, shape) -> dict:
        self.proc.stdin.write(json.dumps({"kind": kind, "shape": list(shape)}) + "\n")
        return json.loads(self._line())

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait(timeout=30)


def main() -> None:
    global PIN_CPU
    PIN_CPU = next((int(a.split("=", 1)[1]) for a in sys.argv if a.startswith("--pin=")), None)
    out = sys.stdout
    sys.stdout = sys.stderr   # anything else printed here stays off the protocol
    cases = {}
    print(json.dumps({"ready": True}), file=out, flush=True)
    for line in sys.stdin:
        req = json.loads(line)
        key = (req["kind"], tuple(req["shape"]))
        if key not in cases:
            cases[key] = case_fns(*key)
        cand, ref = cases[key]
        times, gaps = dobench_stamped(cand)
        ref_times, ref_gaps = dobench_stamped(ref)
        own_flush = flush_us()
        with spin_lead():
            paced, paced_gaps = dobench_stamped(cand)
            ref_paced, ref_paced_gaps = dobench_stamped(ref)
            paced_flush = flush_us()
        print(json.dumps({"candidate": times, "host_gaps_us": gaps, "reference": ref_times, "flush_us": own_flush,
                          "reference_host_gaps_us": ref_gaps, "paced": paced, "paced_host_gaps_us": paced_gaps,
                          "reference_paced": ref_paced, "reference_paced_host_gaps_us": ref_paced_gaps,
                          "paced_flush_us": paced_flush}), file=out, flush=True)


if __name__ == "__main__":
    main()
