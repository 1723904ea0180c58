"""Vet every practice entry that can exist on a device and record what fired, with evidence.

    python bench/corpus_table.py --device cuda --json results/corpus-cuda.json

The assertions live in tests/test_corpus.py and tests/test_gpu.py; this records the numbers.
"""

import argparse
import json
import platform
import sys
import time

import torch

from kernelvet import vet
from kernelvet.practice import entries
from kernelvet.report import Status


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--json")
    ap.add_argument("names", nargs="*")
    args = ap.parse_args()
    rows = []
    for e in entries(args.device):
        if args.names and e.name not in args.names:
            continue
        t0 = time.monotonic()
        r = vet(e.path, e.problem_ref, device=args.device, timeout=e.timeout)
        failed = sorted(str(f.check) for f in r.findings if f.status is Status.FAIL)
        want = sorted(str(c) for c in e.catches)
        ok = e.as_expected(set(failed), args.device)
        rows.append({"name": e.name, "kind": e.kind, "pattern": e.pattern, "problem": e.problem,
                     "verdict": str(r.verdict), "failed": failed, "expected": want, "as_expected": ok,
                     "findings": {str(f.check): {"status": str(f.status), "summary": f.summary}
                                  for f in r.findings if f.status is not Status.PASS},
                     "median_ms": r.timing.median_ms if r.timing else None,
                     "reference_median_ms": r.timing.reference_median_ms if r.timing else None,
                     "wall_s": time.monotonic() - t0, "phases_s": dict(r.phases_s)})
        print(f"{'ok ' if ok else 'BAD'} {e.kind:6} {e.name:22} {str(r.verdict):6} {','.join(failed) or '-':40} "
              f"{rows[-1]['wall_s']:.1f}s", flush=True)
    meta = {"device": torch.cuda.get_device_name() if args.device == "cuda" else platform.processor(),
            "torch": torch.__version__, "python": platform.python_version(),
            "date": time.strftime("%Y-%m-%d")}
    try:
        import triton
        meta["triton"] = triton.__version__
    except ImportError:
        pass
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"meta": meta, "rows": rows}, fh, indent=2, sort_keys=True)
    return 0 if all(r["as_expected"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
