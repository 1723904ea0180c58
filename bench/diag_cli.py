"""Session diagnostic (H200): where the CLI's start-up goes, and what driver_context saves.

Session 13, call 1 (0828a77) asked whether the launcher's `import torch` is slower beside the CLI's
own (session 12: 3.56 s against 2.88 s): no. Alone 3.6-4.7 s, in the launcher's environment
3.5-4.3 s, two at once 3.4-4.6 s each; the host's pace moved more than any of these. The marks
showed the judge's CUDA start-up after the import instead (0.9 s from "torch imported" to "judge's
device started"), and the first worker asked to prepare only after it.

Now, in alternating rounds: `python -c "import torch"` (the baseline), `kernelvet check --verbose`
as shipped, and the same check with the driver's context left out (DriverContext replaced by a
thread that does nothing). Each check's start-up marks and report phases are kept.
Usage: python bench/diag_cli.py OUT_DIR [ROUNDS]
"""
from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time

from kernelvet.practice import by_name

_WITHOUT = ("import sys, kernelvet.driver_context as d\n"
            "class Off(d.DriverContext):\n"
            "    def _make(self):\n"
            "        self.why = 'left out (diag_cli)'\n"
            "d.DriverContext = Off\n"
            "from kernelvet.cli import entry\n"
            "sys.argv[0] = 'kernelvet'\n"
            "entry()\n")


def main() -> None:
    dest, rounds = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 4
    os.makedirs(dest, exist_ok=True)
    args = ["check", by_name("triton_gemm_ieee").path, "--ref", "matmul", "--device", "cuda", "--verbose",
            "--no-server"]
    runs = {"import torch": [sys.executable, "-c", "import torch"],
            "check": [sys.executable, "-m", "kernelvet", *args],
            "check without driver_context": [sys.executable, "-c", _WITHOUT, *args]}
    res = {k: [] for k in runs}
    for r in range(rounds):
        for label, cmd in runs.items():
            report = os.path.join(dest, f"cli-{r}-{label.replace(' ', '_')}.json")
            t0 = time.perf_counter()
            done = subprocess.run(cmd + (["--json", report] if label != "import torch" else []), capture_output=True,
                                  text=True, env={**os.environ, "COLUMNS": "200"})
            row = {"wall_s": time.perf_counter() - t0, "rc": done.returncode}
            if label != "import torch":
                marks = [ln for ln in done.stdout.splitlines() if ln.startswith("start-up")]
                row["start_up"] = marks[-1] if marks else done.stderr[-600:]
                if os.path.exists(report):
                    with open(report) as fh:
                        row["phases_s"] = json.load(fh).get("phases_s")
            res[label].append(row)
            print(r, label, f"{row['wall_s']:.2f} s rc {row['rc']}", row.get("start_up", ""), flush=True)
    for label in ("check", "check without driver_context"):
        adds = [c["wall_s"] - b["wall_s"] for b, c in zip(res["import torch"], res[label])]
        res[f"{label}: adds over import torch"] = adds
        print(f"{label}: adds {statistics.median(adds):.2f} s (median) of {[round(a, 2) for a in adds]}", flush=True)
    with open(os.path.join(dest, "diag-cli.json"), "w") as fh:
        json.dump(res, fh, indent=1)


if __name__ == "__main__":
    main()
