"""Session diagnostic (H200, session 9): how much does do_bench's own reading of a 256^3 GEMM move
with where its buffers happen to lie in device memory?

Session 9's diag runs read do_bench on the same torch.mm at 12.13 us in one process and 11.84 in
another, while kernelvet's reading of it stayed at 11.7-11.8 us (a worker's allocations are the
same from vet to vet). do_bench's 256 MB flush is a zero_: it leaves the L2 full of dirty lines, and
which of them the kernel's operand reads must write back first depends on addresses. Here each
"placement" allocates a random pad first (small-pool blocks moving the operands, a large one moving
the flush buffer), then the operands, and reads do_bench twice on torch.mm and twice on the Triton
GEMM (stamped: runs whose host was slower than the device are marked host-bound). kernelvet vets
the Triton GEMM every other placement (its reference, torch.mm, is timed in the same worker).
Usage: python bench/diag_placement.py OUT.json [PLACEMENTS]
"""
from __future__ import annotations

import json
import random
import statistics
import sys
import time

import torch
import triton

import kernelvet
from kernelvet import load_problem, spawn
from kernelvet.practice import by_name, kernels

from dobench_process import dobench_stamped as _dobench_stamped, flush_us as _flush_us   # bench/ is this script's directory


def one_placement(rnd: random.Random) -> dict:
    """A random pad, then the operands; do_bench twice on each kernel. Everything is freed after."""
    small = [torch.empty(256 << 10, dtype=torch.uint8, device="cuda") for _ in range(rnd.randrange(8))]
    large = torch.empty(rnd.randrange(0, 64) << 21, dtype=torch.uint8, device="cuda")
    g = torch.Generator(device="cuda").manual_seed(0)
    a = torch.randn(256, 256, device="cuda", generator=g)
    b = torch.randn(256, 256, device="cuda", generator=g)
    row = {"small_pad": len(small), "large_pad_mib": large.numel() >> 20, "torch_us": [], "triton_us": [],
           "triton_host_gap_us": []}
    for _ in range(2):
        row["torch_us"].append(triton.testing.do_bench(lambda: torch.mm(a, b), warmup=25, rep=100,
                                                       return_mode="median") * 1e3)
        times, gaps = _dobench_stamped(lambda: kernels.matmul(a, b, ieee=True))
        row["triton_us"].append(statistics.median(times) * 1e3)
        row["triton_host_gap_us"].append(statistics.median(gaps))
    return row


def main() -> None:
    dest = sys.argv[1]
    placements = int(sys.argv[2]) if len(sys.argv) > 2 else 10
    torch.backends.cuda.matmul.allow_tf32 = False
    rnd = random.Random(9)
    launcher = spawn.shared_launcher()
    prob = load_problem("matmul", (256, 256, 256))
    flush_us = _flush_us()
    res = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__, "triton": triton.__version__,
           "flush_us": flush_us, "placements": [], "kernelvet": []}
    for p in range(placements):
        res["placements"].append(one_placement(rnd))
        print(p, res["placements"][-1], flush=True)
        torch.cuda.empty_cache()
        if p % 2 == 1:
            rep = kernelvet.vet(by_name("triton_gemm_ieee").path, prob, device="cuda", launcher=launcher,
                                audit="never")
            if rep.timing:
                kv = {"triton_us": rep.timing.median_ms * 1e3,
                      "torch_us": statistics.median(rep.timing.reference_raw_ms) * 1e3}
                res["kernelvet"].append(kv)
                print("kernelvet", kv, flush=True)
            time.sleep(2.0)   # the next vet's worker starts CUDA now: not while do_bench runs
    pl, kv = res["placements"], res["kernelvet"]
    torch_db = [statistics.median(r["torch_us"]) for r in pl]
    triton_db = [statistics.median([t for t, gap in zip(r["triton_us"], r["triton_host_gap_us"])
                                    if gap <= flush_us + t] or [float("nan")]) for r in pl]
    triton_db = [t for t in triton_db if t == t]
    res["summary"] = {
        "do_bench torch.mm us, per placement (min, median, max)": [min(torch_db), statistics.median(torch_db), max(torch_db)],
        "do_bench Triton us, runs not host-bound, per placement (min, median, max)":
            [min(triton_db), statistics.median(triton_db), max(triton_db)] if triton_db else None,
        "kernelvet torch.mm us (min, median, max)": [min(x["torch_us"] for x in kv), statistics.median(x["torch_us"] for x in kv),
                                                     max(x["torch_us"] for x in kv)] if kv else None,
        "kernelvet Triton us (min, median, max)": [min(x["triton_us"] for x in kv), statistics.median(x["triton_us"] for x in kv),
                                                   max(x["triton_us"] for x in kv)] if kv else None,
    }
    print(json.dumps(res["summary"], indent=1))
    with open(dest, "w") as fh:
        json.dump(res, fh, indent=1)


if __name__ == "__main__":
    main()
