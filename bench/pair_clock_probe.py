"""caching's pairs by the judge's clock on CUDA: two forged-pair memos (tests/test_gpu_claims.py) at
2048^3 and 4096^3 and the honest Triton GEMM at 2048^3, each vetted once; a line per vet, and a
JSON line with every pair (the worker's, the controls', the judge's) into OUT/pairs.jsonl.

    PYTHONPATH=src python3 bench/pair_clock_probe.py OUT
"""

import json
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))   # the tests' candidates

from kernelvet import vet  # noqa: E402
from kernelvet.ids import CheckId  # noqa: E402
from kernelvet.problem import load_problem  # noqa: E402
from tests.test_gpu_claims import FORGED_PAIRS_GEMM, TRITON_GEMM  # noqa: E402

CASES = (("forged_pairs", FORGED_PAIRS_GEMM, 2048), ("forged_pairs", FORGED_PAIRS_GEMM, 4096),
         ("triton_gemm_ieee", TRITON_GEMM, 2048))


def row(name: str, report, seconds: float) -> dict:
    c = report.finding(CheckId.CACHING)
    return {"name": name, "verdict": str(report.verdict), "caching": str(c.status), "summary": c.summary[:300],
            "failed": [(str(f.check), f.summary[:200]) for f in report.failed], "s": round(seconds, 1),
            "judge_pairs": c.evidence.get("judge_pairs"), "earlier": c.evidence.get("earlier_judge_pairs"),
            "pairs": c.evidence.get("pairs"), "controls": c.evidence.get("controls")}


def main(out_dir: str) -> None:
    with open(os.path.join(out_dir, "pairs.jsonl"), "w") as out, tempfile.TemporaryDirectory() as tmp:
        for name, text, n in CASES:
            path = os.path.join(tmp, f"{name}.py")
            with open(path, "w") as f:
                f.write(text)
            t = time.monotonic()
            report = vet(path, load_problem("matmul", (n, n, n)), device="cuda", timeout=300, library_policy="off")
            r = row(f"{name}_{n}", report, time.monotonic() - t)
            out.write(json.dumps(r, default=str) + "\n")
            out.flush()
            print(r["name"], r["verdict"], r["caching"], r["s"], r["summary"][:160],
                  [(round(j["unseen_ms"], 3), round(j["bound_ms"], 3), round(j["null_ms"], 3))
                   for j in r["judge_pairs"] or []], flush=True)


if __name__ == "__main__":
    if len(sys.argv) != 2 or not os.path.isdir(sys.argv[1]):
        sys.exit(print("Usage: python bench/pair_clock_probe.py OUT   (an existing folder; needs a CUDA device)",
                       file=sys.stderr) or 2)
    main(sys.argv[1])
