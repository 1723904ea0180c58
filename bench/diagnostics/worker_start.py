"""Where does a spare worker's device start-up (the `worker-device-start` phase) go?

The parent imports what the launcher imports and freezes its heap; each child, forked as the
launcher forks a worker, times the steps of `Worker._do_prepare` one by one.
Usage: python bench/diagnostics/worker_start.py OUT.json [--pre [--pre-driver]]   (pre_triton() in
  the parent: what the launcher pays, and with --pre-driver Triton's driver object too)
"""
from __future__ import annotations

import gc
import json
import os
import statistics
import sys
import time

import torch
import triton  # noqa: F401

import kernelvet.worker
from kernelvet import warm

STEPS = ("cuda context", "flush buffer 256 MB", "cublas float32", "cublas bfloat16", "triton first kernel",
         "synchronize")


def child(w: int) -> None:
    marks, t = {}, time.perf_counter()

    def mark(name):
        nonlocal t
        torch.cuda.synchronize()
        now = time.perf_counter()
        marks[name], t = now - t, now

    torch.zeros(1, device="cuda")
    mark("cuda context")
    torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    mark("flush buffer 256 MB")
    for dtype, name in ((torch.float32, "cublas float32"), (torch.bfloat16, "cublas bfloat16")):
        a = torch.ones(16, 16, device="cuda", dtype=dtype)
        torch.mm(a, a)
        mark(name)
    x = torch.ones(64, device="cuda")
    warm._scale[(1,)](x, torch.empty_like(x), 64, BLOCK=64)
    mark("triton first kernel")
    torch.cuda.synchronize()
    mark("synchronize")
    os.write(w, json.dumps(marks).encode())
    os._exit(0)


def pre_triton() -> dict:
    """What of Triton's first kernel call can be paid before the fork without starting CUDA: the
    hash of its installation (launcher._hash_triton), its driver object (NVML answers torch's
    is_available: no cuInit) and its compiler's modules."""
    done = {}
    from kernelvet import launcher
    t = time.perf_counter()
    launcher._hash_triton()
    done["triton_key"] = time.perf_counter() - t
    if "--pre-driver" not in sys.argv:
        return done
    os.environ["PYTORCH_NVML_BASED_CUDA_CHECK"] = "1"
    t = time.perf_counter()
    try:
        from triton.runtime import driver
        driver.active.get_current_stream   # noqa: B018 - creates the driver (loads its cuda_utils)
        done["driver"] = time.perf_counter() - t
    except Exception as exc:  # noqa: BLE001
        done["driver"] = repr(exc)
    t = time.perf_counter()
    try:
        import triton.compiler.compiler  # noqa: F401
        from triton.backends import backends
        for b in backends.values():
            b.compiler   # noqa: B018
        done["compiler"] = time.perf_counter() - t
    except Exception as exc:  # noqa: BLE001
        done["compiler"] = repr(exc)
    done["cuda_initialized"] = torch.cuda.is_initialized()
    return done


def main() -> None:
    with kernelvet.worker._AtenTrace():
        torch.zeros(1) + 1
    pre = pre_triton() if "--pre" in sys.argv else None
    print("pre", pre, flush=True)
    gc.collect()
    gc.freeze()
    runs = []
    for _ in range(4):
        r, w = os.pipe()
        t0 = time.perf_counter()
        pid = os.fork()
        if pid == 0:
            os.close(r)
            child(w)
        os.close(w)
        data = b""
        while chunk := os.read(r, 1 << 16):
            data += chunk
        os.waitpid(pid, 0)
        marks = json.loads(data)
        marks["fork to exit"] = time.perf_counter() - t0
        runs.append(marks)
        print(" ".join(f"{k}={v:.3f}" for k, v in marks.items()), flush=True)
    med = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
    print("median", json.dumps(med))
    with open(sys.argv[1], "w") as fh:
        json.dump({"runs": runs, "median_s": med, "pre": pre, "torch": torch.__version__}, fh, indent=1)


if __name__ == "__main__":
    main()
