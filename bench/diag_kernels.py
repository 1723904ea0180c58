"""Session diagnostic (H200, session 11): which kernels does each rep of torch.mm at 256^3 run,
and how long do they take by CUPTI, when outputs are freed (do_bench) or held (kernelvet)?

Session 2's profile of torch.mm 256^3 float32 named two cuBLAS kernels of one tile, the plain
`..._execute_kernel` and `..._execute_split_k_kernel`. kernelvet's per-rep times of its torch
reference are bimodal by rep parity (~1 us) and its median sits under do_bench's. If cuBLAS picks
a different kernel from rep to rep (the output's address, a workspace), the kernels' own durations
show it, free of any event overhead. For each loop, one process, the profiler on:
  free      do_bench's loop: flush (256 MB int32 zero_), events, call; outputs dropped
  hold      each output kept until a sync every 32 reps (kernelvet's batches)
  hold+rot  and three input sets in turn (kernelvet rotates its seen sets)
per rep: the event window (us) and every kernel the call ran (name, CUPTI us). Both kernels:
torch.mm and the Triton GEMM.
Usage: python bench/diag_kernels.py OUT.json
"""
from __future__ import annotations

import collections
import itertools
import json
import statistics
import sys

import torch
import triton

from kernelvet.practice import kernels

from diag_parity import loop as timed_loop   # bench/ is this script's directory

N, REPS = 256, 256


def loop(fn_of, sets, flush, hold: bool) -> tuple[list[float], list[list]]:
    """Event windows (us) and, per rep, the kernels run between its flush and the next one."""
    turn = itertools.count()
    prof = torch.autograd.profiler.profile(use_device="cuda", use_kineto=True)
    with prof:
        windows = timed_loop(lambda: fn_of(sets[next(turn) % len(sets)]), flush, hold, False, (), reps=REPS)
    acts = sorted((e for e in prof.kineto_results.events() if "cuda" in str(e.device_type()).lower()),
                  key=lambda e: e.start_ns())
    per_rep, cur = [], None
    for e in acts:
        name = e.name()
        if "FillFunctor" in name:   # the flush (zero_) opens a rep
            cur = []
            per_rep.append(cur)
        elif cur is not None:
            cur.append((name[:120], (e.end_ns() - e.start_ns()) / 1e3))
    return [w * 1e3 for w in windows], per_rep[-REPS:]


def summary(windows: list[float], per_rep: list[list]) -> dict:
    names = collections.Counter(tuple(n for n, _ in rep) for rep in per_rep)
    dur = [sum(d for _, d in rep) for rep in per_rep]
    return {
        "window_us": {"median": statistics.median(windows), "even": statistics.median(windows[0::2]),
                      "odd": statistics.median(windows[1::2])},
        "kernel_us": {"median": statistics.median(dur), "even": statistics.median(dur[0::2]),
                      "odd": statistics.median(dur[1::2])},
        "kernel_sets": [[list(k), c] for k, c in names.most_common()],
        "by_kernel_set_us": {" + ".join(k): statistics.median(sum(d for _, d in rep) for rep in per_rep
                                                             if tuple(n for n, _ in rep) == k) for k in names},
        "windows": windows, "kernels": per_rep,
    }


def main() -> None:
    dest = sys.argv[1]
    torch.backends.cuda.matmul.allow_tf32 = False
    g = torch.Generator(device="cuda").manual_seed(0)
    sets = [(torch.randn(N, N, device="cuda", generator=g), torch.randn(N, N, device="cuda", generator=g))
            for _ in range(3)]
    flush = triton.runtime.driver.active.get_empty_cache_for_benchmark()
    fns = {"torch": lambda ab: torch.mm(*ab), "triton": lambda ab: kernels.matmul(*ab, ieee=True)}
    res = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__, "triton": triton.__version__,
           "reps": REPS, "rounds": []}
    for fn in fns.values():
        for _ in range(20):
            fn(sets[0])
    torch.cuda.synchronize()
    for r in range(2):
        row = {}
        for name, fn in fns.items():
            for variant, hold, k in (("free", False, 1), ("hold", True, 1), ("hold+rot", True, 3)):
                row[f"{name}/{variant}"] = s = summary(*loop(fn, sets[:k], flush, hold))
                print(r, f"{name}/{variant:9s} window {s['window_us']['median']:.2f} "
                      f"(even {s['window_us']['even']:.2f} odd {s['window_us']['odd']:.2f}) kernels "
                      f"{s['kernel_us']['median']:.2f} (even {s['kernel_us']['even']:.2f} odd "
                      f"{s['kernel_us']['odd']:.2f}) sets {[(k[0], c) for k, c in s['kernel_sets'][:3]]}",
                      flush=True)
        res["rounds"].append(row)
    with open(dest, "w") as fh:
        json.dump(res, fh)


if __name__ == "__main__":
    main()
