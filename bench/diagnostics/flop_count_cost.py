"""What counting a big reference's FLOPs costs the judge: the float64 call (a float64 copy of every
input under torch's FLOP counter) beside the count on the meta device, for models the counter
counts nothing in (pooling, activations) and one it does (a Linear), at a few input sizes.

    python bench/diagnostics/flop_count_cost.py OUT.json [GIB ...]   (default 0.25 0.5 1)

Any device: the inputs are drawn on the host, as a judge without CUDA draws them."""

from __future__ import annotations

import json
import platform
import statistics
import sys
import time

import torch

from kernelvet.judge import reference

MODELS = {"avgpool2d": lambda: torch.nn.AvgPool2d(3), "relu": torch.nn.ReLU,
          "linear": lambda: torch.nn.Linear(512, 512)}


def _timed(fn, *args, rounds: int = 3) -> tuple[list[float], object]:
    times, got = [], None
    for _ in range(rounds):
        t0 = time.perf_counter()
        got = fn(*args)
        times.append(time.perf_counter() - t0)
    return times, got


def main(out: str, gibs: list[float]) -> None:
    rows = []
    for gib in gibs:
        n = int(gib * (1 << 30)) // 4
        for name, make in MODELS.items():
            shape = (n // 512, 512) if name == "linear" else (n // (64 * 512 * 512) or 1, 64, 512, 512)
            x = [torch.rand(shape)]
            model = make()
            f64, f64_count = _timed(reference._flops_in_float64, model, x)
            meta, meta_count = _timed(reference._flops_on_meta, model, x)
            rows.append({"model": name, "input_gib": x[0].numel() * 4 / (1 << 30), "float64_s": f64, "meta_s": meta,
                         "float64_flops": f64_count, "meta_flops": meta_count if isinstance(meta_count, float) else None})
            print(f"{name:10s} {rows[-1]['input_gib']:.2f} GiB: float64 forward {statistics.median(f64):.2f} s, "
                  f"meta {statistics.median(meta):.2f} s, FLOPs {f64_count} / {rows[-1]['meta_flops']}", flush=True)
            del x
    meta = {"version": 1, "torch": torch.__version__, "python": platform.python_version(),
            "cpus": torch.get_num_threads(), "machine": platform.machine()}
    with open(out, "w") as fh:
        json.dump({**meta, "rows": rows}, fh, indent=1)


if __name__ == "__main__":
    main(sys.argv[1], [float(g) for g in sys.argv[2:]] or [0.25, 0.5, 1.0])
