"""What the judge's clock makes of a value-keyed memo whose worker forges its pair times: the memo
of tests/test_gpu_claims.py (a hit: four sums read back and a copy; a miss: the IEEE Triton GEMM)
vetted at N^3 with the library policy off, each pair's unseen rep by the judge's clock beside its
bound and the bound's parts (checks/pair_clock.py), one JSON line per vet.

    python bench/diagnostics/forged_pairs_clock.py OUT.jsonl [VETS] [N]   (default 3 vets, N 4096)

From the repository root, with `PYTHONPATH=src` (any kernelvet tree on PYTHONPATH is the one
vetted). `VET_DEVICE` names another device (cpu: the same memo at N 512 reads 2.4 s per miss)."""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time

sys.path.insert(0, os.getcwd())   # the repository's tests, for the memo's text

import kernelvet                                      # noqa: E402
from kernelvet import spawn, vet                      # noqa: E402
from kernelvet.ids import CheckId                     # noqa: E402
from kernelvet.problem import load_problem            # noqa: E402
from tests.test_gpu_claims import FORGED_PAIRS_GEMM   # noqa: E402

PARTS = ("unseen_ms", "bound_ms", "null_ms", "control_spread_ms", "first_rep_price_ms", "call_ms", "slower")


def one_vet(path: str, n: int, device: str) -> dict:
    launcher = spawn.Launcher()
    t0 = time.monotonic()
    try:
        report = vet(path, load_problem("matmul", (n,) * 3), device=device, timeout=300, launcher=launcher,
                     library_policy="off")
    finally:
        launcher.close()
    caching, timers = report.finding(CheckId.CACHING), report.finding(CheckId.TIMERS)
    judged = caching.evidence.get("judge_pairs") or []
    return {"kernelvet": os.path.relpath(os.path.dirname(kernelvet.__file__)), "n": n, "device": device,
            "vet_s": round(time.monotonic() - t0, 2), "verdict": report.verdict.value,
            "caching": caching.status.value, "summary": caching.summary,
            "reported_ms": timers.evidence.get("reported_ms"), "judge_per_call_ms": timers.evidence.get("judge_per_call_ms"),
            "slower_pairs": sum(bool(j.get("slower")) for j in judged),
            "judge_pairs": [{k: j.get(k) for k in PARTS} for j in judged]}


def main() -> None:
    out = sys.argv[1]
    vets = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    n = int(sys.argv[3]) if len(sys.argv) > 3 else 4096
    device = os.environ.get("VET_DEVICE", "cuda")
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "forged_pairs.py")
        with open(path, "w") as fh:
            fh.write(FORGED_PAIRS_GEMM)
        for _ in range(vets):
            row = one_vet(path, n, device)
            with open(out, "a") as fh:
                fh.write(json.dumps(row) + "\n")
            print(row["verdict"], row["slower_pairs"], [round(j["unseen_ms"], 2) for j in row["judge_pairs"]],
                  "bound", [round(j["bound_ms"], 2) for j in row["judge_pairs"]][:1], flush=True)


if __name__ == "__main__":
    main()
