"""Does the judge's least time (timing.judge_least_ms) stay below the reported median on honest
kernels? Every honest kernel of the practice corpus that runs on the device, vetted once, one
JSON line each: verdict, median and least.

    PYTHONPATH=src python bench/diagnostics/least_honest.py OUT.jsonl [--device cuda]
"""

import argparse
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests"))

from kernelvet import practice, spawn  # noqa: E402
from matrix import vet_entry  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--skip", nargs="*", default=["cuda_tiled_gemm"], help="entries left out (a minute's build)")
    args = ap.parse_args()
    launcher = spawn.Launcher()
    with open(args.out, "w") as fh:
        for e in practice.CORPUS:
            if e.kind != "honest" or args.device.split(":")[0] not in e.devices or e.name in args.skip:
                continue
            r = vet_entry(e, args.device, launcher=launcher)
            t = r.timing
            row = {"name": e.name, "verdict": str(r.verdict), "median_ms": t.median_ms if t else None,
                   "least_ms": t.judge_least_ms if t else None}
            fh.write(json.dumps(row) + "\n")
            print(json.dumps(row), flush=True)
    launcher.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
