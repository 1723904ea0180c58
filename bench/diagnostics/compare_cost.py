"""What the judge's comparisons of a big output cost in a vet: an elementwise problem of N
elements (float32), its own Model as the candidate with the library allowed, vetted through the API
on DEVICE. One JSON line per vet: the phases, and the seconds and passes of the judge's comparisons
of outputs against their float64 references (metrics.compare, rel_error, row_errors, _sliced_norms).
Run it from two checkouts in turn, VETS times each, to compare them on one machine. First, one
line of the comparisons alone on an output of N elements where the output lives (DEVICE) and its
reference on the host, median of 5: the passes the checks made of one output before metrics.compare
(its error, with the floor, by rows) and the one pass now.
Usage: PYTHONPATH=src python bench/diagnostics/compare_cost.py OUT.jsonl [N] [VETS] [DEVICE]
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time

from kernelbench_phases import CALLS, SPENT, _timed   # its neighbour here (on sys.path as the script's folder)
from kernelvet import metrics, vet

PROBLEM = """import torch
from torch import nn


class Model(nn.Module):
    def forward(self, x):
        return {forward}


def get_inputs():
    return [torch.randn({rows}, 4096)]


def get_init_inputs():
    return []
"""


def _emit(out: str, line: dict) -> None:
    print(json.dumps(line), flush=True)
    with open(out, "a") as fh:
        fh.write(json.dumps(line) + "\n")


def _median_s(fn, times: int = 5) -> float:
    runs = []
    for _ in range(times):
        t0 = time.perf_counter()
        fn()
        runs.append(time.perf_counter() - t0)
    return round(sorted(runs)[times // 2], 4)


def direct(n: int, device: str) -> dict:
    import torch
    torch.manual_seed(0)
    ref = torch.randn(max(n // 4096, 1), 4096, dtype=torch.float64)
    out = (ref + 1e-6 * torch.randn_like(ref)).float().to(device)
    three = _median_s(lambda: (metrics.rel_error(out, ref), metrics.rel_error(out, ref, 1.0),
                               metrics.row_errors(out, ref)))
    return {"direct": True, "elements": n, "device": device, "three_passes_s": three,
            "compare_rows_s": _median_s(lambda: metrics.compare_rows(out, ref)),
            "rel_error_s": _median_s(lambda: metrics.rel_error(out, ref)),
            "compare_s": _median_s(lambda: metrics.compare(out, ref))}


def write_problem(work: str, n: int, forward: str = "torch.tanh(x) * 0.5") -> tuple[str, str]:
    """The elementwise problem of about `n` float32 elements (rows of 4096) computing `forward` of
    its input x, and its own Model as the candidate, written into `work`: their paths."""
    path, cand = os.path.join(work, "problem.py"), os.path.join(work, "candidate.py")
    text = PROBLEM.format(rows=max(n // 4096, 1), forward=forward)
    with open(path, "w") as fh:
        fh.write(text)
    with open(cand, "w") as fh:
        fh.write(text + "\n\nclass ModelNew(Model):\n    pass\n")
    return path, cand


def main(argv: list[str]) -> int:
    out = argv[0]
    n = int(argv[1]) if len(argv) > 1 else 1 << 26
    vets = int(argv[2]) if len(argv) > 2 else 3
    device = argv[3] if len(argv) > 3 else "cpu"
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    if hasattr(metrics, "compare_rows"):
        _emit(out, {"commit": commit, **direct(n, device)})
    for name in ("_compare", "rel_error", "row_errors", "_sliced_norms"):
        if hasattr(metrics, name):   # a checkout without it
            _timed(metrics, name)
    with tempfile.TemporaryDirectory() as work:
        path, cand = write_problem(work, n)
        for _ in range(vets):
            SPENT.clear()
            CALLS.clear()
            t0 = time.monotonic()
            report = vet(cand, path, device=device, allow=["library-call"])
            _emit(out, {"commit": commit, "elements": n, "device": device, "verdict": str(report.verdict),
                        "wall_s": round(time.monotonic() - t0, 3), "phases_s": dict(report.phases_s),
                        "comparisons": {k: [round(t, 3), CALLS[k]] for k, t in SPENT.items()}})
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
