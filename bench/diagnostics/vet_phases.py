"""Does a vet's wall time all fall inside its phases?

An honest 256^3 vet through the API, alone (1 s apart) and back to back, with torch's default
host threads and with one: each vet's phases, their sum, and the wall seconds outside them. Time
outside every phase is work nobody accounts for (the final evaluation of the checks once ran
there, beside the next vet's spare starting up; it is now the `findings` phase).
Usage: python bench/diagnostics/vet_phases.py OUT.json [VETS]
"""
from __future__ import annotations

import json
import statistics
import sys
import time

import torch

from kernelvet import judge, load_problem, spawn
from kernelvet.practice import by_name


def _row(report, wall: float) -> dict:
    p = report.phases_s
    inside = sum(p.get(k, 0.0) for k in ("problem", "reference", "candidate", "findings", "finish"))
    return {"wall_s": wall, "verdict": str(report.verdict), "judged_on": report.device.get("judged_on"),
            "outside_phases_s": p["total"] - inside, "phases_s": dict(p)}


def gemm_256_ready():
    """A launcher with a spare on CUDA, the 256^3 matmul problem and the honest Triton GEMM's path."""
    launcher = spawn.shared_launcher()
    judge.prepare(launcher, "cuda")
    return launcher, load_problem("matmul", (256, 256, 256)), by_name("triton_gemm_ieee").path


def main() -> None:
    out, n = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 4
    launcher, prob, path = gemm_256_ready()
    judge.vet(path, prob, device="cuda", launcher=launcher)   # Triton's cache and the judge warmed
    res = {"threads_default": torch.get_num_threads()}
    for threads in (torch.get_num_threads(), 1):
        torch.set_num_threads(threads)
        for spacing in ("alone", "back to back"):
            rows = []
            for _ in range(n):
                if spacing == "alone":
                    time.sleep(1.0)
                t0 = time.perf_counter()
                report = judge.vet(path, prob, device="cuda", launcher=launcher)
                rows.append(_row(report, time.perf_counter() - t0))
            key = f"{spacing}, {threads} threads"
            res[key] = rows
            print(key, "wall", [round(r["wall_s"], 2) for r in rows], "outside phases",
                  [round(r["outside_phases_s"], 3) for r in rows], "findings",
                  [round(r["phases_s"].get("findings", 0), 3) for r in rows],
                  "median wall", round(statistics.median(r["wall_s"] for r in rows), 2), flush=True)
    with open(out, "w") as fh:
        json.dump(res, fh, indent=1)


if __name__ == "__main__":
    main()
