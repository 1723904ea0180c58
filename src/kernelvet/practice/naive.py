"""The naive bench of the tutorial, kept deliberately naive: the one the cheats were written to beat.

It launches the candidate in its own process, times it with events on the default stream (host
perf_counter on the CPU), and compares with allclose against a reference computed in the same
process, on one fixed input. No other checks. Its verdict is whatever it prints last on stdout.

    python -m kernelvet.practice.naive CANDIDATE PROBLEM DEVICE
"""

from __future__ import annotations

import importlib.util
import json
import sys
import time

import torch

WARMUP, REPS = 3, 20
# The usual leaderboard tolerances: 1e-2 for float32 (KernelBench's), looser for half formats.
TOLERANCE = {torch.float16: 5e-2, torch.bfloat16: 5e-2}


def _load(path: str, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _problem(ref: str):
    from kernelvet import problems
    if ref in problems.BUILTIN:
        return problems.make(ref)
    return _load(ref, "naive_reference")


def _time(fn, inputs, device) -> float:
    """Milliseconds per call: events on the default stream (CUDA), or the host clock."""
    for _ in range(WARMUP):
        fn(*inputs)
    if device == "cuda":
        torch.cuda.synchronize()   # "That helper is already wrong": it only drains the default stream
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(REPS):
            fn(*inputs)
        end.record()
        end.synchronize()
        return start.elapsed_time(end) / REPS
    t0 = time.perf_counter()
    for _ in range(REPS):
        fn(*inputs)
    return (time.perf_counter() - t0) * 1e3 / REPS


def run(candidate: str, ref: str, device: str) -> dict:
    prob = _problem(ref)
    torch.manual_seed(0)
    inputs = [x.to(device) if isinstance(x, torch.Tensor) else x for x in prob.get_inputs()]
    init = prob.get_init_inputs()
    torch.manual_seed(0)
    model = prob.Model(*init).to(device)
    ref_out = model(*[x.clone() if isinstance(x, torch.Tensor) else x for x in inputs])
    ref_ms = _time(model, inputs, device)
    torch.manual_seed(0)
    new = _load(candidate, "naive_candidate").ModelNew(*init).to(device)
    cand_ms = _time(new, inputs, device)
    out = new(*inputs)
    tol = TOLERANCE.get(ref_out.dtype, 1e-2)
    believed = bool(torch.allclose(out, ref_out, atol=tol, rtol=tol))
    return {"believed": believed, "speedup": ref_ms / cand_ms if cand_ms > 0 else float("inf"),
            "candidate_ms": cand_ms, "reference_ms": ref_ms}


if __name__ == "__main__":
    result = run(sys.argv[1], sys.argv[2], sys.argv[3])
    sys.stdout.flush()
    print(json.dumps(result))
